// LayerNorm, one definition for the model's kernels: y = (x - mean) · rstd · gain + shift over a
// row of k elements, rstd = 1 / sqrt(var + eps), in fp32, var the biased variance taken from the
// deviations' squares (a second pass over the row: no cancellation). Who normalises a row
// reduces its sums: a block (kernels/model/1_launches.cu's layernorm kernel, small_linear's
// batch-1 prologue) or a warp (small_linear's rows at batch 2-8 and the persistent step's); the
// statistics from the two sums and the normalisation are these functions whichever it is, and the
// row forms below are the ways the model's prologues hold a row (where it is, or in registers).
#pragma once
#include <cstdint>

#include "kernels/common/reduce.cuh"
#include "kernels/common/storage.cuh"

namespace attnbench {

__device__ __forceinline__ float layernorm_mean(float sum, int64_t k) { return sum / static_cast<float>(k); }

// From the sum of the squared deviations.
__device__ __forceinline__ float layernorm_rstd(float squares, int64_t k, float eps) {
  return rsqrtf(squares / static_cast<float>(k) + eps);
}

// v normalised; the caller applies the gain and shift, (v - mean) · rstd · gain + shift, itself,
// its loads of them where it has them (registers, shared memory or global).
__device__ __forceinline__ float layernorm_normalize(float v, float mean, float rstd) { return (v - mean) * rstd; }

// A row's LayerNorm statistics by one warp: the mean, then the reciprocal deviation from the
// deviations' squares (a second pass: no cancellation), the variance the biased one.
__device__ __forceinline__ float2 row_stats(const float* x, int64_t k, float eps) {
  const int lane = threadIdx.x % 32;
  float sum = 0;
  for (int64_t c = lane; c < k; c += 32) sum += x[c];
  const float mean = layernorm_mean(warp_sum(sum), k);
  float squares = 0;
  for (int64_t c = lane; c < k; c += 32) squares += (x[c] - mean) * (x[c] - mean);
  return {mean, layernorm_rstd(warp_sum(squares), k, eps)};
}

// Row x's LayerNorm by one warp into `a` (batch 2-8, a warp a row; batch 1 takes the whole
// block, layernorm_row_block), the lane's elements (c = lane + 32 i) held in registers: the
// row comes in with one round trip, where row_stats' passes over it in memory took one each
// (measured at GPT-2 124M batch 1 before the block version: QKV and MLP-up launches 0.6-0.7 µs
// shorter, the step 5% shorter; bench notes run 193). The sums run in row_stats' order, so the
// results are the same bit for bit. Up to 24 elements a lane (d_model 768): 32 took the kernel
// from 64 to 120 registers a thread, two blocks an SM instead of four; longer rows take
// row_stats.
constexpr int kLnHeld = 24;
template <class T>
__device__ __forceinline__ void layernorm_row(const float* x, const T* g, const T* b, T* a, int64_t k, float eps) {
  const int lane = threadIdx.x % 32;
  if (k > 32 * kLnHeld) {
    const auto [mean, rstd] = row_stats(x, k, eps);
    for (int64_t c = lane; c < k; c += 32)
      a[c] = from_float<T>(layernorm_normalize(x[c], mean, rstd) * to_float(g[c]) + to_float(b[c]));
    return;
  }
  float v[kLnHeld];
#pragma unroll
  for (int i = 0; i < kLnHeld; ++i) v[i] = lane + 32 * i < k ? x[lane + 32 * i] : 0.f;
  float sum = 0;
#pragma unroll
  for (int i = 0; i < kLnHeld; ++i)
    if (lane + 32 * i < k) sum += v[i];
  const float mean = layernorm_mean(warp_sum(sum), k);
  float squares = 0;
#pragma unroll
  for (int i = 0; i < kLnHeld; ++i)
    if (lane + 32 * i < k) squares += (v[i] - mean) * (v[i] - mean);
  const float rstd = layernorm_rstd(warp_sum(squares), k, eps);
#pragma unroll
  for (int i = 0; i < kLnHeld; ++i) {
    const int64_t c = lane + 32 * i;
    if (c < k) a[c] = from_float<T>(layernorm_normalize(v[i], mean, rstd) * to_float(g[c]) + to_float(b[c]));
  }
}

// A single row x's LayerNorm by the whole block into `a` (batch 1), a few elements a thread
// (c = threadIdx.x + kThreads i), their gains and shifts held in registers (BlockGains): the
// row comes in with one round trip, where a warp alone (layernorm_row) loads the gains only
// once it has the statistics, and the block's other warps wait for it. The sums go through
// block_reduce (`red`: kWarps floats of shared memory). Up to kLnPerThread elements a thread
// (1024 at 256 threads: GPT-2 medium). GPT-2 124M at batch 1 on an H200: the QKV and MLP-up
// launches 8.6 -> 6.5 and 9.1 -> 6.8 µs (ncu), the step's TBT 0.364 -> 0.312 ms (bench notes,
// run 199).
constexpr int kLnPerThread = 4;
// The gains and shifts of a thread's elements in layernorm_row_block.
struct BlockGains {
  float gain[kLnPerThread], shift[kLnPerThread];
  template <class T, int kWarps>
  __device__ __forceinline__ void load(const T* g, const T* b, int64_t k) {
#pragma unroll
    for (int i = 0; i < kLnPerThread; ++i) {
      const int64_t c = threadIdx.x + 32 * kWarps * i;
      gain[i] = c < k ? to_float(g[c]) : 0.f;
      shift[i] = c < k ? to_float(b[c]) : 0.f;
    }
  }
};
template <class T, int kWarps>
__device__ __forceinline__ void layernorm_row_block(const float* x, const BlockGains& gs, T* a, int64_t k, float eps,
                                                    float* red) {
  constexpr int kThreads = 32 * kWarps, kPer = kLnPerThread;
  float v[kPer];
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const int64_t c = threadIdx.x + kThreads * i;
    v[i] = c < k ? x[c] : 0.f;
  }
  float sum = 0;
#pragma unroll
  for (int i = 0; i < kPer; ++i) sum += v[i];
  const float mean = layernorm_mean(block_reduce<false, kWarps>(sum, red), k);
  float squares = 0;
#pragma unroll
  for (int i = 0; i < kPer; ++i)
    if (threadIdx.x + kThreads * i < k) squares += (v[i] - mean) * (v[i] - mean);
  const float rstd = layernorm_rstd(block_reduce<false, kWarps>(squares, red), k, eps);
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const int64_t c = threadIdx.x + kThreads * i;
    if (c < k) a[c] = from_float<T>(layernorm_normalize(v[i], mean, rstd) * gs.gain[i] + gs.shift[i]);
  }
}

}  // namespace attnbench
