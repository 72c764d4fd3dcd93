// The attention (prefill) ladder, baseline first: O = softmax(Q Kᵀ · scale + bias + mask) V per
// query head, fp32 softmax statistics, storage in dtype; the semantics (bottom-right causal,
// window, ALiBi, GQA, fully masked rows -> 0) are AttentionParams' (attention.hpp). One rung
// per file, from the unfused paths (1_naive.cu, 2_cublas.cu) to the fused kernels
// (3_flash_fp32.cu, 4_flash_mma.cu, 5_flash_wgmma.cu, 6_flash_ws.cu).
#include <string>
#include <vector>

#include "kernels/attention/attention.hpp"
#include "kernels/attention/rungs.hpp"
#include "kernels/common/rope_first.hpp"

namespace attnbench {
namespace {

using Launch = void (*)(const AttentionParams&, const LaunchContext&);
using Workspace = std::size_t (*)(const AttentionParams&);

template <Workspace Own>
std::size_t own_scratch(const AttentionParams& p) {
  return rope_first::own_scratch<AttentionParams, Own>(p);
}

// RoPE for a rung that does not fuse it: rope_rows writes rotated copies of Q and K into
// scratch after the rung's own, and the rung runs on them with RoPE off (the unfused
// baseline).
template <Launch Rung, Workspace Own>
void unfused_rope(const AttentionParams& p, const LaunchContext& ctx) {
  if (!p.rope.on()) return Rung(p, ctx);
  RopeRows q = rope_pass_q(p), k = rope_pass_k(p);
  q.dst = static_cast<char*>(ctx.workspace) + own_scratch<Own>(p);
  k.dst = static_cast<char*>(q.dst) + round_up_256(q.bytes());
  rope_rows(q, p.rope, ctx.stream);
  check_launch("attention/rope_rows (q)");
  rope_rows(k, p.rope, ctx.stream);
  check_launch("attention/rope_rows (k)");
  AttentionParams r = p;
  r.q = q.dst;
  r.k = k.dst;
  r.rope = {};
  Rung(r, ctx);
}

template <Workspace Own>
std::size_t unfused_rope_workspace(const AttentionParams& p) {
  if (!p.rope.on()) return own_scratch<Own>(p);
  return own_scratch<Own>(p) + round_up_256(rope_pass_q(p).bytes()) + round_up_256(rope_pass_k(p).bytes());
}

// The rotated copies are dense: so must the inputs be (the attention op's are).
template <std::string (*Supports)(const AttentionParams&, const DeviceCaps&)>
std::string unfused_rope_supports(const AttentionParams& p, const DeviceCaps& caps) {
  if (p.rope.on() &&
      (p.q_batch_stride != p.seq_q * p.heads * p.head_dim || p.kv_batch_stride != p.seq_k * p.kv_heads * p.head_dim))
    return "unfused RoPE needs dense q and k (batch strides seq * heads * head_dim)";
  AttentionParams r = p;
  r.rope = {};
  return Supports(r, caps);
}

// flash_mma with RoPE as a separate pass: the baseline of its fused RoPE, listed only for
// cases with RoPE.
std::string flash_mma_rope_first_supports(const AttentionParams& p, const DeviceCaps& caps) {
  if (!p.rope.on()) return "the unfused-RoPE baseline: only for cases with rope";
  return unfused_rope_supports<attention_impl::flash_mma_supports>(p, caps);
}

std::string flash_ws_rope_first_supports(const AttentionParams& p, const DeviceCaps& caps) {
  if (!p.rope.on()) return "the unfused-RoPE baseline: only for cases with rope";
  return unfused_rope_supports<attention_impl::flash_ws_supports>(p, caps);
}

}  // namespace

const std::vector<Variant<AttentionParams>>& attention_variants() {
  using namespace attention_impl;
  static const std::vector<Variant<AttentionParams>> table = with_added_variants<AttentionParams>({
      {"naive", "unfused: fp32 scores (thread per score), scale+mask, softmax block_reduce, P V",
       unfused_rope<naive, naive_workspace>, unfused_rope_supports<naive_supports>,
       unfused_rope_workspace<naive_workspace>},
      {"cublas", "unfused as a framework runs it: cuBLAS batched GEMMs, fp32 scores, softmax warp_online",
       unfused_rope<cublas, cublas_workspace>, unfused_rope_supports<cublas_supports>,
       unfused_rope_workspace<cublas_workspace>},
      {"flash_fp32", "fp32 FlashAttention-2: register-tiled SIMT (4x8 per thread), online softmax, cp.async K/V",
       unfused_rope<flash_fp32, nullptr>, unfused_rope_supports<flash_fp32_supports>, unfused_rope_workspace<nullptr>},
      {"flash_mma",
       "fp16/bf16 FlashAttention-2: mma.sync m16n8k16, ldmatrix, cp.async pipeline, P in registers, lazy rescale; "
       "RoPE: Q turned in its load, K in one pass; block-sparse: only the live key tiles",
       flash_mma, flash_mma_supports, flash_mma_workspace},
      {"flash_mma_rope_first", "flash_mma after a separate RoPE pass over Q and K (the unfused baseline)",
       unfused_rope<flash_mma, nullptr>, flash_mma_rope_first_supports, unfused_rope_workspace<nullptr>,
       rope_first::applies<AttentionParams>},
      {"flash_wgmma", "fp16/bf16 d128, sm_90a: wgmma m64n128k16, Q/K/V in 128-byte swizzle, P in registers",
       unfused_rope<flash_wgmma, nullptr>, unfused_rope_supports<flash_wgmma_supports>,
       unfused_rope_workspace<nullptr>},
      {"flash_ws",
       "fp16/bf16 d64/128/256 and fp8 e4m3 d128 (V transposed first), sm_90a, FlashAttention-3's design: TMA producer warp, mbarrier ring, setmaxnreg, "
       "ping-pong consumer warpgroups, softmax under the next tile's products, persistent; RoPE: Q turned in "
       "shared memory, K in one pass",
       flash_ws, flash_ws_supports, flash_ws_workspace},
      {"flash_ws_rope_first", "flash_ws after a separate RoPE pass over Q and K (the unfused baseline)",
       unfused_rope<flash_ws, flash_ws_workspace>, flash_ws_rope_first_supports,
       unfused_rope_workspace<flash_ws_workspace>, rope_first::applies<AttentionParams>},
  });
  return table;
}

}  // namespace attnbench
