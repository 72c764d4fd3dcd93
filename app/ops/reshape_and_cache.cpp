// reshape_and_cache (vLLM): tokens' K/V rows scattered into their slots of a paged KV
// cache, cache[slot / block_size, h, ..., slot % block_size] = value (quantised to fp8
// e4m3 with a per-tensor scale when the cache is fp8); every slot no token owns keeps
// its contents. The write that fills the paged op's cache. With RoPE each key is turned at
// its position in its sequence before it is stored.
#include "kernels/reshape_and_cache/reshape_and_cache.hpp"

#include <algorithm>
#include <cmath>

#include "app/numeric.hpp"
#include "app/op.hpp"
#include "app/ops/heads.hpp"
#include "app/ops/paged.hpp"
#include "app/plugin.hpp"
#include "app/problem.hpp"

namespace attnbench {
namespace {

class ReshapeAndCacheProblem : public TableProblem<ReshapeAndCacheParams> {
 public:
  explicit ReshapeAndCacheProblem(const CasePoint& p) : TableProblem(p, reshape_and_cache_variants()) {
    const Shape& s = p.shape;
    context_ = s.lengths("context");
    kv_dtype_ = dtype_from_name(s.word("kv_dtype"));
    shape_.tokens = 0;
    for (int64_t c : context_) shape_.tokens += c;
    shape_.kv_heads = s.num("kv_heads");
    shape_.head_dim = s.num("head_dim");
    shape_.block_size = s.num("block_size");
    shape_.num_blocks = s.num("num_blocks");
    shape_.x = 16 / static_cast<int64_t>(dtype_bytes(kv_dtype_));
    const int64_t g = shape_.kv_heads, d = shape_.head_dim;
    for (const char* name : {"k", "v"})
      add_input(name, p.dtype, {{"tokens", shape_.tokens}, {"kv_heads", g}, {"head_dim", d}}, 1.f, true,
                "every sequence's tokens, one after another");
    // Both caches in their memory order: K [blocks, kv_heads, head_dim / x, block_size, x],
    // V [blocks, kv_heads, head_dim, block_size]; a row is one (block, head).
    const std::vector<Dim> caches = {{"k|v", 2},
                                     {"num_blocks", shape_.num_blocks, 'b'},
                                     {"kv_heads", g, 'h'},
                                     {"head_dim*block_size", d * shape_.block_size, 'd'}};
    add_input("cache", kv_dtype_, caches, 1.f, true, "the caches before the write, in vLLM's layouts");
    add_output("cache_after", kv_dtype_, caches, 3, "vLLM's layouts");
    slots_ = &add_buffer(8 * shape_.tokens);
    rope_ = RopeOptions(s, 0, *std::max_element(context_.begin(), context_.end()));
    if (rope_.on()) {
      std::vector<int32_t> positions;  // each token's index in its sequence
      for (int64_t c : context_)
        for (int64_t i = 0; i < c; ++i) positions.push_back(static_cast<int32_t>(i));
      positions_ = &add_constant(positions);
    }
    rope_.upload(constant_adder());
  }
  Work work() const override {
    // The tokens read at dtype and written at kv_dtype, K and V, and the slot mapping.
    const double elems = 2.0 * shape_.tokens * shape_.kv_heads * shape_.head_dim;
    return {0, elems * (dtype_bytes(point().dtype) + dtype_bytes(kv_dtype_)) + 8.0 * shape_.tokens, Bandwidth::copy};
  }
  // A copy (or a quantisation done the same way on both sides) is right or wrong: bit for bit.
  // Keys turned by RoPE are computed (fp32 on the device, fp64 here) before they are rounded:
  // the cache dtype's tolerance, on the codes.
  Tolerance tolerance() const override { return rope_.on() ? default_tolerance(kv_dtype_) : Tolerance{0, 0}; }
  // Every (block, head) row of the first and the last sequence, K and V.
  ref::Rows must_check_rows() const override {
    ref::Rows rows;
    const int64_t last = static_cast<int64_t>(context_.size()) - 1;
    for (int64_t which = 0; which < 2; ++which)
      for (int64_t b : {int64_t{0}, last})
        for (int64_t j = 0; j * shape_.block_size < context_[b]; ++j)
          for (int64_t h = 0; h < shape_.kv_heads; ++h)
            rows.push_back((which * shape_.num_blocks + pool_.table[b * pool_.max_blocks + j]) * shape_.kv_heads + h);
    std::sort(rows.begin(), rows.end());
    rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
    return rows;
  }
  ref::Matrix reference(const ref::Rows& rows) const override {
    const int64_t per_cache = shape_.num_blocks * shape_.kv_heads;
    const int64_t width = shape_.head_dim * shape_.block_size;
    return reference_by_part(rows, per_cache, width, [&](int64_t which, const ref::Rows& mine) {
      return ref::reshape_and_cache(shape_, which ? ref::PagedCache::value : ref::PagedCache::key,
                                    input(2).host.data() + which * per_cache * width, codes_[which].data(),
                                    pool_.slots.data(), mine);
    });
  }
  // The output starts as the caches before the write: slots the kernel must not touch
  // keep them, and a slot it forgot keeps an old value that fails.
  void poison_output(cudaStream_t stream) override {
    check_cuda(cudaMemcpyAsync(output().device.get(), input(2).device.get(), output().bytes(), cudaMemcpyDeviceToDevice,
                               stream),
               "restore the cache");
  }

 protected:
  void prepare(uint64_t seed, const LaunchContext& ctx) override {
    (void)ctx;
    pool_ = lay_out_pool(seed, context_, shape_.block_size, shape_.num_blocks);
    slots_->upload(pool_.slots.data(), 8 * pool_.slots.size());
    // What the cache stores: the value rounded to kv_dtype, or for fp8 value / scale.
    for (int which = 0; which < 2; ++which) {
      HostValues v = input(which).host;
      if (which == 0 && rope_.on()) turn_keys(v);
      scale_[which] = kv_dtype_ == DType::fp8_e4m3 ? fp8_scale(v.data(), static_cast<int64_t>(v.size())) : 1.f;
      codes_[which].resize(v.size());
      for (size_t i = 0; i < v.size(); ++i) codes_[which][i] = round_to(kv_dtype_, v[i] / scale_[which]);
    }
  }

 private:
  ReshapeAndCacheParams params() const override {
    char* k_cache = static_cast<char*>(output().device.get());
    ReshapeAndCacheParams p{input(0).device.get(), input(1).device.get(), k_cache,
                            k_cache ? k_cache + output().bytes() / 2 : nullptr,
                            static_cast<const int64_t*>(slots_->get())};
    p.tokens = shape_.tokens;
    p.kv_heads = shape_.kv_heads;
    p.head_dim = shape_.head_dim;
    p.block_size = shape_.block_size;
    p.num_blocks = shape_.num_blocks;
    p.dtype = point().dtype;
    p.kv_dtype = kv_dtype_;
    p.k_scale = scale_[0];
    p.v_scale = scale_[1];
    p.rope = rope_.device();
    p.positions = positions_ ? static_cast<const int32_t*>(positions_->get()) : nullptr;
    return p;
  }
  // The keys as RoPE turns them (fp64, rounded to float): token i of a sequence at position i.
  void turn_keys(HostValues& k) const {
    const int64_t d = shape_.head_dim, g = shape_.kv_heads;
    int64_t token = 0;
    for (int64_t c : context_)
      for (int64_t i = 0; i < c; ++i, ++token)
        for (int64_t h = 0; h < g; ++h) {
          float* row = k.data() + (token * g + h) * d;
          ref::Matrix x = Eigen::Map<const Eigen::Matrix<float, 1, Eigen::Dynamic>>(row, d).cast<double>();
          ref::detail::apply_rope(x, {i}, rope_.reference());
          for (int64_t e = 0; e < d; ++e) row[e] = static_cast<float>(x(0, e));
        }
  }
  ref::ReshapeAndCacheShape shape_;
  std::vector<int64_t> context_;
  DType kv_dtype_;
  PoolLayout pool_;
  std::vector<float> codes_[2];
  float scale_[2] = {1, 1};
  DeviceBuffer* slots_;
  RopeOptions rope_;                                           // positions [0, the longest context)
  DeviceBuffer* positions_ = nullptr;  // with RoPE
};

}  // namespace

namespace {

// What a plugin's variant receives (kernels/plugin/include/attnbench/plugin.h).
attnbench_reshape_and_cache_params reshape_and_cache_abi(const ReshapeAndCacheParams& p) {
  attnbench_reshape_and_cache_params a{};
  a.k = p.k;
  a.v = p.v;
  a.k_cache = p.k_cache;
  a.v_cache = p.v_cache;
  a.slot_mapping = p.slot_mapping;
  a.positions = p.positions;
  a.tokens = p.tokens;
  a.kv_heads = p.kv_heads;
  a.head_dim = p.head_dim;
  a.block_size = p.block_size;
  a.num_blocks = p.num_blocks;
  a.dtype = abi_dtype(p.dtype);
  a.kv_dtype = abi_dtype(p.kv_dtype);
  a.k_scale = p.k_scale;
  a.v_scale = p.v_scale;
  a.rope = abi_rope(p.rope);
  return a;
}

}  // namespace

OpSpec reshape_and_cache_op() {
  OpSpec op;
  op.name = "reshape_and_cache";
  op.summary = "tokens' K/V scattered into a paged KV cache (vLLM layouts), fp8 optional";
  op.keys = joined_keys({{
      batch_key(),
      int_key("kv_heads", "key/value heads"),
      head_dim_key("elements per head: a multiple of 8 (of 16 for fp8), at most 256"),
      lengths_key("context", "tokens written per sequence: one integer for all, or one per sequence"),
      int_key("block_size", "tokens per cache block", 16),
      derived_int_key("num_blocks", "blocks in the pool; more than the sequences need (one spare at least)",
                      "needed + needed / 4 + 1"),
      choice_key("kv_dtype", "the cache's storage type", {"fp32", "fp16", "bf16", "fp8_e4m3"}, std::nullopt, "dtype"),
  }, rope_keys()});
  op.finish = [](ShapeCheck& c) {
    const int64_t head_dim = c.shape.num("head_dim");
    if (head_dim % 8 != 0 || head_dim > 256)
      c.fail("head_dim", "shape.head_dim must be a multiple of 8 and at most 256, got " + std::to_string(head_dim));
    finish_rope(c);
    finish_paged_pool(c);
  };
  op.variants = [] { return variant_infos(reshape_and_cache_variants()); };
  op.plugin_op = ATTNBENCH_OP_RESHAPE_AND_CACHE;
  op.add_plugin = [](const attnbench_variant& v, const char* file) { add_variant(plugin_variant(v, file, reshape_and_cache_abi)); };
  op.make = [](const CasePoint& p) -> std::unique_ptr<Problem> { return std::make_unique<ReshapeAndCacheProblem>(p); };
  return op;
}

}  // namespace attnbench
