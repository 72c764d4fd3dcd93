// mla's split-KV rungs on the CPU, split_kv (kernels/mla/2_split_kv.cu: row classes 16, 32 and
// 64) and split_kv_reg (kernels/mla/3_split_kv_reg.cu: 16 and 32): their host-side split plan
// (kernels/mla/split_plan.hpp: every key of every sequence in exactly one split, the round of
// blocks it fills, the workspace it needs) and what each takes and refuses.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "app/case.hpp"
#include "app/op.hpp"
#include "app/problem.hpp"
#include "kernels/mla/mla.hpp"
#include "kernels/mla/rungs.hpp"
#include "kernels/mla/split_plan.hpp"
#include "tests/case_text.hpp"

namespace attnbench {
namespace {

using mla_impl::kSplitKvMaxRows;
using mla_impl::kSplitKvRegMaxRows;
using mla_impl::kSplitMaxBlocks;
using mla_impl::kSplitMinChunk;
using mla_impl::kSplitTile;
using mla_impl::plan_split_kv;
using mla_impl::split_cap;
using mla_impl::split_group_rows;
using mla_impl::split_range;
using mla_impl::SplitPlan;

// Blocks of a plan that hold keys: groups · Σ_b (splits whose range is not empty).
int64_t working_blocks(const SplitPlan& plan, const std::vector<int32_t>& lens) {
  int64_t n = 0;
  for (int32_t len : lens)
    for (int64_t s = 0; s < plan.splits; ++s) {
      int64_t begin, end;
      n += split_range(plan.splits, plan.chunk, s, len, begin, end);
    }
  return n * plan.groups;
}

// The rungs' largest row classes: split_kv's, then split_kv_reg's.
constexpr std::array<int64_t, 2> kMaxRows = {kSplitKvMaxRows, kSplitKvRegMaxRows};

// Every invariant a plan must keep for these lengths on `slots` resident blocks, for a rung whose
// largest row class is max_rows.
void expect_valid_for(const std::vector<int32_t>& lens, int64_t rows, int64_t slots, int64_t max_rows) {
  const int64_t batch = static_cast<int64_t>(lens.size());
  const int64_t longest = *std::max_element(lens.begin(), lens.end());
  for (const bool host : {true, false}) {
    SCOPED_TRACE("batch " + std::to_string(batch) + " rows " + std::to_string(rows) + " slots " +
                 std::to_string(slots) + " max_rows " + std::to_string(max_rows) +
                 (host ? " (host lengths)" : " (longest only)"));
    const SplitPlan plan = plan_split_kv(host ? lens.data() : nullptr, batch, longest, rows, slots, max_rows);
    ASSERT_GE(plan.splits, 1);
    EXPECT_EQ(plan.chunk % kSplitTile, 0);
    EXPECT_EQ(plan.groups, (rows + plan.group_rows - 1) / plan.group_rows);
    EXPECT_LE(plan.group_rows, max_rows);
    EXPECT_TRUE(plan.group_rows == 16 || plan.group_rows == 32 || plan.group_rows == 64);
    EXPECT_EQ(plan.group_rows, split_group_rows(rows, max_rows));
    EXPECT_EQ(plan.groups, mla_impl::split_groups(rows, max_rows));
    EXPECT_GE(plan.group_rows * plan.groups, rows);
    // One group whenever the rung's largest class holds the rows, in the fewest rows that do.
    if (rows <= max_rows) {
      EXPECT_EQ(plan.groups, 1);
      EXPECT_TRUE(plan.group_rows == 16 || plan.group_rows / 2 < rows);
    } else {
      EXPECT_EQ(plan.group_rows, max_rows);
    }
    // The workspace holds split_cap splits: no plan may take more.
    EXPECT_LE(plan.splits, split_cap(batch, plan.groups, longest));
    if (plan.splits > 1) {
      EXPECT_GE(plan.chunk, kSplitMinChunk);
      EXPECT_LE(working_blocks(plan, host ? lens : std::vector<int32_t>(lens.size(), longest)),
                std::min(slots, kSplitMaxBlocks));
      EXPECT_EQ(plan.splits, (longest + plan.chunk - 1) / plan.chunk);  // the last split is the longest's last
    } else {
      EXPECT_GE(plan.chunk, longest);
    }
    // Every key of every sequence in exactly one split, splits in order and contiguous; the
    // combine merges the first ceil(len / chunk) splits, exactly those with keys.
    for (int32_t len : lens) {
      int64_t next = 0, with_keys = 0;
      for (int64_t s = 0; s < plan.splits; ++s) {
        int64_t begin, end;
        if (!split_range(plan.splits, plan.chunk, s, len, begin, end)) continue;
        ++with_keys;
        EXPECT_EQ(begin, next) << "split " << s << " of " << len;
        EXPECT_GT(end, begin);
        EXPECT_EQ(begin % kSplitTile, 0);  // tiles start on whole 32-key tiles (half a block of 64)
        next = end;
      }
      EXPECT_EQ(next, len);
      EXPECT_EQ(with_keys, std::min<int64_t>(plan.splits, (len + plan.chunk - 1) / plan.chunk));
    }
  }
}

// Both rungs' plans.
void expect_valid(const std::vector<int32_t>& lens, int64_t rows, int64_t slots) {
  for (int64_t max_rows : kMaxRows) expect_valid_for(lens, rows, slots, max_rows);
}

// split_kv (rung 2, verified on an H100): row classes 16, 32 and 64, so heads · s_q <= 64 is one
// group and more take groups of 64.
TEST(MlaSplitPlan, SplitKvRowClassesAndGroups) {
  EXPECT_EQ(kSplitKvMaxRows, 64);
  EXPECT_EQ(split_group_rows(1, kSplitKvMaxRows), 16);
  EXPECT_EQ(split_group_rows(16, kSplitKvMaxRows), 16);
  EXPECT_EQ(split_group_rows(17, kSplitKvMaxRows), 32);
  EXPECT_EQ(split_group_rows(32, kSplitKvMaxRows), 32);
  EXPECT_EQ(split_group_rows(33, kSplitKvMaxRows), 64);
  EXPECT_EQ(split_group_rows(48, kSplitKvMaxRows), 64);
  EXPECT_EQ(split_group_rows(64, kSplitKvMaxRows), 64);
  EXPECT_EQ(split_group_rows(65, kSplitKvMaxRows), 64);
  EXPECT_EQ(split_group_rows(256, kSplitKvMaxRows), 64);
  const std::vector<int32_t> lens(4, 4096);
  EXPECT_EQ(plan_split_kv(lens.data(), 4, 4096, 128 * 2, 132, kSplitKvMaxRows).groups, 4);
  EXPECT_EQ(plan_split_kv(lens.data(), 4, 4096, 32 * 2, 132, kSplitKvMaxRows).groups, 1);
  EXPECT_EQ(plan_split_kv(lens.data(), 4, 4096, 32 * 2, 132, kSplitKvMaxRows).group_rows, 64);
  EXPECT_EQ(plan_split_kv(lens.data(), 4, 4096, 48, 132, kSplitKvMaxRows).group_rows, 64);
  EXPECT_EQ(plan_split_kv(lens.data(), 4, 4096, 48, 132, kSplitKvMaxRows).groups, 1);
  EXPECT_EQ(plan_split_kv(lens.data(), 4, 4096, 20, 132, kSplitKvMaxRows).group_rows, 32);
  EXPECT_EQ(plan_split_kv(lens.data(), 4, 4096, 16, 132, kSplitKvMaxRows).group_rows, 16);
  // The compute-bound perf shapes: b64 h128 s1 is 2 groups of 64, b32 h128 s2 4, no splits.
  std::vector<int32_t> many(64, 4096);
  SplitPlan plan = plan_split_kv(many.data(), 64, 4096, 128, 132, kSplitKvMaxRows);
  EXPECT_EQ(plan.group_rows, 64);
  EXPECT_EQ(plan.groups, 2);
  EXPECT_EQ(plan.splits, 1);
  EXPECT_EQ(plan.chunk, 4096);
  many.assign(32, 8192);
  plan = plan_split_kv(many.data(), 32, 8192, 256, 132, kSplitKvMaxRows);
  EXPECT_EQ(plan.groups, 4);
  EXPECT_EQ(plan.splits, 1);
  // A few sequences of many heads still split: 2 x 2 groups = 4 units on 132 slots.
  many.assign(2, 16384);
  plan = plan_split_kv(many.data(), 2, 16384, 128, 132, kSplitKvMaxRows);
  EXPECT_EQ(plan.groups, 2);
  EXPECT_GT(plan.splits, 1);
  EXPECT_LE(working_blocks(plan, many), 132);
}

// split_kv_reg (rung 3): row classes 16 and 32 (a warp holds 16 rows' Q fragments and P in
// registers), so 33 rows and more take groups of 32.
TEST(MlaSplitPlan, SplitKvRegRowClassesAndGroups) {
  EXPECT_EQ(kSplitKvRegMaxRows, 32);
  EXPECT_EQ(split_group_rows(1, kSplitKvRegMaxRows), 16);
  EXPECT_EQ(split_group_rows(16, kSplitKvRegMaxRows), 16);
  EXPECT_EQ(split_group_rows(17, kSplitKvRegMaxRows), 32);
  EXPECT_EQ(split_group_rows(32, kSplitKvRegMaxRows), 32);
  EXPECT_EQ(split_group_rows(33, kSplitKvRegMaxRows), 32);
  EXPECT_EQ(split_group_rows(48, kSplitKvRegMaxRows), 32);
  EXPECT_EQ(split_group_rows(256, kSplitKvRegMaxRows), 32);
  const std::vector<int32_t> lens(4, 4096);
  EXPECT_EQ(plan_split_kv(lens.data(), 4, 4096, 128 * 2, 132, kSplitKvRegMaxRows).groups, 8);
  EXPECT_EQ(plan_split_kv(lens.data(), 4, 4096, 32 * 2, 132, kSplitKvRegMaxRows).groups, 2);
  EXPECT_EQ(plan_split_kv(lens.data(), 4, 4096, 16 * 2, 132, kSplitKvRegMaxRows).groups, 1);
  EXPECT_EQ(plan_split_kv(lens.data(), 4, 4096, 48, 132, kSplitKvRegMaxRows).group_rows, 32);
  EXPECT_EQ(plan_split_kv(lens.data(), 4, 4096, 48, 132, kSplitKvRegMaxRows).groups, 2);
  EXPECT_EQ(plan_split_kv(lens.data(), 4, 4096, 16, 132, kSplitKvRegMaxRows).group_rows, 16);
}

// The compute-bound perf shapes on split_kv_reg: enough row groups to fill an H100 without splits.
TEST(MlaSplitPlan, ManyHeadsFillTheCardWithGroups) {
  std::vector<int32_t> lens(64, 4096);
  SplitPlan plan = plan_split_kv(lens.data(), 64, 4096, 128, 132, kSplitKvRegMaxRows);  // b64 h128 s1: 4 groups of 32
  EXPECT_EQ(plan.group_rows, 32);
  EXPECT_EQ(plan.groups, 4);
  EXPECT_EQ(plan.splits, 1);
  EXPECT_EQ(plan.chunk, 4096);
  lens.assign(32, 8192);
  plan = plan_split_kv(lens.data(), 32, 8192, 256, 132, kSplitKvRegMaxRows);  // b32 h128 s2: 8 groups
  EXPECT_EQ(plan.groups, 8);
  EXPECT_EQ(plan.splits, 1);
  // A few sequences of many heads still split: 2 x 4 groups = 8 units on 132 slots.
  lens.assign(2, 16384);
  plan = plan_split_kv(lens.data(), 2, 16384, 128, 132, kSplitKvRegMaxRows);
  EXPECT_EQ(plan.groups, 4);
  EXPECT_GT(plan.splits, 1);
  EXPECT_LE(working_blocks(plan, lens), 132);
}

// The perf cases' memory-bound shapes on an H100 (132 SMs, one block each): 16 rows, one group
// of 16 on both rungs.
TEST(MlaSplitPlan, FillsTheCardInOneRound) {
  for (int64_t max_rows : kMaxRows) {
    SCOPED_TRACE("max_rows " + std::to_string(max_rows));
    // b64 h16 s1 ctx16384: 64 blocks alone; two splits of 8192 make 128.
    std::vector<int32_t> lens(64, 16384);
    SplitPlan plan = plan_split_kv(lens.data(), 64, 16384, 16, 132, max_rows);
    EXPECT_EQ(plan.group_rows, 16);
    EXPECT_EQ(plan.splits, 2);
    EXPECT_EQ(plan.chunk, 8192);
    // One sequence of 64k keys: 128 splits of 512 (132 would need chunks of 496.5, not whole tiles).
    lens.assign(1, 65536);
    plan = plan_split_kv(lens.data(), 1, 65536, 16, 132, max_rows);
    EXPECT_EQ(plan.chunk, 512);
    EXPECT_EQ(plan.splits, 128);
    // A batch that fills the card alone: one split, no partials.
    lens.assign(200, 4096);
    plan = plan_split_kv(lens.data(), 200, 4096, 16, 132, max_rows);
    EXPECT_EQ(plan.splits, 1);
    // Short contexts: no split below kSplitMinChunk keys.
    lens.assign(2, 300);
    plan = plan_split_kv(lens.data(), 2, 300, 16, 132, max_rows);
    EXPECT_EQ(plan.splits, 2);
    EXPECT_EQ(plan.chunk, 256);
    lens.assign(2, 256);
    EXPECT_EQ(plan_split_kv(lens.data(), 2, 256, 16, 132, max_rows).splits, 1);
  }
}

// With the host's lengths a ragged batch's short sequences take few blocks, so its longest is
// cut finer than a plan from `longest` alone cuts it.
// cases/smoke/mla.toml: the 1025-key sequence takes 5 splits of 256, the last only key 1024,
// which the first of two speculative tokens does not see (a partial with m = -inf, l = 0).
TEST(MlaSplitPlan, TheSmokeCaseSplits) {
  const std::vector<int32_t> lens = {70, 2, 129, 1025};
  for (int64_t max_rows : kMaxRows)
    for (int64_t rows : {16, 32}) {
      SCOPED_TRACE("max_rows " + std::to_string(max_rows) + " rows " + std::to_string(rows));
      const SplitPlan plan = plan_split_kv(lens.data(), 4, 1025, rows, 132, max_rows);
      EXPECT_EQ(plan.groups, 1);
      EXPECT_EQ(plan.splits, 5);
      EXPECT_EQ(plan.chunk, 256);
      int64_t begin, end;
      ASSERT_TRUE(split_range(plan.splits, plan.chunk, 4, 1025, begin, end));
      EXPECT_EQ(begin, 1024);
      EXPECT_EQ(end, 1025);
    }
}

TEST(MlaSplitPlan, HostLengthsCutTheLongestFiner) {
  std::vector<int32_t> lens(16, 100);
  lens[3] = 65536;
  for (int64_t max_rows : kMaxRows) {
    const SplitPlan with = plan_split_kv(lens.data(), 16, 65536, 16, 132, max_rows);
    const SplitPlan without = plan_split_kv(nullptr, 16, 65536, 16, 132, max_rows);
    EXPECT_GT(with.splits, without.splits);
    EXPECT_LE(working_blocks(with, lens), 132);
    EXPECT_EQ(without.splits, 8);  // 16 sequences x 8 splits = 128 blocks
  }
}

TEST(MlaSplitPlan, EveryKeyInExactlyOneSplit) {
  expect_valid({70, 2, 129}, 16, 132);
  expect_valid({70, 2, 129}, 32, 132);
  expect_valid({1024, 16384, 65536}, 16, 132);
  expect_valid({1024, 16384, 65536}, 32, 264);
  expect_valid({4096, 2, 700, 2049, 64}, 256, 132);
  expect_valid({2, 9000, 64, 65, 127, 128, 129, 3, 513, 4095, 4097, 333, 2048, 7, 6000, 100}, 64, 132);
  expect_valid(std::vector<int32_t>(64, 16384), 16, 132);
  expect_valid(std::vector<int32_t>(64, 16384), 16, 10000);  // a card larger than kSplitMaxBlocks
  expect_valid(std::vector<int32_t>(1, 1 << 20), 16, 132);
  expect_valid({1}, 1, 1);
  std::mt19937 gen(49);
  for (int trial = 0; trial < 300; ++trial) {
    const int batch = std::uniform_int_distribution<int>(1, 80)(gen);
    const int top = std::uniform_int_distribution<int>(1, 1 << std::uniform_int_distribution<int>(1, 17)(gen))(gen);
    std::vector<int32_t> lens(static_cast<size_t>(batch));
    for (int32_t& len : lens) len = std::uniform_int_distribution<int32_t>(1, top)(gen);
    const int64_t rows = std::uniform_int_distribution<int64_t>(1, 300)(gen);
    const int64_t slots = std::uniform_int_distribution<int64_t>(1, 600)(gen);
    expect_valid(lens, rows, slots);
  }
}

// A last split that the plan thought shorter (longest_context smaller than a context, which a
// caller should not do) still runs to the end of its context.
TEST(MlaSplitPlan, TheLastSplitRunsToTheEnd) {
  int64_t begin, end;
  EXPECT_TRUE(split_range(3, 256, 2, 1000, begin, end));
  EXPECT_EQ(begin, 512);
  EXPECT_EQ(end, 1000);
  EXPECT_TRUE(split_range(3, 256, 1, 300, begin, end));
  EXPECT_EQ(end, 300);
  EXPECT_FALSE(split_range(3, 256, 2, 300, begin, end));
}

// ---------------------------------------------------------------------------------------------
// The variant: its workspace and its reasons.

MlaParams params(int64_t batch, int64_t heads, int64_t s_q, int64_t longest) {
  MlaParams p;
  p.batch = batch;
  p.heads = heads;
  p.s_q = s_q;
  p.longest_context = longest;
  p.block_size = 64;
  p.max_blocks_per_seq = (longest + 63) / 64;
  p.num_blocks = batch * p.max_blocks_per_seq + 1;
  p.dtype = DType::bf16;
  finish_mla_params(p);
  return p;
}

// Each rung's entry points and its largest row class.
struct Rung {
  const char* name;
  std::string (*supports)(const MlaParams&, const DeviceCaps&);
  std::size_t (*workspace)(const MlaParams&);
  int64_t max_rows;
};
const std::array<Rung, 2> kRungs = {{
    {"split_kv", mla_impl::split_kv_supports, mla_impl::split_kv_workspace, kSplitKvMaxRows},
    {"split_kv_reg", mla_impl::split_kv_reg_supports, mla_impl::split_kv_reg_workspace, kSplitKvRegMaxRows},
}};

// The workspace holds the partials of the largest plan any card gets, with the rung's own row
// classes: [batch, rows, splits, 512] floats (256-byte aligned), then [batch, rows, splits]
// (m, l) pairs.
TEST(MlaSplitKv, WorkspaceHoldsEveryPlansPartials) {
  for (const Rung& rung : kRungs) {
    SCOPED_TRACE(rung.name);
    for (const auto& [batch, heads, s_q, longest] :
         std::vector<std::array<int64_t, 4>>{{64, 16, 1, 16384}, {1, 16, 2, 65536}, {3, 16, 1, 129}, {32, 128, 2, 8192},
                                             {5, 128, 2, 4096}, {64, 128, 1, 4096}, {2, 24, 2, 30000}}) {
      const MlaParams p = params(batch, heads, s_q, longest);
      const std::size_t ws = rung.workspace(p);
      const int64_t rows = heads * s_q;
      for (int64_t slots : {1, 66, 132, 264, 528, 100000}) {
        const SplitPlan plan = plan_split_kv(nullptr, batch, longest, rows, slots, rung.max_rows);
        if (plan.splits == 1) continue;
        const std::size_t need = static_cast<std::size_t>((batch * rows * plan.splits * 512 * 4 + 255) / 256 * 256 +
                                                          batch * rows * plan.splits * 8);
        EXPECT_LE(need, ws) << batch << " x " << rows << " rows, " << longest << " keys, " << slots << " slots";
      }
    }
    EXPECT_EQ(rung.workspace(params(600, 16, 1, 4096)), 0u);  // 600 units > kSplitMaxBlocks: never split
  }
  // 48 rows: one group of 64 on split_kv, two of 32 on split_kv_reg, which halves the splits its
  // 512-block round allows (b200, 8192 keys: split_kv 2 splits, split_kv_reg 1: no partials).
  EXPECT_GT(mla_impl::split_kv_workspace(params(200, 24, 2, 8192)), 0u);
  EXPECT_EQ(mla_impl::split_kv_reg_workspace(params(200, 24, 2, 8192)), 0u);
}

TEST(MlaSplitKv, SaysWhyNot) {
  for (const Rung& rung : kRungs) {
    SCOPED_TRACE(rung.name);
    MlaParams p = params(4, 16, 2, 4096);
    EXPECT_EQ(rung.supports(p, assumed_caps()), "");
    p.cache_format = MlaCache::fp8;
    EXPECT_EQ(rung.supports(p, assumed_caps()), "");
    p.heads = 128;  // several row groups: runs, each group reading the cache
    EXPECT_EQ(rung.supports(p, assumed_caps()), "");
    p = params(4, 16, 2, 4096);
    p.dtype = DType::fp32;
    EXPECT_EQ(rung.supports(p, assumed_caps()), "fp16/bf16 queries only (mma.sync on 16-bit inputs; fp32 runs naive)");
    p = params(4, 16, 2, 4096);
    p.latent_dim = 256;
    EXPECT_EQ(rung.supports(p, assumed_caps()),
              "latent_dim 512 and rope_dim 64 only (DeepSeek's dims, FlashMLA's: the kernel is specialised to them)");
    p = params(4, 16, 2, 4096);
    DeviceCaps a100 = assumed_caps();
    a100.cc_major = 8;
    EXPECT_EQ(rung.supports(p, a100), "needs sm_90 (bulk copies through mbarriers)");
    // Every configuration fits an H100's 227 KB.
    DeviceCaps h100 = assumed_caps();
    h100.smem_per_block_optin = 227 * 1024;
    for (int64_t heads : {16, 32, 64})
      for (const MlaCache cache : {MlaCache::dtype, MlaCache::fp8}) {
        MlaParams f = params(4, heads, 1, 4096);
        f.cache_format = cache;
        EXPECT_EQ(rung.supports(f, h100), "") << heads << " rows";
      }
  }
  DeviceCaps small = assumed_caps();
  small.smem_per_block_optin = 100 * 1024;
  MlaParams f = params(4, 16, 1, 4096);
  f.cache_format = MlaCache::fp8;
  // split_kv: Q [rows][1168 bytes], 3 stages of 32 keys (36.5 KB each; fp8: 2 dequantised tiles
  // and 3 raw stages of 20.5 KB), P, the row maxima and sums.
  EXPECT_EQ(mla_impl::split_kv_supports(params(4, 16, 1, 4096), small), "needs 129 KB of shared memory per block");
  EXPECT_EQ(mla_impl::split_kv_supports(params(4, 16, 2, 4096), small), "needs 149 KB of shared memory per block");
  EXPECT_EQ(mla_impl::split_kv_supports(params(4, 64, 1, 4096), small), "needs 189 KB of shared memory per block");
  MlaParams f64 = params(4, 64, 1, 4096);
  f64.cache_format = MlaCache::fp8;
  EXPECT_EQ(mla_impl::split_kv_supports(f64, small), "needs 214 KB of shared memory per block");
  // split_kv_reg, 16 rows: 3 stages of 32 keys (36.5 KB each) and two partial-S buffers (8.5 KB
  // each); fp8: 3 raw stages (20.5 KB each), two 16-bit V tiles (32.5 KB each), the partial-S
  // buffers. 64 rows are two groups of 32: the 32-row configuration.
  EXPECT_EQ(mla_impl::split_kv_reg_supports(params(4, 16, 1, 4096), small), "needs 126 KB of shared memory per block");
  EXPECT_EQ(mla_impl::split_kv_reg_supports(params(4, 16, 2, 4096), small), "needs 143 KB of shared memory per block");
  EXPECT_EQ(mla_impl::split_kv_reg_supports(params(4, 64, 1, 4096), small), "needs 143 KB of shared memory per block");
  EXPECT_EQ(mla_impl::split_kv_reg_supports(f, small), "needs 143 KB of shared memory per block");
  f.s_q = 2;
  EXPECT_EQ(mla_impl::split_kv_reg_supports(f, small), "needs 160 KB of shared memory per block");
}

// The op lists both rungs for its 16-bit points and says why not for fp32 and the other dims.
TEST(MlaSplitKv, TheOpsPointsRunIt) {
  for (const Rung& rung : kRungs) {
    SCOPED_TRACE(rung.name);
    const std::string name = rung.name;
    const auto skip = [&](const std::string& text, const std::vector<std::string>& sets) {
      const CasePoint p = case_text::parse(text, sets).points.at(0);
      for (const VariantChoice& v : make_problem(p)->variants(assumed_caps()))
        if (v.name == name) return v.skip;
      return std::string("no row");
    };
    const std::string head = "op = \"mla\"\n[shape]\nbatch = 3\nheads = 16\ns_q = 2\ncontext = [70, 2, 129]\n";
    for (const char* dtype : {"fp16", "bf16"})
      for (const char* cache : {"dtype", "fp8"})
        EXPECT_EQ(skip(head, {std::string("dtype=") + dtype, std::string("shape.cache=") + cache}), "")
            << dtype << " " << cache;
    EXPECT_EQ(skip(head, {"dtype=fp32"}), "fp16/bf16 queries only (mma.sync on 16-bit inputs; fp32 runs naive)");
    EXPECT_NE(skip(head, {"dtype=bf16", "shape.latent_dim=128"}), "");
  }
}

}  // namespace
}  // namespace attnbench
