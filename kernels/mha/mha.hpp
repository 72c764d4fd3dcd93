// mha: the bias epilogues around attention's projections. The GEMMs compute X·Wᵀ alone;
// these add the biases, and split the fused QKV projection into the q, k and v tensors the
// attention kernels read.
#pragma once
#include <cstdint>

#include <cuda_runtime.h>

#include "kernels/common/kernels.hpp"

namespace attnbench {

// qkv [tokens, (heads + 2 kv_heads) · head_dim] plus bias [(heads + 2 kv_heads) · head_dim],
// its columns split into q [tokens, heads, head_dim], k and v [tokens, kv_heads, head_dim].
struct QkvSplit {
  const void* qkv;
  const void* bias;
  void *q, *k, *v;
  int64_t tokens = 0, heads = 1, kv_heads = 1, head_dim = 64;
  DType dtype = DType::fp32;
};
void qkv_split(const QkvSplit& p, cudaStream_t stream);

// y [rows, cols] += bias [cols], in place.
void add_bias(void* y, const void* bias, int64_t rows, int64_t cols, DType dtype, cudaStream_t stream);

}  // namespace attnbench
