// The fp64 reference: tiny cases computed by hand, then properties that tie the operations to each other
// (GQA = MHA with repeated heads, decode = last row of causal attention, paged = decode on the gathered cache, ...).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <iomanip>
#include <limits>
#include <numeric>
#include <random>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "reference/reference.hpp"
#include "tests/expect_near.hpp"

namespace attnbench::ref {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Multiples of 1/32 in [-2, 2]: exact in float, and sums of their products are exact in double, so properties that
// only regroup arithmetic hold exactly and a constant shift (x + 8) loses nothing to rounding.
std::vector<float> random_values(size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> dist(-64, 64);
  std::vector<float> x(n);
  for (float& e : x) e = dist(gen) / 32.0f;
  return x;
}

Rows all_rows(int64_t n) {
  Rows r(n);
  std::iota(r.begin(), r.end(), 0);
  return r;
}

Matrix rows_of(std::initializer_list<std::initializer_list<double>> values) {
  Matrix m(values.size(), values.begin()->size());
  int i = 0;
  for (const auto& row : values) {
    int j = 0;
    for (double v : row) m(i, j++) = v;
    ++i;
  }
  return m;
}

// ---------------------------------------------------------------------------------------------------------- softmax

TEST(Softmax, HandComputed) {
  // Row 0: exp(0, ln 2, ln 3) = (1, 2, 3), sum 6 -> (1/6, 1/3, 1/2); float(ln 2) is off by ~3e-8 relative.
  // Row 1: (1000, 1000, 1000) -> 1/3 each; exp(1000) overflows, so this passes only if the max is subtracted.
  // Row 2: (-inf, 0, -inf) -> (0, 1, 0).
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> x = {0, std::log(2.0f), std::log(3.0f), 1000, 1000, 1000, -inf, 0, -inf};
  const Matrix got = softmax(x.data(), 3, {0, 1, 2});
  expect_near(got, rows_of({{1 / 6.0, 1 / 3.0, 1 / 2.0}, {1 / 3.0, 1 / 3.0, 1 / 3.0}, {0, 1, 0}}), 1e-7);
}

TEST(Softmax, AllMinusInfinityRowIsZero) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> x = {-inf, -inf};
  const Matrix got = softmax(x.data(), 2, {0});
  EXPECT_EQ(got(0, 0), 0.0);
  EXPECT_EQ(got(0, 1), 0.0);
}

// A masked key (-inf) and a score too far below the row's max weigh exactly 0, not the
// denormal a vectorised exp's clamp gives (which slowed the attention references down).
TEST(Softmax, MaskedAndUnderflowingWeightsAreExactlyZero) {
  Matrix s(1, 4);
  s << 0.0, -std::numeric_limits<double>::infinity(), -800.0, -1.0;
  detail::softmax_rows(s);
  EXPECT_EQ(s(0, 1), 0.0);
  EXPECT_EQ(s(0, 2), 0.0);
  EXPECT_DOUBLE_EQ(s(0, 0), 1.0 / (1.0 + std::exp(-1.0)));
  EXPECT_DOUBLE_EQ(s(0, 3), std::exp(-1.0) / (1.0 + std::exp(-1.0)));
}

TEST(Softmax, RowsSumToOneAndIgnoreAConstantShift) {
  const int64_t rows = 5, cols = 37;
  std::vector<float> x = random_values(rows * cols, 1);
  const Matrix p = softmax(x.data(), cols, all_rows(rows));
  for (int64_t i = 0; i < rows; ++i) EXPECT_NEAR(p.row(i).sum(), 1.0, 1e-14) << "row " << i;
  for (float& e : x) e += 8;  // exact: see random_values
  expect_near(softmax(x.data(), cols, all_rows(rows)), p, 1e-14);
}

// ------------------------------------------------------------------------------------------------------------- gemm

TEST(Gemm, HandComputed) {
  // Batch 0: A = [1 2; 3 4], B = [5 6; 7 8].  Batch 1: A = I, B = [1 2; 3 4].
  const std::vector<float> a = {1, 2, 3, 4, 1, 0, 0, 1};
  const std::vector<float> b = {5, 6, 7, 8, 1, 2, 3, 4};
  // nt, batch 0: A·Bᵀ = [1·5+2·6 1·7+2·8; 3·5+4·6 3·7+4·8] = [17 23; 39 53]; batch 1: Bᵀ = [1 3; 2 4].
  expect_near(gemm(a.data(), b.data(), false, 2, 2, 2, all_rows(4)), rows_of({{17, 23}, {39, 53}, {1, 3}, {2, 4}}), 0);
  // nn, batch 0: A·B = [1·5+2·7 1·6+2·8; 3·5+4·7 3·6+4·8] = [19 22; 43 50]; batch 1: B = [1 2; 3 4].
  expect_near(gemm(a.data(), b.data(), true, 2, 2, 2, all_rows(4)), rows_of({{19, 22}, {43, 50}, {1, 2}, {3, 4}}), 0);
  // Output row r is row r % m of batch r / m, returned in the order asked.
  expect_near(gemm(a.data(), b.data(), false, 2, 2, 2, {3, 0, 3}), rows_of({{2, 4}, {17, 23}, {2, 4}}), 0);
}

TEST(Gemm, NtOnBEqualsNnOnBTransposed) {
  const int64_t batch = 2, m = 5, n = 7, k = 3;
  const std::vector<float> a = random_values(batch * m * k, 2), b = random_values(batch * n * k, 3);
  std::vector<float> bt(b.size());  // [batch, k, n]
  for (int64_t p = 0; p < batch; ++p) {
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < k; ++j) bt[(p * k + j) * n + i] = b[(p * n + i) * k + j];
    }
  }
  expect_near(gemm(a.data(), b.data(), false, m, n, k, all_rows(batch * m)),
              gemm(a.data(), bt.data(), true, m, n, k, all_rows(batch * m)), 0);
}

// Larger than one task in both directions (tiles of 256 rows x 256 columns), checked against a plain triple loop.
TEST(Gemm, TilesCoverTheOutput) {
  const int64_t batch = 2, m = 300, n = 520, k = 9;
  const std::vector<float> a = random_values(batch * m * k, 4), b = random_values(batch * n * k, 5);
  for (bool nn : {false, true}) {
    const Matrix c = gemm(a.data(), b.data(), nn, m, n, k, all_rows(batch * m));
    Matrix expected(batch * m, n);
    for (int64_t p = 0; p < batch; ++p) {
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          double sum = 0;
          for (int64_t e = 0; e < k; ++e) {
            sum += double{a[(p * m + i) * k + e]} * (nn ? b[(p * k + e) * n + j] : b[(p * n + j) * k + e]);
          }
          expected(p * m + i, j) = sum;
        }
      }
    }
    expect_near(c, expected, 0);
  }
}

// -------------------------------------------------------------------------------------------------------- attention

// Inputs of an attention problem, drawn at random.
struct AttentionInputs {
  std::vector<float> q, k, v;
  AttentionInputs(const AttentionShape& s, unsigned seed)
      : q(random_values(s.batch * s.seq_q * s.heads * s.head_dim, seed)),
        k(random_values(s.batch * s.seq_k * s.kv_heads * s.head_dim, seed + 1)),
        v(random_values(s.batch * s.seq_k * s.kv_heads * s.head_dim, seed + 2)) {}
  Matrix run(const AttentionShape& s) const { return attention(s, q.data(), k.data(), v.data(), all_rows(count(s))); }
  static int64_t count(const AttentionShape& s) { return s.batch * s.seq_q * s.heads; }
};

// head_dim 4 so that the default scale 1/sqrt(4) = 1/2 is exact.
//   keys    k0 = (1 0 0 0), k1 = (0 1 0 0), k2 = (0 0 1 0)
//   values  v0 = (6 0 0 1), v1 = (0 6 0 1), v2 = (0 0 6 1)
//   queries q0 = (0 0 0 0): every score 0, so uniform over the keys it sees;
//           q1 = (0, 2 ln 2, 2 ln 3, 0): scores (0, ln 2, ln 3), weights (1, 2, 3) / 6 over keys 0..2.
struct HandCase {
  AttentionShape s;
  std::vector<float> q = {0, 0, 0, 0, 0, 2 * std::log(2.0f), 2 * std::log(3.0f), 0};
  std::vector<float> k = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0};
  std::vector<float> v = {6, 0, 0, 1, 0, 6, 0, 1, 0, 0, 6, 1};
  HandCase() {
    s.seq_q = 2;
    s.seq_k = 3;
    s.head_dim = 4;
  }
  Matrix run() const { return attention(s, q.data(), k.data(), v.data(), {0, 1}); }
};

TEST(Attention, HandComputedCausalIsAlignedBottomRight) {
  HandCase c;
  c.s.causal = true;
  // Query i sits at key position i + 3 - 2: q0 sees keys 0, 1 -> (v0 + v1) / 2 = (3 3 0 1);
  // q1 sees keys 0..2 -> (v0 + 2 v1 + 3 v2) / 6 = (1 2 3 1). (Top-left alignment would give (6 0 0 1), (2 4 0 1).)
  expect_near(c.run(), rows_of({{3, 3, 0, 1}, {1, 2, 3, 1}}), 1e-7);
}

TEST(Attention, HandComputedNonCausal) {
  HandCase c;
  // q0 sees all three keys -> (v0 + v1 + v2) / 3 = (2 2 2 1); q1 as in the causal case.
  expect_near(c.run(), rows_of({{2, 2, 2, 1}, {1, 2, 3, 1}}), 1e-7);
}

TEST(Attention, HandComputedWindow) {
  HandCase c;
  c.q.assign(8, 0);  // uniform over the keys each query sees
  c.s.window = 2;
  // Positions 1 and 2; without causal |p - j| < 2: p = 1 sees keys 0..2, p = 2 sees keys 1, 2.
  expect_near(c.run(), rows_of({{2, 2, 2, 1}, {0, 3, 3, 1}}), 1e-15);
  // With causal also j <= p: p = 1 sees keys 0, 1; p = 2 sees keys 1, 2.
  c.s.causal = true;
  expect_near(c.run(), rows_of({{3, 3, 0, 1}, {0, 3, 3, 1}}), 1e-15);
}

TEST(Attention, HandComputedAlibi) {
  HandCase c;
  c.q.assign(8, 0);  // scores are the bias alone
  c.s.score.alibi_slopes = {1 / 256.0};
  // One head: slope 2^-8. q1 (p = 2) scores -(2, 1, 0)/256 for keys 0..2, so weights are proportional to
  // (e^-2/256, e^-1/256, 1); q0 (p = 1) scores -(1, 0, 1)/256.
  const double a = std::exp(-1 / 256.0), a2 = a * a;
  const double z0 = 2 * a + 1, z1 = a2 + a + 1;
  expect_near(c.run(), rows_of({{6 * a / z0, 6 / z0, 6 * a / z0, 1}, {6 * a2 / z1, 6 * a / z1, 6 / z1, 1}}), 1e-15);
}

TEST(Attention, HandComputedCausalTopLeft) {
  HandCase c;
  c.s.causal = true;
  c.s.top_left = true;
  // Query i sits at key position i: q0 sees key 0 -> v0 = (6 0 0 1); q1 sees keys 0, 1 with weights (1, 2) / 3.
  expect_near(c.run(), rows_of({{6, 0, 0, 1}, {2, 4, 0, 1}}), 1e-7);
}

TEST(Attention, HandComputedSoftcap) {
  HandCase c;
  c.s.score.softcap = 0.5;
  // q1's scores (0, ln 2, ln 3) become 0.5 tanh(2 s): weights proportional to exp of those.
  const double w1 = std::exp(0.5 * std::tanh(2 * std::log(2.0))), w2 = std::exp(0.5 * std::tanh(2 * std::log(3.0)));
  const double z = 1 + w1 + w2;
  expect_near(c.run(), rows_of({{2, 2, 2, 1}, {6 / z, 6 * w1 / z, 6 * w2 / z, 1}}), 1e-7);
}

TEST(Attention, HandComputedSink) {
  HandCase c;
  c.s.score.sinks = {std::log(6.0)};  // one head: a logit of ln 6 joins each softmax, weight 6 against the keys'
  // q0's keys weigh (1, 1, 1): (v0 + v1 + v2) / (3 + 6); q1's (1, 2, 3): (v0 + 2 v1 + 3 v2) / (6 + 6).
  expect_near(c.run(), rows_of({{6 / 9.0, 6 / 9.0, 6 / 9.0, 3 / 9.0}, {0.5, 1, 1.5, 0.5}}), 1e-6);
  c.s.score.sinks = {-1e300};  // a sink that weighs nothing is no sink
  expect_near(c.run(), rows_of({{2, 2, 2, 1}, {1, 2, 3, 1}}), 1e-6);
}

// The dtype-faithful reference (fp32, nothing rounded) with sinks agrees with the fp64 one.
TEST(Attention, FaithfulSinksAgreeWithFp64) {
  AttentionShape s;
  s.batch = 2, s.heads = 4, s.kv_heads = 2, s.seq_q = 9, s.seq_k = 40, s.head_dim = 16;
  s.causal = true;
  s.score.sinks = {-2.5, 0.0, 1.5, 3.0};
  const AttentionInputs in(s, 91);
  const Matrix exact = in.run(s);
  s.faithful.on = true;
  expect_near(in.run(s), exact, 1e-5);
  s.faithful.on = false;
  s.score.sinks.clear();
  EXPECT_GT((in.run(s) - exact).cwiseAbs().maxCoeff(), 1e-3);  // and the sinks change the result
}

TEST(Attention, HandComputedScale) {
  HandCase c;
  c.s.score.scale = 1.0;  // twice the default 1/2: q1's scores (0, 2 ln 2, 2 ln 3), weights (1, 4, 9) / 14
  expect_near(c.run(), rows_of({{2, 2, 2, 1}, {6 / 14.0, 24 / 14.0, 54 / 14.0, 1}}), 1e-7);
}

// The slopes ALiBi's authors (and vLLM) compute, by hand: 2^(-8i/n) for a power of two n; otherwise those of the
// largest power of two below n, then the odd-numbered slopes of twice that count.
TEST(Attention, AlibiSlopesForEightTwelveAndFortyHeads) {
  const std::vector<double> eight = alibi_slopes(8);
  ASSERT_EQ(eight.size(), 8u);
  for (int64_t h = 0; h < 8; ++h) EXPECT_EQ(eight[h], std::ldexp(1.0, -(h + 1))) << "head " << h;
  // 12 = 8 + 4: 2^-1 .. 2^-8, then 2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5 (16 heads' slopes 1, 3, 5, 7).
  const std::vector<double> twelve = alibi_slopes(12);
  ASSERT_EQ(twelve.size(), 12u);
  for (int64_t h = 0; h < 8; ++h) EXPECT_EQ(twelve[h], std::ldexp(1.0, -(h + 1))) << "head " << h;
  for (int64_t i = 0; i < 4; ++i) EXPECT_DOUBLE_EQ(twelve[8 + i], std::exp2(-0.5 - i)) << "head " << 8 + i;
  // 40 = 32 + 8: 2^(-i/4), i = 1..32, then 64 heads' slopes 1, 3, ..., 15: 2^(-(2k+1)/8).
  const std::vector<double> forty = alibi_slopes(40);
  ASSERT_EQ(forty.size(), 40u);
  for (int64_t h = 0; h < 32; ++h) EXPECT_DOUBLE_EQ(forty[h], std::exp2(-(h + 1) / 4.0)) << "head " << h;
  for (int64_t k = 0; k < 8; ++k) EXPECT_DOUBLE_EQ(forty[32 + k], std::exp2(-(2 * k + 1) / 8.0)) << "head " << 32 + k;
  EXPECT_EQ(alibi_slopes(1), std::vector<double>{1.0 / 256});
}

// RoPE by hand: position 1, rotary_dim 4 of head_dim 6, theta 100: angles 1 and 1/10 for the two pairs.
TEST(Rope, HandComputedNeoxAndGptj) {
  const double a = 1.0, b = 0.1;
  Rope rope;
  rope.theta = 100;
  rope.rotary_dim = 4;
  Matrix x(1, 6);
  x << 1, 2, 3, 4, 5, 6;
  rope.style = Rope::Style::neox;  // pairs (0, 2) at angle a and (1, 3) at b
  Matrix neox = x;
  detail::apply_rope(neox, {1}, rope);
  Matrix want(1, 6);
  want << 1 * std::cos(a) - 3 * std::sin(a), 2 * std::cos(b) - 4 * std::sin(b), 3 * std::cos(a) + 1 * std::sin(a),
      4 * std::cos(b) + 2 * std::sin(b), 5, 6;
  expect_near(neox, want, 1e-15);
  rope.style = Rope::Style::gptj;  // pairs (0, 1) at angle a and (2, 3) at b
  Matrix gptj = x;
  detail::apply_rope(gptj, {1}, rope);
  want << 1 * std::cos(a) - 2 * std::sin(a), 2 * std::cos(a) + 1 * std::sin(a), 3 * std::cos(b) - 4 * std::sin(b),
      4 * std::cos(b) + 3 * std::sin(b), 5, 6;
  expect_near(gptj, want, 1e-15);
}

// Scores depend on positions only through p - j: shifting every query and key by the same offset changes nothing.
TEST(Rope, ScoresDependOnlyOnTheDistance) {
  for (auto style : {Rope::Style::neox, Rope::Style::gptj}) {
    Rope rope;
    rope.style = style;
    const std::vector<float> qf = random_values(16, 3), kf = random_values(16, 4);
    Matrix q = detail::view(qf.data(), 1, 16, 16).cast<double>(), k = detail::view(kf.data(), 1, 16, 16).cast<double>();
    Matrix q0 = q, k0 = k, q1 = q, k1 = k;
    detail::apply_rope(q0, {7}, rope);
    detail::apply_rope(k0, {3}, rope);
    detail::apply_rope(q1, {7 + 1000}, rope);
    detail::apply_rope(k1, {3 + 1000}, rope);
    EXPECT_NEAR((q0 * k0.transpose())(0, 0), (q1 * k1.transpose())(0, 0), 1e-12);
  }
}

// theta -> infinity stops every pair but the first: pair i turns by p·theta^(-2i/r), and pair 0 by p whatever theta
// is (so "no RoPE" is not the limit). With interleaved pairs, pair 0 is elements (0, 1): a huge theta over all 16
// dims equals RoPE over the first two alone. And a query and key both at position 0 are not turned at all.
TEST(Rope, HugeThetaTurnsOnlyTheFirstPair) {
  AttentionShape s;
  s.batch = 2, s.heads = 4, s.kv_heads = 2, s.seq_q = 9, s.seq_k = 13, s.head_dim = 16;
  s.causal = true;
  const AttentionInputs in(s, 100);
  const Matrix plain = in.run(s);
  s.rope.style = Rope::Style::gptj;
  s.rope.theta = 1e300;
  s.rope.rotary_dim = 16;
  const Matrix huge = in.run(s);
  EXPECT_GT((huge - plain).cwiseAbs().maxCoeff(), 1e-3);
  s.rope.theta = 10000;
  s.rope.rotary_dim = 2;
  expect_near(in.run(s), huge, 1e-12);

  s.seq_q = s.seq_k = 1;
  const AttentionInputs one(s, 101);
  const Matrix at_zero = one.run(s);
  s.rope.style = Rope::Style::none;
  expect_near(one.run(s), at_zero, 1e-15);
}

TEST(Attention, TopLeftEqualsBottomRightWhenSeqQEqualsSeqK) {
  AttentionShape s;
  s.batch = 2, s.heads = 3, s.seq_q = 9, s.seq_k = 9, s.head_dim = 8;
  s.causal = true;
  s.window = 4;
  s.score.alibi_slopes = alibi_slopes(3);
  const AttentionInputs in(s, 80);
  const Matrix bottom_right = in.run(s);
  s.top_left = true;
  expect_near(in.run(s), bottom_right, 0);
  s.seq_k = 12;  // and they differ when the lengths do
  const AttentionInputs longer(s, 80);
  const Matrix top_left = longer.run(s);
  s.top_left = false;
  EXPECT_GT((longer.run(s) - top_left).cwiseAbs().maxCoeff(), 1e-3);
}

TEST(Attention, HugeSoftcapIsNoSoftcap) {
  AttentionShape s;
  s.batch = 2, s.heads = 2, s.seq_q = 7, s.seq_k = 10, s.head_dim = 16;
  s.causal = true;
  const AttentionInputs in(s, 90);
  const Matrix plain = in.run(s);
  s.score.softcap = 1e6;
  expect_near(in.run(s), plain, 1e-9);
  s.score.softcap = 0.2;  // and a small cap changes the result
  EXPECT_GT((in.run(s) - plain).cwiseAbs().maxCoeff(), 1e-3);
}

// Head h of GQA reads kv head h / (heads / kv_heads); repeating each kv head that many times must change nothing.
void expect_equals_mha_with_repeated_heads(AttentionShape s) {
  const AttentionInputs in(s, 10);
  const Matrix grouped = in.run(s);
  const int64_t group = s.heads / s.kv_heads, d = s.head_dim;
  AttentionInputs mha = in;
  mha.k.resize(s.batch * s.seq_k * s.heads * d);
  mha.v.resize(mha.k.size());
  for (int64_t t = 0; t < s.batch * s.seq_k; ++t) {
    for (int64_t h = 0; h < s.heads; ++h) {
      for (int64_t e = 0; e < d; ++e) {
        mha.k[(t * s.heads + h) * d + e] = in.k[(t * s.kv_heads + h / group) * d + e];
        mha.v[(t * s.heads + h) * d + e] = in.v[(t * s.kv_heads + h / group) * d + e];
      }
    }
  }
  s.kv_heads = s.heads;
  expect_near(grouped, mha.run(s), 0);
}

TEST(Attention, GqaEqualsMhaWithRepeatedKvHeads) {
  AttentionShape s;
  s.batch = 2, s.heads = 8, s.kv_heads = 2, s.seq_q = 5, s.seq_k = 9, s.head_dim = 16;
  s.causal = true;
  s.score.alibi_slopes = alibi_slopes(s.heads);
  expect_equals_mha_with_repeated_heads(s);
}

TEST(Attention, MqaEqualsMhaWithRepeatedKvHead) {
  AttentionShape s;
  s.batch = 2, s.heads = 4, s.kv_heads = 1, s.seq_q = 7, s.seq_k = 7, s.head_dim = 8;
  expect_equals_mha_with_repeated_heads(s);
}

TEST(Attention, WindowOfSeqKIsNoWindow) {
  AttentionShape s;
  s.batch = 2, s.heads = 3, s.seq_q = 11, s.seq_k = 11, s.head_dim = 8;
  const AttentionInputs in(s, 20);
  const Matrix full = in.run(s);
  s.window = s.seq_k;
  expect_near(in.run(s), full, 0);
  s.window = s.seq_k - 1;  // and the window does something
  EXPECT_GT((in.run(s) - full).cwiseAbs().maxCoeff(), 1e-3);
}

// Block-sparse: every block live is dense; only key block 0 live is attention over the first
// block's keys alone (non-causal scores do not depend on positions); a head's mask is its own.
TEST(Attention, BlockSparseAllLiveIsDenseAndOneBlockIsTheFirstKeys) {
  AttentionShape s;
  s.batch = 2, s.heads = 2, s.kv_heads = 1, s.seq_q = 10, s.seq_k = 11, s.head_dim = 8, s.causal = true;
  const AttentionInputs in(s, 30);
  const Matrix dense = in.run(s);
  const int64_t block = 4, qb = 3, kb = 3;
  s.sparse.assign(2, BlockMask{block, kb, std::vector<uint8_t>(qb * kb, 1)});
  expect_near(in.run(s), dense, 0);

  s.causal = false;
  for (BlockMask& m : s.sparse)
    for (int64_t b = 0; b < qb; ++b) m.live[b * kb + 1] = m.live[b * kb + 2] = 0;  // key block 0 only
  AttentionShape first = s;
  first.sparse.clear();
  first.seq_k = block;
  std::vector<float> k4, v4;  // each batch's first 4 keys and values
  for (int64_t b = 0; b < s.batch; ++b) {
    k4.insert(k4.end(), in.k.begin() + b * 11 * 8, in.k.begin() + b * 11 * 8 + 4 * 8);
    v4.insert(v4.end(), in.v.begin() + b * 11 * 8, in.v.begin() + b * 11 * 8 + 4 * 8);
  }
  const Matrix want = attention(first, in.q.data(), k4.data(), v4.data(), all_rows(AttentionInputs::count(s)));
  expect_near(in.run(s), want, 1e-12);
  s.sparse[1].live[0] = 0, s.sparse[1].live[1] = 1;  // head 1, query block 0: key block 1 instead
  const Matrix mixed = in.run(s);
  for (int64_t r = 0; r < AttentionInputs::count(s); ++r) {
    const bool changed = r % 2 == 1 && r / 2 % 10 < block;  // head 1's queries 0..3
    EXPECT_EQ((mixed.row(r) - want.row(r)).cwiseAbs().maxCoeff() > 1e-6, changed) << r;
  }
}

TEST(Attention, CausalWithMoreQueriesThanKeysGivesZeroRows) {
  AttentionShape s;
  s.batch = 2, s.heads = 2, s.seq_q = 6, s.seq_k = 4, s.head_dim = 8;
  s.causal = true;
  const Matrix o = AttentionInputs(s, 30).run(s);
  EXPECT_FALSE(o.hasNaN());
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t i = 0; i < s.seq_q; ++i) {
      for (int64_t h = 0; h < s.heads; ++h) {
        const auto row = o.row((b * s.seq_q + i) * s.heads + h);
        // Query i sits at key position i - 2: the first two see no key at all.
        if (i < s.seq_q - s.seq_k) {
          EXPECT_TRUE((row.array() == 0).all()) << "b " << b << " i " << i << " h " << h;
        } else {
          EXPECT_GT(row.cwiseAbs().maxCoeff(), 0) << "b " << b << " i " << i << " h " << h;
        }
      }
    }
  }
}

TEST(Attention, CausalSingleQuerySeesEveryKey) {
  AttentionShape s;
  s.batch = 2, s.heads = 2, s.seq_q = 1, s.seq_k = 13, s.head_dim = 8;
  const AttentionInputs in(s, 40);
  const Matrix open = in.run(s);
  s.causal = true;
  expect_near(in.run(s), open, 0);
}

// ------------------------------------------------------------------------------------------------------- decode

// A decode problem whose cache slots past each context hold NaN, so reading one shows.
struct DecodeInputs {
  DecodeShape s;
  std::vector<float> q, k, v;
  DecodeInputs(int64_t heads, int64_t kv_heads, int64_t head_dim, std::vector<int64_t> context, bool alibi) {
    s.batch = context.size(), s.heads = heads, s.kv_heads = kv_heads, s.head_dim = head_dim;
    s.max_context = *std::max_element(context.begin(), context.end()) + 3;
    s.context = context;
    if (alibi) s.score.alibi_slopes = alibi_slopes(heads);
    q = random_values(s.batch * heads * head_dim, 50);
    k = random_values(s.batch * s.max_context * kv_heads * head_dim, 51);
    v = random_values(k.size(), 52);
    const int64_t token = kv_heads * head_dim;
    for (int64_t b = 0; b < s.batch; ++b) {
      for (int64_t t = context[b]; t < s.max_context; ++t) {
        std::fill_n(k.begin() + (b * s.max_context + t) * token, token, kNaN);
        std::fill_n(v.begin() + (b * s.max_context + t) * token, token, kNaN);
      }
    }
  }
  Matrix run(const Rows& rows) const { return decode(s, q.data(), k.data(), v.data(), rows); }
};

TEST(Decode, EqualsLastRowOfCausalAttention) {
  for (bool alibi : {false, true})
    for (int64_t window : {0, 5}) {
      DecodeInputs in(4, 2, 16, {1, 7, 33}, alibi);
      in.s.window = window;
      in.s.score.softcap = window ? 0.7 : 0;  // the options together
      in.s.score.scale = window ? 0.3 : 0;
      if (window) in.s.score.sinks = {0.5, -1.0, 2.0, 0.0};
      const DecodeShape& s = in.s;
      const Matrix o = in.run(all_rows(s.batch * s.heads));
      EXPECT_FALSE(o.hasNaN());
      for (int64_t b = 0; b < s.batch; ++b) {
        // Sequence b as a prefill: context[b] queries (random, but the last is the decode query) over its tokens.
        AttentionShape a;
        a.heads = s.heads, a.kv_heads = s.kv_heads, a.seq_q = a.seq_k = s.context[b], a.head_dim = s.head_dim;
        a.causal = true;
        a.window = s.window;
        a.score = s.score;
        std::vector<float> q = random_values(a.seq_q * a.heads * a.head_dim, 60);
        std::copy_n(in.q.begin() + b * s.heads * s.head_dim, s.heads * s.head_dim,
                    q.end() - s.heads * s.head_dim);  // the last query row
        const int64_t cache = b * s.max_context * s.kv_heads * s.head_dim;
        Rows last_row(s.heads);
        std::iota(last_row.begin(), last_row.end(), (a.seq_q - 1) * a.heads);
        const Matrix expected = attention(a, q.data(), in.k.data() + cache, in.v.data() + cache, last_row);
        expect_near(o.middleRows(b * s.heads, s.heads), expected, 1e-15);
      }
    }
}

// Decode's cache holds keys rotated when they were stored: decode with RoPE equals the last row of a causal prefill
// whose keys were rotated beforehand at their positions and whose query is rotated at context - 1.
TEST(Rope, DecodeRotatesOnlyItsQuery) {
  DecodeInputs in(4, 2, 16, {5, 9}, false);
  in.s.rope.style = Rope::Style::neox;
  in.s.rope.rotary_dim = 8;
  const DecodeShape& s = in.s;
  const Matrix o = in.run(all_rows(s.batch * s.heads));
  for (int64_t b = 0; b < s.batch; ++b) {
    AttentionShape a;
    a.heads = s.heads, a.kv_heads = s.kv_heads, a.seq_q = 1, a.seq_k = s.context[b], a.head_dim = s.head_dim;
    a.rope = s.rope;
    a.rotate_keys = false;  // the same cache, read as stored
    const int64_t cache = b * s.max_context * s.kv_heads * s.head_dim;
    Rows heads(s.heads);
    std::iota(heads.begin(), heads.end(), 0);
    const Matrix want =
        attention(a, in.q.data() + b * s.heads * s.head_dim, in.k.data() + cache, in.v.data() + cache, heads);
    expect_near(o.middleRows(b * s.heads, s.heads), want, 1e-15);
  }
  DecodeInputs plain(4, 2, 16, {5, 9}, false);  // and the rotation does something
  EXPECT_GT((plain.run(all_rows(s.batch * s.heads)) - o).cwiseAbs().maxCoeff(), 1e-3);
}

// ---------------------------------------------------------------------------------------------------------- paged

TEST(Paged, EqualsDecodeOnTheGatheredCache) {
  for (bool alibi : {false, true}) {
    const DecodeInputs dense(4, 2, 16, {1, 17, 40}, alibi);
    const DecodeShape& d = dense.s;
    PagedShape p;
    p.decode = d;
    p.decode.max_context = 0;  // ignored
    p.block_size = 16;
    p.x = 8;  // fp16
    p.max_blocks_per_seq = 4;
    p.num_blocks = 11;  // 1 + 2 + 3 blocks needed
    // Each sequence gets distinct blocks from a shuffled pool; unused table entries are -1, never to be read.
    std::vector<int32_t> pool(p.num_blocks);
    std::iota(pool.begin(), pool.end(), 0);
    std::shuffle(pool.begin(), pool.end(), std::mt19937(70));
    std::vector<int32_t> table(d.batch * p.max_blocks_per_seq, -1);
    auto next = pool.begin();
    for (int64_t b = 0; b < d.batch; ++b) {
      for (int64_t i = 0; i < (d.context[b] + p.block_size - 1) / p.block_size; ++i) {
        table[b * p.max_blocks_per_seq + i] = *next++;
      }
    }
    // Scatter the dense cache into the pool; every slot not written (spare blocks, tails of last blocks) stays NaN.
    const int64_t kvh = d.kv_heads, hd = d.head_dim, bs = p.block_size, x = p.x;
    std::vector<float> k_pool(p.num_blocks * kvh * hd * bs, kNaN), v_pool(k_pool.size(), kNaN);
    for (int64_t b = 0; b < d.batch; ++b) {
      for (int64_t t = 0; t < d.context[b]; ++t) {
        const int64_t block = table[b * p.max_blocks_per_seq + t / bs], slot = t % bs;
        for (int64_t h = 0; h < kvh; ++h) {
          for (int64_t e = 0; e < hd; ++e) {
            const float* src_k = &dense.k[((b * d.max_context + t) * kvh + h) * hd + e];
            const float* src_v = &dense.v[((b * d.max_context + t) * kvh + h) * hd + e];
            k_pool[(((block * kvh + h) * (hd / x) + e / x) * bs + slot) * x + e % x] = *src_k;
            v_pool[((block * kvh + h) * hd + e) * bs + slot] = *src_v;
          }
        }
      }
    }
    const Rows rows = all_rows(d.batch * d.heads);
    const Matrix o = paged(p, dense.q.data(), k_pool.data(), v_pool.data(), table.data(), rows);
    EXPECT_FALSE(o.hasNaN());
    expect_near(o, dense.run(rows), 0);
  }
}

// --------------------------------------------------------------------------------------------------- cache_append

TEST(CacheAppend, TwoSequencesLandAtTheirContextAndNothingElseChanges) {
  // Caches of 5 rows, 2 values each (kv_heads 1, head_dim 2); 2 new rows per sequence after contexts 1 and 3.
  CacheAppendShape s;
  s.batch = 2, s.tokens = 2, s.kv_heads = 1, s.head_dim = 2, s.max_context = 5;
  s.context = {1, 3};
  std::vector<float> before(2 * 5 * 2);
  std::iota(before.begin(), before.end(), 100.0f);                                // row r holds (100 + 2r, 101 + 2r)
  const std::vector<float> added = {-1, -2, -3, -4, /* b = 1 */ -5, -6, -7, -8};  // [batch, tokens, 2]
  const Matrix got = cache_append(s, before.data(), added.data(), all_rows(10));
  expect_near(got,
              rows_of({{100, 101},
                       {-1, -2},
                       {-3, -4},
                       {106, 107},
                       {108, 109},  // b = 0: positions 1, 2 new
                       {110, 111},
                       {112, 113},
                       {114, 115},
                       {-5, -6},
                       {-7, -8}}),  // b = 1: positions 3, 4 new
              0);
}

TEST(CacheAppend, RowsSpanEveryKvHeadAndMaySampleInAnyOrder) {
  // kv_heads 2, head_dim 3: a cache row is 6 values. One token per sequence, the prefill of an empty cache for b = 0.
  CacheAppendShape s;
  s.batch = 2, s.tokens = 1, s.kv_heads = 2, s.head_dim = 3, s.max_context = 4;
  s.context = {0, 2};
  const std::vector<float> before(2 * 4 * 6, 7.0f);
  const std::vector<float> added = {1, 2, 3, 4, 5, 6, /* b = 1 */ 11, 12, 13, 14, 15, 16};
  const Matrix got = cache_append(s, before.data(), added.data(), {6, 0, 7, 6});  // (1, 2), (0, 0), (1, 3), (1, 2)
  expect_near(got,
              rows_of({{11, 12, 13, 14, 15, 16}, {1, 2, 3, 4, 5, 6}, {7, 7, 7, 7, 7, 7}, {11, 12, 13, 14, 15, 16}}), 0);
}

TEST(CacheAppend, BadShapesAndRowsThrow) {
  CacheAppendShape s;
  s.batch = 2, s.tokens = 2, s.kv_heads = 1, s.head_dim = 2, s.max_context = 5;
  const std::vector<float> before(20, 0), added(8, 0);
  s.context = {3, 4};  // 4 + 2 rows do not fit in 5
  EXPECT_THROW(cache_append(s, before.data(), added.data(), {0}), std::invalid_argument);
  s.context = {3};  // one length for two sequences
  EXPECT_THROW(cache_append(s, before.data(), added.data(), {0}), std::invalid_argument);
  s.context = {-1, 0};
  EXPECT_THROW(cache_append(s, before.data(), added.data(), {0}), std::invalid_argument);
  s.context = {3, 3};
  EXPECT_THROW(cache_append(s, before.data(), added.data(), {10}), std::out_of_range);
  EXPECT_NO_THROW(cache_append(s, before.data(), added.data(), {9}));
}

// ---------------------------------------------------------------------------------------------- reshape_and_cache

TEST(ReshapeAndCache, KnownSlotsAgainstHandComputedIndices) {
  // 3 blocks of 2 slots, kv_heads 2, head_dim 4, x 2: a (block, kv head) row is head_dim * block_size = 8 values.
  // Token 0 -> slot 5 (block 2, offset 1), token 1 -> slot 0 (block 0, offset 0), token 2 -> -1 (padding, skipped).
  ReshapeAndCacheShape s;
  s.tokens = 3, s.kv_heads = 2, s.head_dim = 4, s.block_size = 2, s.num_blocks = 3, s.x = 2;
  const std::vector<int64_t> slots = {5, 0, -1};
  std::vector<float> values(3 * 2 * 4);  // values[t, h, e] = 100 t + 10 h + e + 1
  for (int t = 0; t < 3; ++t)
    for (int h = 0; h < 2; ++h)
      for (int e = 0; e < 4; ++e) values[(t * 2 + h) * 4 + e] = 100 * t + 10 * h + e + 1;
  std::vector<float> before(3 * 2 * 8);
  std::iota(before.begin(), before.end(), 1000.0f);  // row r, column c holds 1000 + 8r + c
  const Rows rows = all_rows(6);                     // r = block * kv_heads + h

  // K [block, h, e / 2, offset, e % 2]: in a row, element e of offset o sits at (e / 2 * 2 + o) * 2 + e % 2, so
  // offset 0 takes columns 0 1 4 5 and offset 1 columns 2 3 6 7.
  const Matrix k = reshape_and_cache(s, PagedCache::key, before.data(), values.data(), slots.data(), rows);
  expect_near(k,
              rows_of({{101, 102, 1002, 1003, 103, 104, 1006, 1007},      // block 0 h 0: token 1, offset 0
                       {111, 112, 1010, 1011, 113, 114, 1014, 1015},      // block 0 h 1
                       {1016, 1017, 1018, 1019, 1020, 1021, 1022, 1023},  // block 1: no token
                       {1024, 1025, 1026, 1027, 1028, 1029, 1030, 1031},
                       {1032, 1033, 1, 2, 1036, 1037, 3, 4},        // block 2 h 0: token 0, offset 1
                       {1040, 1041, 11, 12, 1044, 1045, 13, 14}}),  // block 2 h 1
              0);

  // V [block, h, e, offset]: element e of offset o sits at e * 2 + o: offset 0 is the even columns, offset 1 the odd.
  const Matrix v = reshape_and_cache(s, PagedCache::value, before.data(), values.data(), slots.data(), rows);
  expect_near(v,
              rows_of({{101, 1001, 102, 1003, 103, 1005, 104, 1007},
                       {111, 1009, 112, 1011, 113, 1013, 114, 1015},
                       {1016, 1017, 1018, 1019, 1020, 1021, 1022, 1023},
                       {1024, 1025, 1026, 1027, 1028, 1029, 1030, 1031},
                       {1032, 1, 1034, 2, 1036, 3, 1038, 4},
                       {1040, 11, 1042, 12, 1044, 13, 1046, 14}}),
              0);

  // Sampled rows, in any order, are those rows of the whole cache.
  const Matrix sampled = reshape_and_cache(s, PagedCache::key, before.data(), values.data(), slots.data(), {4, 0, 4});
  expect_near(sampled,
              rows_of({{1032, 1033, 1, 2, 1036, 1037, 3, 4},
                       {101, 102, 1002, 1003, 103, 104, 1006, 1007},
                       {1032, 1033, 1, 2, 1036, 1037, 3, 4}}),
              0);
}

TEST(ReshapeAndCache, PagedReadsBackWhatItWrote) {
  // The tokens of three sequences scattered through a shuffled block table, then paged decode over the result:
  // the same as decode over the dense cache, exactly.
  const DecodeInputs dense(4, 2, 16, {1, 17, 40}, false);
  const DecodeShape& d = dense.s;
  PagedShape p;
  p.decode = d;
  p.block_size = 16, p.x = 8, p.max_blocks_per_seq = 3, p.num_blocks = 8;  // 1 + 2 + 3 blocks needed
  std::vector<int32_t> pool(p.num_blocks);
  std::iota(pool.begin(), pool.end(), 0);
  std::shuffle(pool.begin(), pool.end(), std::mt19937(71));
  std::vector<int32_t> table(d.batch * p.max_blocks_per_seq, -1);
  ReshapeAndCacheShape s;
  s.tokens = 1 + 17 + 40, s.kv_heads = d.kv_heads, s.head_dim = d.head_dim, s.block_size = p.block_size,
  s.num_blocks = p.num_blocks, s.x = p.x;
  const int64_t token = d.kv_heads * d.head_dim;
  std::vector<float> k_tokens, v_tokens;  // [tokens, kv_heads, head_dim], sequence after sequence
  std::vector<int64_t> slots;
  auto next = pool.begin();
  for (int64_t b = 0; b < d.batch; ++b) {
    for (int64_t t = 0; t < d.context[b]; ++t) {
      if (t % p.block_size == 0) table[b * p.max_blocks_per_seq + t / p.block_size] = *next++;
      slots.push_back(int64_t{table[b * p.max_blocks_per_seq + t / p.block_size]} * p.block_size + t % p.block_size);
      const int64_t at = (b * d.max_context + t) * token;
      k_tokens.insert(k_tokens.end(), dense.k.begin() + at, dense.k.begin() + at + token);
      v_tokens.insert(v_tokens.end(), dense.v.begin() + at, dense.v.begin() + at + token);
    }
  }
  const std::vector<float> empty(p.num_blocks * token * p.block_size, kNaN);
  const Rows all = all_rows(p.num_blocks * d.kv_heads);
  const Matrix k = reshape_and_cache(s, PagedCache::key, empty.data(), k_tokens.data(), slots.data(), all);
  const Matrix v = reshape_and_cache(s, PagedCache::value, empty.data(), v_tokens.data(), slots.data(), all);
  const std::vector<float> k_pool(k.data(), k.data() + k.size()), v_pool(v.data(), v.data() + v.size());
  const Rows rows = all_rows(d.batch * d.heads);
  const Matrix o = paged(p, dense.q.data(), k_pool.data(), v_pool.data(), table.data(), rows);
  EXPECT_FALSE(o.hasNaN());
  expect_near(o, dense.run(rows), 0);
}

TEST(ReshapeAndCache, BadSlotsThrow) {
  ReshapeAndCacheShape s;
  s.tokens = 2, s.kv_heads = 1, s.head_dim = 2, s.block_size = 2, s.num_blocks = 2, s.x = 2;
  const std::vector<float> cache(2 * 2 * 2, 0), values(2 * 2, 0);
  const std::vector<int64_t> outside = {0, 4}, shared = {3, 3}, fine = {3, -1};
  EXPECT_THROW(reshape_and_cache(s, PagedCache::key, cache.data(), values.data(), outside.data(), {0}),
               std::out_of_range);
  EXPECT_THROW(reshape_and_cache(s, PagedCache::value, cache.data(), values.data(), shared.data(), {0}),
               std::invalid_argument);
  EXPECT_THROW(reshape_and_cache(s, PagedCache::key, cache.data(), values.data(), fine.data(), {2}), std::out_of_range);
  EXPECT_NO_THROW(reshape_and_cache(s, PagedCache::key, cache.data(), values.data(), fine.data(), {1}));
  s.x = 3;  // head_dim 2 is not a multiple of 3
  EXPECT_THROW(reshape_and_cache(s, PagedCache::key, cache.data(), values.data(), fine.data(), {0}),
               std::invalid_argument);
}

// ------------------------------------------------------------------------------------------------ rows and errors

TEST(Rows, SampledRowsEqualRowsOfTheFullOutput) {
  // Any order, with repeats. Attention has more than 256 rows per kv head, so its groups are split into tasks.
  const Rows sample = {599, 0, 5, 5, 300, 2, 599, 1};
  const auto check = [&](const Matrix& full, const Matrix& sampled) {
    ASSERT_EQ(sampled.rows(), static_cast<Eigen::Index>(sample.size()));
    for (size_t n = 0; n < sample.size(); ++n) {
      expect_near(sampled.row(n), full.row(sample[n]), 1e-13);
    }
  };
  {
    const std::vector<float> x = random_values(600 * 33, 80);
    check(softmax(x.data(), 33, all_rows(600)), softmax(x.data(), 33, sample));
  }
  {
    const std::vector<float> a = random_values(3 * 200 * 17, 81), b = random_values(3 * 300 * 17, 82);
    for (bool nn : {false, true}) {
      check(gemm(a.data(), b.data(), nn, 200, 300, 17, all_rows(600)),
            gemm(a.data(), b.data(), nn, 200, 300, 17, sample));
    }
  }
  {
    AttentionShape s;
    s.heads = 2, s.kv_heads = 1, s.seq_q = 300, s.seq_k = 310, s.head_dim = 8;
    s.causal = true;
    const AttentionInputs in(s, 83);
    check(in.run(s), attention(s, in.q.data(), in.k.data(), in.v.data(), sample));
  }
  {
    const DecodeInputs in(4, 4, 8, std::vector<int64_t>(150, 5), true);
    check(in.run(all_rows(600)), in.run(sample));
  }
}

TEST(Rows, LargeProblemsGiveTheSameBitsEveryTime) {
  // Big enough to run on several threads; tasks must not depend on which thread runs them.
  AttentionShape s;
  s.batch = 2, s.heads = 4, s.seq_q = 300, s.seq_k = 300, s.head_dim = 64;
  s.causal = true;
  const AttentionInputs in(s, 90);
  const Matrix first = in.run(s);
  for (int trial = 0; trial < 3; ++trial) EXPECT_TRUE(in.run(s) == first) << "trial " << trial;
}

TEST(Errors, RowsOutOfRangeThrow) {
  AttentionShape s;
  s.batch = 2, s.heads = 2, s.seq_q = 3, s.seq_k = 3, s.head_dim = 4;
  const AttentionInputs in(s, 100);
  EXPECT_THROW(attention(s, in.q.data(), in.k.data(), in.v.data(), {0, 12}), std::out_of_range);
  EXPECT_THROW(attention(s, in.q.data(), in.k.data(), in.v.data(), {-1}), std::out_of_range);
  EXPECT_NO_THROW(attention(s, in.q.data(), in.k.data(), in.v.data(), {11}));

  const DecodeInputs d(2, 2, 4, {3, 4}, false);
  EXPECT_THROW(d.run({4}), std::out_of_range);
  EXPECT_THROW(softmax(in.q.data(), 4, {-1}), std::out_of_range);
  EXPECT_THROW(gemm(in.q.data(), in.k.data(), false, 2, 2, 2, {-1}), std::out_of_range);
}

TEST(Errors, BadShapesThrow) {
  AttentionShape s;
  s.heads = 3, s.kv_heads = 2;
  const std::vector<float> x(64, 0);
  EXPECT_THROW(attention(s, x.data(), x.data(), x.data(), {0}), std::invalid_argument);

  DecodeInputs d(2, 2, 4, {3, 4}, false);
  d.s.context = {3, 4, 5};
  EXPECT_THROW(d.run({0}), std::invalid_argument);
  d.s.context = {3, 0};
  EXPECT_THROW(d.run({0}), std::invalid_argument);

  PagedShape p;
  p.decode = DecodeInputs(2, 2, 8, {3}, false).s;
  p.block_size = 2, p.num_blocks = 4, p.max_blocks_per_seq = 2, p.x = 8;
  const std::vector<int32_t> bad_block = {0, 4};  // context 3 uses both entries; block 4 is outside the pool
  const std::vector<float> pool(4 * 2 * 8 * 2, 0), q(2 * 8, 0);
  EXPECT_THROW(paged(p, q.data(), pool.data(), pool.data(), bad_block.data(), {0}), std::out_of_range);
  p.x = 3;  // head_dim 8 is not a multiple of 3
  const std::vector<int32_t> good = {0, 1};
  EXPECT_THROW(paged(p, q.data(), pool.data(), pool.data(), good.data(), {0}), std::invalid_argument);
  p.x = 8;
  EXPECT_NO_THROW(paged(p, q.data(), pool.data(), pool.data(), good.data(), {0}));
}

}  // namespace
}  // namespace attnbench::ref

namespace attnbench::ref {
namespace {

// mha against the layer written out with loops: projection, split, causal GQA attention with
// the softmax spelled out, output projection, with the storage roundings where the chain
// stores (`store`; none: only q, k, v pass through float on the reference's side), the biases
// joining after the stored product or, with fused_bias, before the one rounding.
void check_mha_by_hand(const std::function<float(float)>& store, bool fused_bias = false) {
  const int64_t B = 2, S = 5, D = 8, H = 2, G = 1, hd = 4, W = (H + 2 * G) * hd;
  const std::vector<float> x = random_values(B * S * D, 1), wqkv = random_values(W * D, 2), bqkv = random_values(W, 3),
                           wo = random_values(D * H * hd, 4), bo = random_values(D, 5);
  const auto st = [&](double v) { return store ? double{store(static_cast<float>(v))} : v; };
  MhaShape s;
  s.batch = B;
  s.seq = S;
  s.d_model = D;
  s.attention.heads = H;
  s.attention.kv_heads = G;
  s.attention.head_dim = hd;
  s.attention.causal = true;
  s.store = store;
  s.fused_bias = fused_bias;
  const Rows rows = {0, 4, 5, 9, 7};
  const Matrix got = mha(s, x.data(), wqkv.data(), bqkv.data(), wo.data(), bo.data(), rows);
  Matrix want(static_cast<int64_t>(rows.size()), D);
  for (size_t n = 0; n < rows.size(); ++n) {
    const int64_t b = rows[n] / S, t = rows[n] % S;
    auto proj = [&](int64_t token, int64_t c) {  // column c of [q | k | v] for a token of sequence b, as stored
      double acc = 0;
      for (int64_t i = 0; i < D; ++i) acc += double{x[(b * S + token) * D + i]} * wqkv[c * D + i];
      return fused_bias ? st(acc + bqkv[c]) : st(st(acc) + bqkv[c]);
    };
    std::vector<double> o(H * hd, 0.0);
    for (int64_t h = 0; h < H; ++h) {
      const int64_t g = h / (H / G);
      std::vector<double> score(t + 1);
      double m = -1e300, sum = 0;
      for (int64_t j = 0; j <= t; ++j) {  // causal: keys 0..t
        double dot = 0;
        for (int64_t e = 0; e < hd; ++e) dot += proj(t, h * hd + e) * proj(j, H * hd + g * hd + e);
        score[j] = dot / std::sqrt(double(hd));
        m = std::max(m, score[j]);
      }
      for (int64_t j = 0; j <= t; ++j) sum += score[j] = std::exp(score[j] - m);
      for (int64_t j = 0; j <= t; ++j)
        for (int64_t e = 0; e < hd; ++e) o[h * hd + e] += score[j] / sum * proj(j, (H + G) * hd + g * hd + e);
    }
    for (int64_t c = 0; c < D; ++c) {
      double acc = 0;
      for (int64_t i = 0; i < H * hd; ++i) acc += st(o[i]) * wo[c * H * hd + i];
      want(static_cast<int64_t>(n), c) = acc + bo[c];
    }
  }
  expect_near(got, want, 1e-6);
}

TEST(Mha, LoopsByHandCausalGqa) { check_mha_by_hand(nullptr); }

// Storage rounded to quarters: coarse enough that a rounding left out or added is seen.
TEST(Mha, LoopsByHandWithStorageRounding) {
  check_mha_by_hand([](float v) { return std::round(v * 4) / 4; });
}

// The epilogue step's path: q, k, v rounded once, after the bias; and it is another layer at
// this coarse rounding, so a reference that ignored fused_bias would fail the first test.
TEST(Mha, LoopsByHandWithTheBiasBeforeTheRounding) {
  const auto quarters = [](float v) { return std::round(v * 4) / 4; };
  check_mha_by_hand(quarters, true);
  MhaShape s;
  s.batch = 1;
  s.seq = 4;
  s.d_model = 8;
  s.attention.heads = s.attention.kv_heads = 2;
  s.attention.head_dim = 4;
  s.store = quarters;
  const std::vector<float> x = random_values(32, 1), w = random_values(24 * 8, 2), b = random_values(24, 3),
                           wo = random_values(64, 4), bo = random_values(8, 5);
  const Matrix launches = mha(s, x.data(), w.data(), b.data(), wo.data(), bo.data(), {0, 1, 2, 3});
  s.fused_bias = true;
  const Matrix epilogue = mha(s, x.data(), w.data(), b.data(), wo.data(), bo.data(), {0, 1, 2, 3});
  EXPECT_GT((launches - epilogue).cwiseAbs().maxCoeff(), 1e-3);
}

TEST(Mha, RowsOutOfRangeAndBadHeadsAreRefused) {
  MhaShape s;
  s.batch = 1;
  s.seq = 2;
  s.d_model = 8;
  s.attention.heads = 2;
  s.attention.kv_heads = 2;
  s.attention.head_dim = 4;
  const std::vector<float> x(16), w(256), b(32), wo(64), bo(8);
  EXPECT_THROW(mha(s, x.data(), w.data(), b.data(), wo.data(), bo.data(), {2}), std::out_of_range);
  s.attention.kv_heads = 3;
  EXPECT_THROW(mha(s, x.data(), w.data(), b.data(), wo.data(), bo.data(), {0}), std::invalid_argument);
}

// A ragged batch (serving engines' mixed batches) is, sequence by sequence, causal attention of its query_len
// queries over its context_len keys aligned bottom-right: vLLM's test batch (q, kv) = (1, 1328), (5, 18),
// (129, 463), scaled down, under GQA with every score option and a window.
TEST(Ragged, EachSequenceIsBottomRightCausalAttention) {
  RaggedShape s;
  s.heads = 6, s.kv_heads = 2, s.head_dim = 16;
  s.query_len = {1, 5, 29};
  s.context_len = {133, 18, 63};
  s.window = 40;
  s.score.softcap = 20;
  s.score.alibi_slopes = alibi_slopes(6);
  s.score.sinks = {0.5, -1, 2, 0, -3, 1};
  const std::vector<float> q = random_values(s.queries() * s.heads * s.head_dim, 70),
                           k = random_values(s.keys() * s.kv_heads * s.head_dim, 71),
                           v = random_values(s.keys() * s.kv_heads * s.head_dim, 72);
  const Matrix o = ragged(s, q.data(), k.data(), v.data(), all_rows(s.queries() * s.heads));
  EXPECT_FALSE(o.hasNaN());
  int64_t q0 = 0, k0 = 0;
  for (size_t b = 0; b < s.query_len.size(); ++b) {
    AttentionShape a;
    a.heads = s.heads, a.kv_heads = s.kv_heads, a.seq_q = s.query_len[b], a.seq_k = s.context_len[b];
    a.head_dim = s.head_dim;
    a.causal = true;
    a.window = s.window;
    a.score = s.score;
    const Matrix want = attention(a, q.data() + q0 * s.heads * s.head_dim, k.data() + k0 * s.kv_heads * s.head_dim,
                                  v.data() + k0 * s.kv_heads * s.head_dim, all_rows(a.seq_q * a.heads));
    expect_near(o.middleRows(q0 * s.heads, a.seq_q * a.heads), want, 0);
    q0 += s.query_len[b];
    k0 += s.context_len[b];
  }
  // Rows asked out of order and a subset give the same values (to the last bits: a row's products are summed
  // in another grouping when its task holds other rows).
  const Rows some = {static_cast<int64_t>(o.rows()) - 1, 0, 7 * s.heads + 3};
  const Matrix part = ragged(s, q.data(), k.data(), v.data(), some);
  for (size_t n = 0; n < some.size(); ++n) expect_near(part.row(n), o.row(some[n]), 1e-13);
}

// Every query_len 1 is decode over a cache holding the sequences one after another.
TEST(Ragged, AllDecodesIsDecode) {
  RaggedShape s;
  s.heads = 4, s.kv_heads = 1, s.head_dim = 8;
  s.query_len = {1, 1, 1};
  s.context_len = {9, 1, 30};
  s.score.scale = 0.4;
  const std::vector<float> q = random_values(s.queries() * s.heads * s.head_dim, 80),
                           k = random_values(s.keys() * s.kv_heads * s.head_dim, 81),
                           v = random_values(s.keys() * s.kv_heads * s.head_dim, 82);
  DecodeShape d;
  d.batch = 3, d.heads = s.heads, d.kv_heads = s.kv_heads, d.head_dim = s.head_dim, d.max_context = 30;
  d.context = s.context_len;
  d.first = {0, 9, 10};
  d.score = s.score;
  const Rows all = all_rows(s.queries() * s.heads);
  expect_near(ragged(s, q.data(), k.data(), v.data(), all), decode(d, q.data(), k.data(), v.data(), all), 0);
}

TEST(Ragged, RefusesMoreQueriesThanKeys) {
  RaggedShape s;
  s.query_len = {4};
  s.context_len = {3};
  const std::vector<float> x(64, 0.f);
  EXPECT_THROW(ragged(s, x.data(), x.data(), x.data(), {0}), std::invalid_argument);
}

}  // namespace
}  // namespace attnbench::ref
