// fp64 reference of reshape_and_cache: tokens' K or V rows scattered into vLLM's paged caches.
#pragma once
#include "reference/paged.hpp"

namespace attnbench::ref {

// Which of vLLM's two paged layouts (x = 16 bytes / element size of the cache's storage type):
// key   [num_blocks, kv_heads, head_dim / x, block_size, x]
// value [num_blocks, kv_heads, head_dim, block_size]
enum class PagedCache { key, value };

struct ReshapeAndCacheShape {
  int64_t tokens = 1, kv_heads = 1, head_dim = 8, block_size = 16, num_blocks = 1, x = 8;
};

// cache_after[block, h, e, offset] = values[t, h, e]   for the token t with slot_mapping[t] = block * block_size + offset,
//                                   cache_before[...]  for a slot no token owns.
// One call per cache (K or V). values: [tokens, kv_heads, head_dim], already the stored codes (e.g. fp8 value / scale,
// as floats); slot_mapping: [tokens], a negative slot skips its token (vLLM's padding); no two tokens share a slot.
// cache_before and the result are in `which`'s layout, which either way is [num_blocks * kv_heads, head_dim *
// block_size] in memory order: output row r = block * kv_heads + h; returns [rows.size(), head_dim * block_size].
Matrix reshape_and_cache(const ReshapeAndCacheShape& s, PagedCache which, const float* cache_before,
                         const float* values, const int64_t* slot_mapping, const Rows& rows);

}  // namespace attnbench::ref
