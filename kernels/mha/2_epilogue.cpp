// mha step 2, epilogue: the biases and the split move into the projections' epilogues
// (GemmParams::bias and split_n), as cuBLASLt's bias epilogue and vLLM's QKVParallelLinear do
// it. The QKV projection adds its bias to the fp32 accumulators and stores each column straight
// into q, k or v, so QKV is never written nor read back; the output projection adds its bias
// before its one rounding. Three launches where step 1 (1_launches.cpp) had five, and about
// 2·tokens·((heads + 2 kv_heads)·head_dim + d_model) elements less traffic; each value is
// rounded once where step 1 rounded the projection and then its sum with the bias. Only GEMM
// variants with that epilogue run it (naive, and wgmma_ws with its stores split by TMA); the
// others' rows say why.
#include "kernels/mha/rungs.hpp"

namespace attnbench {

GemmParams mha_impl::epilogue_qkv(const MhaParams& p) {
  GemmParams g = launches_qkv(p);
  g.c = p.q;
  g.biased = true;
  g.bias = p.b_qkv;
  g.split_n[0] = p.q_width();
  g.split_n[1] = p.kv_width();
  g.c1 = p.k;
  g.c2 = p.v;
  return g;
}

GemmParams mha_impl::epilogue_out(const MhaParams& p) {
  GemmParams g = launches_out(p);
  g.biased = true;
  g.bias = p.b_o;
  return g;
}

void mha_impl::epilogue(const MhaParams& p, const LaunchContext& ctx) {
  p.gemm->launch(epilogue_qkv(p), ctx);
  p.attention->launch(p.attn, ctx);
  p.gemm->launch(epilogue_out(p), ctx);
}

}  // namespace attnbench
