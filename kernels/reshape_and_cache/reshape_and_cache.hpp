// reshape_and_cache: writes new tokens' K/V rows into their slots of a paged KV cache, in
// vLLM's layouts (paged.hpp), quantising to fp8 when the cache is fp8.
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/common/kernels.hpp"
#include "kernels/common/rope.hpp"

namespace attnbench {

// Writes token i's K and V rows into slot slot_mapping[i] (block = slot / block_size,
// offset = slot % block_size) of the paged caches, quantising to fp8 (value / scale,
// round to nearest even, saturating at +-448) when the cache is fp8.
struct ReshapeAndCacheParams {
  const void* k;                // [tokens, kv_heads, head_dim], dtype
  const void* v;                // [tokens, kv_heads, head_dim], dtype
  void* k_cache;                // [num_blocks, kv_heads, head_dim / x, block_size, x], kv_dtype (PagedParams::k_cache)
  void* v_cache;                // [num_blocks, kv_heads, head_dim, block_size], kv_dtype (PagedParams::v_cache)
  const int64_t* slot_mapping;  // [tokens], on the device; a negative slot skips the token
  int64_t tokens = 1, kv_heads = 1, head_dim = 64, block_size = 16;
  int64_t num_blocks = 1;  // blocks in each cache (the kernels need not know it; a plugin's view does)
  DType dtype = DType::fp32, kv_dtype = DType::fp32;
  float k_scale = 1, v_scale = 1;
  // RoPE: token i's key is turned at position positions[i] before it is stored (and
  // quantised), as serving engines do; values are stored as they are.
  RopeTable rope;
  const int32_t* positions = nullptr;  // [tokens], on the device; read only with rope
};

const std::vector<Variant<ReshapeAndCacheParams>>& reshape_and_cache_variants();

// The table's first variant: what the paged op's cache writes call.
void reshape_and_cache(const ReshapeAndCacheParams& p, const LaunchContext& ctx);

}  // namespace attnbench
