// fp64 reference of dense attention (MHA, GQA, MQA; causal, sliding window, ALiBi).
#pragma once
#include "reference/common.hpp"

namespace attnbench::ref {

struct AttentionShape {
  int64_t batch = 1, heads = 1, kv_heads = 1, seq_q = 1, seq_k = 1, head_dim = 8;
  bool causal = false;  // aligned bottom-right: query i sees keys j <= i + seq_k - seq_q
  int64_t window = 0;   // 0 = none; else |i + seq_k - seq_q - j| < window (and j <= that when causal)
  bool alibi = false;   // bias -slope(h) * |i + seq_k - seq_q - j|
  double scale = 0;     // 0 = 1/sqrt(head_dim)
};

// ALiBi slope of query head h (0-based): 2^(-8 (h + 1) / heads).
double alibi_slope(int64_t h, int64_t heads);

// O = softmax(Q Kᵀ·scale + bias + mask) V, per (batch, head); query head h reads kv head h / (heads / kv_heads).
// q: [batch, seq_q, heads, head_dim]; k, v: [batch, seq_k, kv_heads, head_dim].
// Output row r = (b * seq_q + i) * heads + h, as in o [batch, seq_q, heads, head_dim];
// returns [rows.size(), head_dim]. Rows that see no key are 0.
Matrix attention(const AttentionShape& s, const float* q, const float* k, const float* v, const Rows& rows);

namespace detail {
// Appends the tasks that compute rows[n] of attention(s, q, k, v) into output row out[n]: rows are grouped by
// (batch, kv head), and a group is split every kRowsPerTask rows. decode() plans its sequences through this too.
void plan_attention(const AttentionShape& s, const float* q, const float* k, const float* v, const Rows& rows,
                    const Rows& out, std::vector<KvTask>& tasks);
}  // namespace detail

}  // namespace attnbench::ref
