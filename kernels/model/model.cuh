// The model family's device helpers: a greedy step's bookkeeping (shared by greedy_step and
// greedy_finish), and GPT-2's GELU from kernels/common/epilogue.cuh.
#pragma once
#include "kernels/common/epilogue.cuh"
#include "kernels/model/model.hpp"

namespace attnbench {

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
