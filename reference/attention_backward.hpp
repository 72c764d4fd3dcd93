// fp64 reference of attention's backward pass (issue 50): the gradients of a loss L with respect
// to Q, K and V, given dO = ∂L/∂O, for the forward of reference/attention.hpp (MHA, GQA, MQA;
// causal in both alignments, sliding window, ALiBi, soft-capping, the scale). Per (batch, query
// head), with s = scale · q·k the raw score, z = cap(s) + bias + mask the logit:
//   P   = softmax(Z) row by row        (attention_weights(), the forward's own code)
//   O   = P V,  LSE_i = log Σ_j exp(z_ij) (natural log; +inf for a query that sees no key)
//   D_i = Σ_d dO_id · O_id             (= rowsum(dO ∘ O) = Σ_j P_ij dP_ij)
//   dP  = dO Vᵀ
//   dS  = P ∘ (dP − D) ∘ cap'(S)       (cap' = 1 − tanh²(s / softcap); 1 without soft-capping)
//   dQ  = scale · dS K,  dK = scale · dSᵀ Q,  dV = Pᵀ dO
// and under GQA each kv head's dK and dV are summed over the query heads of its group. A query
// that sees no key has O = 0 and contributes nothing: its dQ row is 0.
// Not taken (refused): RoPE, block-sparse masks, attention sinks.
#pragma once
#include <vector>

#include "reference/attention.hpp"

namespace attnbench::ref {

// The forward's O and LSE as a training step stored them (O in the inputs' dtype, LSE in fp32),
// both widened to float. Given, the backward uses them where a kernel does (D from the stored O,
// P = exp(z - stored LSE)): the dtype-faithful path. Null: the fp64 forward's own.
struct StoredForward {
  const float* o = nullptr;    // [batch, seq_q, heads, head_dim]
  const float* lse = nullptr;  // [batch, heads, seq_q]
};

struct AttentionGrads {
  Matrix o;                 // [batch·seq_q·heads, head_dim]: row (b·seq_q + i)·heads + h
  std::vector<double> lse;  // [batch, heads, seq_q]: (b·heads + h)·seq_q + i; +inf where no key is seen
  Matrix dq;                // like o
  Matrix dk, dv;            // [batch·seq_k·kv_heads, head_dim]: row (b·seq_k + j)·kv_heads + g
};

// q, d_o: [batch, seq_q, heads, head_dim]; k, v: [batch, seq_k, kv_heads, head_dim].
// `groups`: the (batch, kv head) groups to compute, as b·kv_heads + g (empty = all); the rows of
// every other group are left 0. One group's dK and dV need all of its queries, so a group is
// the unit of work. s.faithful: its largest_score is noted (the verdict's score floor), and its
// `p` rounds P before dV = Pᵀ dO and dS before dQ and dK (the tensor cores' operands).
// `what`: the gradients (and the forward's O and LSE), or only the forward's O and LSE (dq, dk,
// dv left 0): a kernel's inputs at 2/5 of the work, for shapes whose every group cannot be
// differentiated in fp64 in the time a case has.
enum class Pass { forward, backward };
AttentionGrads attention_backward(const AttentionShape& s, const float* q, const float* k, const float* v,
                                  const float* d_o, const StoredForward& stored = {},
                                  const std::vector<int64_t>& groups = {}, Pass what = Pass::backward);

}  // namespace attnbench::ref
