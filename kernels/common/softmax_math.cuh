// The arithmetic of the online softmax that softmax, attention, decode and paged kernels share:
// exp2 on the special-function unit (scores are kept in exp2 units, x · log2(e), so that an
// exp is one FFMA and one MUFU.EX2), and the merges of partial (max, sum[, o]) results, each
// sum relative to its own max. kLog2e itself is in kernels.hpp, for host code.
#pragma once
#include <cuda_runtime.h>

#include <cmath>

#include "kernels/common/kernels.hpp"

namespace attnbench {

// 2^x on the special-function unit (about 2 ulp); exp2(-inf) = +0, which masking relies on.
__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// Attention sinks (gpt-oss): the head's sink logit joins its softmax's denominator, without a
// value. l: a row's sum of exp2(x - m) over its keys, m the max it is relative to (exp2 units);
// sink_log2: the head's sink logit times log2(e) (sink_log2()), -inf without sinks. A row that
// saw no key (m = -inf, or 0 with l = 0 in the kernels that keep it finite) gets l = +inf or
// the sink's weight alone, and o = 0: the sink takes everything. Added once per row, where the
// row's o is divided by l (or the splits' combine, which adds it to the merged l).
__device__ __forceinline__ float sink_log2(const float* sinks, int h) { return sinks ? sinks[h] * kLog2e : -INFINITY; }
__device__ __forceinline__ float plus_sink(float l, float m, float sink_log2) {
  return sink_log2 == -INFINITY ? l : l + exp2_approx(sink_log2 - m);
}

// Merges partial (m2, l2) into (m, l), each l a sum of exp(x - m) over its part (natural
// units). The sum with the smaller max is scaled by exp(m_lo - m_hi) <= 1, so no term ever
// exceeds 1 and nothing overflows in any merge order. An empty partial (m_lo = -inf, l_lo = 0)
// is skipped without computing -inf - -inf.
__device__ __forceinline__ void merge_ml(float& m, float& l, float m2, float l2) {
  const bool first_hi = m >= m2;
  const float m_hi = first_hi ? m : m2, m_lo = first_hi ? m2 : m;
  const float l_hi = first_hi ? l : l2, l_lo = first_hi ? l2 : l;
  const float r = m_lo == -INFINITY ? 0.f : exp2_approx((m_lo - m_hi) * kLog2e);
  m = m_hi;
  l = l_hi + l_lo * r;
}

// Merges (m2, l2, o2) into (m, l, o), each l and o a sum of exp2(x - m) (times v) over its
// part (log2 units): the smaller max's sums are scaled down, so nothing overflows. An empty
// part (m2 = -inf, l2 = 0, o2 = 0) is skipped, since -inf - -inf would be NaN; (m, l, o) =
// (-inf, 0, 0) takes the weight exp2(-inf) = 0.
__device__ __forceinline__ void merge_mlo(float& m, float& l, float4& o, float m2, float l2, const float4& o2) {
  if (m2 == -INFINITY) return;
  const float mx = fmaxf(m, m2);
  const float a = exp2_approx(m - mx), b = exp2_approx(m2 - mx);
  l = l * a + l2 * b;
  o = make_float4(fmaf(o.x, a, o2.x * b), fmaf(o.y, a, o2.y * b), fmaf(o.z, a, o2.z * b), fmaf(o.w, a, o2.w * b));
  m = mx;
}

}  // namespace attnbench
