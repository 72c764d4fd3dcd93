// fp64 reference of cache_append: new tokens' K or V rows written into a dense KV cache.
#pragma once
#include "reference/common.hpp"

namespace attnbench::ref {

struct CacheAppendShape {
  int64_t batch = 1, tokens = 1, kv_heads = 1, head_dim = 8, max_context = 1;
  // Per sequence, the rows already in its cache: its new rows go to positions context[b] .. context[b] + tokens - 1.
  // 0 <= context[b] and context[b] + tokens <= max_context.
  std::vector<int64_t> context;
  Rope rope;  // new rows turned at their positions context[b] + t as they are stored (keys)
};

// cache_after[b, p] = rope(new_rows[b, p - context[b]], p)  if context[b] <= p < context[b] + tokens,
//                     cache_before[b, p]           otherwise.
// One call per cache (K or V). cache_before: [batch, max_context, kv_heads, head_dim]; new_rows: [batch, tokens,
// kv_heads, head_dim], sequence-major (the layout of CacheAppendParams::k_new and v_new).
// Output row r = b * max_context + p, one cache row kv_heads * head_dim wide; returns [rows.size(), kv_heads *
// head_dim].
Matrix cache_append(const CacheAppendShape& s, const float* cache_before, const float* new_rows, const Rows& rows);

}  // namespace attnbench::ref
