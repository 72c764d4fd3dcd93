// Attention semantics shared by the prefill, decode and paged kernels: which keys a query
// sees (causal, sliding window, as reaches around its position) and the ALiBi bias.
#pragma once
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "kernels/common/kernels.hpp"

namespace attnbench {

// ALiBi slope of query head h of `heads`: slope(h) = 2^(-8 (h + 1) / heads); the bias of key j
// for a query at position pos is -slope(h) · |pos - j|.
__host__ __device__ __forceinline__ float alibi_slope(int h, int heads) {
  return exp2f(-8.f * static_cast<float>(h + 1) / static_cast<float>(heads));
}
// The same in exp2 units (times log2(e)), for scores kept as x · log2(e).
__host__ __device__ __forceinline__ float alibi_slope_log2(int h, int heads) { return alibi_slope(h, heads) * kLog2e; }
// The slope's exponent step, -8 / heads, for kernels that evaluate it on the special-function
// unit as exp2_approx(step · (h + 1)) (flash_mma: no exp2f call in the kernel).
inline float alibi_exponent_step(int64_t heads) { return -8.f / static_cast<float>(heads); }

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
