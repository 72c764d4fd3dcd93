// What the ragged op's adapter (ragged.cpp) shares with its tests and with the mla op: the batch
// a [shape] names, its paged cache in the flash layout, written from the tokens and read back
// through the block table, and the rows verification always checks.
#pragma once
#include <cstdint>
#include <vector>

#include "app/ops/paged.hpp"
#include "app/shape.hpp"
#include "kernels/common/dtype.hpp"
#include "reference/common.hpp"

namespace attnbench {

// The [shape]'s batch, one [query_len, context_len] per sequence: shape.sequences (which
// finish() fills from shape.mix when the case gives a mix).
inline const IntPairs& ragged_sequences(const Shape& s) { return s.pairs("sequences"); }

// The flash layout of a paged cache, k and v alike: [num_blocks, block_size, kv_heads, head_dim],
// slot s = block · block_size + token of the block, element (s, h, d) at (s · kv_heads + h) ·
// head_dim + d. Every sequence's tokens (`tokens`: [slots.size(), kv_heads, head_dim], one
// sequence's context after another) go to their slots (PoolLayout::slots) encoded in kv_dtype
// (fp8: value / scale, saturated); every other one of the pool's `pool_slots` slots holds NaN
// (all-ones bytes, NaN in every storage type), the trap a kernel that reads past a context falls in.
std::vector<uint8_t> flash_pool(const float* tokens, const std::vector<int64_t>& slots, int64_t kv_heads,
                                int64_t head_dim, int64_t pool_slots, DType kv_dtype, float scale);

// The sequences' contexts read back out of such a pool through the block table (key j of
// sequence b in block table[b][j / block_size]), as the cache holds them (fp8: code · scale):
// [Σ context, kv_heads, head_dim], one sequence after another, what the reference reads.
std::vector<float> gather_flash_pool(const uint8_t* pool, const PoolLayout& layout, const std::vector<int64_t>& context,
                                     int64_t block_size, int64_t kv_heads, int64_t head_dim, DType kv_dtype,
                                     float scale);

// The rows verification always checks of an output [Σ query_len, heads, ...] whose sequences'
// query tokens are packed one sequence after another (row t · heads + h): the first and the last
// query token of every sequence with the first and the last head, sequence by sequence, so that a
// [verify] max_rows too small for all of them keeps the first sequences' (ragged, and mla with
// s_q tokens every sequence).
ref::Rows first_and_last_rows(const std::vector<int64_t>& query_len, int64_t heads);

}  // namespace attnbench
