// The host-side plan of mla's split-KV rungs (2_split_kv.cu, 3_split_kv_reg.cu): how a launch
// cuts its work into blocks, in plain C++ so that the CPU tests check it
// (tests/test_mla_split_kv.cpp) and the kernels walk the same ranges (split_range is host and
// device).
//
// A block is (sequence, group of query rows, split of the context). Query rows are the
// sequence's s_q · heads (token, head) pairs; a group holds group_rows of them: the kernel's row
// class, the fewest of 16, 32, 64 that hold them, up to the rung's largest class (max_rows).
// Rung 2, split_kv, has classes 16, 32 and 64 (kSplitKvMaxRows: heads · s_q <= 64 is one
// group); rung 3, split_kv_reg, keeps each warp's Q fragments and P in registers, which leaves
// no room for 32 rows a warp, so its classes are 16 and 32 (kSplitKvRegMaxRows: 48 or 64 rows
// take two groups, the second reading the cache from L2 right after the first). Every latent row
// of a split is read once for all of a group's rows. A split is `chunk` keys (whole 32-key
// tiles of the kernels), the last one running to the end of its context.
#pragma once
#include <algorithm>
#include <cstdint>

#include "kernels/common/host_device.hpp"

namespace attnbench::mla_impl {

// Keys a split_kv block stages at once (one tile: half a FlashMLA block of 64).
constexpr int64_t kSplitTile = 32;
// A split streams at least this many keys (8 tiles: the pipeline's prologue and the partial it
// writes, rows x 2 KB, stay small beside 8 x 32 x 1152 bytes of cache).
constexpr int64_t kSplitMinChunk = 256;
// The most blocks a plan puts in one round, whatever the card (Variant::workspace sees no
// DeviceCaps, so it sizes the partials for this bound): 132 SMs x 1 block on an H100/H200.
constexpr int64_t kSplitMaxBlocks = 512;
// Query rows of one block at most: each rung's largest row class (split_kv: 16, 32, 64;
// split_kv_reg: 16, 32).
constexpr int64_t kSplitKvMaxRows = 64;
constexpr int64_t kSplitKvRegMaxRows = 32;

// The row class of a sequence's rows = s_q · heads on a rung whose largest class is max_rows
// (16, 32 or 64): the fewest of 16, 32, 64 that hold them, at most max_rows (more rows take
// several groups of max_rows).
constexpr int64_t split_group_rows(int64_t rows, int64_t max_rows) {
  int64_t cls = 16;
  while (cls < rows && cls < max_rows) cls *= 2;
  return cls;
}

// Row groups of a sequence's rows on that rung: ceil(rows / its row class).
constexpr int64_t split_groups(int64_t rows, int64_t max_rows) {
  return (rows + split_group_rows(rows, max_rows) - 1) / split_group_rows(rows, max_rows);
}

struct SplitPlan {
  int64_t group_rows = 16;  // the kernel's row class
  int64_t groups = 1;       // row groups per sequence: ceil(rows / group_rows)
  int64_t splits = 1;       // splits per sequence (gridDim.y); 1 = no partials, no combine
  int64_t chunk = kSplitTile;  // keys per split, a multiple of kSplitTile
};

// The most splits any plan of these sizes uses (what the workspace holds): chunks of at least
// kSplitMinChunk keys, and batch · groups · splits <= kSplitMaxBlocks.
inline int64_t split_cap(int64_t batch, int64_t groups, int64_t longest) {
  const int64_t by_keys = (longest + kSplitMinChunk - 1) / kSplitMinChunk;
  return std::max<int64_t>(1, std::min(by_keys, kSplitMaxBlocks / std::max<int64_t>(1, batch * groups)));
}

// Keys [begin, end) of split `split` of a context of `ctx` keys; false when the split holds
// none (its blocks exit at once and the combine never reads them: it merges the first
// ceil(ctx / chunk) splits). The last split runs to the end of the context, whatever the plan
// assumed of it.
ATTNBENCH_HOST_DEVICE inline bool split_range(int64_t splits, int64_t chunk, int64_t split, int64_t ctx,
                                              int64_t& begin, int64_t& end) {
  begin = split * chunk;
  end = split == splits - 1 ? ctx : (begin + chunk < ctx ? begin + chunk : ctx);
  return begin < ctx;
}

// The plan for `batch` sequences of `rows` query rows each on a card of `slots` resident blocks
// (SMs x blocks per SM), for a rung whose largest row class is max_rows. lens: the contexts on
// the host (MlaParams::host_context_lens), or null to assume every sequence as long as
// `longest`. The chunk is the shortest (whole tiles, at least kSplitMinChunk, at most split_cap
// splits) whose blocks holding keys, groups · Σ_b ceil(len_b / chunk), fit one round of
// min(slots, kSplitMaxBlocks): a ragged batch's short sequences take fewer splits than its
// longest, so the longest is cut finer than a plan from `longest` alone would cut it. A batch
// that fills the round without splits gets one split.
inline SplitPlan plan_split_kv(const int32_t* lens, int64_t batch, int64_t longest, int64_t rows, int64_t slots,
                               int64_t max_rows) {
  SplitPlan plan;
  plan.group_rows = split_group_rows(rows, max_rows);
  plan.groups = (rows + plan.group_rows - 1) / plan.group_rows;
  const int64_t whole = std::max<int64_t>(1, (longest + kSplitTile - 1) / kSplitTile) * kSplitTile;
  plan.chunk = whole;
  const int64_t budget = std::min(slots, kSplitMaxBlocks), units = batch * plan.groups;
  const int64_t cap = split_cap(batch, plan.groups, longest);
  if (cap <= 1 || units >= budget) return plan;
  const auto blocks = [&](int64_t chunk) {
    int64_t n = 0;
    for (int64_t b = 0; b < batch; ++b) {
      const int64_t len = lens ? std::max<int64_t>(1, lens[b]) : longest;
      n += (len + chunk - 1) / chunk;
    }
    return n * plan.groups;
  };
  // Chunks in tiles: [lo, hi], hi = the whole context (units <= budget blocks: it fits).
  const int64_t fewest = (longest + cap - 1) / cap;  // keys a split must take so that splits <= cap
  int64_t lo = std::max(kSplitMinChunk, (fewest + kSplitTile - 1) / kSplitTile * kSplitTile) / kSplitTile;
  int64_t hi = whole / kSplitTile;
  if (lo >= hi) return plan;
  while (lo < hi) {  // the fewest tiles whose blocks fit the budget
    const int64_t mid = lo + (hi - lo) / 2;
    if (blocks(mid * kSplitTile) <= budget)
      hi = mid;
    else
      lo = mid + 1;
  }
  const int64_t chunk = lo * kSplitTile, splits = (longest + chunk - 1) / chunk;
  if (splits <= 1) return plan;
  plan.chunk = chunk;
  plan.splits = splits;
  return plan;
}

}  // namespace attnbench::mla_impl
