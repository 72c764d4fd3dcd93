// sample rung 4, gemm_then_sample: the LM-head form's simple way, as a serving engine runs it:
// the logits of every row by cuBLAS (cublasGemmEx, logits [batch, vocab] = hidden [batch, d] ·
// W [vocab, d]ᵀ, fp32 accumulate, stored in fp32 in the workspace so no dtype rounding enters),
// then the fastest sampling rung that takes them, through its launcher: cluster (3_cluster.cu) on
// sm_90, else pivot (2_pivot.cu), on the fp32 logits. Every option runs (top-k, top-p, min-p,
// greedy): the logits reach memory whole. That is its cost: W is read once (the floor), and the
// fp32 logits are written and read back, 4 · batch · vocab bytes each way (at batch 64 and
// vocab 128256, 33 MB each, 3% of W's 1.05 GB at d 4096), plus a launch more; at batch 1 the
// GEMM is a GEMV that cuBLAS may not stream at the card's bandwidth. Rung 5 fuses the two.
// The error it owes: the fp32 sums of d exact products in cuBLAS's order, whatever it is
// (reference/sample.hpp, lm_head_gamma), then the sampling rung's own (its depth contract).
// Verified on an H200 (run 289: smoke and cases/sample's LM-head files, 438 passed, 0 failed with
// the given-logits smoke; memcheck and racecheck clean) and timed (cold, W [128256, 4096] bf16):
// batch 1, 8, 64: 0.2837, 0.2863, 0.3735 ms, 83.3%, 82.6%, 63.3% of the floor (W read once):
// cuBLAS streams W at ~3.7 TB/s; at batch 64 the sampling and the 33 MB of logits each way cost
// ~0.09 ms.
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/common/cublas.hpp"
#include "kernels/sample/rungs.hpp"

namespace attnbench::sample_impl {

// The fp32 logits [batch, vocab]; the sampling rungs it calls need no workspace.
std::size_t gemm_then_sample_workspace(const SampleParams& p) {
  return round_up_256(static_cast<std::size_t>(p.batch * p.vocab) * sizeof(float));
}

void gemm_then_sample(const SampleParams& p, const LaunchContext& ctx) {
  auto* logits = static_cast<float*>(ctx.workspace);
  // The logits in fp32 (as the model's LM head keeps them): no dtype rounding enters.
  cublas_a_wt(ctx, p.hidden, p.d, p.lm_head, logits, CUDA_R_32F, p.batch, p.vocab, p.d, p.dtype,
              "sample/gemm_then_sample: cublasGemmEx");
  // The sampling rung on the logits as if given, in fp32.
  SampleParams s = p;
  s.logits = logits;
  s.dtype = DType::fp32;
  s.hidden = s.lm_head = nullptr;
  s.d = 0;
  if (cluster_supports(s, *ctx.caps).empty())
    cluster(s, ctx);
  else
    pivot(s, ctx);
}

}  // namespace attnbench::sample_impl
