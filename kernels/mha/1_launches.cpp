// mha step 1, launches: the layer launch by launch, as a first port of a PyTorch module runs it.
// The QKV projection writes X·Wqkvᵀ to memory, a kernel adds its bias and splits the columns
// into q, k and v (qkv_split), the attention runs, the output projection writes O·Woᵀ and a
// last kernel adds its bias in place (add_bias); both of those kernels are
// kernels/common/epilogue.cu's, which the model's launch-by-launch chain uses too. Five
// launches, and QKV and y each make one extra round trip through memory: what step 2
// (2_epilogue.cpp) removes.
#include "kernels/common/epilogue.hpp"
#include "kernels/mha/rungs.hpp"

namespace attnbench {

GemmParams mha_impl::launches_qkv(const MhaParams& p) {
  return {p.x, p.w_qkv, p.qkv, 1, p.tokens, p.q_width() + 2 * p.kv_width(), p.d_model, GemmLayout::nt, p.dtype};
}

GemmParams mha_impl::launches_out(const MhaParams& p) {
  return {p.attn.o, p.w_o, p.y, 1, p.tokens, p.d_model, p.q_width(), GemmLayout::nt, p.dtype};
}

void mha_impl::launches(const MhaParams& p, const LaunchContext& ctx) {
  p.gemm->launch(launches_qkv(p), ctx);
  QkvSplit split{p.qkv, p.b_qkv, p.q, p.k, p.v};
  split.tokens = p.tokens;
  split.heads = p.attn.heads;
  split.kv_heads = p.attn.kv_heads;
  split.head_dim = p.attn.head_dim;
  split.dtype = p.dtype;
  qkv_split(split, ctx.stream);
  p.attention->launch(p.attn, ctx);
  p.gemm->launch(launches_out(p), ctx);
  add_bias(p.y, p.b_o, p.tokens, p.d_model, p.dtype, ctx.stream);
}

}  // namespace attnbench
