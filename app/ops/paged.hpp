// What the paged op shares with reshape_and_cache, the kernel that fills its cache, and with the
// other ops over a shuffled pool of blocks (ragged, mla): the pool's key rules and how a trial
// lays sequences out over the pool.
#pragma once
#include <cstdint>
#include <vector>

namespace attnbench {

class ShapeCheck;

// num_blocks defaults to what sequences of these context lengths need in blocks of
// shape.block_size, plus a quarter and one spare; a given num_blocks must leave one spare (it
// stays NaN, and table entries past a sequence's last block point at it). Every op over a
// shuffled pool (paged, ragged, mla) finishes its num_blocks with this.
void finish_num_blocks(ShapeCheck& check, const std::vector<int64_t>& context);

// kv_dtype defaults to dtype; num_blocks defaults to what the sequences need plus a
// quarter and one spare (at least one spare: it stays NaN, and table entries past a
// sequence's last block point at it); head_dim must fill the key cache's 16-byte packs.
void finish_paged_pool(ShapeCheck& check);

// An fp8 e4m3 cache stores value / scale: the scale that puts the largest |value| at
// 448, the format's largest (1 when every value is 0).
float fp8_scale(const float* values, int64_t n);

// One trial's layout: the pool in a seeded random order, sequence b taking the next
// ceil(context[b] / block_size) blocks; table entries past a sequence's last block
// point at a spare block, and token t of sequence b goes to slot
// table[b][t / block_size] * block_size + t % block_size.
struct PoolLayout {
  int64_t max_blocks = 0;        // table columns: the most blocks any sequence needs
  std::vector<int32_t> table;    // [batch, max_blocks]
  std::vector<int64_t> slots;    // [tokens]: every sequence's tokens, one after another
};
PoolLayout lay_out_pool(uint64_t seed, const std::vector<int64_t>& context, int64_t block_size, int64_t num_blocks);

}  // namespace attnbench
