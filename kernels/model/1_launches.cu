// The model's decode step, rung 1: launch by launch (row PREFILL+DECODE+launches). Each layer is
// its kernels in a chain, each reading the last one's output from memory: a LayerNorm (with the
// residual add of the projection before), the QKV projection on the `gemm` key's GEMM variant,
// its bias and split into q and the cache (kernels/common/epilogue.cu), the attention (the
// DECODE half: a decode or paged variant), the output projection, a LayerNorm, the MLP's two
// projections with bias and GELU between; then the final LayerNorm, the logits (cuBLAS) and the
// greedy token (greedy.cu). app/ops/model_forward.cpp chains them; the prefill runs the same
// chain over the prompt. About 100 launches a GPT-2 124M step, each a microsecond or two of
// work behind a launch boundary: what rung 2 (2_small_linear.cu) fuses away.
//
// This file: the chain's kernels besides the GEMMs, the attention and the epilogues:
// memory-bound, fp32 arithmetic, each result rounded once to its storage type.
#include <algorithm>

#include "kernels/common/cublas.hpp"
#include "kernels/common/dispatch.cuh"
#include "kernels/common/layernorm.cuh"
#include "kernels/common/reduce.cuh"
#include "kernels/model/model.cuh"

namespace attnbench {
namespace {

constexpr int kThreads = 256;
constexpr int kNormThreads = 128;  // a LayerNorm row of GPT-2 (768 to 1600) is a few elements a thread

template <class T>
__global__ void embed_kernel(EmbedParams p) {
  const T* wte = static_cast<const T*>(p.wte);
  const T* wpe = static_cast<const T*>(p.wpe);
  const int64_t total = p.batch * p.n * p.d;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t c = i % p.d, row = i / p.d, b = row / p.n, t = row % p.n;
    const int64_t pos = (p.starts ? p.starts[b] : 0) + t;
    const int64_t id = p.tokens[b * p.token_stride + pos];
    p.x[i] = to_float(wte[id * p.d + c]) + to_float(wpe[pos * p.d + c]);
  }
}

// One block a row: the residual add in place, then mean and variance over the row (two
// passes, the deviations' squares summed: no cancellation), then the affine map, with
// kernels/common/layernorm.cuh's arithmetic (the fused prologues' too).
template <class T>
__global__ void __launch_bounds__(kNormThreads) layernorm_kernel(LayerNormParams p) {
  __shared__ float red[kNormThreads / 32];
  float* x = p.x + blockIdx.x * p.d;
  const T* delta = static_cast<const T*>(p.delta);
  const T* bias = static_cast<const T*>(p.delta_bias);
  float sum = 0;
  for (int64_t c = threadIdx.x; c < p.d; c += kNormThreads) {
    float v = x[c];
    if (delta) {
      v += to_float(delta[blockIdx.x * p.d + c]) + to_float(bias[c]);
      x[c] = v;
    }
    sum += v;
  }
  const float mean = layernorm_mean(block_reduce<false, kNormThreads / 32>(sum, red), p.d);
  float squares = 0;
  for (int64_t c = threadIdx.x; c < p.d; c += kNormThreads) {
    const float u = x[c] - mean;  // each thread rereads what it wrote
    squares += u * u;
  }
  const float rstd = layernorm_rstd(block_reduce<false, kNormThreads / 32>(squares, red), p.d, p.eps);
  const T* gamma = static_cast<const T*>(p.gamma);
  const T* beta = static_cast<const T*>(p.beta);
  T* h = static_cast<T*>(p.h) + blockIdx.x * p.d;
  for (int64_t c = threadIdx.x; c < p.d; c += kNormThreads)
    h[c] = from_float<T>(layernorm_normalize(x[c], mean, rstd) * to_float(gamma[c]) + to_float(beta[c]));
}

__global__ void paged_slots_kernel(PagedSlots p) {
  const int64_t b = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (b >= p.batch) return;
  const int64_t pos = p.positions[b];
  p.slots[b] = p.block_tables[b * p.max_blocks + pos / p.block_size] * p.block_size + pos % p.block_size;
}

}  // namespace

void embed(const EmbedParams& p, cudaStream_t stream) {
  with_storage(p.dtype, "model/embed", [&](auto tag) {
    embed_kernel<decltype(tag)><<<grid_stride_blocks(p.batch * p.n * p.d, kThreads), kThreads, 0, stream>>>(p);
  });
  check_launch("model/embed");
}

void residual_layernorm(const LayerNormParams& p, cudaStream_t stream) {
  if (p.rows == 0) return;
  with_storage(p.dtype, "model/layernorm", [&](auto tag) {
    layernorm_kernel<decltype(tag)><<<static_cast<unsigned>(p.rows), kNormThreads, 0, stream>>>(p);
  });
  check_launch("model/layernorm");
}

void paged_slots(const PagedSlots& p, cudaStream_t stream) {
  paged_slots_kernel<<<static_cast<unsigned>(ceil_div(p.batch, 128)), 128, 0, stream>>>(p);
  check_launch("model/paged_slots");
}

void logits_gemm(const void* h, int64_t h_stride, const void* wte, float* logits, int64_t batch, int64_t vocab,
                 int64_t d, DType dtype, const LaunchContext& ctx) {
  cublas_a_wt(ctx, h, h_stride, wte, logits, CUDA_R_32F, batch, vocab, d, dtype, "model/logits_gemm");
}

}  // namespace attnbench
