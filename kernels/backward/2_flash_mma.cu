// attention_backward rung 2, flash_mma: FlashAttention-2's backward on tensor cores (mma.sync,
// sm_80+), fp16/bf16: the five products of the naive rung's formulas as tiles, each pair of
// S and dP computed once. The kernel and its design: flash.cuh (shared with rung 3, which
// differs only in how dQ is summed).
// Over rung 1: rung 1 gives every output row its own warp and recomputes S and dP in both of
// its kernels (14·d FLOPs a visible pair on CUDA cores, every K/V row re-read by every query
// warp); here a block keeps Bc keys' dK and dV in registers while it streams the query tiles
// through shared memory, and all five products (10·d FLOPs a pair) run on tensor cores. The
// price: dQ's partial sums of every key block meet in an fp32 buffer through atomics (Br x d
// float2 adds a block and query tile), so the order of each dQ sum depends on scheduling: the
// rung is declared nondeterministic ([verify] repeat reports its spread; rung 3 is the
// ordered one).
// Verified on an H100 (runs 273-276; memcheck clean). Timed (run 276, b4 h16 s4096 d128 bf16):
// 5.69 ms non-causal, 0.80x PyTorch's FA2 SDPA backward on the same card (run 274); rung 4
// (wgmma) is 1.42x this.
#include "kernels/backward/flash.cuh"

namespace attnbench::backward_impl {

void flash_mma(const BackwardParams& p, const LaunchContext& ctx) {
  flash::run<false>(p, ctx, "attention_backward/flash_mma");
}
std::string flash_mma_supports(const BackwardParams& p, const DeviceCaps& caps) { return flash::supports(p, caps); }
std::size_t flash_mma_workspace(const BackwardParams& p) { return flash::workspace_of(p, false).total(); }

}  // namespace attnbench::backward_impl
