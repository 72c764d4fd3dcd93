// The backward's small passes around its main kernels, shared by the rungs: FlashAttention's
// "preprocess" (D_i = rowsum(dO_i ∘ O_i), the term every dS of row i subtracts, and the zeroed
// fp32 dQ accumulator the atomics or ordered adds of the tiled rungs sum into) and the final
// conversion of that accumulator to dQ in the dtype.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "kernels/common/kernels.hpp"
#include "kernels/common/reduce.cuh"
#include "kernels/common/storage.cuh"

namespace attnbench::backward_impl {

constexpr int kPreprocessWarps = 4;

// One warp per query row (b, i, h) of o's row order: d[(b·heads + h)·seq_q + i] = Σ_c dO·O in
// fp32, and, when dq_accum is given, that row of the fp32 accumulator set to 0.
template <class T>
__global__ void __launch_bounds__(32 * kPreprocessWarps)
    preprocess_kernel(const T* __restrict__ o, const T* __restrict__ d_o, float* __restrict__ d,
                      float* __restrict__ dq_accum, int64_t batch, int64_t seq_q, int64_t heads, int head_dim) {
  const int lane = threadIdx.x % 32;
  const int64_t row = int64_t{blockIdx.x} * kPreprocessWarps + threadIdx.x / 32;
  if (row >= batch * seq_q * heads) return;  // the whole warp
  const int64_t h = row % heads, i = row / heads % seq_q, b = row / heads / seq_q;
  float acc = 0.f;
  for (int c = lane; c < head_dim; c += 32)
    acc = fmaf(to_float(d_o[row * head_dim + c]), to_float(o[row * head_dim + c]), acc);
  acc = warp_sum(acc);
  if (lane == 0) d[(b * heads + h) * seq_q + i] = acc;
  if (dq_accum)
    for (int c = lane; c < head_dim; c += 32) dq_accum[row * head_dim + c] = 0.f;
}

template <class T>
void launch_preprocess(const T* o, const T* d_o, float* d, float* dq_accum, int64_t batch, int64_t seq_q,
                       int64_t heads, int head_dim, cudaStream_t stream) {
  const int64_t rows = batch * seq_q * heads;
  preprocess_kernel<T><<<static_cast<unsigned>(ceil_div(rows, kPreprocessWarps)), 32 * kPreprocessWarps, 0, stream>>>(
      o, d_o, d, dq_accum, batch, seq_q, heads, head_dim);
}

// dq = scale · dq_accum in the dtype, two elements a thread (head_dim is even).
template <class T>
__global__ void dq_convert_kernel(const float2* __restrict__ acc, T* __restrict__ dq, int64_t pairs, float scale) {
  for (int64_t n = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; n < pairs; n += int64_t{gridDim.x} * blockDim.x) {
    const float2 x = __ldcs(acc + n);
    dq[2 * n] = from_float<T>(scale * x.x);
    dq[2 * n + 1] = from_float<T>(scale * x.y);
  }
}

template <class T>
void launch_dq_convert(const float* acc, T* dq, int64_t elements, float scale, cudaStream_t stream) {
  const int64_t pairs = elements / 2;
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(ceil_div(pairs, 256), 4096));
  dq_convert_kernel<T><<<blocks, 256, 0, stream>>>(reinterpret_cast<const float2*>(acc), dq, pairs, scale);
}

}  // namespace attnbench::backward_impl
