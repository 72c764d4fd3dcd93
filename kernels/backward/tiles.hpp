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

}  // namespace attnbench::backward_impl
