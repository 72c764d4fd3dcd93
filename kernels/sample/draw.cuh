// What every rung of the sample ladder computes alike, once: a logit as the rules read it, its
// weight, the row's max and first argmax, and the inverse-CDF draw in vocabulary order. The
// reference's tolerance (reference/sample.cpp) is derived from exactly these roundings and from
// the sum depth they keep (at most vocab / 1024 + 48 fp32 additions per weight: reference/sample.hpp).
#pragma once
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include "kernels/common/storage.cuh"
#include "kernels/sample/sample.hpp"

namespace attnbench::sample_impl {

// A stored logit widened, -0 read as +0 (the rules compare values: -0 == +0).
template <class T>
__device__ __forceinline__ float logit(T v) {
  return to_float(v) + 0.f;
}

// The logit's order key: unsigned compares of keys are compares of values (v is never -0):
// the stored bits made monotone, 32 for fp32, 16 for fp16/bf16 (kKeyBits<T>).
template <class T>
constexpr int kKeyBits = sizeof(T) * 8;

template <class T>
__device__ __forceinline__ uint32_t order_key(float v) {
  if constexpr (sizeof(T) == 4) {
    const uint32_t b = __float_as_uint(v);
    return (b >> 31) ? ~b : (b | 0x80000000u);
  } else {
    const uint32_t b = std::is_same_v<T, __half> ? uint32_t{__half_as_ushort(__float2half_rn(v))}
                                                  : __float_as_uint(v) >> 16;  // bf16: exactly the top half
    return (b >> 15) ? (~b & 0xffffu) : (b | 0x8000u);
  }
}

// The logit of an order key.
template <class T>
__device__ __forceinline__ float key_value(uint32_t k) {
  constexpr uint32_t top = 1u << (kKeyBits<T> - 1), all = kKeyBits<T> == 32 ? ~0u : (1u << kKeyBits<T>) - 1;
  const uint32_t b = (k & top) ? (k & ~top) : (~k & all);
  if constexpr (sizeof(T) == 4) return __uint_as_float(b);
  else return to_float(from_bits<T>(b));
}

// A token's weight p_t / p_max: exp((x - max) · fl(1/T)), accurate expf (2 ulp), no fast math.
__device__ __forceinline__ float weight(float x, float m, float inv_t) { return expf((x - m) * inv_t); }

// The row's max and the lowest index holding it, in every thread (a block of kThreads).
template <int kThreads = kSampleThreads, class T>
__device__ void row_max(const T* x, int n, float& m, int& arg) {
  struct Best {
    float v;
    int i;
  };
  using Reduce = cub::BlockReduce<Best, kThreads>;
  __shared__ typename Reduce::TempStorage tmp;
  __shared__ Best best;
  Best mine{-INFINITY, INT_MAX};
  for (int i = threadIdx.x; i < n; i += kThreads) {
    const float v = logit(x[i]);
    if (v > mine.v) mine = {v, i};  // ascending i: the first of equal values stays
  }
  const Best b = Reduce(tmp).Reduce(mine, [](const Best& a, const Best& c) {
    return a.v > c.v || (a.v == c.v && a.i < c.i) ? a : c;
  });
  if (threadIdx.x == 0) best = b;
  __syncthreads();
  m = best.v;
  arg = best.i;
  __syncthreads();  // tmp and best may be reused
}

// The first position i of a row of n, in order, where hit(before, w) holds: w = weight(i) (0 for a
// token that is not counted) and before the fp32 prefix sum of the weights ahead of it; INT_MAX
// when there is none. Also the last position whose weight is positive. In chunks of kPer
// consecutive positions a thread: a thread's run (kPer additions), CUB's raking block scan
// (32 + 5), a carry per chunk (n / (1024 kPer) additions): within the tolerance's depth contract
// (reference/sample.hpp). Stops at the chunk that holds the hit. The same in every thread.
struct PrefixHit {
  int first, last;
};

template <int kPer, int kThreads = kSampleThreads, class Weight, class Hit>
__device__ PrefixHit first_in_prefix(int n, Weight weight, Hit hit) {
  using Scan = cub::BlockScan<float, kThreads>;
  using Reduce = cub::BlockReduce<int, kThreads>;
  __shared__ typename Scan::TempStorage scan_tmp;
  __shared__ typename Reduce::TempStorage reduce_tmp;
  __shared__ int result;
  float carry = 0;
  int last = -1;
  for (int base = 0; base < n; base += kThreads * kPer) {
    const int first = base + static_cast<int>(threadIdx.x) * kPer;
    float w[kPer];
    float run = 0;
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      w[j] = first + j < n ? weight(first + j) : 0.f;
      if (w[j] > 0) last = first + j;
      run += w[j];
    }
    float before, total;
    Scan(scan_tmp).ExclusiveSum(run, before, total);
    int found = INT_MAX;
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      if (found == INT_MAX && first + j < n && hit(carry + before, w[j])) found = first + j;
      before += w[j];
    }
    found = Reduce(reduce_tmp).Reduce(found, [](int a, int b) { return a < b ? a : b; });
    if (threadIdx.x == 0) result = found;
    __syncthreads();
    found = result;
    __syncthreads();  // result, scan_tmp and reduce_tmp are rewritten next
    carry += total;
    if (found != INT_MAX || base + kThreads * kPer >= n) {
      last = Reduce(reduce_tmp).Reduce(last, [](int a, int b) { return a > b ? a : b; });
      if (threadIdx.x == 0) result = last;
      __syncthreads();
      last = result;
      __syncthreads();
      return {found, last};
    }
  }
  return {INT_MAX, -1};  // n == 0
}

// The inverse-CDF draw: the first kept token t, in vocabulary order, whose prefix sum of kept
// weights exceeds `target` (= u · W); the last kept token of positive weight when rounding
// leaves none. keep(x, w) says whether a token with logit x and weight w is kept.
template <int kPer, class T, class Keep>
__device__ int draw_token(const T* x, int n, float m, float inv_t, float target, Keep keep) {
  const PrefixHit h = first_in_prefix<kPer>(
      n,
      [&](int i) {
        const float v = logit(x[i]), w = weight(v, m, inv_t);
        return keep(v, w) ? w : 0.f;
      },
      [&](float before, float w) { return w > 0 && before + w > target; });
  return h.first != INT_MAX ? h.first : h.last;
}

}  // namespace attnbench::sample_impl
