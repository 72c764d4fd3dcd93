// cache_append: new tokens' K/V rows written into a dense KV cache at each sequence's
// next positions, cache[b, context[b] + t] = new[b, t]; every other row keeps its
// contents. The write half of a generation step (the pipeline runs it between decode
// steps). Bound by copying the new rows. With RoPE the new keys are turned at their positions
// as they are stored.
#include "kernels/cache_append/cache_append.hpp"

#include <algorithm>

#include "app/op.hpp"
#include "app/ops/heads.hpp"
#include "app/plugin.hpp"
#include "app/problem.hpp"

namespace attnbench {
namespace {

class CacheAppendProblem : public TableProblem<CacheAppendParams> {
 public:
  explicit CacheAppendProblem(const CasePoint& p)
      : TableProblem(p, cache_append_variants()), rope_(p.shape, 0, p.shape.num("max_context")) {
    const Shape& s = p.shape;
    shape_.batch = s.num("batch");
    shape_.kv_heads = s.num("kv_heads");
    shape_.head_dim = s.num("head_dim");
    shape_.tokens = s.num("tokens");
    shape_.max_context = s.num("max_context");
    shape_.context = s.lengths("context");
    const int64_t b = shape_.batch, g = shape_.kv_heads, d = shape_.head_dim;
    // K then V: the kernel writes both, and verification reads one output.
    const std::vector<Dim> caches = {{"k|v", 2},
                                     {"batch", b, 'b'},
                                     {"max_context", shape_.max_context, 'i'},
                                     {"kv_heads", g, 'h'},
                                     {"head_dim", d, 'd'}};
    add_input("cache", p.dtype, caches, 1.f, true, "the caches before the append");
    for (const char* name : {"k_new", "v_new"})
      add_input(name, p.dtype, {{"batch", b}, {"tokens", shape_.tokens}, {"kv_heads", g}, {"head_dim", d}}, 1.f, true);
    add_output("cache_after", p.dtype, caches, 3);
    positions_ = &add_constant(std::vector<int32_t>(shape_.context.begin(), shape_.context.end()));
    shape_.rope = rope_.reference();
    rope_.upload(constant_adder());
  }
  Work work() const override {
    // The new rows, read once and written once, K and V.
    return {0, 4.0 * shape_.batch * shape_.tokens * shape_.kv_heads * shape_.head_dim * dtype_bytes(point().dtype),
            Bandwidth::copy};
  }
  // A copy is right or wrong: bit for bit. Keys turned by RoPE are computed (fp32 on the
  // device, fp64 in the reference) and rounded to the dtype: its tolerance.
  Tolerance tolerance() const override { return rope_.on() ? default_tolerance(point().dtype) : Tolerance{0, 0}; }
  // Every written row of the first and last sequence, and the rows either side of them.
  ref::Rows must_check_rows() const override {
    ref::Rows rows;
    for (int64_t which = 0; which < 2; ++which)
      for (int64_t b : {int64_t{0}, shape_.batch - 1})
        for (int64_t pos = shape_.context[b] - 1; pos <= shape_.context[b] + shape_.tokens; ++pos)
          if (pos >= 0 && pos < shape_.max_context)
            rows.push_back((which * shape_.batch + b) * shape_.max_context + pos);
    std::sort(rows.begin(), rows.end());
    rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
    return rows;
  }
  ref::Matrix reference(const ref::Rows& rows) const override {
    const int64_t per_cache = shape_.batch * shape_.max_context, width = shape_.kv_heads * shape_.head_dim;
    return reference_by_part(rows, per_cache, width, [&](int64_t which, const ref::Rows& mine) {
      ref::CacheAppendShape shape = shape_;
      if (which == 1) shape.rope = {};  // values are not turned
      return ref::cache_append(shape, input(0).host.data() + which * per_cache * width, input(1 + which).host.data(),
                               mine);
    });
  }
  // The output starts as the caches before the append: rows the kernel must not touch
  // keep them, and a row it forgot to write keeps an old value that fails.
  void poison_output(cudaStream_t stream) override {
    check_cuda(cudaMemcpyAsync(output().device.get(), input(0).device.get(), output().bytes(), cudaMemcpyDeviceToDevice,
                               stream),
               "restore the cache");
  }

 private:
  CacheAppendParams params() const override {
    char* k_cache = static_cast<char*>(output().device.get());
    CacheAppendParams p{k_cache, k_cache ? k_cache + output().bytes() / 2 : nullptr, input(1).device.get(),
                        input(2).device.get(), static_cast<const int32_t*>(positions_->get())};
    p.batch = shape_.batch;
    p.tokens = shape_.tokens;
    p.kv_heads = shape_.kv_heads;
    p.head_dim = shape_.head_dim;
    p.max_context = shape_.max_context;
    p.rope = rope_.device();
    p.dtype = point().dtype;
    return p;
  }
  ref::CacheAppendShape shape_;
  DeviceBuffer* positions_;
  RopeOptions rope_;                    // positions [0, max_context)
};

}  // namespace

namespace {

// What a plugin's variant receives (kernels/plugin/include/attnbench/plugin.h).
attnbench_cache_append_params cache_append_abi(const CacheAppendParams& p) {
  attnbench_cache_append_params a{};
  a.k_cache = p.k_cache;
  a.v_cache = p.v_cache;
  a.k_new = p.k_new;
  a.v_new = p.v_new;
  a.positions = p.positions;
  a.batch = p.batch;
  a.tokens = p.tokens;
  a.kv_heads = p.kv_heads;
  a.head_dim = p.head_dim;
  a.max_context = p.max_context;
  a.dtype = abi_dtype(p.dtype);
  a.rope = abi_rope(p.rope);
  return a;
}

}  // namespace

OpSpec cache_append_op() {
  OpSpec op;
  op.name = "cache_append";
  op.summary = "new K/V rows appended to a dense KV cache (between decode steps)";
  op.keys = joined_keys({{
      batch_key(),
      int_key("kv_heads", "key/value heads"),
      head_dim_key(),
      lengths_key("context", "rows already in each sequence's cache: where its new rows start", 0),
      int_key("tokens", "new rows per sequence", 1),
      derived_int_key("max_context", "the cache's allocated rows per sequence", "the longest context + tokens"),
  }, rope_keys()});
  op.finish = [](ShapeCheck& c) {
    Shape& s = c.shape;
    const int64_t head_dim = s.num("head_dim"), tokens = s.num("tokens");
    if (head_dim % 8 != 0 || head_dim > 256)
      c.fail("head_dim", "shape.head_dim must be a multiple of 8 and at most 256, got " + std::to_string(head_dim));
    finish_rope(c);
    const auto& context = s.lengths("context");
    if (!c.given("max_context")) s.set("max_context", *std::max_element(context.begin(), context.end()) + tokens);
    for (size_t i = 0; i < context.size(); ++i)
      if (context[i] + tokens > s.num("max_context"))
        c.fail("max_context", "context " + std::to_string(context[i]) + " + tokens " + std::to_string(tokens) +
                                  " for sequence " + std::to_string(i) + " exceeds max_context " +
                                  std::to_string(s.num("max_context")));
  };
  op.variants = [] { return variant_infos(cache_append_variants()); };
  op.plugin_op = ATTNBENCH_OP_CACHE_APPEND;
  op.add_plugin = [](const attnbench_variant& v, const char* file) { add_variant(plugin_variant(v, file, cache_append_abi)); };
  op.make = [](const CasePoint& p) -> std::unique_ptr<Problem> { return std::make_unique<CacheAppendProblem>(p); };
  return op;
}

}  // namespace attnbench
