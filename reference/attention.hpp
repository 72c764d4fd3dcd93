// fp64 reference of dense attention (MHA, GQA, MQA; causal, sliding window, ALiBi).
#pragma once
#include "reference/common.hpp"

namespace attnbench::ref {

struct AttentionShape {
  int64_t batch = 1, heads = 1, kv_heads = 1, seq_q = 1, seq_k = 1, head_dim = 8;
  // Query i sits at key position p = i + seq_k - seq_q (bottom-right alignment: the last
  // query sees the last key), or p = i with top_left. Causal: it sees keys j <= p.
  bool causal = false;
  bool top_left = false;
  int64_t window = 0;  // 0 = none; else |p - j| < window (and j <= p when causal)
  Score score;              // ALiBi, scale and soft-capping (common.hpp)
  Rope rope;                // query i rotated at its position p, key j at j
  bool rotate_keys = true;  // false: the keys are already rotated (a cache that stores them so)
  // Block-sparse: one BlockMask per query head (empty = dense); query i sees key j only
  // when its head's mask has j's block live for i's block, on top of every other mask.
  std::vector<BlockMask> sparse;
  Faithful faithful;  // off: fp64; on: the dtype-faithful reference (common.hpp)
};

// ALiBi's slopes for `heads` heads, as its authors compute them: for a power of two n,
// 2^(-8i/n), i = 1..n; otherwise the slopes of the largest power of two below, then every
// other slope of twice that count.
std::vector<double> alibi_slopes(int64_t heads);

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
