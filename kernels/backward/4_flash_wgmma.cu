// attention_backward rung 4, flash_wgmma: FlashAttention-3's backward on Hopper's warpgroup
// mma (sm_90a), fp16/bf16, head_dim 64 and 128. The kernel and its design: flash_wgmma.cuh
// (shared with rung 5, which differs only in how dQ is summed).
// Over rung 2 (flash_mma): the same K/V-outer algorithm and tile geometry, every product on
// wgmma with its operands read by the tensor cores straight from 128-byte-swizzled shared
// memory (no ldmatrix), two warpgroups of 64 keys each; dQ by float4 atomics (nondeterministic
// order, as rung 2). Verified on an H100 (runs 273-276): 1.42x rung 2 at b4 h16 s4096 d128
// non-causal (4.02 ms, 342 TFLOP/s), 1.15x PyTorch's FA2 SDPA backward and 0.65x its cuDNN one.
// dQ through rung 5's writer warp instead of the atomics (run 290, H100, same call, a build
// carried beside): b4 h16 s4096 d128 non-causal 4.1677 ms against 4.0448, causal 2.4132 against
// 2.4562: no gain where nothing orders the adds, so this rung keeps its atomics.
#include "kernels/backward/flash_wgmma.cuh"
#include "kernels/backward/rungs.hpp"

namespace attnbench::backward_impl {

void flash_wgmma(const BackwardParams& p, const LaunchContext& ctx) {
  run<false, false>(p, ctx, "attention_backward/flash_wgmma");
}
std::string flash_wgmma_supports(const BackwardParams& p, const DeviceCaps& caps) { return supports(p, caps, false); }
std::size_t flash_wgmma_workspace(const BackwardParams& p) { return flash::workspace_of(p, false).total(); }

}  // namespace attnbench::backward_impl
