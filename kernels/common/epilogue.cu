// The projections' epilogues as kernels of their own (declared in epilogue.hpp): one thread an
// element in a grid-stride loop, fp32 arithmetic, the result rounded once to the storage
// type. Memory-bound and small beside the GEMMs around them. mha's chain takes qkv_split and
// add_bias, the model's launch-by-launch chain qkv_to_cache and bias_gelu (its small_linear
// rung fuses the same arithmetic into its projections instead).
#include <algorithm>

#include "kernels/common/dispatch.cuh"
#include "kernels/common/epilogue.cuh"
#include "kernels/common/epilogue.hpp"

namespace attnbench {
namespace {

constexpr int kThreads = 256;

template <class T>
__global__ void add_bias_kernel(T* __restrict__ y, const T* __restrict__ bias, int64_t rows, int64_t cols) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < rows * cols;
       i += int64_t{gridDim.x} * blockDim.x)
    y[i] = from_float<T>(to_float(y[i]) + to_float(bias[i % cols]));
}

template <class T>
__global__ void bias_gelu_kernel(T* __restrict__ f, const T* __restrict__ bias, int64_t rows, int64_t cols) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < rows * cols;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float u = to_float(f[i]) + to_float(bias[i % cols]);
    f[i] = from_float<T>(gelu_tanh(u));
  }
}

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
__global__ void qkv_to_cache_kernel(QkvToCache p) {
  const int64_t width = p.heads * p.head_dim, total = p.batch * p.n * 3 * width;
  const T* qkv = static_cast<const T*>(p.qkv);
  const T* bias = static_cast<const T*>(p.bias);
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t c = i % (3 * width), token = i / (3 * width), b = token / p.n, t = token % p.n;
    const T x = from_float<T>(to_float(qkv[i]) + to_float(bias[c]));
    const int64_t which = c / width, e = c % width;
    if (which == 0) {
      static_cast<T*>(p.q)[token * width + e] = x;
    } else {
      const int64_t row = b * p.max_context + (p.starts ? p.starts[b] : 0) + t;
      static_cast<T*>(which == 1 ? p.k_cache : p.v_cache)[row * width + e] = x;
    }
  }
}

}  // namespace

void add_bias(void* y, const void* bias, int64_t rows, int64_t cols, DType dtype, cudaStream_t stream) {
  if (rows * cols == 0) return;
  with_storage(dtype, "mha/add_bias", [&](auto tag) {
    using T = decltype(tag);
    add_bias_kernel<T><<<grid_stride_blocks(rows * cols, kThreads), kThreads, 0, stream>>>(
        static_cast<T*>(y), static_cast<const T*>(bias), rows, cols);
  });
  check_launch("mha/add_bias");
}

void bias_gelu(void* f, const void* bias, int64_t rows, int64_t cols, DType dtype, cudaStream_t stream) {
  with_storage(dtype, "model/bias_gelu", [&](auto tag) {
    using T = decltype(tag);
    bias_gelu_kernel<T><<<grid_stride_blocks(rows * cols, kThreads), kThreads, 0, stream>>>(
        static_cast<T*>(f), static_cast<const T*>(bias), rows, cols);
  });
  check_launch("model/bias_gelu");
}

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

void qkv_to_cache(const QkvToCache& p, cudaStream_t stream) {
  with_storage(p.dtype, "model/qkv_to_cache", [&](auto tag) {
    qkv_to_cache_kernel<decltype(tag)>
        <<<grid_stride_blocks(p.batch * p.n * 3 * p.heads * p.head_dim, kThreads), kThreads, 0, stream>>>(p);
  });
  check_launch("model/qkv_to_cache");
}

}  // namespace attnbench
