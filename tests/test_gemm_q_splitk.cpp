// gemm_q's splitk_gemv rung (kernels/gemm_q/3_splitk_gemv.cu) on the CPU: its host-side plan
// (kernels/gemm_q/splitk_plan.hpp: how many blocks of a cluster each column block's k is split
// over, every k step in exactly one split, every block resident at once) and what the rung takes
// and refuses, through the variant table the runner uses.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "kernels/gemm_q/gemm_q.hpp"
#include "kernels/gemm_q/rungs.hpp"
#include "kernels/gemm_q/splitk_plan.hpp"
#include "tests/gemm_q_test_params.hpp"

namespace attnbench {
namespace {

using gemm_q_impl::kSplitkBlocksPerSm;
using gemm_q_impl::kSplitkMaxSplits;
using gemm_q_impl::kSplitkRows;
using gemm_q_impl::plan_splitk;
using gemm_q_impl::splitk_range;
using gemm_q_impl::splitk_step_k;
using gemm_q_impl::SplitkPlan;

using gemm_q_test::card;
using gemm_q_test::ladder_index;
using gemm_q_test::params;

TEST(GemmQSplitk, StepCoversFourLanesOfSixteenBytes) {
  EXPECT_EQ(splitk_step_k(4), 128);
  EXPECT_EQ(splitk_step_k(8), 64);
}

// The shapes on an H100 (132 SMs): the numbers the rung's header comment quotes.
TEST(GemmQSplitk, LlamaShapesOnH100) {
  SplitkPlan p = plan_splitk(4096, 4096, 4, 132);
  EXPECT_EQ(p.col_blocks, 64);
  EXPECT_EQ(p.steps, 32);
  EXPECT_EQ(p.splits, 8);
  EXPECT_EQ(p.blocks(), 512);  // <= 4 · 132 = 528: one wave
  p = plan_splitk(14336, 4096, 4, 132);
  EXPECT_EQ(p.col_blocks, 224);
  EXPECT_EQ(p.splits, 2);  // 4 would be 896 blocks: a second wave
  EXPECT_EQ(p.blocks(), 448);
  p = plan_splitk(4096, 14336, 4, 132);
  EXPECT_EQ(p.steps, 112);
  EXPECT_EQ(p.splits, 8);
  p = plan_splitk(4096, 4096, 8, 132);  // int8: 64 k a step
  EXPECT_EQ(p.steps, 64);
  EXPECT_EQ(p.splits, 8);
}

// The launcher asks the card how many clusters it holds at once: where its GPCs pack 4 blocks
// an SM into fewer than 64 clusters of 8, n 4096 takes 4 splits, not a second wave.
TEST(GemmQSplitk, OneWaveOfWhatTheCardHolds) {
  auto packs = [](int64_t eight) {
    return [eight](int splits) { return splits == 8 ? eight : 4 * 132 / splits; };
  };
  EXPECT_EQ(plan_splitk(4096, 4096, 4, packs(66)).splits, 8);
  EXPECT_EQ(plan_splitk(4096, 4096, 4, packs(64)).splits, 8);
  EXPECT_EQ(plan_splitk(4096, 4096, 4, packs(63)).splits, 4);
  EXPECT_EQ(plan_splitk(4096, 4096, 4, [](int) { return int64_t{0}; }).splits, 1);  // nothing fits: no split
  EXPECT_EQ(plan_splitk(64, 4096, 4, [](int) { return int64_t{1}; }).splits, 8);  // one column block
}

// The launcher's clusters: the card's answer when the query succeeded, 0 kept as 0 (a cluster size
// that cannot run at all must not be launched: the plan splits less), the model only on a failed
// query. Before, an answer of 0 was replaced by the model, which plans 8 splits at n 4096 and
// a launch the card refuses.
TEST(GemmQSplitk, ClustersTheCardAnswersZeroIncluded) {
  using gemm_q_impl::splitk_clusters;
  EXPECT_EQ(splitk_clusters(true, 66, 132, 8), 66);
  EXPECT_EQ(splitk_clusters(true, 0, 132, 8), 0);
  EXPECT_EQ(splitk_clusters(false, 0, 132, 8), 4 * 132 / 8);
  EXPECT_EQ(splitk_clusters(false, 123, 132, 2), 4 * 132 / 2);
  auto eight_none = [](int splits) { return splitk_clusters(true, splits == 8 ? 0 : 4 * 132 / splits, 132, splits); };
  EXPECT_EQ(plan_splitk(4096, 4096, 4, eight_none).splits, 4);
  auto none = [](int splits) { return splitk_clusters(true, splits == 1 ? 528 : 0, 132, splits); };
  EXPECT_EQ(plan_splitk(4096, 4096, 4, none).splits, 1);
}

// Whatever the shape and card: splits a power of two in [1, 8], no more than the steps, all
// blocks resident at once unless one split already overflows, and no larger split would fit.
TEST(GemmQSplitk, PlanInvariants) {
  for (int bits : {4, 8})
    for (int sms : {1, 8, 108, 132, 144})
      for (int64_t n : {1, 37, 64, 65, 1000, 4096, 14336, 65536})
        for (int64_t k : {16, 32, 64, 96, 128, 256, 1088, 4096, 14336}) {
          if (k % (128 / bits) != 0) continue;
          const SplitkPlan p = plan_splitk(n, k, bits, sms);
          SCOPED_TRACE("n " + std::to_string(n) + " k " + std::to_string(k) + " bits " + std::to_string(bits) +
                       " sms " + std::to_string(sms));
          EXPECT_EQ(p.col_blocks, (n + kSplitkRows - 1) / kSplitkRows);
          EXPECT_EQ(p.steps, (k + splitk_step_k(bits) - 1) / splitk_step_k(bits));
          EXPECT_GE(p.splits, 1);
          EXPECT_LE(p.splits, kSplitkMaxSplits);
          EXPECT_EQ(p.splits & (p.splits - 1), 0) << "a power of two";
          EXPECT_LE(p.splits, p.steps);
          const int64_t slots = static_cast<int64_t>(kSplitkBlocksPerSm) * sms;
          if (p.splits > 1) EXPECT_LE(p.blocks(), slots);
          if (p.splits < kSplitkMaxSplits)
            EXPECT_TRUE(p.col_blocks * p.splits * 2 > slots || p.splits * 2 > p.steps) << "a larger split fits";
        }
}

// Every step in exactly one split, in order, none empty when splits <= steps, balanced to one step.
TEST(GemmQSplitk, RangesCoverEveryStepOnce) {
  for (int64_t steps : {1, 2, 3, 7, 8, 9, 17, 32, 112})
    for (int splits : {1, 2, 4, 8}) {
      if (splits > steps) continue;
      int64_t next = 0, lo = steps, hi = 0;
      for (int r = 0; r < splits; ++r) {
        int64_t begin, end;
        splitk_range(steps, splits, r, begin, end);
        EXPECT_EQ(begin, next) << "steps " << steps << " splits " << splits << " rank " << r;
        EXPECT_GT(end, begin) << "steps " << steps << " splits " << splits << " rank " << r;
        lo = std::min(lo, end - begin);
        hi = std::max(hi, end - begin);
        next = end;
      }
      EXPECT_EQ(next, steps);
      EXPECT_LE(hi - lo, 1);
    }
}

TEST(GemmQSplitk, TakesSmallMOnHopper) {
  const DeviceCaps h100 = card(9);
  for (int64_t m : {1, 4, 8, 9, 16})
    for (int bits : {4, 8}) {
      EXPECT_EQ(gemm_q_impl::splitk_gemv_supports(params(m, 4096, 4096, bits), h100), "") << m;
      EXPECT_EQ(gemm_q_impl::splitk_gemv_supports(params(m, 37, 256, bits, 256), h100), "") << m;  // per channel
    }
}

TEST(GemmQSplitk, RefusesWithReasons) {
  const DeviceCaps h100 = card(9);
  for (int64_t m : {17, 64, 256})
    EXPECT_EQ(gemm_q_impl::splitk_gemv_supports(params(m, 4096, 4096), h100),
              "m > 16: the split-k GEMV is the small-m rung (one or two 8-token tiles); fused_mma and dequant_cublas "
              "take larger m");
  EXPECT_EQ(gemm_q_impl::splitk_gemv_supports(params(1, 4096, 4096), card(8)),
            "needs sm_90 (thread-block clusters and distributed shared memory)");
  EXPECT_EQ(gemm_q_impl::splitk_gemv_supports(params(1, 64, 1040, 4, 1040), h100),
            "k and group must be multiples of 32 (a lane's 16 bytes of codes, one group)");
  EXPECT_EQ(gemm_q_impl::splitk_gemv_supports(params(1, 64, 1024, 4, 16), h100),
            "k and group must be multiples of 32 (a lane's 16 bytes of codes, one group)");
  EXPECT_EQ(gemm_q_impl::splitk_gemv_supports(params(1, 64, 1024, 8, 16), h100), "");  // int8: 16 a piece
  EXPECT_EQ(gemm_q_impl::splitk_gemv_supports(params(1, 64, 1000, 8, 1000), h100),
            "k and group must be multiples of 16 (a lane's 16 bytes of codes, one group)");
}

// The rung is in the table, right after fused_mma and before the dense_cublas measuring stick, with
// no workspace (the cluster sums in shared memory) and deterministic (a fixed rank order).
TEST(GemmQSplitk, InTheLadder) {
  const auto& table = gemm_q_variants();
  const int at = ladder_index("splitk_gemv"), fused = ladder_index("fused_mma"), dense = ladder_index("dense_cublas");
  ASSERT_GE(at, 0);
  EXPECT_EQ(at, fused + 1);
  EXPECT_GT(dense, at);
  const auto& v = table[static_cast<size_t>(at)];
  EXPECT_FALSE(static_cast<bool>(v.workspace));
  EXPECT_TRUE(v.deterministic);
  EXPECT_EQ(v.supports(params(17, 64, 256), card(9)).rfind("m > 16", 0), 0u);
}

}  // namespace
}  // namespace attnbench
