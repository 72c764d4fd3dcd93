// The projections' bias epilogues: one thread per element, fp32 arithmetic, the result
// rounded once to the storage type. Memory-bound and small beside the GEMMs around them.
#include <algorithm>

#include "kernels/common/dispatch.cuh"
#include "kernels/mha/mha.hpp"

namespace attnbench {
namespace {

constexpr int kThreads = 256;

template <class T>
__global__ void qkv_split_kernel(const T* __restrict__ qkv, const T* __restrict__ bias, T* __restrict__ q,
                                 T* __restrict__ k, T* __restrict__ v, int64_t tokens, int64_t q_width,
                                 int64_t kv_width) {
  const int64_t width = q_width + 2 * kv_width;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < tokens * width;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t t = i / width, c = i % width;
    const T x = from_float<T>(to_float(qkv[i]) + to_float(bias[c]));
    if (c < q_width)
      q[t * q_width + c] = x;
    else if (c < q_width + kv_width)
      k[t * kv_width + c - q_width] = x;
    else
      v[t * kv_width + c - q_width - kv_width] = x;
  }
}

template <class T>
__global__ void add_bias_kernel(T* __restrict__ y, const T* __restrict__ bias, int64_t rows, int64_t cols) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < rows * cols;
       i += int64_t{gridDim.x} * blockDim.x)
    y[i] = from_float<T>(to_float(y[i]) + to_float(bias[i % cols]));
}

}  // namespace

void qkv_split(const QkvSplit& p, cudaStream_t stream) {
  const int64_t q_width = p.heads * p.head_dim, kv_width = p.kv_heads * p.head_dim;
  const int64_t n = p.tokens * (q_width + 2 * kv_width);
  if (n == 0) return;
  with_storage(p.dtype, "mha/qkv_split", [&](auto tag) {
    using T = decltype(tag);
    qkv_split_kernel<T><<<grid_stride_blocks(n, kThreads), kThreads, 0, stream>>>(
        static_cast<const T*>(p.qkv), static_cast<const T*>(p.bias), static_cast<T*>(p.q), static_cast<T*>(p.k),
        static_cast<T*>(p.v), p.tokens, q_width, kv_width);
  });
  check_launch("mha/qkv_split");
}

void add_bias(void* y, const void* bias, int64_t rows, int64_t cols, DType dtype, cudaStream_t stream) {
  if (rows * cols == 0) return;
  with_storage(dtype, "mha/add_bias", [&](auto tag) {
    using T = decltype(tag);
    add_bias_kernel<T><<<grid_stride_blocks(rows * cols, kThreads), kThreads, 0, stream>>>(
        static_cast<T*>(y), static_cast<const T*>(bias), rows, cols);
  });
  check_launch("mha/add_bias");
}

}  // namespace attnbench
