// softmax rung 2, block_reduce: one block per row; the block's threads stride over the row,
// so every access is coalesced, then shared-memory tree reductions give the max, then the
// sum; then the write pass. Still three passes over memory, but 11x rung 1.
// H200, run 1: fp32 32768x4096 0.310 ms, 3463 GB/s, 82.7% of copy bandwidth.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "kernels/common/dispatch.cuh"
#include "kernels/common/storage.cuh"
#include "kernels/softmax/rungs.hpp"

namespace attnbench {
namespace {

constexpr int kBlockReduceThreads = 256;  // a power of two, for the tree

// x, y: [rows, cols]. Block b owns row b.
template <class T>
__global__ void __launch_bounds__(kBlockReduceThreads) block_reduce_kernel(const T* x, T* y, int64_t cols) {
  __shared__ float red[kBlockReduceThreads];
  const int t = threadIdx.x;
  const T* xr = x + int64_t{blockIdx.x} * cols;
  T* yr = y + int64_t{blockIdx.x} * cols;

  float m = -INFINITY;
  for (int64_t c = t; c < cols; c += kBlockReduceThreads) m = fmaxf(m, to_float(xr[c]));
  red[t] = m;
  __syncthreads();
  for (int s = kBlockReduceThreads / 2; s > 0; s >>= 1) {
    if (t < s) red[t] = fmaxf(red[t], red[t + s]);
    __syncthreads();
  }
  m = red[0];
  __syncthreads();  // every thread has read the max before red is reused for the sum
  // A row of only -inf (a fully masked attention row) becomes 0, as the attention reference
  // has it: otherwise exp(-inf - -inf) = NaN. m is the same in every thread: all return.
  if (m == -INFINITY) {
    for (int64_t c = t; c < cols; c += kBlockReduceThreads) yr[c] = from_float<T>(0.f);
    return;
  }

  float l = 0.f;
  for (int64_t c = t; c < cols; c += kBlockReduceThreads) l += expf(to_float(xr[c]) - m);
  red[t] = l;
  __syncthreads();
  for (int s = kBlockReduceThreads / 2; s > 0; s >>= 1) {
    if (t < s) red[t] += red[t + s];
    __syncthreads();
  }
  l = red[0];

  for (int64_t c = t; c < cols; c += kBlockReduceThreads) yr[c] = from_float<T>(expf(to_float(xr[c]) - m) / l);
}

}  // namespace

void softmax_impl::block_reduce(const SoftmaxParams& p, const LaunchContext& ctx) {
  with_storage(p.dtype, "softmax", [&](auto tag) {
    using T = decltype(tag);
    block_reduce_kernel<T><<<static_cast<unsigned>(p.rows), kBlockReduceThreads, 0, ctx.stream>>>(
        static_cast<const T*>(p.x), static_cast<T*>(p.y), p.cols);
  });
  check_launch("softmax/block_reduce");
}

}  // namespace attnbench
