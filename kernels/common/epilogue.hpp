// The projections' epilogues launched as kernels of their own, after a GEMM that computed X·Wᵀ
// alone: the bias added (and GELU applied), and the fused QKV projection split into the tensors
// the attention kernels read. mha's chain and the model's launch-by-launch chain
// (kernels/model/1_launches.cu) use the same ones; the model's small_linear rung does the same
// arithmetic inside its projections' epilogue (kernels/model/small_linear.cuh). One thread an
// element, fp32 arithmetic, the result rounded once to the storage type (epilogue.cu).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/common/kernels.hpp"

namespace attnbench {

// y [rows, cols] += bias [cols], in place (mha's output projection).
void add_bias(void* y, const void* bias, int64_t rows, int64_t cols, DType dtype, cudaStream_t stream);

// f [rows, cols] = gelu(f + bias), in place, with GPT-2's tanh approximation
// 0.5 u (1 + tanh(sqrt(2/pi) (u + 0.044715 u^3))) (the model's MLP up projection).
void bias_gelu(void* f, const void* bias, int64_t rows, int64_t cols, DType dtype, cudaStream_t stream);

// mha: qkv [tokens, (heads + 2 kv_heads) · head_dim] plus bias [(heads + 2 kv_heads) · head_dim],
// its columns split into q [tokens, heads, head_dim], k and v [tokens, kv_heads, head_dim].
struct QkvSplit {
  const void* qkv;
  const void* bias;
  void *q, *k, *v;
  int64_t tokens = 0, heads = 1, kv_heads = 1, head_dim = 64;
  DType dtype = DType::fp32;
};
void qkv_split(const QkvSplit& p, cudaStream_t stream);

// The model: the fused QKV projection of n tokens per sequence, plus its bias, split: q into
// [batch, n, heads, head_dim], k and v into the caches' rows s + t, s = starts[b] (null: 0).
// (qkv_split with heads = kv_heads, its k and v rows placed in a cache instead of packed.)
struct QkvToCache {
  const void* qkv;          // [batch, n, 3, heads, head_dim]
  const void* bias;         // [3, heads, head_dim]
  void* q;                  // [batch, n, heads, head_dim]
  void *k_cache, *v_cache;  // [batch, max_context, heads, head_dim]
  const int32_t* starts;    // [batch] or null
  int64_t batch = 1, n = 1, heads = 1, head_dim = 64, max_context = 1;
  DType dtype = DType::fp32;
};
void qkv_to_cache(const QkvToCache& p, cudaStream_t stream);

}  // namespace attnbench
