// The fp64 reference of attention's backward pass (reference/attention_backward.hpp): its dQ,
// dK and dV against central finite differences of the forward reference's loss
// L = Σ dO ∘ attention(Q, K, V), on small shapes with every option it takes; its O and LSE
// against the forward reference and the definition; the stored-forward (faithful) path against
// the fp64 one. At the end: the tiled rungs' tile geometry against the mask.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "reference/attention_backward.hpp"

namespace attnbench::ref {
namespace {

// Multiples of 1/32 in [-2, 2]: x ± 2^-20 is exact in float (22 significant bits), so the
// finite differences below step by exactly h.
std::vector<float> random_values(size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> dist(-64, 64);
  std::vector<float> x(n);
  for (float& e : x) e = static_cast<float>(dist(gen)) / 32.0f;
  return x;
}

struct Inputs {
  AttentionShape s;
  std::vector<float> q, k, v, d_o;
};

Inputs make(AttentionShape s, unsigned seed) {
  const auto nq = static_cast<size_t>(s.batch * s.seq_q * s.heads * s.head_dim);
  const auto nk = static_cast<size_t>(s.batch * s.seq_k * s.kv_heads * s.head_dim);
  return {s, random_values(nq, seed), random_values(nk, seed + 1), random_values(nk, seed + 2),
          random_values(nq, seed + 3)};
}

// L = Σ dO ∘ O, O from the forward reference.
double loss(const Inputs& in) {
  const int64_t rows = in.s.batch * in.s.seq_q * in.s.heads;
  Rows all(static_cast<size_t>(rows));
  std::iota(all.begin(), all.end(), 0);
  const Matrix o = attention(in.s, in.q.data(), in.k.data(), in.v.data(), all);
  double l = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < in.s.head_dim; ++c) l += o(r, c) * in.d_o[static_cast<size_t>(r * in.s.head_dim + c)];
  return l;
}

constexpr double kStep = 1.0 / (1 << 20);  // h = 2^-20 ≈ 9.5e-7
// |fd - analytic| <= kAtol + kRtol·|analytic|: the difference quotient's own error is the
// rounding of L (~1e-16·Σ|dO ∘ O|, divided by 2h: ~1e-9) plus h²·L''' (~1e-12).
constexpr double kAtol = 1e-7, kRtol = 1e-6;

// Every element of x (q, k or v of `in`) against grad (row-major, as the tensor is laid out).
double check_tensor(Inputs& in, std::vector<float>& x, const Matrix& grad, const std::string& what) {
  double worst = 0;
  for (size_t e = 0; e < x.size(); ++e) {
    const float keep = x[e];
    x[e] = static_cast<float>(keep + kStep);
    const double up = loss(in);
    x[e] = static_cast<float>(keep - kStep);
    const double down = loss(in);
    x[e] = keep;
    const double fd = (up - down) / (2 * kStep);
    const double g = grad(static_cast<int64_t>(e) / grad.cols(), static_cast<int64_t>(e) % grad.cols());
    EXPECT_NEAR(g, fd, kAtol + kRtol * std::abs(g)) << what << " element " << e;
    worst = std::max(worst, std::abs(g - fd));
  }
  return worst;
}

void check_gradients(AttentionShape s, unsigned seed) {
  Inputs in = make(s, seed);
  const AttentionGrads g = attention_backward(in.s, in.q.data(), in.k.data(), in.v.data(), in.d_o.data());
  const double worst = std::max({check_tensor(in, in.q, g.dq, "dQ"), check_tensor(in, in.k, g.dk, "dK"),
                                 check_tensor(in, in.v, g.dv, "dV")});
  // The gradients are not all 0 (a test that compares zeros proves nothing).
  EXPECT_GT(g.dq.cwiseAbs().maxCoeff(), 1e-3);
  EXPECT_GT(g.dk.cwiseAbs().maxCoeff(), 1e-3);
  EXPECT_GT(g.dv.cwiseAbs().maxCoeff(), 1e-3);
  std::printf("  finite differences: worst |analytic - fd| = %.3g\n", worst);
}

AttentionShape shape(int64_t heads, int64_t kv_heads, int64_t seq_q, int64_t seq_k, int64_t d = 8) {
  AttentionShape s;
  s.batch = 2;
  s.heads = heads;
  s.kv_heads = kv_heads;
  s.seq_q = seq_q;
  s.seq_k = seq_k;
  s.head_dim = d;
  return s;
}

TEST(AttentionBackward, FiniteDifferencesPlain) { check_gradients(shape(2, 2, 5, 7), 1); }

TEST(AttentionBackward, FiniteDifferencesCausalBottomRight) {
  AttentionShape s = shape(2, 2, 7, 5);  // queries 0 and 1 see no key
  s.causal = true;
  check_gradients(s, 2);
  s = shape(2, 2, 5, 7);
  s.causal = true;
  check_gradients(s, 3);
}

TEST(AttentionBackward, FiniteDifferencesCausalTopLeft) {
  AttentionShape s = shape(2, 2, 7, 5);
  s.causal = true;
  s.top_left = true;
  check_gradients(s, 4);
  s = shape(2, 2, 5, 7);
  s.causal = true;
  s.top_left = true;
  check_gradients(s, 5);
}

TEST(AttentionBackward, FiniteDifferencesWindow) {
  AttentionShape s = shape(2, 2, 6, 6);
  s.window = 3;
  check_gradients(s, 6);
  s.causal = true;
  check_gradients(s, 7);
}

TEST(AttentionBackward, FiniteDifferencesGqaAndMqa) {
  AttentionShape s = shape(4, 2, 5, 6);
  s.causal = true;
  check_gradients(s, 8);
  check_gradients(shape(4, 1, 4, 5), 9);
}

TEST(AttentionBackward, FiniteDifferencesSoftcap) {
  AttentionShape s = shape(2, 1, 5, 6);
  s.score.softcap = 1.5;  // scores reach a few units: tanh is well into its curve
  s.score.scale = 0.9;
  check_gradients(s, 10);
}

TEST(AttentionBackward, FiniteDifferencesAlibi) {
  AttentionShape s = shape(4, 2, 5, 7);
  s.score.alibi_slopes = alibi_slopes(4);
  check_gradients(s, 11);
  s.causal = true;
  s.score.softcap = 2;
  s.window = 4;
  check_gradients(s, 12);
}

// O is the forward reference's; LSE is log Σ_j exp(z_ij) over the keys query i sees, computed
// here from the definition; a query that sees no key has O = 0, LSE = +inf and dQ = 0.
TEST(AttentionBackward, ForwardAndLseMatchTheForwardReference) {
  AttentionShape s = shape(4, 2, 7, 5);
  s.causal = true;  // bottom-right: queries 0 and 1 see no key
  s.window = 3;
  s.score.softcap = 2;
  s.score.alibi_slopes = alibi_slopes(4);
  const Inputs in = make(s, 20);
  const AttentionGrads g = attention_backward(in.s, in.q.data(), in.k.data(), in.v.data(), in.d_o.data());
  Rows all(static_cast<size_t>(s.batch * s.seq_q * s.heads));
  std::iota(all.begin(), all.end(), 0);
  const Matrix o = attention(s, in.q.data(), in.k.data(), in.v.data(), all);
  EXPECT_LE((o - g.o).cwiseAbs().maxCoeff(), 1e-14);
  const double scale = 1 / std::sqrt(static_cast<double>(s.head_dim));
  const int64_t d = s.head_dim, offset = s.seq_k - s.seq_q;
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.heads; ++h)
      for (int64_t i = 0; i < s.seq_q; ++i) {
        const int64_t p = i + offset;
        double sum = 0;
        for (int64_t j = 0; j < s.seq_k; ++j) {
          if (j > p || std::abs(p - j) >= s.window) continue;
          double dot = 0;
          for (int64_t c = 0; c < d; ++c)
            dot += static_cast<double>(in.q[static_cast<size_t>(((b * s.seq_q + i) * s.heads + h) * d + c)]) *
                   in.k[static_cast<size_t>(((b * s.seq_k + j) * s.kv_heads + h / 2) * d + c)];
          sum += std::exp(2 * std::tanh(scale * dot / 2) - s.score.alibi_slopes[static_cast<size_t>(h)] * (p - j));
        }
        const double lse = g.lse[static_cast<size_t>((b * s.heads + h) * s.seq_q + i)];
        const int64_t row = (b * s.seq_q + i) * s.heads + h;
        if (p < 0) {
          EXPECT_EQ(lse, std::numeric_limits<double>::infinity());
          EXPECT_EQ(g.o.row(row).cwiseAbs().maxCoeff(), 0.0);
          EXPECT_EQ(g.dq.row(row).cwiseAbs().maxCoeff(), 0.0);
        } else {
          EXPECT_NEAR(lse, std::log(sum), 1e-13 * (1 + std::abs(lse))) << "b" << b << " h" << h << " i" << i;
        }
      }
}

// The faithful path from the forward's own O and LSE (rounded to float, as the op stores them
// in fp32) gives the fp64 gradients to about float's precision; a group left out stays 0.
TEST(AttentionBackward, StoredForwardAndGroups) {
  AttentionShape s = shape(4, 2, 9, 11);
  s.causal = true;
  const Inputs in = make(s, 30);
  const AttentionGrads g = attention_backward(in.s, in.q.data(), in.k.data(), in.v.data(), in.d_o.data());
  const std::vector<float> o(g.o.data(), g.o.data() + g.o.size());
  const std::vector<float> lse(g.lse.begin(), g.lse.end());
  const AttentionGrads f =
      attention_backward(in.s, in.q.data(), in.k.data(), in.v.data(), in.d_o.data(), {o.data(), lse.data()});
  const double tol = 1e-6 * g.dq.cwiseAbs().maxCoeff();
  EXPECT_LE((f.dq - g.dq).cwiseAbs().maxCoeff(), tol);
  EXPECT_LE((f.dk - g.dk).cwiseAbs().maxCoeff(), 1e-6 * g.dk.cwiseAbs().maxCoeff());
  EXPECT_LE((f.dv - g.dv).cwiseAbs().maxCoeff(), 1e-6 * g.dv.cwiseAbs().maxCoeff());
  EXPECT_GT((f.dq - g.dq).cwiseAbs().maxCoeff(), 0.0);  // the stored values are used
  // Group (batch 1, kv head 0) only: its rows equal the full result's, the others are 0.
  const AttentionGrads one = attention_backward(in.s, in.q.data(), in.k.data(), in.v.data(), in.d_o.data(), {}, {2});
  for (int64_t j = 0; j < s.seq_k; ++j)
    for (int64_t kvh = 0; kvh < 2; ++kvh) {
      const int64_t r = (s.seq_k + j) * 2 + kvh, r0 = j * 2 + kvh;
      const Matrix want = kvh == 0 ? Matrix(g.dk.row(r)) : Matrix(Matrix::Zero(1, s.head_dim));
      EXPECT_EQ(Matrix(one.dk.row(r)), want);
      EXPECT_EQ(one.dv.row(r0).cwiseAbs().maxCoeff(), 0.0);
    }
}

TEST(AttentionBackward, RefusesWhatItDoesNotTake) {
  AttentionShape s = shape(2, 2, 4, 4);
  const Inputs in = make(s, 40);
  AttentionShape r = s;
  r.rope.style = Rope::Style::neox;
  EXPECT_THROW(attention_backward(r, in.q.data(), in.k.data(), in.v.data(), in.d_o.data()), std::invalid_argument);
  r = s;
  r.score.sinks = {0.5, 0.5};
  EXPECT_THROW(attention_backward(r, in.q.data(), in.k.data(), in.v.data(), in.d_o.data()), std::invalid_argument);
  r = s;
  r.heads = 3;
  EXPECT_THROW(attention_backward(r, in.q.data(), in.k.data(), in.v.data(), in.d_o.data()), std::invalid_argument);
}

}  // namespace
}  // namespace attnbench::ref

// The op (app/ops/attention_backward.cpp): its keys, its work, its output and the rows it
// always checks. Nothing here needs a GPU.
#include "app/case.hpp"
#include "app/op.hpp"
#include "app/ops/heads.hpp"
#include "app/problem.hpp"

namespace attnbench {
namespace {

CasePoint point(const std::string& shape, const std::string& dtype = "bf16") {
  return parse_case("op = \"attention_backward\"\ndtype = \"" + dtype + "\"\n[shape]\n" + shape, "t.toml", {})
      .points.at(0);
}

// A case the loader refuses, and its message.
std::string refusal(const std::string& shape, const std::string& dtype = "bf16") {
  try {
    point(shape, dtype);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

const std::string kBase = "batch = 2\nheads = 4\nseq_q = 33\nhead_dim = 64\n";

TEST(AttentionBackwardOp, RefusesBadShapesWithClearMessages) {
  EXPECT_NE(refusal(kBase + "kv_heads = 3\n").find("heads (4) must be a multiple of kv_heads (3)"), std::string::npos)
      << refusal(kBase + "kv_heads = 3\n");
  EXPECT_NE(refusal("batch = 2\nheads = 4\nseq_q = 33\nhead_dim = 60\n").find("multiple of 8"), std::string::npos);
  EXPECT_NE(refusal("batch = 2\nheads = 4\nseq_q = 33\nhead_dim = 264\n").find("at most 256"), std::string::npos);
  EXPECT_NE(refusal(kBase + "sinks = true\n").find("attention_backward has no attention sinks yet"), std::string::npos)
      << refusal(kBase + "sinks = true\n");
  EXPECT_NE(refusal(kBase + "rope = \"neox\"\n"), "");  // no RoPE keys
  EXPECT_NE(refusal(kBase, "fp8_e4m3"), "");
  EXPECT_NE(refusal(kBase + "alibi_slopes = [0.5, 0.25]\n").find("2 slopes for 4 query heads"), std::string::npos);
  EXPECT_NE(refusal("batch = 2\nheads = 4\nhead_dim = 64\n").find("seq_q"), std::string::npos);
  EXPECT_EQ(refusal(kBase), "");
}

TEST(AttentionBackwardOp, WorkOutputAndVariants) {
  const auto problem = make_problem(
      point("batch = 2\nheads = 8\nkv_heads = 2\nseq_q = 128\nseq_k = 256\nhead_dim = 64\ncausal = true\n"));
  const Work w = problem->work();
  const double pairs = static_cast<double>(AttentionMask{128, 256, true, 0}.pairs());
  EXPECT_DOUBLE_EQ(w.flops, 10.0 * 2 * 8 * 64 * pairs);  // 2.5 x the forward's 4 · head_dim a pair
  // Read q, o, d_o (2 x 128 x 8 x 64 each) and k, v (2 x 256 x 2 x 64), bf16, and lse (fp32,
  // 2 x 8 x 128); write dq, dk, dv.
  const double q = 2.0 * 128 * 8 * 64, k = 2.0 * 256 * 2 * 64;
  EXPECT_DOUBLE_EQ(w.bytes, 2 * (3 * q + 2 * k) + 4.0 * 2 * 8 * 128 + 2 * (q + 2 * k));
  EXPECT_EQ(problem->output_rows(), 2 * 128 * 8 + 2 * (2 * 256 * 2));
  EXPECT_EQ(problem->output_cols(), 64);
  const auto inputs = problem->input_names();
  ASSERT_EQ(inputs.size(), 6u);
  const std::vector<std::string> names = {"q", "k", "v", "o", "d_o", "lse"};
  const std::vector<bool> drawn = {true, true, true, false, true, false};
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(inputs[i].first, names[i]);
    EXPECT_EQ(inputs[i].second, drawn[i]) << names[i];
  }
  EXPECT_EQ(problem->input_tensors().at(5)->dtype, DType::fp32);
  EXPECT_TRUE(problem->has_faithful());
  const auto variants = problem->variants(assumed_caps());
  ASSERT_FALSE(variants.empty());
  EXPECT_EQ(variants[0].name, "naive");
  EXPECT_EQ(variants[0].skip, "");
  EXPECT_TRUE(variants[0].deterministic);
  for (const char* dtype : {"fp32", "fp16"})
    EXPECT_EQ(make_problem(point(kBase, dtype))->variants(assumed_caps())[0].skip, "") << dtype;
}

// Bottom-right with seq_q > seq_k: queries 0..3 see no key (dQ rows 0); top-left with
// seq_q < seq_k: keys 2..5 are seen by no query (dK and dV rows 0). Both are always checked,
// with the first and last row of each of dQ, dK and dV.
TEST(AttentionBackwardOp, MustCheckRowsCoverEveryPartAndTheZeroRows) {
  const auto blind = make_problem(point("batch = 2\nheads = 3\nseq_q = 6\nseq_k = 2\nhead_dim = 8\ncausal = true\n"));
  const int64_t q_rows = 2 * 6 * 3, k_rows = 2 * 2 * 3;
  const ref::Rows b = blind->must_check_rows();
  for (int64_t r : {q_rows - 1, q_rows, q_rows + k_rows - 1, q_rows + k_rows})
    EXPECT_NE(std::find(b.begin(), b.end(), r), b.end()) << r;
  int64_t blind_rows = 0;
  for (int64_t r : b)
    if (r < q_rows) {
      EXPECT_TRUE(r / 3 % 6 < 4 || r == q_rows - 1) << r;
      blind_rows += r / 3 % 6 < 4;
    }
  EXPECT_GT(blind_rows, 0);
  const auto unseen = make_problem(
      point("batch = 2\nheads = 3\nseq_q = 2\nseq_k = 6\nhead_dim = 8\ncausal = \"top_left\"\n"));
  const int64_t q2 = 2 * 2 * 3, k2 = 2 * 6 * 3;
  int64_t dk = 0, dv = 0;
  for (int64_t r : unseen->must_check_rows()) {
    if (r < q2) continue;
    const int64_t within = (r - q2) % k2, j = within / 3 % 6;
    if (j >= 2) (r < q2 + k2 ? dk : dv) += 1;
  }
  EXPECT_GT(dk, 0);
  EXPECT_GT(dv, 0);
}

}  // namespace
}  // namespace attnbench

// The tiled rungs' tile geometry (kernels/backward/tiles.hpp) against the mask, pair by pair:
// a key block walks exactly the query tiles some pair of which is visible, and its turn on a
// tile's dQ (the deterministic rung) is the number of lower key blocks that walk the tile. A
// mismatch would make the kernels skip gradients or wait forever.
#include "kernels/backward/tiles.hpp"

namespace attnbench::backward_impl {
namespace {

TEST(BackwardTiles, KeyBlocksAndQueryTilesMeetExactlyWhereAPairIsVisible) {
  constexpr int Br = 64;
  int checked = 0;
  for (int seq_q : {1, 5, 64, 65, 130, 200})
    for (int seq_k : {1, 7, 64, 129, 300})
      for (int causal : {0, 1, 2})  // none, bottom-right, top-left
        for (int window : {0, 1, 3, 64, 100})
          for (int Bc : {64, 128}) {
            const int q_offset = causal == 2 ? 0 : seq_k - seq_q;
            const int unlimited = seq_q + seq_k;
            const bool windowed = window > 0 && window < seq_q + seq_k;
            const int lo_reach = windowed ? window - 1 : unlimited;
            const int hi_reach = causal ? 0 : windowed ? window - 1 : unlimited;
            auto sees = [&](int i, int j) {
              const int pos = i + q_offset;
              return (!causal || j <= pos) && (window == 0 || std::abs(pos - j) < window);
            };
            const int key_blocks = (seq_k + Bc - 1) / Bc, tiles = (seq_q + Br - 1) / Br;
            std::vector<std::vector<bool>> meet(key_blocks, std::vector<bool>(tiles, false));
            for (int i = 0; i < seq_q; ++i)
              for (int j = 0; j < seq_k; ++j)
                if (sees(i, j)) meet[j / Bc][i / Br] = true;
            for (int n = 0; n < key_blocks; ++n) {
              const int n0 = n * Bc, n1 = std::min(n0 + Bc, seq_k) - 1;
              const TileRange r = query_tiles(seq_q, q_offset, lo_reach, hi_reach, n0, n1, Br);
              for (int m = 0; m < tiles; ++m) {
                const std::string where = "seq_q " + std::to_string(seq_q) + " seq_k " + std::to_string(seq_k) +
                                          " causal " + std::to_string(causal) + " window " + std::to_string(window) +
                                          " Bc " + std::to_string(Bc) + " key block " + std::to_string(n) +
                                          " query tile " + std::to_string(m);
                ASSERT_EQ(meet[n][m], m >= r.first && m <= r.last) << where;
                if (!meet[n][m]) continue;
                int before = 0, after = 0;
                for (int k = 0; k < n; ++k) before += meet[k][m];
                for (int k = n + 1; k < key_blocks; ++k) after += meet[k][m];
                // A block's turn in either order: the key blocks that see the tile before it.
                ASSERT_EQ(n - first_key_block(q_offset, lo_reach, m, Br, Bc), before) << where;
                ASSERT_EQ(last_key_block(seq_q, seq_k, q_offset, hi_reach, m, Br, Bc) - n, after) << where;
                ++checked;
              }
            }
          }
  EXPECT_GT(checked, 1000);
}

// Rotated turns (rung 5 without a mask bound): at every query tile the key blocks' turns are
// 0 .. key_blocks - 1, each once, in the order the blocks reach the tile on their rotated walks
// (a step of a block's walk = its iteration at that tile); blocks that reach it at the same
// step (more blocks than tiles) keep one order at every tile, the higher first. So a block waits
// only for blocks at an earlier or the same step of theirs, never in a cycle; and the chain is
// idle at the start: each tile's first turn belongs to the block that starts its walk there or
// nearest before it.
TEST(BackwardTiles, RotatedTurnsFollowTheBlocksWalks) {
  int checked = 0;
  for (int tiles = 1; tiles <= 70; tiles += (tiles < 10 ? 1 : 7))
    for (int key_blocks = 1; key_blocks <= 40; key_blocks += (key_blocks < 10 ? 1 : 5)) {
      ASSERT_EQ(rotated_start(0, tiles, key_blocks), 0);
      for (int m = 0; m < tiles; ++m) {
        std::vector<int> by_turn(key_blocks, -1);
        for (int j = 0; j < key_blocks; ++j) {
          const int turn = rotated_turn(m, j, tiles, key_blocks);
          ASSERT_TRUE(turn >= 0 && turn < key_blocks) << tiles << " " << key_blocks << " " << m << " " << j;
          ASSERT_EQ(by_turn[turn], -1) << "two blocks share turn " << turn;
          by_turn[turn] = j;
        }
        auto step = [&](int j) { return ((m - rotated_start(j, tiles, key_blocks)) % tiles + tiles) % tiles; };
        for (int t = 1; t < key_blocks; ++t) {
          const int ahead = by_turn[t - 1], next = by_turn[t];
          ASSERT_LE(step(ahead), step(next)) << "tiles " << tiles << ", key blocks " << key_blocks << ", tile " << m;
          if (step(ahead) == step(next)) ASSERT_GT(ahead, next);  // the same walk: the higher block first
          ++checked;
        }
      }
    }
  EXPECT_GT(checked, 10000);
  // Only where every key block sees every query tile, in the deterministic rung, and with a
  // row of key blocks that fits the card at once.
  EXPECT_TRUE(rotated_turns(true, 8192, 8192, 4096, 4096, 32, 132));
  EXPECT_FALSE(rotated_turns(false, 8192, 8192, 4096, 4096, 32, 132));  // atomics in any order
  EXPECT_FALSE(rotated_turns(true, 8192, 0, 4096, 4096, 32, 132));      // causal
  EXPECT_FALSE(rotated_turns(true, 99, 99, 4096, 4096, 32, 132));       // a window
  EXPECT_FALSE(rotated_turns(true, 65536, 65536, 32768, 32768, 256, 132));  // 256 key blocks on 132 SMs
  EXPECT_FALSE(rotated_turns(true, 8192, 8192, 4096, 4096, 32, 0));     // the SM count unknown
}

// Both block orders of the 1-D grid give every (key block, row) to exactly one block, and start
// a row's key blocks in increasing order (the deterministic rung's turns wait only for lower
// key blocks of the row: one that started later could deadlock the chain). Key-major starts
// every row's key block n before any row's n + 1, so a causal grid's heaviest blocks go first.
TEST(BackwardTiles, BothBlockOrdersCoverEveryBlockOnceAndStartARowInKeyOrder) {
  for (int key_blocks : {1, 3, 32})
    for (int rows : {1, 2, 8, 64})
      for (bool key_major : {false, true})
        for (bool descending : {false, true}) {
          const int total = key_blocks * rows;
          std::vector<int> seen(total, 0), next_key(rows, 0);
          int last_n = descending ? key_blocks - 1 : 0;
          for (int linear = 0; linear < total; ++linear) {
            const BlockCoord c = block_coord(linear, key_blocks, rows, key_major, descending);
            ASSERT_TRUE(c.n_block >= 0 && c.n_block < key_blocks && c.row >= 0 && c.row < rows);
            ++seen[c.row * key_blocks + c.n_block];
            const int expected = next_key[c.row]++;
            ASSERT_EQ(c.n_block, descending ? key_blocks - 1 - expected : expected)
                << "row " << c.row << " starts its key blocks out of its turns' order";
            if (key_major) ASSERT_TRUE(descending ? c.n_block <= last_n : c.n_block >= last_n);
            last_n = c.n_block;
          }
          for (int s : seen) ASSERT_EQ(s, 1);
        }
  // Descending turns where the keys a query sees are bounded above, in the deterministic rungs.
  EXPECT_TRUE(descending_turns(true, 0, 4096, 4096));            // causal
  EXPECT_TRUE(descending_turns(true, 99, 4096, 4096));           // a window
  EXPECT_FALSE(descending_turns(true, 4096 + 4096, 4096, 4096));  // neither: key_reach's "unlimited"
  EXPECT_FALSE(descending_turns(false, 0, 4096, 4096));          // atomics in any order
  // The rule: key-major for causal grids under 4 blocks an SM only.
  EXPECT_TRUE(key_major_order(true, 256, 132));    // GQA b2 h32/4 s4096 d128, Bc 128
  EXPECT_FALSE(key_major_order(true, 2048, 132));  // MHA b4 h16 s4096 d128
  EXPECT_FALSE(key_major_order(false, 256, 132));  // non-causal work is even
  EXPECT_FALSE(key_major_order(true, 256, 0));     // no device caps: the row-major default
}

}  // namespace
}  // namespace attnbench::backward_impl
