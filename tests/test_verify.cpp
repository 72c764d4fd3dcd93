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

// ------------------------------------------------------------------------------------------ the scaled bound
// The verdict of an op with a dtype-faithful reference (docs/measuring.md, "The bounds"): the
// outputs below are what a wrong kernel would write, computed here on the CPU.
#include <random>

#include "app/numeric.hpp"
#include "reference/attention.hpp"
#include "reference/softmax.hpp"

namespace {

std::vector<float> drawn(size_t n, DType t, double lo, double hi, bool normal, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  std::normal_distribution<double> g(0, hi);
  std::vector<float> x(n);
  for (float& v : x) v = round_to(t, static_cast<float>(normal ? g(rng) : u(rng)));
  return x;
}

ref::Rows all_rows(int64_t n) {
  ref::Rows r(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) r[static_cast<size_t>(i)] = i;
  return r;
}

std::vector<double> flat(const ref::Matrix& m) {
  std::vector<double> v(static_cast<size_t>(m.size()));
  for (int64_t r = 0; r < m.rows(); ++r)
    for (int64_t c = 0; c < m.cols(); ++c) v[static_cast<size_t>(r * m.cols() + c)] = m(r, c);
  return v;
}

ref::Matrix rounded(ref::Matrix m, DType t) {
  ref::detail::round_all(m, rounding_of(t));
  return m;
}

ref::Faithful faithful_in(DType t) {
  ref::Faithful f;
  f.on = true;
  f.in = f.p = rounding_of(t);
  return f;
}

// One variant's output held to the bound the reference and the faithful one set.
Comparison judged(const ref::Matrix& want, const ref::Matrix& faithful, const std::vector<double>& got, DType t) {
  Comparison c = compare(want, got, all_rows(want.rows()), no_elementwise());
  apply_bound(c, scaled_bound(want, faithful, t, default_bound_rule(t)));
  return c;
}

struct SoftmaxPoint {
  int64_t rows, cols;
  DType t;
  std::vector<float> x;
  ref::Matrix want, faithful;
  SoftmaxPoint(int64_t rows, int64_t cols, DType t, double spread)
      : rows(rows), cols(cols), t(t), x(drawn(static_cast<size_t>(rows * cols), t, -spread, spread, false, 7)) {
    want = ref::softmax(x.data(), cols, all_rows(rows));
    faithful = rounded(ref::softmax(x.data(), cols, all_rows(rows), faithful_in(t)), t);
  }
};

}  // namespace

TEST(ScaledBound, HonestStorageRoundingPasses) {
  for (DType t : {DType::fp32, DType::fp16, DType::bf16}) {
    const SoftmaxPoint p(16, 4096, t, 8);
    const Comparison c = judged(p.want, p.faithful, flat(rounded(p.want, t)), t);
    EXPECT_TRUE(c.passed()) << dtype_name(t) << " margin " << c.margin;
    EXPECT_LT(c.margin, 1);
    EXPECT_GT(c.margin, 0);
  }
}

// The fixed bf16 atol (8e-3) is above every output of a 4096-wide softmax of U(-8, 8) (at most
// about 16/4096): a kernel that writes zeros passed it. The scaled bound does not.
TEST(ScaledBound, ZeroWritingSoftmaxFails) {
  const SoftmaxPoint p(16, 4096, DType::bf16, 8);
  const std::vector<double> zeros(static_cast<size_t>(p.want.size()), 0.0);
  EXPECT_TRUE(compare(p.want, zeros, all_rows(p.rows), default_tolerance(DType::bf16)).passed());
  const Comparison c = judged(p.want, p.faithful, zeros, DType::bf16);
  EXPECT_FALSE(c.passed());
  EXPECT_GT(c.margin, 100);
}

// A softmax without the max subtraction is exact enough on U(-8, 8) (exp(8) is far from fp32's
// overflow), which is why the `large` distribution exists: on U(-128, 128) exp overflows.
TEST(ScaledBound, SoftmaxWithoutMaxSubtractionFailsOnLargeInputs) {
  const auto no_max = [](const SoftmaxPoint& p) {
    std::vector<double> y(static_cast<size_t>(p.rows * p.cols));
    for (int64_t r = 0; r < p.rows; ++r) {
      float sum = 0;
      for (int64_t j = 0; j < p.cols; ++j) sum += std::exp(p.x[static_cast<size_t>(r * p.cols + j)]);
      for (int64_t j = 0; j < p.cols; ++j)
        y[static_cast<size_t>(r * p.cols + j)] = std::exp(p.x[static_cast<size_t>(r * p.cols + j)]) / sum;
    }
    return y;
  };
  const SoftmaxPoint mild(8, 1000, DType::fp32, 8), large(8, 1000, DType::fp32, 128);
  EXPECT_TRUE(judged(mild.want, mild.faithful, no_max(mild), DType::fp32).passed());
  EXPECT_FALSE(judged(large.want, large.faithful, no_max(large), DType::fp32).passed());
}

TEST(ScaledBound, OutputOffByAFactorFails) {
  const SoftmaxPoint p(16, 4096, DType::bf16, 8);
  std::vector<double> y = flat(p.faithful);
  for (double& v : y) v *= 1.02;
  EXPECT_FALSE(judged(p.want, p.faithful, y, DType::bf16).passed());
}

namespace {
ref::Matrix attention_out(const ref::AttentionShape& s, const std::vector<float>& q, const std::vector<float>& k,
                          const std::vector<float>& v) {
  return ref::attention(s, q.data(), k.data(), v.data(), all_rows(s.batch * s.seq_q * s.heads));
}
}  // namespace

// 1/sqrt(d + 1) for 1/sqrt(d) in bf16 at seq_k 1000: its error (about 3x an honest kernel's)
// was inside the fixed tolerance and is outside the scaled bound.
TEST(ScaledBound, WrongAttentionScaleFailsInBf16) {
  const DType t = DType::bf16;
  ref::AttentionShape s;
  s.heads = s.kv_heads = 2;
  s.seq_q = 64;
  s.seq_k = 1000;
  s.head_dim = 64;
  const size_t nq = static_cast<size_t>(s.seq_q * s.heads * s.head_dim), nk = static_cast<size_t>(s.seq_k * 2 * 64);
  const auto q = drawn(nq, t, 0, 1, true, 1), k = drawn(nk, t, 0, 1, true, 2), v = drawn(nk, t, 0, 1, true, 3);
  const ref::Matrix want = attention_out(s, q, k, v);
  ref::AttentionShape f = s;
  f.faithful = faithful_in(t);
  const ref::Matrix faithful = rounded(attention_out(f, q, k, v), t);
  // An honest kernel's error: P rounded after normalising instead of before (as a kernel that
  // materialises P does), the output rounded.
  EXPECT_TRUE(judged(want, faithful, flat(rounded(want, t)), t).passed());
  f.score.scale = 1 / std::sqrt(65.0);
  const ref::Matrix wrong = rounded(attention_out(f, q, k, v), t);
  const Comparison c = judged(want, faithful, flat(wrong), t);
  EXPECT_TRUE(compare(want, flat(wrong), all_rows(want.rows()), default_tolerance(t)).passed());  // the old verdict
  EXPECT_FALSE(c.passed()) << "margin " << c.margin;
}

// Large logits in fp32 (scale 8): the scores' own rounding is amplified by exp, so an honest
// fp32 kernel's error is far above the old fixed atol (1e-5); the bound scales with it.
TEST(ScaledBound, Fp32LargeLogitsScaleTheBound) {
  const DType t = DType::fp32;
  ref::AttentionShape s;
  s.seq_q = 32;
  s.seq_k = 256;
  s.head_dim = 64;
  s.score.scale = 8;
  const auto q = drawn(32 * 64, t, 0, 1, true, 4), k = drawn(256 * 64, t, 0, 1, true, 5),
             v = drawn(256 * 64, t, 0, 1, true, 6);
  const ref::Matrix want = attention_out(s, q, k, v);
  ref::AttentionShape f = s;
  f.faithful = faithful_in(t);
  const ref::Matrix faithful = attention_out(f, q, k, v);
  const Bound b = scaled_bound(want, faithful, t, default_bound_rule(t));
  EXPECT_GT(b.faithful_max, 1e-6);
  EXPECT_GT(b.allowed_max, 4 * b.faithful_max * 0.99);
  EXPECT_TRUE(judged(want, faithful, flat(faithful), t).passed());
}

TEST(ScaledBound, MergeKeepsTheWorstTrial) {
  Comparison a = compare(mat({{1}}), {1}, {0}, no_elementwise()), b = a;
  Bound loose, tight;
  loose.allowed_max = loose.allowed_l2 = 1;
  tight.allowed_max = tight.allowed_l2 = 1e-9;
  b.max_abs = b.rel_l2 = 1e-6;
  apply_bound(a, loose);
  apply_bound(b, tight);
  a.merge(b);
  EXPECT_FALSE(a.passed());
  EXPECT_NEAR(a.margin, 1000, 1e-6);
  EXPECT_EQ(fmt_margin(a.margin), "1000");
  EXPECT_EQ(fmt_margin(0.4123), "0.41");
  EXPECT_EQ(fmt_margin(INFINITY), "inf");
}

// An online softmax in fp32 as warp_online computes it (each of 32 lanes keeps its own running
// max and a sum relative to it, rounded into the log2 domain; the lanes' sums are rescaled to
// the row's max at the end) on logits of up to 800 (outlier inputs): every lane's sum keeps its
// own max's rounding, an error that grows with |max score| 2^-24 and that the faithful
// reference, one pass with the row's max, does not have. The score floor admits it; without
// it the same kernel fails.
TEST(ScaledBound, OnlineSoftmaxOnLargeLogitsNeedsTheScoreFloor) {
  const DType t = DType::fp32;
  const int64_t rows = 16, cols = 1000, lanes = 32;
  std::vector<float> x = drawn(static_cast<size_t>(rows * cols), t, -8, 8, false, 9);
  std::mt19937_64 rng(10);
  for (float& v : x)
    if (rng() % 64 == 0) v *= 100;  // outliers, so that many lanes' maxima are large
  const ref::Matrix want = ref::softmax(x.data(), cols, all_rows(rows));
  ref::Faithful f = faithful_in(t);
  f.largest_score = std::make_shared<std::atomic<float>>(0.f);
  const ref::Matrix faithful = ref::softmax(x.data(), cols, all_rows(rows), f);
  constexpr float kLog2e = 1.4426950408889634f;
  std::vector<double> got(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = &x[static_cast<size_t>(r * cols)];
    float m = -INFINITY, l = 0;
    std::vector<float> lane_m(lanes, -INFINITY), lane_l(lanes, 0.f);
    for (int64_t k = 0; k < lanes; ++k) {
      for (int64_t c = k; c < cols; c += lanes) lane_m[k] = std::max(lane_m[k], xr[c]);
      const float ms = lane_m[k] * kLog2e;
      for (int64_t c = k; c < cols; c += lanes) lane_l[k] += std::exp2(std::fma(xr[c], kLog2e, -ms));
      m = std::max(m, lane_m[k]);
    }
    const float ms = m * kLog2e;
    for (int64_t k = 0; k < lanes; ++k) l += lane_l[k] * std::exp2(std::fma(lane_m[k], kLog2e, -ms));
    for (int64_t c = 0; c < cols; ++c)
      got[static_cast<size_t>(r * cols + c)] = std::exp2(std::fma(xr[c], kLog2e, -ms)) / l;
  }
  const double largest = f.largest_score->load();
  EXPECT_GT(largest, 700);
  Comparison with = compare(want, got, all_rows(rows), no_elementwise()), without = with;
  apply_bound(with, scaled_bound(want, faithful, t, default_bound_rule(t), largest));
  apply_bound(without, scaled_bound(want, faithful, t, default_bound_rule(t), 0));
  EXPECT_TRUE(with.passed()) << "margin " << with.margin;
  EXPECT_FALSE(without.passed()) << "margin " << without.margin;
  std::printf("online softmax, logits to %.0f: rel-L2 %.3g, margin %.3g with the score floor, %.3g without\n", largest,
              with.rel_l2, with.margin, without.margin);
}

// Integer outputs: equal, or one of the element's accepted alternatives (counted apart); one id
// off outside them fails, and so do NaN and the poison's -1.
TEST(CompareIntegers, ExactOrAcceptedAlternative) {
  const std::vector<IntegerCheck> want = {{5, {}}, {7, {8}}, {3, {2, 4}}};
  const ref::Rows rows = {0, 10, 20};
  int64_t other = -1;
  Comparison ok = compare_integers(want, {5, 8, 3}, rows, &other);
  EXPECT_TRUE(ok.passed());
  EXPECT_EQ(ok.elements_checked, 3);
  EXPECT_EQ(other, 1);
  Comparison off = compare_integers(want, {6, 7, 3}, rows, &other);
  EXPECT_FALSE(off.passed());
  EXPECT_EQ(off.mismatches, 1);
  EXPECT_EQ(off.worst_row, 0);
  EXPECT_EQ(off.worst_got, 6);
  EXPECT_EQ(off.max_abs, 1);
  EXPECT_EQ(other, 0);
  EXPECT_FALSE(compare_integers(want, {5, 9, 3}, rows).passed());  // 8 is accepted, 9 is not
  EXPECT_FALSE(compare_integers(want, {5, 7, std::nan("")}, rows).passed());
  EXPECT_FALSE(compare_integers(want, {-1, 7, 3}, rows).passed());
  EXPECT_FALSE(compare_integers(want, {5, 7.5, 3}, rows).passed());
}
