// cache_append rung 1, vec_copy: one launch writes the new K and V rows at positions[b] + t,
// threads striding over both tensors in 16-byte units (one element at a time when rows or
// pointers are not 16-byte aligned). A pure copy: its time is the bytes it moves. With RoPE
// the keys go through the RoPE pass instead (rope_rows, turned at their positions as they
// are stored) and this kernel copies the values.
// H200, run 36: part of the pipeline's TBT (cache append + decode), mean 0.0197 ms per step at
// batch 8, 8 kv heads, d128.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "kernels/cache_append/cache_append.hpp"
#include "kernels/common/pdl.cuh"

namespace attnbench::cache_append_impl {
namespace {

// k_cache, v_cache: [batch, max_context, row]; k_new, v_new: [batch, tokens, row]; row counted
// in units W (16 bytes, or one element when rows or pointers are not 16-byte aligned). Threads
// take the units of K, then those of V, so one launch writes both.
template <class W>
__global__ void cache_append_kernel(W* __restrict__ k_cache, W* __restrict__ v_cache, const W* __restrict__ k_new,
                                    const W* __restrict__ v_new, const int32_t* __restrict__ positions, int64_t tokens,
                                    int64_t row, int64_t max_context, int64_t per_tensor, int64_t first) {
  allow_dependents();  // the decode step's attention may launch (it waits for these rows)
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = first + int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < 2 * per_tensor; i += stride) {
    const bool is_v = i >= per_tensor;
    const int64_t j = is_v ? i - per_tensor : i;
    const int64_t e = j % row, bt = j / row;
    const int64_t b = bt / tokens, pos = positions[b] + bt % tokens;
    if (pos < 0 || pos >= max_context) continue;  // outside the cache: never written out of bounds
    (is_v ? v_cache : k_cache)[(b * max_context + pos) * row + e] = (is_v ? v_new : k_new)[j];
  }
}

}  // namespace

void vec_copy(const CacheAppendParams& p, const LaunchContext& ctx) {
  const bool rope = p.rope.on();
  const int64_t es = static_cast<int64_t>(dtype_bytes(p.dtype));
  const int64_t row_bytes = p.kv_heads * p.head_dim * es;
  bool vec16 = row_bytes % 16 == 0;
  for (const void* ptr : {static_cast<const void*>(p.k_cache), static_cast<const void*>(p.v_cache), p.k_new, p.v_new})
    vec16 = vec16 && aligned16(ptr);
  auto launch = [&](auto unit) {
    using W = decltype(unit);
    const int64_t row = row_bytes / static_cast<int64_t>(sizeof(W));
    const int64_t per_tensor = p.batch * p.tokens * row;
    if (per_tensor == 0) return;
    const int64_t first = rope ? per_tensor : 0;  // with RoPE the pass below writes K
    constexpr int kThreads = 256;
    const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(ceil_div(2 * per_tensor - first, kThreads), 65535));
    cache_append_kernel<W><<<blocks, kThreads, 0, ctx.stream>>>(
        static_cast<W*>(p.k_cache), static_cast<W*>(p.v_cache), static_cast<const W*>(p.k_new),
        static_cast<const W*>(p.v_new), p.positions, p.tokens, row, p.max_context, per_tensor, first);
  };
  if (rope && p.batch * p.tokens > 0) {
    // The new keys turned at positions[b] + t, straight into their cache rows.
    RopeRows k{p.k_new, p.k_cache, p.dtype, p.batch, p.tokens, p.kv_heads, p.head_dim};
    k.start = p.positions;
    k.dst_seq = p.max_context;
    rope_rows(k, p.rope, ctx.stream);
    check_launch("decode/cache_append (rope_rows of k)");
  }
  if (vec16) {
    launch(uint4{});
  } else {
    switch (es) {
      case 4:
        launch(uint32_t{});
        break;
      case 2:
        launch(uint16_t{});
        break;
      default:
        launch(uint8_t{});
        break;
    }
  }
  check_launch("decode/cache_append");
}

}  // namespace attnbench::cache_append_impl
