// gemm_q's stream_gemv rung (kernels/gemm_q/4_stream_gemv.cu) on the CPU: its host-side plan
// (kernels/gemm_q/stream_plan.hpp: how many warps split each 16-channel tile's k, all of them
// resident at once), which groups it takes (a k step must lie in one scale group), and what the
// rung takes and refuses, through the variant table the runner uses.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "kernels/gemm_q/gemm_q.hpp"
#include "kernels/gemm_q/rungs.hpp"
#include "kernels/gemm_q/stream_plan.hpp"
#include "tests/gemm_q_test_params.hpp"

namespace attnbench {
namespace {

using gemm_q_impl::kStreamMaxSplits;
using gemm_q_impl::kStreamWarps;
using gemm_q_impl::plan_stream;
using gemm_q_impl::stream_group_ok;
using gemm_q_impl::stream_step_k;
using gemm_q_impl::StreamPlan;

using gemm_q_test::card;
using gemm_q_test::ladder_index;
using gemm_q_test::params;

// An H100 holds 2 blocks of 8 warps an SM of this kernel: 2112 warps on 132 SMs.
constexpr int64_t kH100Warps = 2 * kStreamWarps * 132;

// The shapes on an H100: the numbers the rung's header comment quotes.
TEST(GemmQStream, LlamaShapesOnH100) {
  StreamPlan p = plan_stream(4096, 4096, 4, kH100Warps);
  EXPECT_EQ(p.tiles, 256);
  EXPECT_EQ(p.steps, 32);
  EXPECT_EQ(p.splits, 8);  // 2048 warps of 2112, 4 steps each
  EXPECT_EQ(p.tiles_per_block(), 1);
  EXPECT_EQ(p.blocks(), 256);
  p = plan_stream(14336, 4096, 4, kH100Warps);
  EXPECT_EQ(p.tiles, 896);
  EXPECT_EQ(p.splits, 2);  // 4 would be 3584 warps: a second wave
  EXPECT_EQ(p.tiles_per_block(), 4);
  EXPECT_EQ(p.blocks(), 224);
  p = plan_stream(4096, 14336, 4, kH100Warps);
  EXPECT_EQ(p.steps, 112);
  EXPECT_EQ(p.splits, 8);
  p = plan_stream(4096, 4096, 8, kH100Warps);  // int8: 64 k a step
  EXPECT_EQ(p.steps, 64);
  EXPECT_EQ(p.splits, 8);
}

// A ragged last block: 1000 channels are 63 tiles; at 2 splits, 4 tiles a block, 16 blocks.
TEST(GemmQStream, RaggedTilesAndBlocks) {
  StreamPlan p = plan_stream(1000, 4096, 4, 126);
  EXPECT_EQ(p.tiles, 63);
  EXPECT_EQ(p.splits, 2);
  EXPECT_EQ(p.blocks(), 16);
  p = plan_stream(1, 4096, 4, 1);  // one channel, one warp's room: no split
  EXPECT_EQ(p.tiles, 1);
  EXPECT_EQ(p.splits, 1);
  EXPECT_EQ(p.blocks(), 1);
}

// Whatever the shape and card: splits a power of two in [1, 8], no more than the steps, all warps
// resident at once unless one split already overflows, and no larger split would fit.
TEST(GemmQStream, PlanInvariants) {
  for (int bits : {4, 8})
    for (int64_t warps : {8, 64, 1728, 2112, 4608})
      for (int64_t n : {1, 15, 16, 17, 1000, 4096, 14336, 65536})
        for (int64_t k : {16, 32, 64, 128, 1088, 1152, 4096, 14336}) {
          if (k % (128 / bits) != 0) continue;
          const StreamPlan p = plan_stream(n, k, bits, warps);
          SCOPED_TRACE("n " + std::to_string(n) + " k " + std::to_string(k) + " bits " + std::to_string(bits) +
                       " warps " + std::to_string(warps));
          EXPECT_EQ(p.tiles, (n + 15) / 16);
          EXPECT_EQ(p.steps, (k + stream_step_k(bits) - 1) / stream_step_k(bits));
          EXPECT_GE(p.splits, 1);
          EXPECT_LE(p.splits, kStreamMaxSplits);
          EXPECT_EQ(p.splits & (p.splits - 1), 0) << "a power of two";
          EXPECT_LE(p.splits, p.steps);
          EXPECT_GE(p.blocks() * p.tiles_per_block(), p.tiles) << "every tile in a block";
          EXPECT_LT((p.blocks() - 1) * p.tiles_per_block(), p.tiles) << "no block without a tile";
          if (p.splits > 1) EXPECT_LE(p.tiles * p.splits, warps);
          if (p.splits < kStreamMaxSplits)
            EXPECT_TRUE(p.tiles * p.splits * 2 > warps || p.splits * 2 > p.steps) << "a larger split fits";
        }
}

// A step is 128 int4 codes or 64 int8 codes of a row, and must lie in one scale group.
TEST(GemmQStream, StepInOneGroup) {
  EXPECT_EQ(stream_step_k(4), 128);
  EXPECT_EQ(stream_step_k(8), 64);
  EXPECT_TRUE(stream_group_ok(4096, 128, 4));
  EXPECT_TRUE(stream_group_ok(4096, 256, 4));
  EXPECT_FALSE(stream_group_ok(4096, 64, 4));
  EXPECT_TRUE(stream_group_ok(4096, 64, 8));
  EXPECT_FALSE(stream_group_ok(4096, 32, 8));
  EXPECT_TRUE(stream_group_ok(1088, 1088, 4)) << "per channel, the last step past k";
  EXPECT_FALSE(stream_group_ok(1088, 0, 4));
}

TEST(GemmQStream, TakesSmallM) {
  for (int major : {8, 9})
    for (int64_t m : {1, 4, 8, 9, 16})
      for (int bits : {4, 8}) {
        EXPECT_EQ(gemm_q_impl::stream_gemv_supports(params(m, 4096, 4096, bits), card(major)), "") << m;
        EXPECT_EQ(gemm_q_impl::stream_gemv_supports(params(m, 37, 1088, bits, 1088), card(major)), "") << m;
      }
}

TEST(GemmQStream, RefusesWithReasons) {
  const DeviceCaps h100 = card(9);
  EXPECT_EQ(gemm_q_impl::stream_gemv_supports(params(17, 4096, 4096), h100),
            "m > 16: the streaming GEMV is a small-m rung (one or two 8-token tiles); fused_mma and dequant_cublas "
            "take larger m");
  EXPECT_EQ(gemm_q_impl::stream_gemv_supports(params(1, 4096, 4096), card(7)), "needs sm_80 (mma.sync on fp16/bf16)");
  EXPECT_EQ(gemm_q_impl::stream_gemv_supports(params(1, 64, 1040, 4, 1040), h100),
            "k must be a multiple of 32 (a lane's 16 bytes of codes)");
  EXPECT_EQ(gemm_q_impl::stream_gemv_supports(params(1, 64, 1088, 4, 64), h100),
            "group must be a multiple of 128 or per channel (the scale multiplies each k step's fp32 partial, so a "
            "step must lie in one group); fused_mma takes smaller groups");
  EXPECT_EQ(gemm_q_impl::stream_gemv_supports(params(1, 64, 1088, 8, 64), h100), "");  // int8: 64 a step
}

// The rung is in the table after splitk_gemv and right before the dense_cublas measuring stick,
// with no workspace and deterministic (each tile's splits summed in order).
TEST(GemmQStream, InTheLadder) {
  const auto& table = gemm_q_variants();
  const int at = ladder_index("stream_gemv"), splitk = ladder_index("splitk_gemv"), dense = ladder_index("dense_cublas");
  ASSERT_GE(at, 0);
  EXPECT_EQ(at, splitk + 1);
  EXPECT_EQ(dense, at + 1);
  const auto& v = table[static_cast<size_t>(at)];
  EXPECT_FALSE(static_cast<bool>(v.workspace));
  EXPECT_TRUE(v.deterministic);
}

}  // namespace
}  // namespace attnbench
