// Attention semantics shared by the prefill, decode and paged kernels: which keys a query
// sees (causal, sliding window, as reaches around its position), the ALiBi bias and
// soft-capping.
#pragma once
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "kernels/common/kernels.hpp"
#include "kernels/common/softmax_math.cuh"

namespace attnbench {

// ALiBi: query head h's scores get -slope[h] · |pos - j| (slope[h] · (j - pos) for every key a
// causal query sees). The slopes come from the host in a device array, one per query head:
// the standard ones (reference/attention.hpp, alibi_slopes) or a case's own.
//
// Query head h's slope times `unit`, or 0 without ALiBi (`on` false: the bias term then
// vanishes, and slopes is not read). `unit` is the units the kernel keeps its scores in:
// log2 e for scores in exp2 units, 1 / scale for raw q·k, 1 for scaled scores. One helper for
// the rungs' copies, written as each wrote it (select, then one multiply), so their code does
// not change. (attention/1_naive.cu keeps its own line: it multiplies by |pos - j|, which an
// argument would compute even without ALiBi, and that changed its SASS.)
__device__ __forceinline__ float alibi_slope(bool on, const float* slopes, int h, float unit) {
  return on ? slopes[h] * unit : 0.f;
}

// tanh on the special-function unit: 1 - 2 / (2^(2x·log2 e) + 1), within about 1e-7 of tanh
// (ex2.approx is 2^-22 relative; the division is 2 ulp); +-1 for large |x|, no NaN.
__device__ __forceinline__ float tanh_fast(float x) {
  return 1.f - __fdividef(2.f, exp2_approx(x * (2.f * kLog2e)) + 1.f);
}

// tanh in one special-function op (tanh.approx.f32, sm_75+), within 2^-10.99 of tanh relative.
// The compute-bound prefill kernels already spend one MUFU op a score on the softmax's exp:
// tanh_fast's two more made them MUFU-bound (0.67x the throughput without soft-capping on an
// H100, bench notes run 50), this one costs one.
__device__ __forceinline__ float tanh_sfu(float x) {
  float y;
  asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// Soft-capping, softcap · tanh(s / softcap) for a score s = scale · q·k, in whatever units a
// kernel keeps its scores: `cap` is softcap in those units (softcap / scale for raw q·k,
// softcap · log2 e for s · log2 e) and `inv_cap` its inverse. soft_cap for the memory-bound
// kernels (decode, paged: the accurate tanh is free there), soft_cap_sfu for prefill.
__device__ __forceinline__ float soft_cap(float x, float cap, float inv_cap) { return cap * tanh_fast(x * inv_cap); }
__device__ __forceinline__ float soft_cap_sfu(float x, float cap, float inv_cap) { return cap * tanh_sfu(x * inv_cap); }

// A window that covers every key (|position - j| <= seq_q + seq_k - 2) is no window.
inline int64_t effective_window(int64_t window, int64_t seq_q, int64_t seq_k) {
  return window > 0 && window < seq_q + seq_k ? window : 0;
}

// Causal and window folded into two reaches: a query at position pos sees keys
// [pos - lo, pos + hi] within [0, seq_k). Causal: hi 0; window w: w - 1 (on the high side
// only when not causal); no limit: seq_q + seq_k, past every key.
struct Reach {
  int lo, hi;
};
inline Reach key_reach(bool causal, int64_t window, int64_t seq_q, int64_t seq_k) {
  const int64_t w = effective_window(window, seq_q, seq_k), unlimited = seq_q + seq_k;
  return {static_cast<int>(w > 0 ? w - 1 : unlimited), static_cast<int>(causal ? 0 : w > 0 ? w - 1 : unlimited)};
}

}  // namespace attnbench
