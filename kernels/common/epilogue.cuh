// The epilogues' device arithmetic, for the kernels that fuse an epilogue into a projection
// (kernels/model/small_linear.cuh) and the ones that launch it alone (epilogue.cu): one
// definition of GPT-2's GELU.
#pragma once

namespace attnbench {

// GPT-2's GELU, the tanh approximation: 0.5 u (1 + tanh(sqrt(2/pi) (u + 0.044715 u^3))).
__device__ __forceinline__ float gelu_tanh(float u) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  return 0.5f * u * (1.f + tanhf(kSqrt2OverPi * (u + 0.044715f * u * u * u)));
}

}  // namespace attnbench
