// The attention (prefill) ladder, baseline first: O = softmax(Q Kᵀ · scale + bias + mask) V per
// query head, fp32 softmax statistics, storage in dtype; the semantics (bottom-right causal,
// window, ALiBi, GQA, fully masked rows -> 0) are AttentionParams' (attention.hpp). One rung
// per file, from the unfused paths (1_naive.cu, 2_cublas.cu) to the fused kernels
// (3_flash_fp32.cu, 4_flash_mma.cu, 5_flash_wgmma.cu).
#include <string>
#include <vector>

#include "kernels/attention/attention.hpp"
#include "kernels/attention/rungs.hpp"

namespace attnbench {
namespace {

using Launch = void (*)(const AttentionParams&, const LaunchContext&);
using Workspace = std::size_t (*)(const AttentionParams&);

std::size_t round_256(std::size_t n) { return (n + 255) / 256 * 256; }

// The rotated copies of Q and K, after the rung's own scratch.
RopeRows rope_q(const AttentionParams& p) {
  return {p.q, nullptr, p.dtype, p.batch, p.seq_q, p.heads, p.head_dim, static_cast<int>(p.q_offset)};
}
RopeRows rope_k(const AttentionParams& p) { return {p.k, nullptr, p.dtype, p.batch, p.seq_k, p.kv_heads, p.head_dim}; }

// (A runtime test: with sanitizers on, GCC does not take a function's address as a constant.)
template <Workspace Own>
std::size_t own_scratch(const AttentionParams& p) {
  const Workspace own = Own;
  return own ? round_256(own(p)) : 0;
}

// RoPE for a rung that does not fuse it: rope_rows writes rotated copies of Q and K into
// scratch, and the rung runs on them with RoPE off (the unfused baseline).
template <Launch Rung, Workspace Own>
void rope_first(const AttentionParams& p, const LaunchContext& ctx) {
  if (!p.rope.on()) return Rung(p, ctx);
  RopeRows q = rope_q(p), k = rope_k(p);
  q.dst = static_cast<char*>(ctx.workspace) + own_scratch<Own>(p);
  k.dst = static_cast<char*>(q.dst) + round_256(q.bytes());
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
std::size_t rope_first_workspace(const AttentionParams& p) {
  if (!p.rope.on()) return own_scratch<Own>(p);
  return own_scratch<Own>(p) + round_256(rope_q(p).bytes()) + round_256(rope_k(p).bytes());
}

// The rotated copies are dense: so must the inputs be (the attention op's are).
template <std::string (*Supports)(const AttentionParams&, const DeviceCaps&)>
std::string rope_first_supports(const AttentionParams& p, const DeviceCaps& caps) {
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
  return rope_first_supports<attention_impl::flash_mma_supports>(p, caps);
}

}  // namespace

const std::vector<Variant<AttentionParams>>& attention_variants() {
  using namespace attention_impl;
  static const std::vector<Variant<AttentionParams>> table = {
      {"naive", "unfused: fp32 scores (thread per score), scale+mask, softmax block_reduce, P V",
       rope_first<naive, naive_workspace>, rope_first_supports<naive_supports>, rope_first_workspace<naive_workspace>},
      {"cublas", "unfused as a framework runs it: cuBLAS batched GEMMs, fp32 scores, softmax warp_online",
       rope_first<cublas, cublas_workspace>, rope_first_supports<cublas_supports>,
       rope_first_workspace<cublas_workspace>},
      {"flash_fp32", "fp32 FlashAttention-2: register-tiled SIMT (4x8 per thread), online softmax, cp.async K/V",
       rope_first<flash_fp32, nullptr>, rope_first_supports<flash_fp32_supports>, rope_first_workspace<nullptr>},
      {"flash_mma",
       "fp16/bf16 FlashAttention-2: mma.sync m16n8k16, ldmatrix, cp.async pipeline, P in registers, lazy rescale; "
       "RoPE: Q turned in its load, K in one pass; block-sparse: only the live key tiles",
       flash_mma, flash_mma_supports, flash_mma_workspace},
      {"flash_mma_rope_first", "flash_mma after a separate RoPE pass over Q and K (the unfused baseline)",
       rope_first<flash_mma, nullptr>, flash_mma_rope_first_supports, rope_first_workspace<nullptr>},
      {"flash_wgmma", "fp16/bf16 d128, sm_90a: wgmma m64n128k16, Q/K/V in 128-byte swizzle, P in registers",
       rope_first<flash_wgmma, nullptr>, rope_first_supports<flash_wgmma_supports>, rope_first_workspace<nullptr>},
  };
  return table;
}

}  // namespace attnbench
