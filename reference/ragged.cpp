#include "reference/ragged.hpp"

#include <numeric>

namespace attnbench::ref {

using namespace detail;

int64_t RaggedShape::queries() const { return std::accumulate(query_len.begin(), query_len.end(), int64_t{0}); }
int64_t RaggedShape::keys() const { return std::accumulate(context_len.begin(), context_len.end(), int64_t{0}); }

// Each sequence is one causal attention of query_len[b] queries over context_len[b] keys, aligned bottom-right,
// read in place from the concatenations and planned onto the dense attention core.
Matrix ragged(const RaggedShape& s, const float* q, const float* k, const float* v, const Rows& rows) {
  require(s.heads > 0 && s.kv_heads > 0 && s.head_dim > 0, "ragged: heads, kv_heads and head_dim must be positive");
  require(s.heads % s.kv_heads == 0, "ragged: heads must be a multiple of kv_heads");
  require(!s.query_len.empty() && s.query_len.size() == s.context_len.size(),
          "ragged: query_len and context_len need one entry per sequence, as many of each");
  require(s.window >= 0, "ragged: window must be >= 0");
  const size_t batch = s.query_len.size();
  std::vector<int64_t> first_query(batch), first_key(batch);  // where each sequence starts in q and in k, v
  for (size_t b = 0; b < batch; ++b) {
    require(s.query_len[b] >= 1 && s.query_len[b] <= s.context_len[b],
            "ragged: sequence " + std::to_string(b) + " has " + std::to_string(s.query_len[b]) + " queries over " +
                std::to_string(s.context_len[b]) + " keys (1 <= query_len <= context_len)");
    first_query[b] = b ? first_query[b - 1] + s.query_len[b - 1] : 0;
    first_key[b] = b ? first_key[b - 1] + s.context_len[b - 1] : 0;
  }
  check_rows("ragged", rows, s.queries() * s.heads);
  // Each row's sequence, and its row within that sequence's attention (i * heads + h).
  std::vector<Rows> rows_of(batch), out_of(batch);
  for (size_t n = 0; n < rows.size(); ++n) {
    const int64_t t = rows[n] / s.heads, h = rows[n] % s.heads;
    const size_t b = static_cast<size_t>(std::upper_bound(first_query.begin(), first_query.end(), t) -
                                         first_query.begin() - 1);
    rows_of[b].push_back((t - first_query[b]) * s.heads + h);
    out_of[b].push_back(static_cast<int64_t>(n));
  }
  std::vector<KvTask> tasks;
  for (size_t b = 0; b < batch; ++b) {
    if (rows_of[b].empty()) continue;
    AttentionShape one;
    one.heads = s.heads;
    one.kv_heads = s.kv_heads;
    one.seq_q = s.query_len[b];
    one.seq_k = s.context_len[b];
    one.head_dim = s.head_dim;
    one.causal = true;  // bottom-right: the last query sees the last key
    one.window = s.window;
    one.score = s.score;
    one.rope = s.rope;
    one.rotate_keys = false;
    one.faithful = s.faithful;
    plan_attention(one, q + first_query[b] * s.heads * s.head_dim, k + first_key[b] * s.kv_heads * s.head_dim,
                   v + first_key[b] * s.kv_heads * s.head_dim, rows_of[b], out_of[b], tasks);
  }
  return run_attention(tasks, rows.size(), s.head_dim);
}

}  // namespace attnbench::ref
