// The sample op on the CPU: Philox against Random123's known answers, the fp64 reference's
// filters and draw on hand-made rows, the near-tie rule and how often it fires on realistic
// rows, the case keys' refusals, work() and what the variants refuse.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <cstdio>
#include <vector>

#include "app/numeric.hpp"
#include "app/op.hpp"
#include "app/problem.hpp"
#include "app/verify.hpp"
#include "case_text.hpp"
#include "kernels/common/philox.hpp"
#include "kernels/common/random.hpp"
#include "kernels/sample/pivot.hpp"
#include "kernels/sample/rungs.hpp"
#include "kernels/sample/sample.hpp"
#include "reference/sample.hpp"

using namespace attnbench;
using namespace attnbench::case_text;

namespace {

constexpr double kEps = 0x1.0p-24;

// Logits whose softmax (T = 1) is p: log p, as the fp32 values the reference reads.
std::vector<float> logits_of(std::initializer_list<double> p) {
  std::vector<float> x;
  for (double v : p) x.push_back(static_cast<float>(std::log(v)));
  return x;
}

ref::SampleDraw draw(const std::vector<float>& x, ref::SampleOptions o, float u) {
  return ref::sample_row(x.data(), static_cast<int64_t>(x.size()), o, u);
}

// The tokens a row can give over a fine sweep of u: the kept set (all of it has mass).
std::vector<int64_t> reachable(const std::vector<float>& x, ref::SampleOptions o) {
  std::vector<int64_t> seen;
  for (int i = 0; i < 1000; ++i) {
    const int64_t t = draw(x, o, static_cast<float>((i + 0.5) / 1000)).token;
    if (std::find(seen.begin(), seen.end(), t) == seen.end()) seen.push_back(t);
  }
  std::sort(seen.begin(), seen.end());
  return seen;
}

CasePoint point(const std::string& shape, const std::string& dtype = "bf16") {
  return parse("op = \"sample\"\ndtype = \"" + dtype + "\"\n[shape]\n" + shape).points.at(0);
}

}  // namespace

// Random123's kat_vectors for philox4x32 with 10 rounds.
TEST(Philox, KnownAnswers) {
  struct Kat {
    Philox4 ctr;
    uint32_t k0, k1;
    Philox4 want;
  };
  const Kat kats[] = {
      {{{0, 0, 0, 0}}, 0, 0, {{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}}},
      {{{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}},
       0xffffffffu,
       0xffffffffu,
       {{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}}},
      {{{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}},
       0xa4093822u,
       0x299f31d0u,
       {{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}}},
  };
  for (const Kat& k : kats) {
    const Philox4 got = philox4x32_10(k.ctr, k.k0, k.k1);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(got.v[i], k.want.v[i]) << std::hex << k.ctr.v[0] << " word " << i;
  }
}

// u: 24 bits over 2^24, in [0, 1), the same in float and double; rows and seeds differ.
TEST(Philox, SampleUniform) {
  EXPECT_EQ(sample_uniform(0, 0), static_cast<float>(0x6627e8d5u >> 8) * 0x1.0p-24f);
  double mean = 0;
  for (uint64_t r = 0; r < 4096; ++r) {
    const float u = sample_uniform(42, r);
    ASSERT_GE(u, 0.f);
    ASSERT_LT(u, 1.f);
    EXPECT_EQ(std::ldexp(static_cast<double>(u), 24), std::floor(std::ldexp(static_cast<double>(u), 24)));
    mean += u / 4096.0;
  }
  EXPECT_NEAR(mean, 0.5, 0.02);
  EXPECT_NE(sample_uniform(42, 1), sample_uniform(42, 2));
  EXPECT_NE(sample_uniform(42, 1), sample_uniform(43, 1));
  EXPECT_NE(sample_uniform(1, 0), sample_uniform(uint64_t{1} << 32, 0));  // the seed's high word counts
}

TEST(SampleReference, GreedyIsTheFirstMaximum) {
  ref::SampleOptions o;
  o.temperature = 0;
  o.top_k = 1;  // ignored under greedy, as every filter
  const std::vector<float> x = {1, 3, 3, 2};
  for (float u : {0.f, 0.5f, 0.99f}) {
    const ref::SampleDraw d = draw(x, o, u);
    EXPECT_EQ(d.token, 1);
    EXPECT_EQ(d.accepted, (std::vector<int64_t>{1}));
    EXPECT_FALSE(d.near_tie);
  }
}

// The inverse CDF runs in vocabulary order, not by probability.
TEST(SampleReference, DrawsInVocabularyOrder) {
  const std::vector<float> x = logits_of({0.2, 0.5, 0.3});
  ref::SampleOptions o;
  EXPECT_EQ(draw(x, o, 0.1f).token, 0);
  EXPECT_EQ(draw(x, o, 0.3f).token, 1);
  EXPECT_EQ(draw(x, o, 0.69f).token, 1);
  EXPECT_EQ(draw(x, o, 0.71f).token, 2);
  EXPECT_EQ(draw(x, o, 0.71f).kept, 3);
  // Over seeded rows, the frequencies are the probabilities.
  std::vector<float> rows;
  const int n = 30000;
  for (int r = 0; r < n; ++r) rows.insert(rows.end(), x.begin(), x.end());
  ref::Rows all(n);
  for (int r = 0; r < n; ++r) all[static_cast<size_t>(r)] = r;
  int count[3] = {};
  for (const ref::SampleDraw& d : ref::sample(rows.data(), 3, all, o, 7)) ++count[d.token];
  EXPECT_NEAR(count[0] / double(n), 0.2, 0.015);
  EXPECT_NEAR(count[1] / double(n), 0.5, 0.015);
  EXPECT_NEAR(count[2] / double(n), 0.3, 0.015);
}

// top_k keeps the tokens with fewer than k strictly larger logits: exactly k without ties, and
// every token tied with the k-th largest.
TEST(SampleReference, TopKKeepsKAndItsTies) {
  ref::SampleOptions o;
  o.top_k = 2;
  const std::vector<float> distinct = {0.5f, 3, 1, 2, -1};
  EXPECT_EQ(draw(distinct, o, 0.5f).kept, 2);
  EXPECT_EQ(reachable(distinct, o), (std::vector<int64_t>{1, 3}));
  const std::vector<float> tied = {5, 4, 1, 4, 3};
  EXPECT_EQ(draw(tied, o, 0.5f).kept, 3);
  EXPECT_EQ(reachable(tied, o), (std::vector<int64_t>{0, 1, 3}));
  o.top_k = 1;
  EXPECT_EQ(reachable(tied, o), (std::vector<int64_t>{0}));
  o.top_k = 5;  // >= vocab: off
  EXPECT_EQ(draw(tied, o, 0.5f).kept, 5);
}

// top_p keeps a token while the mass strictly above it is below top_p: the token that crosses
// top_p is kept, the next is not.
TEST(SampleReference, TopPIncludesTheBoundaryToken) {
  const std::vector<float> x = logits_of({0.3, 0.5, 0.2});
  ref::SampleOptions o;
  o.top_p = 0.45f;  // 0.5 alone crosses it
  EXPECT_EQ(reachable(x, o), (std::vector<int64_t>{1}));
  o.top_p = 0.55f;  // above 0.5: the 0.3 token crosses it and is kept
  EXPECT_EQ(reachable(x, o), (std::vector<int64_t>{0, 1}));
  o.top_p = 0.85f;
  EXPECT_EQ(reachable(x, o), (std::vector<int64_t>{0, 1, 2}));
  // A tied group is kept or dropped whole.
  const std::vector<float> tied = logits_of({0.25, 0.25, 0.25, 0.25});
  o.top_p = 0.1f;
  EXPECT_EQ(draw(tied, o, 0.5f).kept, 4);
}

TEST(SampleReference, MinPAndTemperature) {
  const std::vector<float> x = logits_of({0.5, 0.3, 0.2});
  ref::SampleOptions o;
  o.min_p = 0.5f;  // p >= 0.25
  EXPECT_EQ(reachable(x, o), (std::vector<int64_t>{0, 1}));
  // T = 0.5 squares the ratios: 0.3/0.5 -> 0.36 and 0.2/0.5 -> 0.16 of the max.
  o.temperature = 0.5f;
  o.min_p = 0.3f;
  EXPECT_EQ(reachable(x, o), (std::vector<int64_t>{0, 1}));
  o.min_p = 0.4f;
  EXPECT_EQ(reachable(x, o), (std::vector<int64_t>{0}));
  // T = 2: 0.2/0.5 -> sqrt(0.4) = 0.63 of the max.
  o.temperature = 2;
  o.min_p = 0.6f;
  EXPECT_EQ(reachable(x, o), (std::vector<int64_t>{0, 1, 2}));
}

// vLLM's order: min-p, then top-k, then top-p over the renormalised survivors.
TEST(SampleReference, FiltersComposeInVllmOrder) {
  const std::vector<float> x = logits_of({0.4, 0.3, 0.2, 0.1});
  ref::SampleOptions o;
  o.top_k = 3;
  o.top_p = 0.75f;  // of Z = 0.9: 0.675, which 0.4 + 0.3 crosses; of 1 it would keep three
  EXPECT_EQ(reachable(x, o), (std::vector<int64_t>{0, 1}));
  o.top_k = 0;
  EXPECT_EQ(reachable(x, o), (std::vector<int64_t>{0, 1, 2}));
  o.min_p = 0.6f;  // p >= 0.24 first: {0.4, 0.3}, renormalised; top_p 0.5 then keeps 0.4/0.7 alone
  o.top_p = 0.5f;
  EXPECT_EQ(reachable(x, o), (std::vector<int64_t>{0}));
}

// A target exactly on a CDF boundary: the fp64 token is the one after it, the one before is
// accepted as a near-tie; in the middle of a token's interval only that token is.
TEST(SampleReference, NearTieWindow) {
  const std::vector<float> two = {0, 0};
  ref::SampleOptions o;
  const ref::SampleDraw d = draw(two, o, 0.5f);  // u·W = 1 = P(token 0)
  EXPECT_EQ(d.token, 1);
  EXPECT_EQ(d.accepted, (std::vector<int64_t>{1, 0}));
  EXPECT_TRUE(d.near_tie);
  // Equal logits have exact weights (exp(0) = 1): the window is the sum depth's alone,
  // 2 γ_h + ε with h = ceil(n / 1024) + 48.
  const double h = 1 + 48, gamma = h * kEps / (1 - h * kEps);
  EXPECT_DOUBLE_EQ(d.window, 2 * gamma + kEps);
  const std::vector<float> three = {0, 0, 0};
  const ref::SampleDraw mid = draw(three, o, 0.5f);  // u·W = 1.5, the middle of token 1
  EXPECT_EQ(mid.accepted, (std::vector<int64_t>{1}));
  EXPECT_FALSE(mid.near_tie);
  int64_t other = 0;
  EXPECT_TRUE(compare_integers({{d.token, {0}}}, {0}, {0}, &other).passed());
  EXPECT_EQ(other, 1);
  EXPECT_FALSE(compare_integers({{mid.token, {}}}, {0}, {0}).passed());
  EXPECT_FALSE(compare_integers({{mid.token, {}}}, {2}, {0}).passed());
}

// A weight within its fp32 error of min_p: the kept set is uncertain, and the tokens of both
// resolutions are accepted.
TEST(SampleReference, FilterNearTie) {
  const std::vector<float> x = {0, static_cast<float>(std::log(0.5)), -3};
  ref::SampleOptions o;
  o.min_p = 0.5f;
  const ref::SampleDraw d = draw(x, o, 0.7f);
  EXPECT_TRUE(d.filter_near_tie);
  // Kept: u·W = 0.7 · 1.5 = 1.05 lies in token 1; dropped: token 0 alone.
  EXPECT_EQ(d.accepted.size(), 2u);
  EXPECT_NE(std::find(d.accepted.begin(), d.accepted.end(), 0), d.accepted.end());
  EXPECT_NE(std::find(d.accepted.begin(), d.accepted.end(), 1), d.accepted.end());
  o.min_p = 0.4f;  // clear of every weight
  EXPECT_FALSE(draw(x, o, 0.7f).filter_near_tie);
}

// On rows like an LM's (N(0, 4.5²) logits in bf16, the op's draw): a token one kept token away
// from the fp64 one fails unless the row is a near-tie, and near-ties are rare when the kept
// tokens have mass (top_p 0.9), common only when the window spans tokens of tiny mass
// (no filter over 128256 tokens). The counts are printed.
TEST(SampleReference, NeighbourFailsOutsideTheWindow) {
  struct Setting {
    const char* name;
    int64_t vocab;
    ref::SampleOptions o;
    double most_near;  // the largest fraction of near-tie rows expected
  };
  ref::SampleOptions top_p;
  top_p.top_p = 0.9f;
  ref::SampleOptions none;
  for (const Setting& s : {Setting{"top_p 0.9, vocab 32000", 32000, top_p, 0.02},
                           Setting{"no filter, vocab 128256", 128256, none, 1.0}}) {
    const int64_t rows = 64;
    std::vector<float> x(static_cast<size_t>(rows * s.vocab));
    for (size_t i = 0; i < x.size(); ++i) x[i] = round_to(DType::bf16, 4.5f * random_normal(11, 0, i));
    ref::Rows all(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) all[static_cast<size_t>(r)] = r;
    const std::vector<ref::SampleDraw> draws = ref::sample(x.data(), s.vocab, all, s.o, 5);
    int64_t near = 0, failed = 0, kept = 0;
    for (int64_t r = 0; r < rows; ++r) {
      const ref::SampleDraw& d = draws[static_cast<size_t>(r)];
      near += d.near_tie;
      kept += d.kept;
      // The next token in vocabulary order that the filters keep (or the one before).
      const float* row = x.data() + r * s.vocab;
      int64_t neighbour = -1;
      for (int64_t t = d.token + 1; t < s.vocab && neighbour < 0; ++t)
        if (s.o.top_p == 1 || row[t] >= row[d.token]) neighbour = t;
      if (neighbour < 0) neighbour = d.token - 1;
      const bool ok = compare_integers({{d.token, std::vector<int64_t>(d.accepted.begin() + 1, d.accepted.end())}},
                                       {static_cast<double>(neighbour)}, {r})
                          .passed();
      const bool accepted = std::find(d.accepted.begin(), d.accepted.end(), neighbour) != d.accepted.end();
      EXPECT_EQ(ok, accepted);
      failed += !ok;
    }
    std::printf("%s: %lld of %lld rows near-ties, window %.3g of W, %.1f tokens kept a row; a neighbour failed %lld "
                "rows\n",
                s.name, static_cast<long long>(near), static_cast<long long>(rows), draws[0].window,
                static_cast<double>(kept) / rows, static_cast<long long>(failed));
    EXPECT_LE(near, s.most_near * rows);
    EXPECT_GT(failed, 0);
  }
}

TEST(SampleCase, KeysAndRefusals) {
  const CasePoint p = point("batch = 4\nvocab = 1000\n");
  EXPECT_EQ(p.shape.real("temperature"), 1);
  EXPECT_EQ(p.shape.num("top_k"), 0);
  EXPECT_EQ(p.shape.real("top_p"), 1);
  EXPECT_EQ(p.shape.real("min_p"), 0);
  const std::string base = "op = \"sample\"\n[shape]\nbatch = 4\n";
  expect_has(error_of(base + "vocab = 1\n"), {"cases/t.toml:4:", "vocab"});
  expect_has(error_of(base + "vocab = 10\ntop_p = 0\n"), {"top_p must be in (0, 1]"});
  expect_has(error_of(base + "vocab = 10\ntop_p = 1.5\n"), {"top_p"});
  expect_has(error_of(base + "vocab = 10\nmin_p = -0.1\n"), {"min_p"});
  expect_has(error_of(base + "vocab = 10\ntop_k = -1\n"), {"top_k"});
  expect_has(error_of(base + "vocab = 10\ntemperature = 0.0001\n"), {"temperature must be 0 (greedy) or at least"});
  expect_has(error_of(base + "vocab = 10\ntemperature = -1\n"), {"temperature"});
  expect_has(error_of("op = \"sample\"\ndtype = \"fp8_e4m3\"\n[shape]\nbatch = 1\nvocab = 10\n"), {"dtype"});
}

// The floor: the logits read once and the tokens written.
TEST(SampleCase, WorkAndOutput) {
  const auto bf16 = make_problem(point("batch = 8\nvocab = 128256\ntop_p = 0.9\n"));
  EXPECT_DOUBLE_EQ(bf16->work().bytes, 8.0 * 128256 * 2 + 8 * 4);
  EXPECT_DOUBLE_EQ(bf16->work().flops, 3.0 * 8 * 128256);
  EXPECT_EQ(bf16->work().bandwidth, Bandwidth::read);
  EXPECT_EQ(bf16->output_rows(), 8);
  EXPECT_EQ(bf16->output_cols(), 1);
  const auto fp32 = make_problem(point("batch = 64\nvocab = 32000\n", "fp32"));
  EXPECT_DOUBLE_EQ(fp32->work().bytes, 64.0 * 32000 * 4 + 64 * 4);
}

// Every rung runs every dtype; the sort refuses what its int-counted CUB call cannot hold.
TEST(SampleCase, Supports) {
  const DeviceCaps caps = assumed_caps();
  SampleParams p;
  p.batch = 64;
  p.vocab = 256000;
  for (DType t : {DType::fp32, DType::fp16, DType::bf16}) {
    p.dtype = t;
    for (const auto& v : sample_variants()) EXPECT_EQ(v.supports(p, caps), "") << v.name;
  }
  p.dtype = DType::fp8_e4m3;
  for (const auto& v : sample_variants()) EXPECT_NE(v.supports(p, caps), "") << v.name;
  p.dtype = DType::bf16;
  p.batch = 20000;  // 5.1e9 logits
  EXPECT_NE(sample_variants()[0].supports(p, caps).find("2^31"), std::string::npos);
  EXPECT_EQ(sample_variants()[1].supports(p, caps), "");
  EXPECT_EQ(std::string(sample_variants()[0].name), "sort");
  EXPECT_EQ(std::string(sample_variants()[1].name), "pivot");
  EXPECT_EQ(std::string(sample_variants()[2].name), "cluster");
  // The cluster rung needs sm_90's clusters; it splits a row over 8 blocks at small batch, never
  // fewer than 2 (a block's part at most vocab / 2: the depth contract at 512 threads).
  DeviceCaps ampere = caps;
  ampere.cc_major = 8;
  p.batch = 8;
  EXPECT_NE(sample_variants()[2].supports(p, ampere).find("sm_90"), std::string::npos);
  EXPECT_EQ(sample_variants()[1].supports(p, ampere), "");
  for (const auto& [batch, split] : std::vector<std::pair<int64_t, int>>{{1, 8}, {16, 8}, {17, 4}, {33, 4}, {34, 2},
                                                                         {64, 2}, {1000, 2}}) {
    p.batch = batch;
    EXPECT_EQ(sample_impl::cluster_split(p, caps), split) << "batch " << batch;
  }
}

namespace {

// The kernels' order key on the host: fp32's bits, or bf16's top half, made monotone.
long long host_key(float v, DType t) {
  v += 0.f;  // -0 is +0
  uint32_t b;
  std::memcpy(&b, &v, 4);
  if (t == DType::bf16) {
    b >>= 16;
    return (b >> 15) ? (~b & 0xffffu) : (b | 0x8000u);
  }
  return (b >> 31) ? ~b : (b | 0x80000000u);
}

// The value of a host order key (the inverse of host_key).
float host_value(long long key, DType t) {
  const int bits = t == DType::bf16 ? 16 : 32;
  const uint32_t top = 1u << (bits - 1), all = bits == 32 ? ~0u : (1u << bits) - 1;
  const uint32_t k = static_cast<uint32_t>(key);
  uint32_t b = (k & top) ? (k & ~top) : (~k & all);
  if (bits == 16) b <<= 16;
  float v;
  std::memcpy(&v, &b, 4);
  return v;
}

// key_below (2_pivot.cu): the key just below v rounded down to the dtype.
long long host_key_below(float v, DType t) {
  long long k = host_key(v, DType::fp32);
  if (t == DType::bf16) {
    k >>= 16;
    if (host_value(k, t) > v) --k;  // truncated toward zero: one step down for negatives
  }
  return k - 1;
}

// The pivot rung's search (2_pivot.cu) on exact host counts and masses, with the kernel's own
// bracket (kernels/sample/pivot.hpp): the kept tokens are key > the returned lo.
template <class Kept>
long long host_search(const std::vector<long long>& key, const std::vector<double>& w, const std::vector<char>& minp,
                      long long zfloor, long long floor, long long hi, Kept kept, int& passes, double& mass_at) {
  SampleBracket b{floor, hi, 0};
  double z = 0;
  for (bool first = true;; first = false) {
    ++passes;
    long long pivot[kSamplePivots];
    for (int j = 0; j < kSamplePivots; ++j) pivot[j] = bracket_pivot(b, j);
    int count[kSamplePivots] = {};
    double mass[kSamplePivots] = {};
    long long kmin = 1ll << 40;
    for (size_t i = 0; i < key.size(); ++i) {
      if (key[i] <= zfloor || !minp[i]) continue;
      if (first) z += w[i];
      if (key[i] <= b.lo) continue;
      kmin = std::min(kmin, key[i]);
      for (int j = 0; j < kSamplePivots; ++j)
        if (key[i] > pivot[j]) ++count[j], mass[j] += w[i];
    }
    if (first && kept(count[0], mass[0], z)) {
      mass_at = mass[0];
      return b.lo;
    }
    int j = 0;  // the last pivot the filter drops
    for (int i = 1; i < kSamplePivots; ++i)
      if (!kept(count[i], mass[i], z)) j = i;
    mass_at = mass[j];
    const bool inside = j + 1 < kSamplePivots;
    if (bracket_narrow(b, pivot[j], count[j], inside, inside ? pivot[j + 1] : 0, inside ? count[j + 1] : 0, kmin))
      return b.lo;
  }
}

}  // namespace

// The pivot rung's bracket, run on the host over exact statistics, keeps the reference's tokens
// on rows like an LM's, wide ones and ties, within the pass counts its story states (6 for
// 16-bit logits, 11 for fp32, a search); the mean passes are printed.
TEST(SamplePivot, BracketFindsTheReferenceThresholds) {
  struct Setting {
    const char* name;
    DType dtype;
    float scale;  // of N(0, scale²) logits; 0: every logit 0
    ref::SampleOptions o;
  };
  auto opts = [](int64_t k, float p, float min_p) {
    ref::SampleOptions o;
    o.top_k = k;
    o.top_p = p;
    o.min_p = min_p;
    return o;
  };
  const Setting settings[] = {
      {"bf16 top_k 50", DType::bf16, 4.5f, opts(50, 1, 0)},
      {"bf16 top_p 0.9", DType::bf16, 4.5f, opts(0, 0.9f, 0)},
      {"bf16 top_k 50 top_p 0.9", DType::bf16, 4.5f, opts(50, 0.9f, 0)},
      {"bf16 min_p 0.05 top_p 0.9", DType::bf16, 4.5f, opts(0, 0.9f, 0.05f)},
      {"fp32 top_k 50", DType::fp32, 4.5f, opts(50, 1, 0)},
      {"fp32 top_p 0.9", DType::fp32, 4.5f, opts(0, 0.9f, 0)},
      {"fp32 top_k 1000 top_p 0.99", DType::fp32, 1.f, opts(1000, 0.99f, 0)},
      {"bf16 N(0, 72^2) top_p 0.9", DType::bf16, 72.f, opts(0, 0.9f, 0)},
      {"bf16 ties top_k 2 top_p 0.3", DType::bf16, 0.f, opts(2, 0.3f, 0)},
  };
  const int64_t vocab = 32000, rows = 12;
  for (const Setting& s : settings) {
    int most = 0, total = 0;
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<float> x(static_cast<size_t>(vocab));
      for (int64_t i = 0; i < vocab; ++i)
        x[static_cast<size_t>(i)] = round_to(s.dtype, s.scale * random_normal(3, static_cast<uint64_t>(r), i));
      const ref::SampleDraw d = ref::sample_row(x.data(), vocab, s.o, 0.5f);
      const float m = *std::max_element(x.begin(), x.end());
      std::vector<long long> key(x.size());
      std::vector<double> w(x.size());
      std::vector<char> minp(x.size());
      for (size_t i = 0; i < x.size(); ++i) {
        key[i] = host_key(x[i], s.dtype);
        w[i] = std::exp(static_cast<double>(x[i]) - m);
        minp[i] = s.o.min_p <= 0 || w[i] >= s.o.min_p;
      }
      int passes = 0;
      double at = 0;
      const bool top_k = s.o.top_k > 0 && s.o.top_k < vocab;
      const long long hi = host_key(m, s.dtype);
      long long lo = -1;
      if (top_k)
        lo = host_search(
            key, w, minp, -1, -1, hi, [&](int count, double, double) { return count < s.o.top_k; }, passes, at);
      const int k_passes = passes;
      if (s.o.top_p < 1) {
        const long long floor =
            std::max(lo, host_key_below(top_p_floor(m, 1.f, s.o.top_p, static_cast<int>(vocab)), s.dtype));
        lo = host_search(
            key, w, minp, lo, floor, hi, [&](int, double mass, double z) { return mass < s.o.top_p * z; }, passes,
            at);
      }
      int64_t kept = 0;
      for (size_t i = 0; i < x.size(); ++i) kept += key[i] > lo && minp[i];
      if (!d.filter_near_tie) EXPECT_EQ(kept, d.kept) << s.name << ", row " << r;
      double mass = 0;
      for (size_t i = 0; i < x.size(); ++i) mass += key[i] > lo && minp[i] ? w[i] : 0;
      EXPECT_NEAR(at, mass, 1e-9 * mass) << s.name << ": the search's mass above lo is W";
      const int limit = s.dtype == DType::bf16 ? 6 : 11;
      EXPECT_LE(k_passes, limit) << s.name;
      EXPECT_LE(passes - k_passes, limit) << s.name;
      most = std::max(most, passes);
      total += passes;
    }
    std::printf("%s: %.1f search passes a row (most %d)\n", s.name, static_cast<double>(total) / rows, most);
  }
}
