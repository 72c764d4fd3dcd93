// The fp64 reference of GPT-2: the math against loops written from its formulas, generation's KV cache against a
// forward pass without one, the greedy tokens against the logits, the rows asked for, and the inputs refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <iomanip>
#include <numeric>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "reference/model.hpp"
#include "tests/expect_near.hpp"

namespace attnbench::ref {
namespace {

using Store = std::function<float(float)>;

// Round to the nearest bf16 (ties to even): the top 16 bits of the float. Finite values only.
const Store kBf16 = [](float v) {
  uint32_t u;
  std::memcpy(&u, &v, sizeof u);
  u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
  std::memcpy(&v, &u, sizeof v);
  return v;
};

// A model's weights, owned: normal with standard deviation `scale` (LayerNorm gains 1 + that), which separates
// the logits of a small model by far more than any rounding.
struct RandomModel {
  Gpt2Config c;
  std::vector<float> wte, wpe, ln1_g, ln1_b, w_qkv, b_qkv, w_o, b_o, ln2_g, ln2_b, w_fc, b_fc, w_proj, b_proj, lnf_g,
      lnf_b;

  RandomModel(const Gpt2Config& config, unsigned seed, float scale = 0.3f) : c(config) {
    std::mt19937 gen(seed);
    std::normal_distribution<float> normal(0, scale);
    const auto draw = [&](std::vector<float>& w, int64_t n, float mean = 0) {
      w.resize(static_cast<size_t>(n));
      for (float& e : w) e = mean + normal(gen);
    };
    const int64_t L = c.layers, d = c.d_model;
    draw(wte, c.vocab * d);
    draw(wpe, c.max_positions * d);
    draw(ln1_g, L * d, 1);
    draw(ln1_b, L * d);
    draw(w_qkv, L * 3 * d * d);
    draw(b_qkv, L * 3 * d);
    draw(w_o, L * d * d);
    draw(b_o, L * d);
    draw(ln2_g, L * d, 1);
    draw(ln2_b, L * d);
    draw(w_fc, L * 4 * d * d);
    draw(b_fc, L * 4 * d);
    draw(w_proj, L * 4 * d * d);
    draw(b_proj, L * d);
    draw(lnf_g, d, 1);
    draw(lnf_b, d);
  }

  Gpt2Weights weights() const {
    return {wte.data(),    wpe.data(),    ln1_g.data(), ln1_b.data(), w_qkv.data(), b_qkv.data(),
            w_o.data(),    b_o.data(),    ln2_g.data(), ln2_b.data(), w_fc.data(),  b_fc.data(),
            w_proj.data(), b_proj.data(), lnf_g.data(), lnf_b.data()};
  }
};

std::vector<int64_t> random_ids(int64_t n, int64_t vocab, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int64_t> id(0, vocab - 1);
  std::vector<int64_t> ids(static_cast<size_t>(n));
  for (int64_t& e : ids) e = id(gen);
  return ids;
}

Rows all_rows(int64_t n) {
  Rows r(static_cast<size_t>(n));
  std::iota(r.begin(), r.end(), 0);
  return r;
}

// The last position's logits of `ids`, written from the formulas with loops over plain indices: no Eigen and
// nothing of the reference's.
Matrix logits_by_hand(const RandomModel& m, const std::vector<int64_t>& ids, const Store& store) {
  const int64_t d = m.c.d_model, H = m.c.heads, hd = d / H, T = static_cast<int64_t>(ids.size());
  const auto S = [&](double v) { return store ? double{store(static_cast<float>(v))} : v; };
  using Rowsd = std::vector<std::vector<double>>;
  const auto layer_norm = [&](const std::vector<double>& v, const float* g, const float* b) {
    double mean = 0, var = 0;
    for (double e : v) mean += e / static_cast<double>(d);
    for (double e : v) var += (e - mean) * (e - mean) / static_cast<double>(d);
    std::vector<double> h(static_cast<size_t>(d));
    for (int64_t i = 0; i < d; ++i) h[i] = S((v[i] - mean) / std::sqrt(var + 1e-5) * g[i] + b[i]);
    return h;
  };
  // Row `out` of W [outs, ins] times v.
  const auto dot = [](const std::vector<double>& v, const float* w, int64_t out, int64_t ins) {
    double acc = 0;
    for (int64_t i = 0; i < ins; ++i) acc += v[i] * w[out * ins + i];
    return acc;
  };

  Rowsd x(static_cast<size_t>(T), std::vector<double>(static_cast<size_t>(d)));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < d; ++i) x[t][i] = double{m.wte[ids[t] * d + i]} + m.wpe[t * d + i];
  for (int64_t l = 0; l < m.c.layers; ++l) {
    const float* w_qkv = m.w_qkv.data() + l * 3 * d * d;
    Rowsd qkv(static_cast<size_t>(T), std::vector<double>(static_cast<size_t>(3 * d)));
    for (int64_t t = 0; t < T; ++t) {
      const std::vector<double> h = layer_norm(x[t], &m.ln1_g[l * d], &m.ln1_b[l * d]);
      for (int64_t c = 0; c < 3 * d; ++c) qkv[t][c] = S(S(dot(h, w_qkv, c, d)) + m.b_qkv[l * 3 * d + c]);
    }
    for (int64_t t = 0; t < T; ++t) {
      std::vector<double> o(static_cast<size_t>(d), 0.0);
      for (int64_t h = 0; h < H; ++h) {
        std::vector<double> p(static_cast<size_t>(t + 1));  // causal: keys 0 .. t
        double max = -1e300, sum = 0;
        for (int64_t j = 0; j <= t; ++j) {
          double s = 0;
          for (int64_t e = 0; e < hd; ++e) s += qkv[t][h * hd + e] * qkv[j][d + h * hd + e];
          p[j] = s / std::sqrt(static_cast<double>(hd));
          max = std::max(max, p[j]);
        }
        for (int64_t j = 0; j <= t; ++j) sum += p[j] = std::exp(p[j] - max);
        for (int64_t e = 0; e < hd; ++e) {
          for (int64_t j = 0; j <= t; ++j) o[h * hd + e] += p[j] / sum * qkv[j][2 * d + h * hd + e];
          o[h * hd + e] = S(o[h * hd + e]);
        }
      }
      for (int64_t c = 0; c < d; ++c) x[t][c] += S(dot(o, m.w_o.data() + l * d * d, c, d)) + m.b_o[l * d + c];
      const std::vector<double> h2 = layer_norm(x[t], &m.ln2_g[l * d], &m.ln2_b[l * d]);
      std::vector<double> g(static_cast<size_t>(4 * d));
      for (int64_t c = 0; c < 4 * d; ++c) {
        const double u = S(dot(h2, m.w_fc.data() + l * 4 * d * d, c, d)) + m.b_fc[l * 4 * d + c];
        g[c] = S(0.5 * u * (1 + std::tanh(std::sqrt(2 / std::acos(-1.0)) * (u + 0.044715 * u * u * u))));
      }
      for (int64_t c = 0; c < d; ++c)
        x[t][c] += S(dot(g, m.w_proj.data() + l * 4 * d * d, c, 4 * d)) + m.b_proj[l * d + c];
    }
  }
  const std::vector<double> hf = layer_norm(x[T - 1], m.lnf_g.data(), m.lnf_b.data());
  Matrix z(1, m.c.vocab);
  for (int64_t v = 0; v < m.c.vocab; ++v) z(0, v) = dot(hf, m.wte.data(), v, d);
  return z;
}

// ------------------------------------------------------------------------------------------------- the math by hand

// Steps 0 (the prefill) and 1 (one decode step through the cache) against the loops, and gpt2_forward's last row.
void check_by_hand(const Gpt2Config& c, int64_t prompt, const Store& store) {
  const RandomModel m(c, 7);
  Gpt2Run run;
  run.prompt = prompt;
  run.generate = 2;
  run.prompt_ids = random_ids(prompt, c.vocab, 8);
  run.store = store;
  const Gpt2Result got = gpt2_generate(c, m.weights(), run, {0, 1});
  expect_near(got.logits.row(0), logits_by_hand(m, run.prompt_ids, store), 1e-12, "prefill");
  std::vector<int64_t> ids = run.prompt_ids;
  ids.push_back(got.tokens[0]);
  expect_near(got.logits.row(1), logits_by_hand(m, ids, store), 1e-12, "decode step");
  const Matrix all = gpt2_forward(c, m.weights(), ids, store);
  expect_near(all.bottomRows(1), logits_by_hand(m, ids, store), 1e-12, "gpt2_forward");
}

TEST(Gpt2, OneLayerByHand) { check_by_hand({1, 4, 2, 5, 4}, 2, nullptr); }

// bf16 storage: 2^-9 relative, so a rounding left out or added is a billion times the tolerance.
TEST(Gpt2, OneLayerByHandWithStorageRounding) { check_by_hand({1, 4, 2, 5, 4}, 2, kBf16); }

// Two layers: the second reads its weights at the stacked offsets.
TEST(Gpt2, TwoLayersByHand) {
  check_by_hand({2, 8, 2, 7, 6}, 3, nullptr);
  check_by_hand({2, 8, 2, 7, 6}, 3, kBf16);
}

// ------------------------------------------------------------------------------------------------ generation

struct Generation {
  Gpt2Config c{2, 32, 4, 50, 12};
  RandomModel m{c, 1};
  Gpt2Run run;
  Generation() {
    run.batch = 2;
    run.prompt = 5;
    run.generate = 6;
    run.prompt_ids = random_ids(run.batch * run.prompt, c.vocab, 2);
  }
  Gpt2Result all() const { return gpt2_generate(c, m.weights(), run, all_rows(run.generate * run.batch)); }
};

// Step t of sequence b through the cache equals a forward pass without one over prompt + tokens[0 .. t - 1]: the
// cache holds every earlier position's keys and values, at their positions, and each sequence of the stacked batch
// reads only its own.
void check_cache(const Store& store) {
  Generation g;
  g.run.store = store;
  const Gpt2Result r = g.all();
  for (int64_t b = 0; b < g.run.batch; ++b) {
    std::vector<int64_t> ids(g.run.prompt_ids.begin() + b * g.run.prompt,
                             g.run.prompt_ids.begin() + (b + 1) * g.run.prompt);
    for (int64_t t = 0; t < g.run.generate; ++t) {
      const Matrix full = gpt2_forward(g.c, g.m.weights(), ids, store);
      expect_near(r.logits.row(t * g.run.batch + b), full.bottomRows(1), 1e-12,
                  "sequence " + std::to_string(b) + ", step " + std::to_string(t));
      ids.push_back(r.tokens[b * g.run.generate + t]);
    }
  }
}

TEST(Gpt2, CacheMatchesForwardWithoutCache) { check_cache(nullptr); }
TEST(Gpt2, CacheMatchesForwardWithoutCacheWithStorageRounding) { check_cache(kBf16); }

// Every step's token is the argmax of its logits (the lowest id among equals) and its margin the top two's gap.
TEST(Gpt2, TokensAreTheArgmaxAndMarginsTheTopTwoGap) {
  Generation g;
  const Gpt2Result r = g.all();
  ASSERT_EQ(r.tokens.size(), static_cast<size_t>(g.run.batch * g.run.generate));
  ASSERT_EQ(r.margins.size(), static_cast<size_t>(g.run.batch * g.run.generate));
  for (int64_t t = 0; t < g.run.generate; ++t) {
    for (int64_t b = 0; b < g.run.batch; ++b) {
      std::vector<double> z(r.logits.row(t * g.run.batch + b).begin(), r.logits.row(t * g.run.batch + b).end());
      const int64_t argmax = std::max_element(z.begin(), z.end()) - z.begin();  // the first of the largest
      std::sort(z.begin(), z.end(), std::greater<>());
      EXPECT_EQ(r.tokens[b * g.run.generate + t], argmax) << "sequence " << b << ", step " << t;
      EXPECT_EQ(r.margins[t * g.run.batch + b], z[0] - z[1]) << "sequence " << b << ", step " << t;
    }
  }
}

// wte's rows 0 and 3 are r, rows 1 and 2 are -r: the logits are (a, -a, -a, a), a tie at the top whichever the sign
// of a, which the lowest id wins with a margin of 0.
TEST(Gpt2, ATieGoesToTheLowestId) {
  const Gpt2Config c{1, 8, 2, 4, 8};
  RandomModel m(c, 3);
  for (int64_t i = 0; i < c.d_model; ++i) {
    m.wte[3 * c.d_model + i] = m.wte[i];
    m.wte[1 * c.d_model + i] = m.wte[2 * c.d_model + i] = -m.wte[i];
  }
  Gpt2Run run;
  run.prompt = 2;
  run.generate = 3;
  run.prompt_ids = {0, 2};
  const Gpt2Result r = gpt2_generate(c, m.weights(), run, all_rows(run.generate));
  for (int64_t t = 0; t < run.generate; ++t) {
    ASSERT_EQ(r.logits(t, 0), r.logits(t, 3));
    ASSERT_NE(r.logits(t, 0), 0.0);
    EXPECT_EQ(r.tokens[t], r.logits(t, 0) > 0 ? 0 : 1) << "step " << t;
    EXPECT_EQ(r.margins[t], 0.0) << "step " << t;
  }
}

// A subset of the rows, shuffled, is those rows of the all-rows result, in the order asked; the tokens and margins do
// not depend on which rows are asked for.
TEST(Gpt2, RowsAreReturnedInTheOrderAsked) {
  Generation g;
  const Gpt2Result all = g.all();
  Rows rows = {0, 3, 4, 7, 8, 11};
  std::shuffle(rows.begin(), rows.end(), std::mt19937(5));
  const Gpt2Result some = gpt2_generate(g.c, g.m.weights(), g.run, rows);
  ASSERT_EQ(some.logits.rows(), static_cast<Eigen::Index>(rows.size()));
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(some.logits.row(static_cast<Eigen::Index>(i)), all.logits.row(rows[i])) << "row " << rows[i];
  }
  EXPECT_EQ(some.tokens, all.tokens);
  EXPECT_EQ(some.margins, all.margins);
  EXPECT_EQ(gpt2_generate(g.c, g.m.weights(), g.run, {}).logits.rows(), 0);
}

// ------------------------------------------------------------------------------------------------------ bad inputs

TEST(Gpt2, BadInputsAreRefused) {
  Generation g;
  const Gpt2Weights w = g.m.weights();
  const auto generate = [&](const Gpt2Config& c, const Gpt2Run& run, const Rows& rows = {0}) {
    return gpt2_generate(c, w, run, rows);
  };
  EXPECT_NO_THROW(generate(g.c, g.run));

  Gpt2Run run = g.run;
  run.prompt_ids[3] = g.c.vocab;
  EXPECT_THROW(generate(g.c, run), std::invalid_argument) << "id >= vocab";
  run.prompt_ids[3] = -1;
  EXPECT_THROW(generate(g.c, run), std::invalid_argument) << "negative id";

  run = g.run;
  run.generate = g.c.max_positions - run.prompt + 1;  // the last input at position max_positions - 1
  EXPECT_NO_THROW(generate(g.c, run));
  ++run.generate;
  EXPECT_THROW(generate(g.c, run), std::invalid_argument) << "prompt + generate - 1 > max_positions";

  Gpt2Config c = g.c;
  c.heads = 5;
  EXPECT_THROW(generate(c, g.run), std::invalid_argument) << "d_model % heads != 0";
  c = g.c;
  c.layers = 0;
  EXPECT_THROW(generate(c, g.run), std::invalid_argument) << "no layers";

  run = g.run;
  run.prompt_ids.pop_back();
  EXPECT_THROW(generate(g.c, run), std::invalid_argument) << "prompt_ids not batch x prompt";
  run = g.run;
  run.generate = 0;
  EXPECT_THROW(generate(g.c, run), std::invalid_argument) << "generate 0";

  EXPECT_THROW(generate(g.c, g.run, {g.run.generate * g.run.batch}), std::out_of_range) << "row past the end";
  EXPECT_THROW(generate(g.c, g.run, {-1}), std::out_of_range) << "negative row";

  Gpt2Weights missing = w;
  missing.b_fc = nullptr;
  EXPECT_THROW(gpt2_generate(g.c, missing, g.run, {0}), std::invalid_argument) << "a weight missing";

  EXPECT_THROW(gpt2_forward(g.c, w, {1, g.c.vocab}, nullptr), std::invalid_argument) << "forward: id >= vocab";
  EXPECT_THROW(gpt2_forward(g.c, w, {}, nullptr), std::invalid_argument) << "forward: no ids";
  EXPECT_THROW(gpt2_forward(g.c, w, std::vector<int64_t>(g.c.max_positions + 1, 0), nullptr), std::invalid_argument)
      << "forward: more ids than positions";
}

}  // namespace
}  // namespace attnbench::ref
