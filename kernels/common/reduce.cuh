// Reductions across the threads of a warp and of a block.
#pragma once
#include <cuda_runtime.h>

namespace attnbench {

// Xor-butterfly all-reductions over groups of lanes: the group of lane i is the Lanes lanes
// i ^ (Stride · k), k < Lanes (Lanes a power of two, Lanes · Stride <= 32); every lane of the
// group gets op over the group. The rungs reduce over quads of an MMA fragment (Lanes 4), the
// 8 lanes that share a head (Stride 4), a warp, ...; one helper instead of a hand-written
// shuffle loop in each. kOrder is the order of the xor offsets: it decides the rounding of a
// float sum and the SASS, so each call site keeps the order it was measured with
// (high_first: Stride · Lanes/2 down to Stride, as warp_max; low_first: Stride up).
// The offset loop is written out in each form below (scalar, array, 2-D array, pair) on
// purpose: three ways of folding them into one walker (a lambda per offset, one loop with a
// computed offset, the scalar as an array of one) each changed the SASS of 7 to 12 kernels
// (paged v1's vllm_kernel, softmax's warp_online), so the copies stay.
enum class XorOrder { high_first, low_first };

template <int Lanes, XorOrder kOrder = XorOrder::high_first, int Stride = 1, class T, class Op>
__device__ __forceinline__ T allreduce(T v, Op op) {
  static_assert(Lanes >= 1 && (Lanes & (Lanes - 1)) == 0 && Lanes * Stride <= 32,
                "Lanes: a power of two within a warp");
  if constexpr (kOrder == XorOrder::high_first) {
#pragma unroll
    for (int o = Lanes / 2; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, Stride * o));
  } else {
#pragma unroll
    for (int o = 1; o < Lanes; o <<= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, Stride * o));
  }
  return v;
}

// The same over lanes that differ in any bits, the xor offsets listed in the order they run:
// for groups that are no power-of-two stride (3_flash_fp32's row groups: lane bits 1, 3, 4).
template <int... kOffsets, class T, class Op>
__device__ __forceinline__ T allreduce_xor(T v, Op op) {
  ((v = op(v, __shfl_xor_sync(0xffffffffu, v, kOffsets))), ...);
  return v;
}

// A pair (a, b) reduced together, merge(a, b, a', b') taking the partner's pair: the online
// softmax's (max, sum) and argmax's (value, index). Offsets high_first, as allreduce's default.
template <int Lanes, class A, class B, class Merge>
__device__ __forceinline__ void allreduce_pair(A& a, B& b, Merge merge) {
  static_assert(Lanes >= 1 && (Lanes & (Lanes - 1)) == 0 && Lanes <= 32, "Lanes: a power of two within a warp");
#pragma unroll
  for (int o = Lanes / 2; o > 0; o >>= 1)
    merge(a, b, __shfl_xor_sync(0xffffffffu, a, o), __shfl_xor_sync(0xffffffffu, b, o));
}

// The same over each element of an array (1- or 2-dimensional), offset by offset: every
// element's shuffle at one offset before any at the next, as the split-KV rungs interleave
// them (reducing element by element gave other register allocations, so other SASS).
template <int Lanes, XorOrder kOrder = XorOrder::high_first, int Stride = 1, class T, int N, class Op>
__device__ __forceinline__ void allreduce(T (&v)[N], Op op) {
  static_assert(Lanes >= 1 && (Lanes & (Lanes - 1)) == 0 && Lanes * Stride <= 32,
                "Lanes: a power of two within a warp");
  if constexpr (kOrder == XorOrder::high_first) {
#pragma unroll
    for (int o = Lanes / 2; o > 0; o >>= 1) {
#pragma unroll
      for (int i = 0; i < N; ++i) v[i] = op(v[i], __shfl_xor_sync(0xffffffffu, v[i], Stride * o));
    }
  } else {
#pragma unroll
    for (int o = 1; o < Lanes; o <<= 1) {
#pragma unroll
      for (int i = 0; i < N; ++i) v[i] = op(v[i], __shfl_xor_sync(0xffffffffu, v[i], Stride * o));
    }
  }
}
template <int Lanes, XorOrder kOrder = XorOrder::high_first, int Stride = 1, class T, int N, int M, class Op>
__device__ __forceinline__ void allreduce(T (&v)[N][M], Op op) {
  static_assert(Lanes >= 1 && (Lanes & (Lanes - 1)) == 0 && Lanes * Stride <= 32,
                "Lanes: a power of two within a warp");
  if constexpr (kOrder == XorOrder::high_first) {
#pragma unroll
    for (int o = Lanes / 2; o > 0; o >>= 1) {
#pragma unroll
      for (int i = 0; i < N; ++i) {
#pragma unroll
        for (int k = 0; k < M; ++k) v[i][k] = op(v[i][k], __shfl_xor_sync(0xffffffffu, v[i][k], Stride * o));
      }
    }
  } else {
#pragma unroll
    for (int o = 1; o < Lanes; o <<= 1) {
#pragma unroll
      for (int i = 0; i < N; ++i) {
#pragma unroll
        for (int k = 0; k < M; ++k) v[i][k] = op(v[i][k], __shfl_xor_sync(0xffffffffu, v[i][k], Stride * o));
      }
    }
  }
}

struct MaxOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct SumOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return a + b; }
};

template <int Lanes, XorOrder kOrder = XorOrder::high_first, int Stride = 1>
__device__ __forceinline__ float allreduce_max(float v) {
  return allreduce<Lanes, kOrder, Stride>(v, MaxOp{});
}
template <int Lanes, XorOrder kOrder = XorOrder::high_first, int Stride = 1>
__device__ __forceinline__ float allreduce_sum(float v) {
  return allreduce<Lanes, kOrder, Stride>(v, SumOp{});
}

// The warp's max / sum of v, in every lane.
__device__ __forceinline__ float warp_max(float v) { return allreduce_max<32>(v); }
__device__ __forceinline__ float warp_sum(float v) { return allreduce_sum<32>(v); }

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
