// gemm_q rung 4 (stream_gemv, kernels/gemm_q/4_stream_gemv.cu): its host-side plan, in plain C++
// so that the CPU tests check it (tests/test_gemm_q_stream.cpp). A block is 8 warps; each warp
// streams one m16 tile of output channels over a k range, and the `splits` warps of a tile split
// its k steps among themselves (a step: 4 lanes x 16 bytes of a row, 128 int4 codes, 64 int8), so
// a block holds 8 / splits tiles. split r of `splits` takes steps [r·steps/splits,
// (r+1)·steps/splits).
#pragma once
#include <algorithm>
#include <climits>
#include <cstdint>

namespace attnbench::gemm_q_impl {

constexpr int kStreamWarps = 8;
constexpr int kStreamMaxM = 16;       // tokens: two n8 tiles at most
constexpr int kStreamMaxSplits = 8;   // all of a block's warps on one tile

// k a step covers: 4 lanes x 16 bytes of codes.
constexpr int64_t stream_step_k(int bits) { return 4 * 128 / bits; }

struct StreamPlan {
  int64_t tiles = 0;  // ceil(n / 16): m16 channel tiles
  int64_t steps = 0;  // ceil(k / step)
  int splits = 1;     // warps a tile's k is split over: 1, 2, 4 or 8
  int tiles_per_block() const { return kStreamWarps / splits; }
  int64_t blocks() const { return (tiles + tiles_per_block() - 1) / tiles_per_block(); }
};

// The most splits (a power of two, at most 8) whose warps all fit on the card at once
// (`resident_warps`: the launcher's occupancy query times the SM count), and no more splits than
// k steps. Why: the weights are one stream the whole card must pull at once, and a warp holds only
// a few steps of it in flight, so as many warps as the card holds should stream, in one wave (a
// second wave's tail runs at a fraction of the bandwidth): n 4096 has 256 tiles, 8 warps each
// fill 2048 of an H100's 2112; n 14336's 896 tiles take 2 each.
inline StreamPlan plan_stream(int64_t n, int64_t k, int bits, int64_t resident_warps) {
  StreamPlan p;
  p.tiles = (n + 15) / 16;
  const int64_t step = stream_step_k(bits);
  p.steps = (k + step - 1) / step;
  p.splits = kStreamMaxSplits;
  while (p.splits > 1 && (p.tiles * p.splits > resident_warps || p.splits > p.steps)) p.splits /= 2;
  return p;
}

// Whether a step's k all lies in one scale group, which the rung needs: it applies the scale to
// each step's fp32 partial, not to each weight. True when group is a multiple of the step or is
// the whole row (per channel).
inline bool stream_group_ok(int64_t k, int64_t group, int bits) {
  return group == k || (group > 0 && group % stream_step_k(bits) == 0);
}

// The k steps a scale group spans, for the kernel's running group counter: group / step, or, per
// channel, every step there is (INT_MAX: a k that ends inside a step still has one group).
inline int64_t stream_steps_per_group(int64_t k, int64_t group, int bits) {
  return group == k ? INT_MAX : group / stream_step_k(bits);
}

}  // namespace attnbench::gemm_q_impl
