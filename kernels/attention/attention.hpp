// attention family (prefill): O = softmax(Q Kᵀ · scale + bias + mask) V for every
// query head, fp32 softmax statistics, storage in dtype.
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/common/kernels.hpp"
#include "kernels/common/rope.hpp"
#include "kernels/common/score.hpp"

namespace attnbench {

// Block-sparse attention's mask, as FlexAttention keeps its block masks: per (query head,
// query block of `block` queries) the live key blocks (of `block` keys), as a count and an
// ascending list, and the same as a dense byte map for kernels that mask element by element.
// Query block b holds queries b·block .. (by index, not position); causal, window and the
// rest still apply inside live blocks.
struct BlockSparse {
  int block = 0;  // 0 = dense
  int q_blocks = 0, k_blocks = 0;
  const uint8_t* live = nullptr;  // [heads][q_blocks][k_blocks], 1 = live
  const int32_t* num = nullptr;   // [heads][q_blocks]
  const int32_t* idx = nullptr;   // [heads][q_blocks][k_blocks]: the first num[...] entries, ascending
  ATTNBENCH_HOST_DEVICE bool on() const { return block > 0; }
};

// One documented struct of inputs (as flash-attention's Flash_fwd_params).
// Within a batch the layouts are fixed: row i of head h of q/o is at
// i * heads * head_dim + h * head_dim, row j of kv head g of k/v at
// j * kv_heads * head_dim + g * head_dim. Between batches they are strided, so that
// a KV cache [batch, max_context, kv_heads, head_dim] can be read in place.
struct AttentionParams {
  const void* q;  // [batch, seq_q, heads, head_dim]
  const void* k;  // [batch, seq_k, kv_heads, head_dim] (batch stride kv_batch_stride)
  const void* v;  // [batch, seq_k, kv_heads, head_dim] (batch stride kv_batch_stride)
  void* o;        // [batch, seq_q, heads, head_dim]
  int64_t q_batch_stride = 0, kv_batch_stride = 0, o_batch_stride = 0;  // elements
  int64_t batch = 1, heads = 1, kv_heads = 1, seq_q = 1, seq_k = 1, head_dim = 64;
  // Query i sits at position p = i + seq_k - seq_q (bottom-right alignment, as FlashAttention
  // >= 2.1: the last query sees the last key), or p = i with top_left (PyTorch's is_causal).
  // It sees key j when j <= p (causal) and when the two are less than `window` apart
  // (window > 0; on both sides when not causal). The score options (ALiBi's bias
  // -alibi_slopes[h] * |p - j|, soft-capping, the scale) apply before the masks
  // (kernels/common/score.hpp). A query that sees no key outputs 0.
  bool causal = false;
  bool top_left = false;
  int64_t window = 0;
  ScoreParams score;     // score.scale_log2 is scale · log2(e) · descale_q · descale_k
  int64_t q_offset = 0;  // p - i: seq_k - seq_q, or 0 with top_left (finish_attention_params)
  // RoPE: query i rotated at its position p, key j at j, before the scores. The table covers
  // positions [min(0, q_offset), max(seq_k, seq_q + q_offset)).
  RopeTable rope;
  BlockSparse sparse;
  // dtype fp8_e4m3 (FlashAttention-3's fp8 path): q, k and v hold e4m3 codes whose values are
  // the codes times descale_q, descale_k and descale_v (per tensor); o is bf16. 1 otherwise.
  // finish_attention_params folds descale_q · descale_k into score.scale_log2.
  float descale_q = 1, descale_k = 1, descale_v = 1;
  DType dtype = DType::fp32;
};

// The output's storage type: the inputs', but bf16 for fp8 inputs.
inline DType attention_out_dtype(DType t) { return t == DType::fp8_e4m3 ? DType::bf16 : t; }

// Fills the derived fields (strides for the dense layout, the score's scales, q_offset).
inline void finish_attention_params(AttentionParams& p) {
  if (p.q_batch_stride == 0) p.q_batch_stride = p.seq_q * p.heads * p.head_dim;
  if (p.o_batch_stride == 0) p.o_batch_stride = p.seq_q * p.heads * p.head_dim;
  if (p.kv_batch_stride == 0) p.kv_batch_stride = p.seq_k * p.kv_heads * p.head_dim;
  finish_score(p.score, p.head_dim, p.descale_q, p.descale_k);
  p.q_offset = p.top_left ? 0 : p.seq_k - p.seq_q;
}

// The RoPE passes over p's queries (at their positions) and keys; the caller sets dst.
inline RopeRows rope_pass_q(const AttentionParams& p) {
  return {p.q, nullptr, p.dtype, p.batch, p.seq_q, p.heads, p.head_dim, static_cast<int>(p.q_offset)};
}
inline RopeRows rope_pass_k(const AttentionParams& p) {
  return {p.k, nullptr, p.dtype, p.batch, p.seq_k, p.kv_heads, p.head_dim};
}

const std::vector<Variant<AttentionParams>>& attention_variants();

}  // namespace attnbench
