// fp64 reference of decode: one new query per sequence over its dense KV cache.
#pragma once
#include "reference/attention.hpp"

namespace attnbench::ref {

struct DecodeShape {
  int64_t batch = 1, heads = 1, kv_heads = 1, head_dim = 8, max_context = 1;
  std::vector<int64_t> context;  // per sequence, 1 <= context[b] <= max_context
  // Per sequence, the cache row its context starts at; empty = b * max_context (a padded
  // [batch, max_context] cache). Tokens stored one sequence after another use the sums of
  // the contexts before b.
  std::vector<int64_t> first;
  int64_t window = 0;                // 0 = none; else the query sees its last `window` keys (itself included)
  Score score;                       // ALiBi, scale and soft-capping (common.hpp)
  // The query rotated at its position context[b] - 1; the cache's keys are taken as already rotated (as serving
  // engines store them: cache_append / reshape_and_cache rotate a key once, when it is written).
  Rope rope;
  Faithful faithful;  // off: fp64; on: the dtype-faithful reference (common.hpp)
};

// o_b = softmax(q_b K_bᵀ·scale + bias) V_b over the sequence's first context[b] cache rows, per head.
// q: [batch, heads, head_dim]; k_cache, v_cache: [batch, max_context, kv_heads, head_dim], or with `first`
// [rows, kv_heads, head_dim] with sequence b at rows first[b] ...
// Output row r = b * heads + h; returns [rows.size(), head_dim]. Equals the last
// query row of causal attention over the sequence's first context[b] tokens.
Matrix decode(const DecodeShape& s, const float* q, const float* k_cache, const float* v_cache, const Rows& rows);

namespace detail {
// Throws std::invalid_argument, naming op, unless the shape is valid (paged() checks its DecodeShape with this too).
void validate(const DecodeShape& s, const char* op);
}  // namespace detail

}  // namespace attnbench::ref
