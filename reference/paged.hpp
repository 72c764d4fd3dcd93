// fp64 reference of paged decode (vLLM's paged KV cache layouts).
#pragma once
#include "reference/decode.hpp"

namespace attnbench::ref {

// Paged decode (vLLM layouts), x = 16 bytes / element size of the cache's storage type:
// k_cache [num_blocks, kv_heads, head_dim / x, block_size, x], v_cache [num_blocks, kv_heads,
// head_dim, block_size], block_tables [batch, max_blocks_per_seq]. Values are already
// dequantized (fp8 caches are multiplied by their scale before they reach here).
struct PagedShape {
  DecodeShape decode;  // decode.max_context is ignored
  int64_t block_size = 16, num_blocks = 1, max_blocks_per_seq = 1, x = 8;
};

// paged(q, cache, tables) = decode(q, gather(cache, tables)): token t of sequence b lives in slot t % block_size of
// block block_tables[b][t / block_size]. Gathers each sequence's blocks into a dense cache, then calls decode().
Matrix paged(const PagedShape& s, const float* q, const float* k_cache, const float* v_cache,
             const int32_t* block_tables, const Rows& rows);

// Where element e of kv head h of the token in slot `offset` of block `block` lives in vLLM's paged caches
// (the one definition of the layouts, for paged(), reshape_and_cache() and the paged op's cache check).
struct PagedLayout {
  int64_t kv_heads, head_dim, block_size, x;
  // k: [num_blocks, kv_heads, head_dim / x, block_size, x]
  int64_t k(int64_t block, int64_t h, int64_t e, int64_t offset) const {
    return (((block * kv_heads + h) * (head_dim / x) + e / x) * block_size + offset) * x + e % x;
  }
  // v: [num_blocks, kv_heads, head_dim, block_size]
  int64_t v(int64_t block, int64_t h, int64_t e, int64_t offset) const {
    return ((block * kv_heads + h) * head_dim + e) * block_size + offset;
  }
};

}  // namespace attnbench::ref
