// attention_backward family (issue 50): the gradients dQ, dK, dV of prefill attention
// (kernels/attention/attention.hpp) from dO, the forward's O and its log-sum-exp, as a training
// step runs it. Per (batch, query head), with s = scale · q·k, z = cap(s) + bias + mask:
//   P = exp(Z - LSE) (the forward's softmax, recomputed from its LSE), D_i = rowsum(dO_i ∘ O_i),
//   dP = dO Vᵀ, dS = P ∘ (dP - D) ∘ cap'(S) (cap' = 1 - tanh²(s / softcap), 1 without
//   soft-capping), dQ = scale · dS K, dK = scale · dSᵀ Q, dV = Pᵀ dO,
// dK and dV summed over each kv head's group of query heads (GQA/MQA). fp32 accumulation,
// storage in dtype. The fp64 reference: reference/attention_backward.hpp.
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/common/kernels.hpp"
#include "kernels/common/score.hpp"

namespace attnbench {

// One documented struct of inputs (as flash-attention's Flash_bwd_params). Dense layouts,
// attention's: row i of head h of q, o, d_o and dq at ((b·seq_q + i)·heads + h)·head_dim, row j
// of kv head g of k, v, dk and dv at ((b·seq_k + j)·kv_heads + g)·head_dim.
struct BackwardParams {
  const void* q;    // [batch, seq_q, heads, head_dim]
  const void* k;    // [batch, seq_k, kv_heads, head_dim]
  const void* v;    // [batch, seq_k, kv_heads, head_dim]
  const void* o;    // [batch, seq_q, heads, head_dim]: the forward's output, in dtype
  const void* d_o;  // [batch, seq_q, heads, head_dim]: ∂L/∂O
  // [batch, heads, seq_q] fp32: the forward's log-sum-exp of each query's logits z (natural
  // log, score units), so that p = exp(z - lse); +inf for a query that sees no key.
  const float* lse;
  void* dq;  // [batch, seq_q, heads, head_dim]
  void* dk;  // [batch, seq_k, kv_heads, head_dim]
  void* dv;  // [batch, seq_k, kv_heads, head_dim]
  int64_t batch = 1, heads = 1, kv_heads = 1, seq_q = 1, seq_k = 1, head_dim = 64;
  // The forward's mask (AttentionParams'): query i sits at position p = i + q_offset (seq_k -
  // seq_q bottom-right, 0 top_left) and sees key j when j <= p (causal) and |p - j| < window
  // (window > 0). A query that sees no key has dQ = 0 and adds nothing to dK, dV.
  bool causal = false;
  bool top_left = false;
  int64_t window = 0;
  int64_t q_offset = 0;  // finish_backward_params
  // Scale, soft-capping, ALiBi (kernels/common/score.hpp). Attention sinks: not yet (refused).
  // RoPE: not yet (the op has no RoPE keys).
  ScoreParams score;
  DType dtype = DType::fp32;  // q, k, v, o, d_o, dq, dk, dv: fp32, fp16 or bf16
};

// Fills the derived fields: the score's scale (when 0) and scale_log2, q_offset.
inline void finish_backward_params(BackwardParams& p) {
  finish_score(p.score, p.head_dim);
  p.q_offset = p.top_left ? 0 : p.seq_k - p.seq_q;
}

const std::vector<Variant<BackwardParams>>& backward_variants();

}  // namespace attnbench
