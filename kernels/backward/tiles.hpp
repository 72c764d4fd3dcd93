// Which query tiles and key blocks of the tiled backward rungs (flash.cuh) meet: a block of
// keys [n0, n1] walks the query tiles that see one of its keys, and, in the deterministic rung,
// adds its share of a query tile's dQ after the lower key blocks that see the tile. Both sides
// must agree on who meets whom, or a block waits for a turn that never comes: the formulas live
// here once, on host and device, and tests/test_reference_backward.cpp checks them against the
// mask pair by pair.
//
// A query i sits at key position i + q_offset and sees keys [pos - lo_reach, pos + hi_reach]
// within [0, seq_k) (key_reach, kernels/common/mask.cuh). Every term is below 2^30 in magnitude
// (seq_q, seq_k < 2^29, the reaches <= seq_q + seq_k), so int arithmetic cannot overflow.
#pragma once
#include "kernels/common/host_device.hpp"

namespace attnbench::backward_impl {

struct TileRange {
  int first, last;  // empty when first > last
};

// Query tiles of Br rows that see some key of [n0, n1]: the rows i with
// i + q_offset + hi_reach >= n0 and i + q_offset - lo_reach <= n1.
ATTNBENCH_HOST_DEVICE inline TileRange query_tiles(int seq_q, int q_offset, int lo_reach, int hi_reach, int n0,
                                                   int n1, int Br) {
  const int lo_row = n0 - hi_reach - q_offset, hi_row = n1 + lo_reach - q_offset;
  const int lo = lo_row > 0 ? lo_row : 0, hi = hi_row < seq_q - 1 ? hi_row : seq_q - 1;
  return lo > hi ? TileRange{0, -1} : TileRange{lo / Br, hi / Br};
}

// The first key block of Bc keys that sees query tile m: the keys its rows see form one
// interval (each row's is an interval that moves by one key a row), which starts at its first
// row's lowest key; the key blocks that see the tile are that one and the ones after it up to
// the last, with none missing.
ATTNBENCH_HOST_DEVICE inline int first_key_block(int q_offset, int lo_reach, int m, int Br, int Bc) {
  const int key = m * Br + q_offset - lo_reach;
  return (key > 0 ? key : 0) / Bc;
}

// Which key block and which (kv head, batch) row a block of the 1-D grid works on. Blocks
// start in about their linear order, one or two an SM at a time, and a block's work is its key
// block's query tiles times the group: causal masks give the first key blocks of a row the
// most (key block 0 sees every query tile; the last, a few). Row-major order (a row's key
// blocks adjacent, first to last) keeps the blocks that read the same Q and dO on the card
// together; it balances itself when the grid is many blocks an SM. A small causal grid does
// not: GQA b2 h32/4 s4096 d128 is 256 blocks of up to 8 heads x 64 query tiles on 132 SMs,
// the heaviest one alone an SM's fair share, and row-major order starts rows 5-8's heaviest
// blocks in the second wave (rung 4 measured 3.52 ms there against 2.43 ms for MHA's 2048
// blocks of the same FLOPs, run 274; a list-scheduling model gives 1.59x the balanced time).
// Key-major order (every row's key block 0 first, then every row's key block 1, ...) starts the
// heaviest blocks first: the model's 1.00x. Both orders start a row's key blocks in the order of
// the deterministic rungs' turns, increasing or (descending) decreasing: a block waits only for
// the key blocks of its row before it in that order, which must not start after it. (Descending
// key-major starts a causal grid's lightest blocks first: the balance it was chosen for is lost
// to the deterministic rungs, whose chain cost more.)
struct BlockCoord {
  int n_block, row;  // row = kv head + kv_heads * batch index
};

// `descending`: the deterministic rungs' order where the keys a query sees are bounded above
// (descending_turns): a row's key blocks start last first, as their turns run.
ATTNBENCH_HOST_DEVICE inline BlockCoord block_coord(int linear, int key_blocks, int rows, bool key_major,
                                                    bool descending = false) {
  BlockCoord c = key_major ? BlockCoord{linear / rows, linear % rows} : BlockCoord{linear % key_blocks, linear / key_blocks};
  if (descending) c.n_block = key_blocks - 1 - c.n_block;
  return c;
}

// The last key block of Bc keys that sees query tile m (rows m Br .. min(m Br + Br, seq_q) - 1),
// for a tile that some key block sees: its last row's highest key, within [0, seq_k).
ATTNBENCH_HOST_DEVICE inline int last_key_block(int seq_q, int seq_k, int q_offset, int hi_reach, int m, int Br,
                                                int Bc) {
  const int last_row = m * Br + Br - 1 < seq_q - 1 ? m * Br + Br - 1 : seq_q - 1;
  const int key = last_row + q_offset + hi_reach;
  return (key < seq_k - 1 ? key : seq_k - 1) / Bc;
}

// The deterministic rungs add a query tile's dQ one key block at a time, in a fixed order. In
// increasing key order under a causal mask (or a window), key block n + 1's first query tile is
// Bc / Br tiles after block n's, so n + 1 reaches each tile before n has, and waits for it: the
// chain makes every block of a row last as long as key block 0, the one that sees every tile
// (run 277: flash_wgmma_det causal 6.15 ms, its non-causal 5.96; flash_wgmma causal 2.43). In
// decreasing order each block reaches a tile after the block before it in the order, which
// started earlier and nearer to it: no wait but at the start. Only where the keys a query sees
// are bounded above (a causal mask or a window: hi_reach below key_reach's "unlimited", seq_q +
// seq_k); without a bound every key block starts at query tile 0 and the order does not matter.
inline bool descending_turns(bool deterministic, int hi_reach, int seq_q, int seq_k) {
  return deterministic && hi_reach < seq_q + seq_k;
}

// Rotated turns (rung 5, flash_wgmma_det), where every key block sees every query tile (no
// causal mask, no window): in increasing key order every block of a row starts at query tile 0
// and waits there for each block below it, so block j's adds start j turns late (run 292: 0.67-
// 0.78x rung 4 non-causal). Rotated, key block j of key_blocks walks the tiles from
// rotated_start(j) on, wrapping around, and a tile's turns go in the order its blocks reach it:
// the block whose walk started last at or before the tile first, then the blocks below it, then
// from the highest block down. A block's turn at a tile is then its step there's rank among
// the tile's blocks: the block before it in the turn reached the tile a step or more earlier,
// and no two blocks of a row want the same tile at once. No cycle of waits: a block waits only
// for blocks that reached that tile at an earlier step of their own walk.
ATTNBENCH_HOST_DEVICE inline int rotated_start(int j, int tiles, int key_blocks) {
  return static_cast<int>(static_cast<long long>(j) * tiles / key_blocks);
}
// Key block j's turn at query tile m: blocks last, last - 1, .., 0, key_blocks - 1, .., last + 1,
// where last is the highest block whose walk starts at or before m.
ATTNBENCH_HOST_DEVICE inline int rotated_turn(int m, int j, int tiles, int key_blocks) {
  const int last = static_cast<int>((static_cast<long long>(m + 1) * key_blocks - 1) / tiles);
  return ((last - j) % key_blocks + key_blocks) % key_blocks;
}
// A block waits for blocks of its row after it in the grid's order, so the row must fit on the
// card at once (one block an SM): rotated only when its key blocks are at most the SMs (an
// unknown count: never). Every key block sees every tile iff neither reach is bounded
// (key_reach's "unlimited", seq_q + seq_k).
inline bool rotated_turns(bool deterministic, int lo_reach, int hi_reach, int seq_q, int seq_k, long long key_blocks,
                          int sm_count) {
  return deterministic && lo_reach >= seq_q + seq_k && hi_reach >= seq_q + seq_k && key_blocks <= sm_count;
}

// Key-major for a causal grid of fewer than 4 blocks an SM (the model's row-major cost is
// within 7% of balanced from there on, and row-major keeps a head's blocks together).
inline bool key_major_order(bool causal, long long blocks, int sm_count) {
  return causal && blocks < 4LL * sm_count;
}

}  // namespace attnbench::backward_impl
