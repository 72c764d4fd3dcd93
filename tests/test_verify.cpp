// The pass rule, the error figures and the row sample.
#include <gtest/gtest.h>

#include <cmath>

#include "app/verify.hpp"

using namespace attnbench;

namespace {
ref::Matrix mat(std::initializer_list<std::initializer_list<double>> rows) {
  ref::Matrix m(static_cast<int64_t>(rows.size()), static_cast<int64_t>(rows.begin()->size()));
  int64_t i = 0;
  for (const auto& r : rows) {
    int64_t j = 0;
    for (double x : r) m(i, j++) = x;
    ++i;
  }
  return m;
}
}  // namespace

TEST(Compare, ExactMatchPasses) {
  const auto ref = mat({{1, 2}, {3, 4}});
  const Comparison c = compare(ref, {1, 2, 3, 4}, {0, 1}, {1e-5, 1e-4});
  EXPECT_TRUE(c.passed());
  EXPECT_EQ(c.elements_checked, 4);
  EXPECT_EQ(c.max_abs, 0);
  EXPECT_EQ(c.rel_l2, 0);
}

TEST(Compare, ToleranceIsAtolPlusRtolTimesRef) {
  const auto ref = mat({{100, 0}});
  // 100 allows 1e-3 + 1e-2 * 100 = 1.001; 0 allows 1e-3.
  EXPECT_TRUE(compare(ref, {101.0, 0.0009}, {7}, {1e-3, 1e-2}).passed());
  const Comparison c = compare(ref, {101.1, 0.0011}, {7}, {1e-3, 1e-2});
  EXPECT_FALSE(c.passed());
  EXPECT_EQ(c.mismatches, 2);
  EXPECT_EQ(c.worst_row, 7);  // reported as the output's row, not the sample's index
}

TEST(Compare, NaNNeverPassesAndIsTheWorst) {
  const auto ref = mat({{1, 2, 3}});
  const Comparison c = compare(ref, {1, NAN, 3.5}, {0}, {1e-3, 1e-3});
  EXPECT_FALSE(c.passed());
  EXPECT_EQ(c.mismatches, 2);
  EXPECT_EQ(c.worst_col, 1);
  EXPECT_TRUE(std::isnan(c.worst_got));
}

TEST(Compare, ErrorFigures) {
  const auto ref = mat({{3, 4}});
  const Comparison c = compare(ref, {3.3, 4.4}, {0}, {1, 1});
  EXPECT_NEAR(c.max_abs, 0.4, 1e-12);
  EXPECT_NEAR(c.max_rel, 0.1, 1e-12);
  EXPECT_NEAR(c.rel_l2, 0.1, 1e-12);  // |(0.3, 0.4)| / |(3, 4)| = 0.5 / 5
}

TEST(Compare, NonfiniteElsewhereFailsEvenWhenSampledRowsPass) {
  Comparison c = compare(mat({{1}}), {1}, {0}, {0, 0});
  ASSERT_TRUE(c.passed());
  c.nonfinite = 1;  // set by the full-output scan
  EXPECT_FALSE(c.passed());
}

TEST(Compare, MergeKeepsTheWorseTrial) {
  Comparison a = compare(mat({{1}}), {1.1}, {0}, {1, 0});
  const Comparison b = compare(mat({{1}}), {1.5}, {3}, {0, 0});
  a.merge(b);
  EXPECT_NEAR(a.max_abs, 0.5, 1e-12);
  EXPECT_EQ(a.worst_row, 3);
  EXPECT_EQ(a.mismatches, 1);
  EXPECT_EQ(a.elements_checked, 2);
  EXPECT_FALSE(a.passed());
}

TEST(DefaultTolerance, TightensWithPrecision) {
  EXPECT_LT(default_tolerance(DType::fp32).rtol, default_tolerance(DType::fp16).rtol);
  EXPECT_LT(default_tolerance(DType::fp16).rtol, default_tolerance(DType::bf16).rtol);
  // Storage rounding alone (half an ulp) must pass: bf16 at 1.0 rounds by up to 2^-8.
  EXPECT_GT(default_tolerance(DType::bf16).rtol, std::ldexp(1.0, -8));
  EXPECT_GT(default_tolerance(DType::fp16).rtol, std::ldexp(1.0, -11));
}

TEST(SampleRows, AllRowsWhenSmallOrUnlimited) {
  EXPECT_EQ(sample_rows(5, 10, 1).size(), 5u);
  EXPECT_EQ(sample_rows(5, 0, 1).size(), 5u);
}

TEST(SampleRows, KeepsFirstLastAndRequiredRowsWithinTheCap) {
  const ref::Rows r = sample_rows(100000, 64, 3, {5, 77, 99998});
  EXPECT_LE(r.size(), 64u);
  EXPECT_GE(r.size(), 60u);
  EXPECT_EQ(r.front(), 0);
  EXPECT_EQ(r.back(), 99999);
  for (int64_t must : {5, 77, 99998}) EXPECT_TRUE(std::binary_search(r.begin(), r.end(), must)) << must;
  EXPECT_TRUE(std::is_sorted(r.begin(), r.end()));
  EXPECT_EQ(std::adjacent_find(r.begin(), r.end()), r.end());
}

TEST(SampleRows, DeterministicPerSeedAndSpread) {
  EXPECT_EQ(sample_rows(1 << 20, 512, 9), sample_rows(1 << 20, 512, 9));
  EXPECT_NE(sample_rows(1 << 20, 512, 9), sample_rows(1 << 20, 512, 10));
  const ref::Rows r = sample_rows(1 << 20, 512, 9);
  // Every eighth of the output is looked at.
  for (int part = 0; part < 8; ++part) {
    const int64_t lo = (int64_t{1} << 20) * part / 8, hi = (int64_t{1} << 20) * (part + 1) / 8;
    EXPECT_TRUE(std::any_of(r.begin(), r.end(), [&](int64_t x) { return x >= lo && x < hi; })) << part;
  }
}

TEST(Coord, Prints) { EXPECT_EQ(to_string(Coord{1, 2, 3, 4}), "(1, 2, 3, 4)"); }

// A cancelled output is held to its terms' magnitude too: 1.0 + -0.99 checked at rtol
// 1e-2 allows 0.0102 against the terms' 1.0, 0.0001 against the sum's 0.01 alone.
TEST(Compare, MagnitudeWidensTheRelativeTermOnlyWhereItIsLarger) {
  ref::Matrix want(1, 2);
  want << 0.01, 5.0;
  ref::Matrix magnitude(1, 2);
  magnitude << 1.0, 1.0;
  const std::vector<double> got = {0.015, 5.04};
  const Tolerance tol{0, 1e-2};
  EXPECT_EQ(compare(want, got, {0}, tol).mismatches, 1);              // 0.005 > 1e-4; 0.04 <= 0.05
  EXPECT_EQ(compare(want, got, {0}, tol, &magnitude).mismatches, 0);  // 0.005 <= 1e-2; |5| > 1 still rules
  const std::vector<double> far = {0.03, 5.06};
  EXPECT_EQ(compare(want, far, {0}, tol, &magnitude).mismatches, 2);
}
