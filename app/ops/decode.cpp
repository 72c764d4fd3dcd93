// Decode: one new query per sequence attends to its whole KV cache,
// o = softmax(q·Kᵀ·scale + bias)·V over the first context[b] cache rows. The step
// that dominates generation; bound by reading the cache.
#include "kernels/decode/decode.hpp"

#include <algorithm>
#include <cmath>

#include "app/op.hpp"
#include "app/ops/heads.hpp"
#include "app/plugin.hpp"
#include "app/problem.hpp"

namespace attnbench {
namespace {

class DecodeProblem : public TableProblem<DecodeParams> {
 public:
  explicit DecodeProblem(const CasePoint& p)
      : TableProblem(p, decode_variants()), h_(p.shape, p.shape.num("max_context")) {
    max_context_ = p.shape.num("max_context");
    add_input("q", p.dtype, {{"batch", h_.batch}, {"heads", h_.heads}, {"head_dim", h_.head_dim}}, 1.f, true);
    for (const char* name : {"k_cache", "v_cache"})
      add_input(name, p.dtype,
                {{"batch", h_.batch}, {"max_context", max_context_}, {"kv_heads", h_.kv_heads}, {"head_dim", h_.head_dim}},
                1.f, true);
    add_output("o", p.dtype, {{"batch", h_.batch, 'b'}, {"heads", h_.heads, 'h'}, {"head_dim", h_.head_dim, 'd'}}, 2);
    context_lens_ = &add_constant(std::vector<int32_t>(h_.context.begin(), h_.context.end()));
    h_.upload(constant_adder());
  }
  // The bytes a decode step must move: each sequence's K and V rows up to its context,
  // q and o. The cache's unused tail is not counted: nothing should read it.
  Work work() const override {
    int64_t rows = 0;  // the keys the queries see
    for (int64_t c : h_.context) rows += seen_keys(c, h_.window);
    const double e = dtype_bytes(point().dtype);
    return {4.0 * h_.heads * static_cast<double>(rows) * h_.head_dim,
            e * (2.0 * rows * h_.kv_heads * h_.head_dim + 2.0 * h_.batch * h_.heads * h_.head_dim), Bandwidth::read};
  }
  ref::Matrix reference(const ref::Rows& rows) const override { return decode(rows, {}); }
  bool has_faithful() const override { return true; }
  ref::Matrix faithful(const ref::Rows& rows) const override {
    return stored(decode(rows, faithful_of()));
  }
  ref::Matrix decode(const ref::Rows& rows, const ref::Faithful& faithful) const {
    ref::DecodeShape d = h_.reference(faithful);
    d.max_context = max_context_;
    return ref::decode(d, input(0).host.data(), input(1).host.data(), input(2).host.data(), rows);
  }

 protected:
  // Cache rows past each sequence's context hold NaN: a kernel that reads one fails.
  std::vector<std::pair<int64_t, int64_t>> nan_ranges(size_t index) const override {
    if (index == 0) return {};
    const int64_t row = h_.kv_heads * h_.head_dim;
    std::vector<std::pair<int64_t, int64_t>> tails;
    for (int64_t b = 0; b < h_.batch; ++b)
      if (h_.context[b] < max_context_) tails.emplace_back((b * max_context_ + h_.context[b]) * row, (b + 1) * max_context_ * row);
    return tails;
  }

 private:
  DecodeParams params() const override {
    DecodeParams p;
    p.q = input(0).device.get();
    p.k_cache = input(1).device.get();
    p.v_cache = input(2).device.get();
    p.o = output().device.get();
    p.context_lens = static_cast<const int32_t*>(context_lens_->get());
    h_.set_params(p);
    p.max_context = max_context_;
    p.dtype = point().dtype;
    finish_decode_params(p);
    return p;
  }
  DecodeHeads h_;  // RoPE positions [0, max_context)
  int64_t max_context_;
  DeviceBuffer* context_lens_;
};

}  // namespace

namespace {

// What a plugin's variant receives (kernels/plugin/include/attnbench/plugin.h).
attnbench_decode_params decode_abi(const DecodeParams& p) {
  attnbench_decode_params a{};
  abi_one_query(a, p);
  a.max_context = p.max_context;
  abi_score_options(a, p);
  return a;
}

}  // namespace

OpSpec decode_op() {
  OpSpec op;
  op.name = "decode";
  op.summary = "one query per sequence over its KV cache (a generation step)";
  op.keys = joined_keys({{
      batch_key(),
      heads_key(),
      kv_heads_key(),
      head_dim_key(),
      lengths_key("context", "tokens in each sequence's cache: one integer for all, or one per sequence"),
      derived_int_key("max_context", "the cache's allocated rows per sequence", "the longest context"),
      decode_window_key(),
  }, score_keys(), rope_keys()});
  op.finish = [](ShapeCheck& c) {
    finish_head_keys(c);
    const auto& context = c.shape.lengths("context");
    if (!c.given("max_context")) c.shape.set("max_context", *std::max_element(context.begin(), context.end()));
    const int64_t max_context = c.shape.num("max_context");
    for (size_t i = 0; i < context.size(); ++i)
      if (context[i] > max_context)
        c.fail("max_context", "context " + std::to_string(context[i]) + " for sequence " + std::to_string(i) +
                                  " exceeds max_context " + std::to_string(max_context) +
                                  " (the cache's allocated length)");
  };
  op.variants = [] { return variant_infos(decode_variants()); };
  op.plugin_op = ATTNBENCH_OP_DECODE;
  op.add_plugin = [](const attnbench_variant& v, const char* file) { add_variant(plugin_variant(v, file, decode_abi)); };
  op.make = [](const CasePoint& p) -> std::unique_ptr<Problem> { return std::make_unique<DecodeProblem>(p); };
  return op;
}

}  // namespace attnbench
