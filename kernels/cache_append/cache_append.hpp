// cache_append: writes new tokens' K/V rows into a dense KV cache (decode's layout), the
// write half of a generation step.
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/common/kernels.hpp"
#include "kernels/common/rope.hpp"

namespace attnbench {

// Writes `tokens` new rows per sequence: row t of sequence b goes to cache row
// positions[b] + t. Same dtype as the cache.
struct CacheAppendParams {
  void* k_cache;             // [batch, max_context, kv_heads, head_dim]
  void* v_cache;             // [batch, max_context, kv_heads, head_dim]
  const void* k_new;         // [batch, tokens, kv_heads, head_dim]
  const void* v_new;         // [batch, tokens, kv_heads, head_dim]
  const int32_t* positions;  // [batch], on the device; positions[b] + tokens <= max_context
  int64_t batch = 1, tokens = 1, kv_heads = 1, head_dim = 64, max_context = 1;
  // RoPE: each new key is turned at its position (positions[b] + t) as it is stored, as
  // serving engines do; values are copied. The table covers positions [0, max_context).
  RopeTable rope;
  DType dtype = DType::fp32;
};

const std::vector<Variant<CacheAppendParams>>& cache_append_variants();

// The table's first variant: what the pipeline's generation loop calls.
void cache_append(const CacheAppendParams& p, const LaunchContext& ctx);

}  // namespace attnbench
