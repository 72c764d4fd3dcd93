#include "reference/decode.hpp"

namespace attnbench::ref {

using namespace detail;

void detail::validate(const DecodeShape& s, const char* op) {
  const std::string name(op);
  require(s.batch > 0 && s.heads > 0 && s.kv_heads > 0 && s.head_dim > 0 && s.max_context > 0,
          name + ": batch, heads, kv_heads, head_dim and max_context must be positive");
  require(s.heads % s.kv_heads == 0, name + ": heads (" + std::to_string(s.heads) +
                                         ") must be a multiple of kv_heads (" + std::to_string(s.kv_heads) + ")");
  require(static_cast<int64_t>(s.context.size()) == s.batch,
          name + ": context has " + std::to_string(s.context.size()) + " lengths for batch " + std::to_string(s.batch));
  require(s.first.empty() || static_cast<int64_t>(s.first.size()) == s.batch,
          name + ": first has " + std::to_string(s.first.size()) + " rows for batch " + std::to_string(s.batch));
  for (int64_t f : s.first) require(f >= 0, name + ": a sequence's first cache row is negative");
  require(s.window >= 0, name + ": window must be >= 0");
  for (int64_t c : s.context) {
    require(c >= 1 && c <= s.max_context, name + ": context " + std::to_string(c) +
                                              " is outside [1, max_context = " + std::to_string(s.max_context) + "]");
  }
}

// decode = causal attention with Q = q_b and K, V = rows 0..context[b]-1 of sequence b's cache: one query at key
// position context[b] - 1, so it sees every key. Planned onto the dense attention core.
Matrix decode(const DecodeShape& s, const float* q, const float* k_cache, const float* v_cache, const Rows& rows) {
  validate(s, "decode");
  check_rows("decode", rows, s.batch * s.heads);
  std::vector<Rows> rows_of(s.batch), out_of(s.batch);  // per sequence: its head of each row, and its output row
  for (size_t n = 0; n < rows.size(); ++n) {
    rows_of[rows[n] / s.heads].push_back(rows[n] % s.heads);
    out_of[rows[n] / s.heads].push_back(n);
  }
  // Sequence b's slice of the cache, [max_context, kv_heads, d], begins with exactly the [seq_k, kv_heads, d] layout
  // that attention reads, so it is read in place.
  std::vector<KvTask> tasks;
  for (int64_t b = 0; b < s.batch; ++b) {
    if (rows_of[b].empty()) continue;
    AttentionShape one;
    one.heads = s.heads;
    one.kv_heads = s.kv_heads;
    one.seq_k = s.context[b];
    one.head_dim = s.head_dim;
    one.causal = true;
    one.window = s.window;
    one.score = s.score;
    one.rope = s.rope;
    one.rotate_keys = false;
    one.faithful = s.faithful;
    const int64_t first = s.first.empty() ? b * s.max_context : s.first[b];
    const int64_t cache_offset = first * s.kv_heads * s.head_dim;
    plan_attention(one, q + b * s.heads * s.head_dim, k_cache + cache_offset, v_cache + cache_offset, rows_of[b],
                   out_of[b], tasks);
  }
  return run_attention(tasks, rows.size(), s.head_dim);
}

}  // namespace attnbench::ref
