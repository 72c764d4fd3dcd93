// Reductions across the threads of a warp and of a block.
#pragma once
#include <cuda_runtime.h>

namespace attnbench {

// The warp's max / sum of v, in every lane (an xor butterfly).
__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Max (kMax) or sum of v over a block of kWarps warps, in every thread; red holds kWarps
// floats of shared memory. The barrier after the read lets `red` be reused by the next call,
// and orders the shared and global writes before the call for every thread of the block.
template <bool kMax, int kWarps>
__device__ __forceinline__ float block_reduce(float v, float* red) {
  v = kMax ? warp_max(v) : warp_sum(v);
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = v;
  __syncthreads();
  float r = red[0];
#pragma unroll
  for (int i = 1; i < kWarps; ++i) r = kMax ? fmaxf(r, red[i]) : r + red[i];
  __syncthreads();
  return r;
}

}  // namespace attnbench
