// mla's split_kv rung (kernels/mla/2_split_kv.cu) on the CPU: its host-side split plan
// (kernels/mla/split_plan.hpp: every key of every sequence in exactly one split, the round of
// blocks it fills, the workspace it needs) and what it takes and refuses.
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

using mla_impl::kSplitMaxBlocks;
using mla_impl::kSplitMinChunk;
using mla_impl::kSplitTile;
using mla_impl::plan_split_kv;
using mla_impl::split_cap;
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

// Every invariant a plan must keep for these lengths on `slots` resident blocks.
void expect_valid(const std::vector<int32_t>& lens, int64_t rows, int64_t slots) {
  const int64_t batch = static_cast<int64_t>(lens.size());
  const int64_t longest = *std::max_element(lens.begin(), lens.end());
  for (const bool host : {true, false}) {
    SCOPED_TRACE("batch " + std::to_string(batch) + " rows " + std::to_string(rows) + " slots " +
                 std::to_string(slots) + (host ? " (host lengths)" : " (longest only)"));
    const SplitPlan plan = plan_split_kv(host ? lens.data() : nullptr, batch, longest, rows, slots);
    ASSERT_GE(plan.splits, 1);
    EXPECT_EQ(plan.chunk % kSplitTile, 0);
    EXPECT_EQ(plan.groups, (rows + plan.group_rows - 1) / plan.group_rows);
    EXPECT_LE(plan.group_rows, 64);
    EXPECT_GE(plan.group_rows * plan.groups, rows);
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

TEST(MlaSplitPlan, RowClassesAndGroups) {
  EXPECT_EQ(mla_impl::split_group_rows(1), 16);
  EXPECT_EQ(mla_impl::split_group_rows(16), 16);
  EXPECT_EQ(mla_impl::split_group_rows(17), 32);
  EXPECT_EQ(mla_impl::split_group_rows(32), 32);
  // 32 rows at most a group: a warp holds 16 rows' Q fragments and P in registers.
  EXPECT_EQ(mla_impl::kSplitMaxRows, 32);
  EXPECT_EQ(mla_impl::split_group_rows(33), 32);
  EXPECT_EQ(mla_impl::split_group_rows(48), 32);
  EXPECT_EQ(mla_impl::split_group_rows(256), 32);
  const std::vector<int32_t> lens(4, 4096);
  EXPECT_EQ(plan_split_kv(lens.data(), 4, 4096, 128 * 2, 132).groups, 8);
  EXPECT_EQ(plan_split_kv(lens.data(), 4, 4096, 32 * 2, 132).groups, 2);
  EXPECT_EQ(plan_split_kv(lens.data(), 4, 4096, 16 * 2, 132).groups, 1);
  EXPECT_EQ(plan_split_kv(lens.data(), 4, 4096, 48, 132).group_rows, 32);
  EXPECT_EQ(plan_split_kv(lens.data(), 4, 4096, 48, 132).groups, 2);
  EXPECT_EQ(plan_split_kv(lens.data(), 4, 4096, 16, 132).group_rows, 16);
}

// The compute-bound perf shapes: enough row groups to fill an H100 without splits.
TEST(MlaSplitPlan, ManyHeadsFillTheCardWithGroups) {
  std::vector<int32_t> lens(64, 4096);
  SplitPlan plan = plan_split_kv(lens.data(), 64, 4096, 128, 132);  // b64 h128 s1: 4 groups of 32
  EXPECT_EQ(plan.group_rows, 32);
  EXPECT_EQ(plan.groups, 4);
  EXPECT_EQ(plan.splits, 1);
  EXPECT_EQ(plan.chunk, 4096);
  lens.assign(32, 8192);
  plan = plan_split_kv(lens.data(), 32, 8192, 256, 132);  // b32 h128 s2: 8 groups
  EXPECT_EQ(plan.groups, 8);
  EXPECT_EQ(plan.splits, 1);
  // A few sequences of many heads still split: 2 x 4 groups = 8 units on 132 slots.
  lens.assign(2, 16384);
  plan = plan_split_kv(lens.data(), 2, 16384, 128, 132);
  EXPECT_EQ(plan.groups, 4);
  EXPECT_GT(plan.splits, 1);
  EXPECT_LE(working_blocks(plan, lens), 132);
}

// The perf cases' memory-bound shapes on an H100 (132 SMs, one block each).
TEST(MlaSplitPlan, FillsTheCardInOneRound) {
  // b64 h16 s1 ctx16384: 64 blocks alone; two splits of 8192 make 128.
  std::vector<int32_t> lens(64, 16384);
  SplitPlan plan = plan_split_kv(lens.data(), 64, 16384, 16, 132);
  EXPECT_EQ(plan.group_rows, 16);
  EXPECT_EQ(plan.splits, 2);
  EXPECT_EQ(plan.chunk, 8192);
  // One sequence of 64k keys: 128 splits of 512 (132 would need chunks of 496.5, not whole tiles).
  lens.assign(1, 65536);
  plan = plan_split_kv(lens.data(), 1, 65536, 16, 132);
  EXPECT_EQ(plan.chunk, 512);
  EXPECT_EQ(plan.splits, 128);
  // A batch that fills the card alone: one split, no partials.
  lens.assign(200, 4096);
  plan = plan_split_kv(lens.data(), 200, 4096, 16, 132);
  EXPECT_EQ(plan.splits, 1);
  // Short contexts: no split below kSplitMinChunk keys.
  lens.assign(2, 300);
  plan = plan_split_kv(lens.data(), 2, 300, 16, 132);
  EXPECT_EQ(plan.splits, 2);
  EXPECT_EQ(plan.chunk, 256);
  lens.assign(2, 256);
  EXPECT_EQ(plan_split_kv(lens.data(), 2, 256, 16, 132).splits, 1);
}

// With the host's lengths a ragged batch's short sequences take few blocks, so its longest is
// cut finer than a plan from `longest` alone cuts it.
// cases/smoke/mla.toml: the 1025-key sequence takes 5 splits of 256, the last only key 1024,
// which the first of two speculative tokens does not see (a partial with m = -inf, l = 0).
TEST(MlaSplitPlan, TheSmokeCaseSplits) {
  const std::vector<int32_t> lens = {70, 2, 129, 1025};
  for (int64_t rows : {16, 32}) {
    const SplitPlan plan = plan_split_kv(lens.data(), 4, 1025, rows, 132);
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
  const SplitPlan with = plan_split_kv(lens.data(), 16, 65536, 16, 132);
  const SplitPlan without = plan_split_kv(nullptr, 16, 65536, 16, 132);
  EXPECT_GT(with.splits, without.splits);
  EXPECT_LE(working_blocks(with, lens), 132);
  EXPECT_EQ(without.splits, 8);  // 16 sequences x 8 splits = 128 blocks
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

// The workspace holds the partials of the largest plan any card gets: [batch, rows, splits,
// 512] floats (256-byte aligned), then [batch, rows, splits] (m, l) pairs.
TEST(MlaSplitKv, WorkspaceHoldsEveryPlansPartials) {
  for (const auto& [batch, heads, s_q, longest] :
       std::vector<std::array<int64_t, 4>>{{64, 16, 1, 16384}, {1, 16, 2, 65536}, {3, 16, 1, 129}, {32, 128, 2, 8192},
                                           {5, 128, 2, 4096}, {64, 128, 1, 4096}}) {
    const MlaParams p = params(batch, heads, s_q, longest);
    const std::size_t ws = mla_impl::split_kv_workspace(p);
    const int64_t rows = heads * s_q;
    for (int64_t slots : {1, 66, 132, 264, 528, 100000}) {
      const SplitPlan plan = plan_split_kv(nullptr, batch, longest, rows, slots);
      if (plan.splits == 1) continue;
      const std::size_t need = static_cast<std::size_t>((batch * rows * plan.splits * 512 * 4 + 255) / 256 * 256 +
                                                        batch * rows * plan.splits * 8);
      EXPECT_LE(need, ws) << batch << " x " << rows << " rows, " << longest << " keys, " << slots << " slots";
    }
  }
  EXPECT_EQ(mla_impl::split_kv_workspace(params(600, 16, 1, 4096)), 0u);  // 600 units > kSplitMaxBlocks: never split
}

TEST(MlaSplitKv, SaysWhyNot) {
  MlaParams p = params(4, 16, 2, 4096);
  EXPECT_EQ(mla_impl::split_kv_supports(p, assumed_caps()), "");
  p.cache_format = MlaCache::fp8;
  EXPECT_EQ(mla_impl::split_kv_supports(p, assumed_caps()), "");
  p.heads = 128;  // several row groups: runs, each group reading the cache
  EXPECT_EQ(mla_impl::split_kv_supports(p, assumed_caps()), "");
  p = params(4, 16, 2, 4096);
  p.dtype = DType::fp32;
  EXPECT_EQ(mla_impl::split_kv_supports(p, assumed_caps()),
            "fp16/bf16 queries only (mma.sync on 16-bit inputs; fp32 runs naive)");
  p = params(4, 16, 2, 4096);
  p.latent_dim = 256;
  EXPECT_EQ(mla_impl::split_kv_supports(p, assumed_caps()),
            "latent_dim 512 and rope_dim 64 only (DeepSeek's dims, FlashMLA's: the kernel is specialised to them)");
  p = params(4, 16, 2, 4096);
  DeviceCaps a100 = assumed_caps();
  a100.cc_major = 8;
  EXPECT_EQ(mla_impl::split_kv_supports(p, a100), "needs sm_90 (bulk copies through mbarriers)");
  DeviceCaps small = assumed_caps();
  small.smem_per_block_optin = 100 * 1024;
  // 16 rows: 3 stages of 32 keys (36.5 KB each) and two partial-S buffers (8.5 KB each).
  EXPECT_EQ(mla_impl::split_kv_supports(params(4, 16, 1, 4096), small), "needs 126 KB of shared memory per block");
  EXPECT_EQ(mla_impl::split_kv_supports(params(4, 16, 2, 4096), small), "needs 143 KB of shared memory per block");
  // fp8: 3 raw stages (20.5 KB each), two 16-bit V tiles (32.5 KB each), the partial-S buffers.
  MlaParams f = params(4, 16, 1, 4096);
  f.cache_format = MlaCache::fp8;
  EXPECT_EQ(mla_impl::split_kv_supports(f, small), "needs 143 KB of shared memory per block");
  f.s_q = 2;
  EXPECT_EQ(mla_impl::split_kv_supports(f, small), "needs 160 KB of shared memory per block");
  // Every configuration fits an H100's 227 KB.
  DeviceCaps h100 = assumed_caps();
  h100.smem_per_block_optin = 227 * 1024;
  EXPECT_EQ(mla_impl::split_kv_supports(f, h100), "");
}

// The op lists split_kv for its 16-bit points and says why not for fp32 and the other dims.
TEST(MlaSplitKv, TheOpsPointsRunIt) {
  const auto skip = [](const std::string& text, const std::vector<std::string>& sets) {
    const CasePoint p = case_text::parse(text, sets).points.at(0);
    for (const VariantChoice& v : make_problem(p)->variants(assumed_caps()))
      if (v.name == "split_kv") return v.skip;
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

}  // namespace
}  // namespace attnbench
