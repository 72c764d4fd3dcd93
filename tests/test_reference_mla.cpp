// The mla op (issue 49) on the CPU: its fp64 reference (reference/mla.hpp) against the formula
// written out in loops over an unpaged cache, through shuffled and identity block tables, with the
// speculative tokens' causal mask and the values as the rows' latent part; FlashMLA's fp8 token
// (e4m3 codes from their bits, the tiles' scales, the bf16 RoPE part) decoded from known bytes and
// written by the adapter (app/ops/mla.hpp); and the op's keys, one-line refusals, work, layout and
// the rows verification always checks. Nothing here needs a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "app/case.hpp"
#include "app/numeric.hpp"
#include "app/op.hpp"
#include "app/ops/mla.hpp"
#include "app/problem.hpp"
#include "kernels/mla/mla.hpp"
#include "kernels/mla/rungs.hpp"
#include "reference/mla.hpp"
#include "tests/case_text.hpp"

namespace attnbench {
namespace {

using ref::Matrix;
using ref::MlaShape;
using ref::Rows;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

std::vector<float> normal_values(size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal;
  std::vector<float> x(n);
  for (float& e : x) e = normal(gen);
  return x;
}

// A tiny problem: each sequence's rows dense ([context, width]), and the same rows in a pool of
// blocks through a block table, either sequence after sequence (identity) or shuffled, every slot
// no token owns NaN.
struct Tiny {
  MlaShape s;
  std::vector<float> q;                    // [batch, s_q, heads, width]
  std::vector<std::vector<float>> tokens;  // per sequence, [context, width]
  std::vector<int32_t> table;              // [batch, max_blocks]
  std::vector<float> pool;                 // [num_blocks · block_size, width]

  void lay_out(bool shuffle) {
    int64_t needed = 0;
    s.max_blocks = 1;
    for (int64_t c : s.context) {
      needed += (c + s.block_size - 1) / s.block_size;
      s.max_blocks = std::max(s.max_blocks, (c + s.block_size - 1) / s.block_size);
    }
    s.num_blocks = needed + 2;  // two spares
    std::vector<int32_t> order(static_cast<size_t>(s.num_blocks));
    std::iota(order.begin(), order.end(), 0);
    if (shuffle) std::shuffle(order.begin(), order.end(), std::mt19937(11));
    const int32_t spare = order.back();
    table.assign(static_cast<size_t>(s.batch() * s.max_blocks), spare);
    pool.assign(static_cast<size_t>(s.num_blocks * s.block_size * s.width()), kNaN);
    size_t next = 0;
    for (int64_t b = 0; b < s.batch(); ++b)
      for (int64_t j = 0; j < s.context[b]; ++j) {
        if (j % s.block_size == 0) table[b * s.max_blocks + j / s.block_size] = order[next++];
        const int64_t slot = int64_t{table[b * s.max_blocks + j / s.block_size]} * s.block_size + j % s.block_size;
        std::copy_n(&tokens[b][j * s.width()], s.width(), &pool[slot * s.width()]);
      }
  }
  float* token(int64_t b, int64_t j) {  // where token j of sequence b sits in the pool
    const int64_t slot = int64_t{table[b * s.max_blocks + j / s.block_size]} * s.block_size + j % s.block_size;
    return &pool[slot * s.width()];
  }
  int64_t rows() const { return s.batch() * s.s_q * s.heads; }
  Matrix run(const Rows& rows) const { return ref::mla(s, q.data(), pool.data(), table.data(), rows); }
  Matrix run_all() const {
    Rows all(static_cast<size_t>(rows()));
    std::iota(all.begin(), all.end(), 0);
    return run(all);
  }
};

Tiny make_tiny(MlaShape s, bool shuffle, unsigned seed = 1) {
  Tiny t;
  t.s = s;
  t.q = normal_values(static_cast<size_t>(s.batch() * s.s_q * s.heads * s.width()), seed);
  for (int64_t b = 0; b < s.batch(); ++b)
    t.tokens.push_back(normal_values(static_cast<size_t>(s.context[b] * s.width()), seed + 1 + static_cast<unsigned>(b)));
  t.lay_out(shuffle);
  return t;
}

MlaShape small_shape() {
  MlaShape s;
  s.s_q = 2;
  s.heads = 3;
  s.latent_dim = 16;
  s.rope_dim = 8;
  s.context = {5, 9, 2};
  s.block_size = 4;
  return s;
}

// The formula in plain loops over sequence b's dense rows: scores over the whole row, the
// causal limit context - s_q + t, softmax, the first latent_dim values of each row.
std::vector<double> by_hand(const Tiny& t, int64_t b, int64_t i, int64_t h) {
  const MlaShape& s = t.s;
  const int64_t w = s.width(), context = s.context[b];
  const int64_t last = s.causal ? context - s.s_q + i : context - 1;
  const double scale = s.scale > 0 ? s.scale : 1 / std::sqrt(static_cast<double>(w));
  const float* q = &t.q[((b * s.s_q + i) * s.heads + h) * w];
  std::vector<double> score;
  for (int64_t j = 0; j <= last; ++j) {
    double dot = 0;
    for (int64_t d = 0; d < w; ++d) dot += double{q[d]} * t.tokens[b][j * w + d];
    score.push_back(scale * dot);
  }
  const double max = *std::max_element(score.begin(), score.end());
  double sum = 0;
  for (double& x : score) sum += (x = std::exp(x - max));
  std::vector<double> o(static_cast<size_t>(s.latent_dim), 0.0);
  for (int64_t j = 0; j <= last; ++j)
    for (int64_t d = 0; d < s.latent_dim; ++d) o[d] += score[j] / sum * t.tokens[b][j * w + d];
  return o;
}

void expect_by_hand(const Tiny& t, const std::string& what) {
  const Matrix o = t.run_all();
  for (int64_t r = 0; r < t.rows(); ++r) {
    const int64_t h = r % t.s.heads, i = r / t.s.heads % t.s.s_q, b = r / t.s.heads / t.s.s_q;
    const std::vector<double> want = by_hand(t, b, i, h);
    for (int64_t d = 0; d < t.s.latent_dim; ++d)
      ASSERT_NEAR(o(r, d), want[d], 1e-12 * (1 + std::abs(want[d]))) << what << " row " << r << " dim " << d;
  }
}

}  // namespace

// ---------------------------------------------------------------------------
// The reference

TEST(MlaReference, MatchesTheFormulaWrittenOut) {
  expect_by_hand(make_tiny(small_shape(), true), "causal");
  MlaShape open = small_shape();
  open.causal = false;
  open.scale = 0.3;
  expect_by_hand(make_tiny(open, true, 5), "not causal, scale 0.3");
  MlaShape wide = small_shape();  // no RoPE part, block size 1, one query token
  wide.rope_dim = 0;
  wide.s_q = 1;
  wide.block_size = 1;
  expect_by_hand(make_tiny(wide, true, 9), "rope_dim 0");
}

TEST(MlaReference, ShuffledTableGivesTheIdentityTablesResult) {
  const Tiny shuffled = make_tiny(small_shape(), true), identity = make_tiny(small_shape(), false);
  ASSERT_NE(shuffled.table, identity.table);
  EXPECT_EQ((shuffled.run_all() - identity.run_all()).cwiseAbs().maxCoeff(), 0.0);
  // Rows asked out of order and repeated come back in the order asked (to the last bits: a task
  // of other rows may round its products differently).
  const Rows rows = {17, 0, 5, 17, 2};
  const Matrix all = identity.run_all(), some = shuffled.run(rows);
  for (size_t n = 0; n < rows.size(); ++n)
    EXPECT_LT((some.row(static_cast<int64_t>(n)) - all.row(rows[n])).cwiseAbs().maxCoeff(), 1e-14) << n;
}

// The first of two query tokens sits one position before the last key and must not see it; the
// second sees it. Without causal both do.
TEST(MlaReference, ASpeculativeTokenDoesNotSeeTheLastKey) {
  for (bool causal : {true, false}) {
    MlaShape s = small_shape();
    s.causal = causal;
    Tiny t = make_tiny(s, true);
    const Matrix before = t.run_all();
    float* last = t.token(1, s.context[1] - 1);
    for (int64_t d = 0; d < s.width(); ++d) last[d] = 3.f * last[d] + 1.f;
    const Matrix after = t.run_all();
    for (int64_t h = 0; h < s.heads; ++h) {
      const int64_t first = (1 * s.s_q + 0) * s.heads + h, second = (1 * s.s_q + 1) * s.heads + h;
      if (causal)
        EXPECT_EQ(before.row(first), after.row(first)) << "head " << h;
      else
        EXPECT_NE(before.row(first), after.row(first)) << "head " << h;
      EXPECT_NE(before.row(second), after.row(second)) << "head " << h;
      // Sequence 0 shares nothing with sequence 1.
      EXPECT_EQ(before.row(h), after.row(h)) << "head " << h;
    }
  }
}

// One key: its weight is 1, and the output is exactly its latent part, whatever its RoPE part.
TEST(MlaReference, TheValueIsTheRowsLatentPart) {
  MlaShape s = small_shape();
  s.s_q = 1;
  s.context = {1};
  Tiny t = make_tiny(s, false);
  Matrix o = t.run_all();
  for (int64_t h = 0; h < s.heads; ++h)
    for (int64_t d = 0; d < s.latent_dim; ++d) EXPECT_EQ(o(h, d), t.tokens[0][d]) << h << " " << d;
  for (int64_t d = s.latent_dim; d < s.width(); ++d) t.token(0, 0)[d] = 100.f;
  EXPECT_EQ((t.run_all() - o).cwiseAbs().maxCoeff(), 0.0);
}

// The faithful reference (fp32, P rounded to bf16) is near the fp64 one and not equal to it.
TEST(MlaReference, FaithfulIsNearButNotTheMath) {
  Tiny t = make_tiny(small_shape(), true);
  const Matrix exact = t.run_all();
  t.s.faithful.on = true;
  t.s.faithful.p = rounding_of(DType::bf16);
  const Matrix faithful = t.run_all();
  const double diff = (faithful - exact).cwiseAbs().maxCoeff();
  EXPECT_GT(diff, 0.0);
  EXPECT_LT(diff, 2e-2 * exact.cwiseAbs().maxCoeff());
}

TEST(MlaReference, RefusesWhatIsNotAProblem) {
  Tiny t = make_tiny(small_shape(), true);
  Tiny few = t;
  few.s.context[2] = 1;  // one token, two query tokens
  EXPECT_THROW(few.run({0}), std::invalid_argument);
  EXPECT_THROW(t.run({t.rows()}), std::out_of_range);
  t.table[0] = static_cast<int32_t>(t.s.num_blocks);
  EXPECT_THROW(t.run({0}), std::out_of_range);
}

// ---------------------------------------------------------------------------
// FlashMLA's fp8 token

TEST(MlaFp8, E4m3CodesFromTheirBits) {
  EXPECT_EQ(ref::e4m3_value(0x00), 0.0);
  EXPECT_EQ(ref::e4m3_value(0x38), 1.0);              // exponent 7, mantissa 0
  EXPECT_EQ(ref::e4m3_value(0x3c), 1.5);              // mantissa 4
  EXPECT_EQ(ref::e4m3_value(0x01), std::ldexp(1, -9));  // the smallest subnormal
  EXPECT_EQ(ref::e4m3_value(0x08), std::ldexp(1, -6));  // the smallest normal
  EXPECT_EQ(ref::e4m3_value(0x7e), 448.0);
  EXPECT_EQ(ref::e4m3_value(0xfe), -448.0);
  EXPECT_TRUE(std::isnan(ref::e4m3_value(0x7f)));
  EXPECT_TRUE(std::isnan(ref::e4m3_value(0xff)));
  // The same values as the codec the rest of attnbench stores caches with.
  for (int c = 0; c < 256; ++c) {
    const double want = fp8e4m3_to_float(static_cast<uint8_t>(c));
    if (std::isnan(want))
      EXPECT_TRUE(std::isnan(ref::e4m3_value(static_cast<uint8_t>(c)))) << c;
    else
      EXPECT_EQ(ref::e4m3_value(static_cast<uint8_t>(c)), want) << c;
  }
}

TEST(MlaFp8, ATokenOfKnownBytes) {
  ASSERT_EQ(ref::mla_fp8_token_bytes(512, 64), 656);
  std::vector<uint8_t> token(656, 0);
  token[0] = 0x38;    // 1.0 in tile 0
  token[130] = 0x40;  // 2.0 in tile 1
  token[511] = 0xb8;  // -1.0 in tile 3
  const float scales[4] = {1.f, 0.25f, 8.f, 4.f};
  std::memcpy(&token[512], scales, 16);
  token[528] = 0x80, token[529] = 0x3f;  // RoPE 0: bf16 0x3f80 = 1.0 (little-endian)
  token[654] = 0x00, token[655] = 0xc0;  // RoPE 63: 0xc000 = -2.0
  std::vector<float> v(576, kNaN);
  ref::mla_fp8_dequantize(token.data(), 512, 64, v.data());
  EXPECT_EQ(v[0], 1.f);
  EXPECT_EQ(v[130], 0.5f);
  EXPECT_EQ(v[511], -4.f);
  EXPECT_EQ(v[1], 0.f);
  EXPECT_EQ(v[512], 1.f);
  EXPECT_EQ(v[575], -2.f);
  EXPECT_EQ(v[513], 0.f);
  // A slot no token owns: all-ones bytes, NaN everywhere.
  std::fill(token.begin(), token.end(), 0xff);
  ref::mla_fp8_dequantize(token.data(), 512, 64, v.data());
  for (float x : v) EXPECT_TRUE(std::isnan(x));
}

TEST(MlaFp8, TileScalesArePowersOfTwoAsFlashMlaTakesThem) {
  EXPECT_EQ(mla_fp8_tile_scale(448.f), 1.f);
  EXPECT_EQ(mla_fp8_tile_scale(449.f), 2.f);
  EXPECT_EQ(mla_fp8_tile_scale(3 * 448.f), 4.f);
  EXPECT_EQ(mla_fp8_tile_scale(1.f), 1.f / 256);  // 1/448 rounds up to 2^-8
  EXPECT_EQ(mla_fp8_tile_scale(0.f), std::ldexp(1.f, -13));  // at least 1e-4's
}

// Tokens written by the adapter into a shuffled pool come back through the reference's decoder
// as e4m3 holds them: each within half a code step, the RoPE part bf16 exactly, the spare slots NaN.
TEST(MlaFp8, PoolWrittenAndReadBack) {
  const int64_t latent = 256, rope = 16, width = latent + rope, bytes = ref::mla_fp8_token_bytes(latent, rope);
  const int64_t tokens = 40, pool_slots = 50;
  std::vector<float> x = normal_values(static_cast<size_t>(tokens * width), 3);
  for (int64_t t = 0; t < tokens; ++t) x[t * width + 128 + t % 128] *= 1000;  // tile 1 of each token: one outlier
  for (int64_t t = 0; t < tokens; ++t) std::fill_n(&x[t * width], 128 * (t == 7), 0.f);  // token 7's tile 0: zeros
  std::vector<int64_t> slots(static_cast<size_t>(pool_slots));
  std::iota(slots.begin(), slots.end(), 0);
  std::shuffle(slots.begin(), slots.end(), std::mt19937(2));
  slots.resize(static_cast<size_t>(tokens));
  const std::vector<uint8_t> pool = mla_fp8_pool(x.data(), slots, latent, rope, pool_slots);
  ASSERT_EQ(pool.size(), static_cast<size_t>(pool_slots * bytes));
  std::vector<float> v(static_cast<size_t>(width));
  for (int64_t t = 0; t < tokens; ++t) {
    const uint8_t* token = &pool[static_cast<size_t>(slots[t] * bytes)];
    ref::mla_fp8_dequantize(token, latent, rope, v.data());
    for (int64_t tile = 0; tile < latent / 128; ++tile) {
      float scale, amax = 0;
      std::memcpy(&scale, token + latent + 4 * tile, 4);
      for (int64_t i = 0; i < 128; ++i) amax = std::max(amax, std::fabs(x[t * width + tile * 128 + i]));
      int e;
      EXPECT_EQ(std::frexp(scale, &e), 0.5f) << "a power of two";
      EXPECT_GE(scale * 448, amax);
      EXPECT_TRUE(amax == 0 ? scale == std::ldexp(1.f, -13) : scale * 224 < amax) << t << " " << tile;
      for (int64_t i = tile * 128; i < (tile + 1) * 128; ++i) {
        const float want = x[t * width + i];
        // e4m3: 3 mantissa bits, half a step is 2^-4 of the value; subnormals step 2^-9 · scale.
        ASSERT_LE(std::fabs(v[i] - want), std::max(std::ldexp(std::fabs(want), -4), std::ldexp(scale, -10)))
            << t << " " << i;
      }
    }
    for (int64_t i = latent; i < width; ++i) ASSERT_EQ(v[i], round_to(DType::bf16, x[t * width + i])) << t << " " << i;
  }
  const std::set<int64_t> owned(slots.begin(), slots.end());
  for (int64_t slot = 0; slot < pool_slots; ++slot) {
    if (owned.count(slot)) continue;
    ref::mla_fp8_dequantize(&pool[static_cast<size_t>(slot * bytes)], latent, rope, v.data());
    for (float y : v) ASSERT_TRUE(std::isnan(y)) << slot;
  }
}

// ---------------------------------------------------------------------------
// The op (app/ops/mla.cpp)

namespace {

using case_text::error_of;
using case_text::expect_has;
using case_text::parse;

const std::string kHead = "op = \"mla\"\ndtype = \"bf16\"\n[shape]\nbatch = 3\nheads = 16\n";

CasePoint point(const std::string& shape, const std::vector<std::string>& sets = {}) {
  return parse(kHead + shape, sets).points.at(0);
}

std::string naive_skip(const CasePoint& p) {
  for (const VariantChoice& v : make_problem(p)->variants(assumed_caps()))
    if (v.name == "naive") return v.skip;
  return "no row";
}

}  // namespace

TEST(MlaOp, KeysAndDefaults) {
  const Shape s = point("context = [70, 2, 129]\n").shape;
  EXPECT_EQ(s.num("s_q"), 1);
  EXPECT_EQ(s.num("latent_dim"), 512);
  EXPECT_EQ(s.num("rope_dim"), 64);
  EXPECT_TRUE(s.flag("causal"));
  EXPECT_EQ(s.num("block_size"), 64);
  EXPECT_EQ(s.word("cache"), "dtype");
  EXPECT_FALSE(s.has("scale"));
  EXPECT_EQ(s.num("num_blocks"), 6 + 6 / 4 + 1);  // 2 + 1 + 3 blocks of 64, a quarter more and a spare
}

TEST(MlaOp, RefusesBadShapesInOneLine) {
  expect_has(error_of(kHead + "s_q = 2\ncontext = [70, 1, 129]\n"),
             {"cases/t.toml:7:", "shape.context: sequence 1 has 1 tokens, fewer than s_q (2)"});
  expect_has(error_of(kHead + "context = 9\nlatent_dim = 100\n"), {"shape.latent_dim (100) must be a multiple of 8"});
  expect_has(error_of(kHead + "context = 9\nlatent_dim = 2048\n"), {"shape.latent_dim must be at most 1024, got 2048"});
  expect_has(error_of(kHead + "context = 9\nrope_dim = 12\n"), {"shape.rope_dim (12) must be a multiple of 8"});
  expect_has(error_of(kHead + "context = 9\nrope_dim = -8\n"), {"shape.rope_dim must be at least 0, got -8"});
  expect_has(error_of(kHead + "context = 9\nlatent_dim = 264\ncache = \"fp8\"\n"),
             {"shape.latent_dim (264) must be a multiple of 128 for cache \"fp8\""});
  expect_has(error_of(kHead + "context = 9\ncache = \"fp4\"\n"), {"shape.cache", "fp4"});
  expect_has(error_of(kHead + "context = [9, 9]\n"), {"has 2 entries but batch is 3"});
  expect_has(error_of(kHead + "context = 9\nblock_size = 4\nnum_blocks = 9\n"),
             {"shape.num_blocks (9) is too small: the sequences need 9 blocks of 4 tokens"});
  expect_has(error_of(kHead + "context = 9\nhead_dim = 576\n"), {"unknown key shape.head_dim"});
  expect_has(error_of(kHead + "context = 9\nscale = 0\n"), {"shape.scale"});
  expect_has(error_of(kHead + "context = 9\n", {"dtype=fp8_e4m3"}), {"fp8_e4m3"});
  expect_has(error_of(kHead + "s_q = 0\ncontext = 9\n"), {"shape.s_q must be at least 1, got 0"});
}

// FLOPs: 2 · (576 + 512) a (query token, head, key seen); bytes: the latent cache once per
// sequence, whatever the heads, plus q and o.
TEST(MlaOp, WorkReadsTheCacheOncePerSequence) {
  const auto bf16 = make_problem(point("s_q = 2\ncontext = [100, 7, 2]\n"));
  const double pairs = (99 + 100) + (6 + 7) + (1 + 2), rows = 3 * 2 * 16;
  Work w = bf16->work();
  EXPECT_DOUBLE_EQ(w.flops, 2.0 * (576 + 512) * pairs * 16);
  EXPECT_DOUBLE_EQ(w.bytes, 109.0 * 576 * 2 + 2.0 * rows * (576 + 512));
  EXPECT_EQ(w.bandwidth, Bandwidth::read);
  // Without causal every query token sees every key; the fp8 cache is 656 bytes a token.
  w = make_problem(point("s_q = 2\ncontext = [100, 7, 2]\ncausal = false\ncache = \"fp8\"\n"))->work();
  EXPECT_DOUBLE_EQ(w.flops, 2.0 * (576 + 512) * (2 * 109) * 16);
  EXPECT_DOUBLE_EQ(w.bytes, 109.0 * 656 + 2.0 * rows * (576 + 512));
  // Twice the heads: twice the FLOPs, the same cache bytes.
  const Work h32 = make_problem(point("s_q = 2\ncontext = [100, 7, 2]\n", {"shape.heads=32"}))->work();
  EXPECT_DOUBLE_EQ(h32.flops, 2 * bf16->work().flops);
  EXPECT_DOUBLE_EQ(h32.bytes - 2.0 * 2 * rows * (576 + 512), 109.0 * 576 * 2);
}

TEST(MlaOp, MustCheckRowsAreEachSequencesFirstAndLastTokenAndHead) {
  const auto problem = make_problem(point("s_q = 2\ncontext = [100, 7, 2]\n"));
  const Rows rows = problem->must_check_rows();
  const std::set<int64_t> got(rows.begin(), rows.end());
  EXPECT_EQ(got.size(), rows.size()) << "no row twice";
  std::set<int64_t> want;
  for (int64_t b = 0; b < 3; ++b)
    for (int64_t t : {0, 1})
      for (int64_t h : {0, 15}) want.insert((b * 2 + t) * 16 + h);
  EXPECT_EQ(got, want);
  // Sequence by sequence, so that a small max_rows keeps the first sequences' rows.
  EXPECT_TRUE(std::is_sorted(rows.begin(), rows.end()));
  // One query token and one head: one row a sequence.
  const Rows one = make_problem(point("context = [100, 7, 2]\n", {"shape.heads=1"}))->must_check_rows();
  EXPECT_EQ(one, (Rows{0, 1, 2}));
}

TEST(MlaOp, TensorsAndLayout) {
  const auto problem = make_problem(point("s_q = 2\ncontext = [100, 7, 2]\n"));
  EXPECT_EQ(problem->output_tensor().layout(), "[batch, s_q, heads, latent_dim]");
  EXPECT_EQ(problem->output_tensor().shape(), (std::vector<int64_t>{3, 2, 16, 512}));
  EXPECT_EQ(problem->output_rows(), 3 * 2 * 16);
  EXPECT_EQ(problem->output_cols(), 512);
  const Coord c = problem->coord((2 * 2 + 1) * 16 + 7, 300);  // sequence 2, token 1, head 7
  EXPECT_EQ(c.b, 2);
  EXPECT_EQ(c.i, 1);
  EXPECT_EQ(c.h, 7);
  EXPECT_EQ(c.d, 300);
  const auto inputs = problem->input_names();
  ASSERT_EQ(inputs.size(), 2u);
  EXPECT_EQ(inputs[0], (std::pair<std::string, bool>{"q", true}));
  EXPECT_EQ(inputs[1], (std::pair<std::string, bool>{"kv", true}));
  EXPECT_EQ(problem->input_tensors()[1]->shape(), (std::vector<int64_t>{109, 576}));
  EXPECT_TRUE(problem->has_faithful());
}

// naive takes every dtype with either cache and says why it refuses what it cannot take.
TEST(MlaOp, NaiveRunsEveryShippedPointAndSaysWhyNot) {
  for (const char* dtype : {"fp32", "fp16", "bf16"})
    for (const char* cache : {"dtype", "fp8"})
      EXPECT_EQ(naive_skip(point("s_q = 2\ncontext = [100, 7, 2]\n", {std::string("dtype=") + dtype,
                                                                        std::string("shape.cache=") + cache})),
                "")
          << dtype << " " << cache;
  MlaParams p;
  p.longest_context = 4;
  p.max_blocks_per_seq = 1;
  finish_mla_params(p);
  EXPECT_FLOAT_EQ(p.scale, 1 / 24.f);
  EXPECT_EQ(mla_impl::naive_supports(p, assumed_caps()), "");
  MlaParams q = p;
  q.cache_format = MlaCache::fp8;
  q.latent_dim = 192;
  EXPECT_EQ(mla_impl::naive_supports(q, assumed_caps()),
            "an fp8 cache needs latent_dim a multiple of 128 (one scale per 128 latent values)");
  q = p;
  q.latent_dim = 2048;
  EXPECT_EQ(mla_impl::naive_supports(q, assumed_caps()), "latent_dim must be in [1, 1024]");
  q = p;
  q.s_q = 8;
  EXPECT_EQ(mla_impl::naive_supports(q, assumed_caps()),
            "longest_context must be in [s_q, max_blocks_per_seq * block_size]");
  EXPECT_EQ(q.token_bytes(), 576 * 2);
  q.cache_format = MlaCache::fp8;
  EXPECT_EQ(q.token_bytes(), 656);
  // Every shipped mla case builds, and naive runs each of its points.
  int points = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(std::string(ATTNBENCH_SOURCE_DIR) + "/cases")) {
    if (entry.path().extension() != ".toml") continue;
    const std::string name = entry.path().filename().string();
    if (name.rfind("mla", 0) != 0 && entry.path().parent_path().filename() != "mla") continue;
    for (const CasePoint& c : load_case(entry.path().string(), {}).points) {
      EXPECT_EQ(naive_skip(c), "") << entry.path() << " " << c.label;
      ++points;
    }
  }
  EXPECT_GE(points, 16 + 8 + 4 + 4 + 2 + 8 + 4 + 4);
}

}  // namespace attnbench
