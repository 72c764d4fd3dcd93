// fp64 reference of a ragged batch, as serving engines run it (vLLM's unified attention,
// FlashInfer's batch kernels): chunked prefills, speculative verifications and decodes in one
// batch over one KV cache. Sequence b has query_len[b] new tokens, the last query_len[b] of its
// context_len[b] keys; they attend causally, aligned bottom-right within their own sequence
// (query t of b sits at key position context_len[b] - query_len[b] + t).
#pragma once
#include "reference/attention.hpp"

namespace attnbench::ref {

struct RaggedShape {
  int64_t heads = 1, kv_heads = 1, head_dim = 8;
  std::vector<int64_t> query_len, context_len;  // per sequence: 1 <= query_len <= context_len
  int64_t window = 0;  // 0 = none; else a query sees its last `window` keys (itself included)
  Score score;
  // Queries rotated at their positions; the cache's keys taken as rotated when they were stored.
  Rope rope;
  Faithful faithful;  // off: fp64; on: the dtype-faithful reference (common.hpp)
  int64_t queries() const;  // Σ query_len
  int64_t keys() const;     // Σ context_len
};

// Per sequence b, its queries' rows attend to its keys: o = softmax(q Kᵀ·scale + bias + causal mask) V.
// q: [queries(), heads, head_dim], the sequences' queries one after another; k, v: [keys(), kv_heads, head_dim],
// the sequences' contexts one after another. Output row r = t * heads + h (t a query of the concatenation);
// returns [rows.size(), head_dim].
Matrix ragged(const RaggedShape& s, const float* q, const float* k, const float* v, const Rows& rows);

}  // namespace attnbench::ref
