// mha's fusion ladder: how the layer's kernels are joined. A row of the mha op is
// GEMM+ATTENTION+STEP: the gemm op's variant for both projections, the attention op's for the
// attention, and a step of this ladder for what lies between them (the QKV projection's bias
// and split into q, k, v; the output projection's bias):
//   1_launches.cpp  each a kernel of its own (kernels/common/epilogue.cu): five launches
//   2_epilogue.cpp  both in the GEMMs' epilogues: three launches, and QKV never stored
#pragma once
#include <string>
#include <vector>

#include "kernels/attention/attention.hpp"
#include "kernels/gemm/gemm.hpp"

namespace attnbench {

// The layer's tensors, the row's two kernel variants, and the attention's parameters.
struct MhaParams {
  const Variant<GemmParams>* gemm = nullptr;            // both projections
  const Variant<AttentionParams>* attention = nullptr;  // the attention
  const void* x = nullptr;      // [tokens, d_model]
  const void* w_qkv = nullptr;  // [(heads + 2 kv_heads) head_dim, d_model]: q's rows, then k's, then v's
  const void* b_qkv = nullptr;  // [(heads + 2 kv_heads) head_dim]
  const void* w_o = nullptr;    // [d_model, heads · head_dim]
  const void* b_o = nullptr;    // [d_model]
  void* qkv = nullptr;          // [tokens, (heads + 2 kv_heads) head_dim]: the launch-by-launch QKV
  void *q = nullptr, *k = nullptr, *v = nullptr;  // what the attention reads (attn.q, attn.k, attn.v)
  void* y = nullptr;            // [tokens, d_model]
  // The attention: q, k, v, o dense [tokens, heads or kv_heads, head_dim], its shape and options.
  AttentionParams attn;
  int64_t tokens = 0, d_model = 0;
  DType dtype = DType::fp32;

  int64_t q_width() const { return attn.heads * attn.head_dim; }
  int64_t kv_width() const { return attn.kv_heads * attn.head_dim; }
};

struct MhaStep {
  const char* name;
  const char* note;  // one line for `attnbench list`
  void (*launch)(const MhaParams& p, const LaunchContext& ctx);
  // The two projections as this step launches them: the GEMM variant must take both.
  GemmParams (*qkv_gemm)(const MhaParams& p);
  GemmParams (*out_gemm)(const MhaParams& p);
};

// The steps in ladder order (variants.cpp).
const std::vector<MhaStep>& mha_steps();

}  // namespace attnbench
