// The model family's device helpers: GPT-2's GELU, and a greedy step's bookkeeping (shared by
// greedy_step and greedy_finish).
#pragma once
#include "kernels/model/model.hpp"

namespace attnbench {

// GPT-2's GELU, the tanh approximation: 0.5 u (1 + tanh(sqrt(2/pi) (u + 0.044715 u^3))).
__device__ __forceinline__ float gelu_tanh(float u) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  return 0.5f * u * (1.f + tanhf(kSqrt2OverPi * (u + 0.044715f * u * u * u)));
}

// The step sequence b has just run (its position less the prompt's last), or -1 when it is
// past the last step (nothing to write).
__device__ __forceinline__ int64_t step_of(const Sequences& s, int64_t b) {
  const int64_t step = s.positions[b] - (s.prompt - 1);
  return step >= 0 && step < s.generate ? step : -1;
}

// Writes `token` after sequence b's position, where the next step reads it, and advances the
// position and the context to it.
__device__ __forceinline__ void advance(const Sequences& s, int64_t b, int32_t token) {
  const int32_t pos = s.positions[b];
  s.tokens[b * s.token_stride + pos + 1] = token;
  s.positions[b] = pos + 1;
  s.contexts[b] = pos + 2;
}

}  // namespace attnbench
