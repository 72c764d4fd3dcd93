// What the example plugins share: storage-type conversions, and the online softmax of one
// query against a stream of keys that the decode and paged examples run per warp.
#pragma once
#include <attnbench/plugin.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

namespace example {

__device__ inline float to_float(float x) { return x; }
__device__ inline float to_float(__half x) { return __half2float(x); }
__device__ inline float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ inline float to_float(__nv_fp8_e4m3 x) { return float(x); }
template <class T>
__device__ T from_float(float x);
template <>
__device__ inline float from_float<float>(float x) {
  return x;
}
template <>
__device__ inline __half from_float<__half>(float x) {
  return __float2half_rn(x);
}
template <>
__device__ inline __nv_bfloat16 from_float<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

// Calls f with a value of the storage type `dtype` names (float, __half, __nv_bfloat16), so
// that a launcher can pick its kernel's template argument: by_dtype(p.dtype, [&](auto t) {
// return launch_as<decltype(t)>(p, stream); }).
template <class F>
cudaError_t by_dtype(int32_t dtype, F f) {
  switch (dtype) {
    case ATTNBENCH_FP16:
      return f(__half());
    case ATTNBENCH_BF16:
      return f(__nv_bfloat16());
    default:
      return f(float());
  }
}

__device__ inline float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// One query's running softmax over the keys a warp has seen: the largest score m, the sum s
// of exp(score - m), and acc = sum of exp(score - m) * v, lane l holding head dims
// l, l + 32, ... (head_dim <= 32 * kDims).
template <int kDims>
struct Online {
  float m = -INFINITY, s = 0.f, acc[kDims] = {};

  // Takes one key's score and its value row, dims read through value(d).
  template <class Value>
  __device__ void add(float score, int head_dim, Value value) {
    const float m_new = fmaxf(m, score);
    const float old = __expf(m - m_new), p = __expf(score - m_new);
    s = s * old + p;
    for (int i = 0; i < kDims; ++i) {
      const int d = threadIdx.x % 32 + 32 * i;
      acc[i] = acc[i] * old + (d < head_dim ? p * value(d) : 0.f);
    }
    m = m_new;
  }

  // Merges the block's warps through shared memory (`scratch`: warps * (2 + 32 * kDims)
  // floats) and writes out[d] = acc / s with warp 0; zeros for a query that saw no key.
  template <class T>
  __device__ void write(float* scratch, int head_dim, T* out) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
    float* mine = scratch + warp * (2 + 32 * kDims);
    if (lane == 0) mine[0] = m, mine[1] = s;
    for (int i = 0; i < kDims; ++i) mine[2 + 32 * i + lane] = acc[i];
    __syncthreads();
    if (warp != 0) return;
    float mt = -INFINITY;
    for (int w = 0; w < warps; ++w) mt = fmaxf(mt, scratch[w * (2 + 32 * kDims)]);
    float st = 0.f, at[kDims] = {};
    for (int w = 0; w < warps; ++w) {
      const float* other = scratch + w * (2 + 32 * kDims);
      const float f = other[0] == -INFINITY ? 0.f : __expf(other[0] - mt);
      st += other[1] * f;
      for (int i = 0; i < kDims; ++i) at[i] += other[2 + 32 * i + lane] * f;
    }
    for (int i = 0; i < kDims; ++i) {
      const int d = lane + 32 * i;
      if (d < head_dim) out[d] = from_float<T>(st > 0.f ? at[i] / st : 0.f);
    }
  }
};

// The first key the query of a sequence of `context` tokens sees: with a window, its last
// `window` keys only.
__device__ inline int first_key(int context, int64_t window) {
  return window > 0 && context > window ? context - (int)window : 0;
}

// This lane's head dims of a query row, as Online keeps them (l, l + 32, ...), 0 past head_dim.
template <int kDims, class T>
__device__ inline void load_query(const T* q, int64_t head_dim, float (&qr)[kDims]) {
  for (int i = 0; i < kDims; ++i) {
    const int d = threadIdx.x % 32 + 32 * i;
    qr[i] = d < head_dim ? to_float(q[d]) : 0.f;
  }
}

// A score as attnbench defines it: scale * q.k, soft-capped, then ALiBi's bias for a key
// `distance` positions before query head h.
__device__ inline float finish_score(float dot, const attnbench_score& sc, int h, float distance) {
  float s = dot * sc.scale;
  if (sc.softcap > 0.f) s = sc.softcap * tanhf(s / sc.softcap);
  return sc.alibi ? s - sc.alibi_slopes[h] * distance : s;
}

// What the decode and paged examples refuse: why not, or null. They keep head_dim / 32 dims
// per lane (kDims) and put sequences in gridDim.y.
inline const char* decode_refusal(const attnbench_score& score, const attnbench_rope& rope, int64_t head_dim,
                                  int64_t batch, int dims) {
  if (score.sinks) return "the example leaves attention sinks to a later version";
  if (rope.style != 0) return "the example leaves RoPE to attnbench's kernels";
  if (head_dim > 32 * dims) return "head_dim must be at most 32 * kDims";
  if (batch > 65535) return "batch must be at most 65535 (gridDim.y)";
  return nullptr;
}

}  // namespace example
