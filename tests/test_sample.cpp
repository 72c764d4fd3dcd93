// The sample op on the CPU: Philox against Random123's known answers, the fp64 reference's
// filters and draw on hand-made rows, the near-tie rule and how often it fires on realistic
// rows, the case keys' refusals, work() and what the variants refuse; the LM-head form's logits,
// bound and cases (SampleLmHead).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <tuple>
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
namespace fs = std::filesystem;

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

// Every rung of given logits runs every dtype; the sort refuses what its int-counted CUB call
// cannot hold. (The LM-head form's rungs: SampleLmHead.CaseAndVariants.)
TEST(SampleCase, Supports) {
  const DeviceCaps caps = assumed_caps();
  SampleParams p;
  p.batch = 64;
  p.vocab = 256000;
  for (DType t : {DType::fp32, DType::fp16, DType::bf16}) {
    p.dtype = t;
    for (const auto& v : sample_variants())
      if (v.applies(p)) EXPECT_EQ(v.supports(p, caps), "") << v.name;
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

// ---- The LM-head form (shape.hidden = d > 0): logits = hidden · Wᵀ, computed, not given. ----

namespace {

// Rows [rows, d] and an LM head [vocab, d] as the op draws them (hidden N(0, 1), W N(0, 4.5² / d))
// in `dtype`: logits N(0, 4.5²).
struct LmHead {
  int64_t rows, vocab, d;
  std::vector<float> h, w;
};

LmHead lm_head(int64_t rows, int64_t vocab, int64_t d, DType dtype, uint64_t seed) {
  LmHead l{rows, vocab, d, std::vector<float>(static_cast<size_t>(rows * d)),
           std::vector<float>(static_cast<size_t>(vocab * d))};
  const float scale = 4.5f / std::sqrt(static_cast<float>(d));
  for (size_t i = 0; i < l.h.size(); ++i) l.h[i] = round_to(dtype, random_normal(seed, 0, i));
  for (size_t i = 0; i < l.w.size(); ++i) l.w[i] = round_to(dtype, scale * random_normal(seed, 1, i));
  return l;
}

ref::Rows all_rows(int64_t n) {
  ref::Rows r(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) r[static_cast<size_t>(i)] = i;
  return r;
}

// A kernel's logits of row r: each one's d products summed by `sum` (fp32 or not), then `after`.
template <class Sum>
std::vector<double> kernel_logits(const LmHead& l, int64_t r, Sum sum) {
  std::vector<double> x(static_cast<size_t>(l.vocab));
  for (int64_t t = 0; t < l.vocab; ++t) x[static_cast<size_t>(t)] = sum(l.h.data() + r * l.d, l.w.data() + t * l.d);
  return x;
}

// How many rows a kernel's tokens fail, and in how many its token differs from the fp64 draw's.
struct Verdict {
  int64_t failed = 0, differ = 0;
};

template <class Sum>
Verdict judge_kernel(const LmHead& l, const ref::SampleOptions& o, uint64_t seed, Sum sum) {
  const std::vector<ref::SampleDraw> want =
      ref::sample_lm_head(l.h.data(), l.w.data(), l.vocab, l.d, all_rows(l.rows), o, seed);
  Verdict v;
  for (int64_t r = 0; r < l.rows; ++r) {
    // The kernel's draw: the rule, exactly, on its logits (its own fp32 draw is the given form's,
    // whose tolerance the tests above check).
    const std::vector<double> x = kernel_logits(l, r, sum);
    const int64_t got = ref::sample_row(x.data(), nullptr, l.vocab, o, sample_uniform(seed, static_cast<uint64_t>(r))).token;
    const ref::SampleDraw& d = want[static_cast<size_t>(r)];
    v.differ += got != d.token;
    v.failed += !compare_integers({{d.token, std::vector<int64_t>(d.accepted.begin() + 1, d.accepted.end())}},
                                  {static_cast<double>(got)}, {r})
                     .passed();
  }
  return v;
}

// fp32 sums of the exact products: one chain in order (rung 4's cuBLAS and rung 5's mma.sync keep
// shorter ones; the bound holds for any order).
double fp32_chain(const float* h, const float* w, int64_t d) {
  float s = 0;
  for (int64_t j = 0; j < d; ++j) s += h[j] * w[j];  // h·w exact in fp32 for 16-bit values
  return s;
}

}  // namespace

// γ_n at n = 2.25 d: d - 1 fp32 additions of 2^-23, or d / 16 tensor-core steps of 18 · 2^-23.
TEST(SampleLmHead, Gamma) {
  EXPECT_DOUBLE_EQ(ref::lm_head_gamma(64), 144 * kEps / (1 - 144 * kEps));
  EXPECT_DOUBLE_EQ(ref::lm_head_gamma(4096), 9216 * kEps / (1 - 9216 * kEps));
}

// A hand-computed row: h = (1, 2), W rows (0.25, 0), (0.5, 0.25), (-1, 0.5): products (0.25, 0),
// (0.5, 0.5), (-1, 1), logits 0.25, 1, 0 exact in fp64; the prefix sums' ranges R = 0.25, 1, 1
// (the last row's partial sum -1 is larger than its total), Σ|h w| = 0.25, 1, 2. At T = 1 the
// weights are e^-0.75, 1, e^-1 over W = 1.8402: the CDF's boundaries at 0.2567 and 0.8001 of it.
TEST(SampleLmHead, ExactDrawOnAHandComputedRow) {
  const std::vector<float> h = {1, 2}, w = {0.25f, 0, 0.5f, 0.25f, -1, 0.5f};
  double x[3], b[3];
  ref::lm_head_logits(h.data(), w.data(), 3, 2, x, b);
  EXPECT_EQ(x[0], 0.25);
  EXPECT_EQ(x[1], 1.0);
  EXPECT_EQ(x[2], 0.0);
  const double g = ref::lm_head_gamma(2), fp64 = 2 * 0x1.0p-53;
  EXPECT_DOUBLE_EQ(b[0], g * 0.25 + fp64 * 0.25);
  EXPECT_DOUBLE_EQ(b[1], g * 1.0 + fp64 * 1.0);
  EXPECT_DOUBLE_EQ(b[2], g * 1.0 + fp64 * 2.0);
  ref::SampleOptions o;
  const std::vector<float> given = {0.25f, 1, 0};
  for (const auto& [u, token] : std::vector<std::pair<float, int64_t>>{{0.1f, 0}, {0.25f, 0}, {0.26f, 1}, {0.5f, 1},
                                                                        {0.79f, 1}, {0.81f, 2}, {0.99f, 2}}) {
    const ref::SampleDraw d = ref::sample_row(x, b, 3, o, u);
    EXPECT_EQ(d.token, token) << "u " << u;
    EXPECT_EQ(d.accepted, (std::vector<int64_t>{token})) << "u " << u << ": not near a boundary";
    EXPECT_EQ(draw(given, o, u).token, token) << "u " << u << ": the given form's draw";
  }
  // Through the rows' entry point, with the op's uniforms.
  const std::vector<ref::SampleDraw> rows = ref::sample_lm_head(h.data(), w.data(), 3, 2, {0}, o, 9);
  EXPECT_EQ(rows[0].token, draw(given, o, sample_uniform(9, 0)).token);
  // Greedy: the max, alone (no other logit within the bounds of it).
  o.temperature = 0;
  const ref::SampleDraw g0 = ref::sample_row(x, b, 3, o, 0.5f);
  EXPECT_EQ(g0.token, 1);
  EXPECT_EQ(g0.accepted, (std::vector<int64_t>{1}));
  // Logits within their bounds of each other are a greedy near-tie: either may be the argmax.
  const double close[2] = {1.0, 1.0 + 1e-9}, wide[2] = {1e-9, 1e-9};
  EXPECT_EQ(ref::sample_row(close, wide, 2, o, 0.5f).accepted, (std::vector<int64_t>{1, 0}));
}

// An honest kernel (fp32 sums of the exact products, within the bound) passes every row, with
// each filter and greedy; one whose logits are wrongly scaled, or rounded to the dtype before the
// draw (bf16: 2^-9 relative, far beyond γ_2d · Σ|h w| at d = 64), fails the rows where its token
// differs from the fp64 draw's, but for the few where it lies within the near-tie window.
TEST(SampleLmHead, TheBoundAcceptsFp32SumsAndRejectsWrongLogits) {
  const LmHead l = lm_head(128, 1000, 64, DType::bf16, 21);
  // The bound holds for the chain in order, backwards, and in k16 blocks chained (mma.sync's).
  for (int64_t r = 0; r < 4; ++r) {
    std::vector<double> x(static_cast<size_t>(l.vocab)), b(x.size());
    ref::lm_head_logits(l.h.data() + r * l.d, l.w.data(), l.vocab, l.d, x.data(), b.data());
    for (int64_t t = 0; t < l.vocab; ++t) {
      const float* hr = l.h.data() + r * l.d;
      const float* wr = l.w.data() + t * l.d;
      float back = 0, blocked = 0;
      for (int64_t j = l.d - 1; j >= 0; --j) back += hr[j] * wr[j];
      for (int64_t k = 0; k < l.d; k += 16) {
        float step = 0;
        for (int64_t j = k; j < k + 16; ++j) step += hr[j] * wr[j];
        blocked += step;
      }
      const double want = x[static_cast<size_t>(t)], bound = b[static_cast<size_t>(t)];
      ASSERT_LE(std::fabs(fp32_chain(hr, wr, l.d) - want), bound);
      ASSERT_LE(std::fabs(back - want), bound);
      ASSERT_LE(std::fabs(blocked - want), bound);
    }
  }
  ref::SampleOptions plain, greedy, filters, sharp, flat;
  greedy.temperature = 0;
  filters.top_k = 50;
  filters.top_p = 0.9f;
  filters.min_p = 0.05f;
  sharp.temperature = 0.7f;
  flat.temperature = 1.5f;
  for (const ref::SampleOptions& o : {plain, greedy, filters, sharp, flat}) {
    const Verdict honest = judge_kernel(l, o, 3, [&](const float* h, const float* w) { return fp32_chain(h, w, l.d); });
    EXPECT_EQ(honest.failed, 0) << "T " << o.temperature << " top_k " << o.top_k;
  }
  int64_t rounded_failed = 0;
  for (const ref::SampleOptions& o : {plain, sharp, flat}) {
    const Verdict scaled =
        judge_kernel(l, o, 3, [&](const float* h, const float* w) { return 1.1 * fp32_chain(h, w, l.d); });
    const Verdict rounded = judge_kernel(l, o, 3, [&](const float* h, const float* w) {
      return round_to(DType::bf16, static_cast<float>(fp32_chain(h, w, l.d)));
    });
    std::printf("T %.1f, vocab 1000, d 64, 128 rows: logits x 1.1 differ in %lld rows, fail %lld; rounded to bf16 "
                "differ in %lld, fail %lld\n",
                o.temperature, static_cast<long long>(scaled.differ), static_cast<long long>(scaled.failed),
                static_cast<long long>(rounded.differ), static_cast<long long>(rounded.failed));
    EXPECT_GT(scaled.failed, 0);
    EXPECT_GE(2 * scaled.failed, scaled.differ);
    EXPECT_GE(2 * rounded.failed, rounded.differ);
    rounded_failed += rounded.failed;
  }
  EXPECT_GT(rounded_failed, 0);
  // Greedy: a row rounded to bf16 ties its top logits, and the first of them may be another token
  // than the fp64 argmax: rejected unless the two lie within their bounds of each other.
  const Verdict tie = judge_kernel(l, greedy, 3, [&](const float* h, const float* w) {
    return round_to(DType::bf16, static_cast<float>(fp32_chain(h, w, l.d)));
  });
  std::printf("greedy: logits rounded to bf16 differ in %lld rows, fail %lld\n", static_cast<long long>(tie.differ),
              static_cast<long long>(tie.failed));
  EXPECT_GT(tie.failed, 0);
  EXPECT_GE(2 * tie.failed, tie.differ);
}

// What the window costs at the perf shape's width: the bound grows as d · R ~ d^1.5 (R, the
// prefix sums' range, ~ sqrt(d)), so at d 4096 a logit's bound is ~4e-3 on N(0, 4.5²) logits
// (printed), where an fp32 chain's actual error is ~3e-5; the near-tie rows it makes are counted,
// and rows scaled by 1.1 or 2 fail.
TEST(SampleLmHead, TheWindowAtWidth4096) {
  const LmHead l = lm_head(8, 8192, 4096, DType::bf16, 5);
  std::vector<double> x(static_cast<size_t>(l.vocab)), b(x.size());
  ref::lm_head_logits(l.h.data(), l.w.data(), l.vocab, l.d, x.data(), b.data());
  double most = 0, err = 0;
  for (int64_t t = 0; t < l.vocab; ++t) {
    most = std::max(most, b[static_cast<size_t>(t)]);
    err = std::max(err, std::fabs(fp32_chain(l.h.data(), l.w.data() + t * l.d, l.d) - x[static_cast<size_t>(t)]));
  }
  ref::SampleOptions o;
  const std::vector<ref::SampleDraw> d =
      ref::sample_lm_head(l.h.data(), l.w.data(), l.vocab, l.d, all_rows(l.rows), o, 4);
  int64_t near = 0;
  for (const auto& r : d) near += r.near_tie;
  std::printf("d 4096: largest logit bound %.3g, an fp32 chain's largest error %.3g; %lld of %lld rows near-ties, "
              "window %.3g of W\n",
              most, err, static_cast<long long>(near), static_cast<long long>(l.rows), d[0].window);
  EXPECT_LT(err, most);
  EXPECT_LT(most, 0.02);
  // A row 1.1x too sharp moves the CDF by a few percent of W at most positions (the mass is spread
  // over the vocabulary), within the ~4% window in most rows: counted, not required to fail.
  for (double scale : {1.1, 2.0}) {
    const Verdict scaled =
        judge_kernel(l, o, 4, [&](const float* h, const float* w) { return scale * fp32_chain(h, w, l.d); });
    std::printf("d 4096: logits x %.1f differ in %lld of %lld rows, fail %lld\n", scale,
                static_cast<long long>(scaled.differ), static_cast<long long>(l.rows),
                static_cast<long long>(scaled.failed));
    if (scale == 2.0) EXPECT_EQ(scaled.failed, scaled.differ);
    EXPECT_GT(scaled.failed, 0);
  }
}

// The op: the key, its refusal of fp32, the inputs, work() and which rungs each form lists.
TEST(SampleLmHead, CaseAndVariants) {
  const CasePoint p = point("batch = 8\nvocab = 128256\nhidden = 4096\n");
  EXPECT_EQ(p.shape.num("hidden"), 4096);
  EXPECT_EQ(point("batch = 8\nvocab = 1000\n").shape.num("hidden"), 0);
  expect_has(error_of("op = \"sample\"\ndtype = \"fp32\"\n[shape]\nbatch = 1\nvocab = 10\nhidden = 64\n"),
             {"hidden", "fp16 or bf16"});
  expect_has(error_of("op = \"sample\"\n[shape]\nbatch = 1\nvocab = 10\nhidden = -1\n"), {"hidden"});
  const auto problem = make_problem(p);
  // W and hidden read once, the tokens written; 2d + 3 FLOPs a logit.
  EXPECT_DOUBLE_EQ(problem->work().bytes, (128256.0 + 8) * 4096 * 2 + 8 * 4);
  EXPECT_DOUBLE_EQ(problem->work().flops, (2.0 * 4096 + 3) * 8 * 128256);
  EXPECT_EQ(problem->output_rows(), 8);
  std::vector<std::string> listed;
  for (const VariantChoice& v : problem->variants(assumed_caps()))
    if (v.applies) {
      listed.push_back(v.name);
      EXPECT_EQ(v.skip, "") << v.name;
    }
  EXPECT_EQ(listed, (std::vector<std::string>{"gemm_then_sample", "fused_lm_head"}));
  EXPECT_EQ(problem->workspace("gemm_then_sample"), 8u * 128256 * 4);
  // fused_lm_head: a summary of 8 bytes per (row, 16-token tile), 8016 tiles at vocab 128256.
  EXPECT_EQ(problem->workspace("fused_lm_head"), 8u * 8016 * 8);
  // The given form lists the first three, and gemm_then_sample refuses it.
  const auto given = make_problem(point("batch = 8\nvocab = 1000\n"));
  listed.clear();
  for (const VariantChoice& v : given->variants(assumed_caps())) {
    if (v.applies) listed.push_back(v.name);
    if (v.name == std::string("gemm_then_sample")) EXPECT_NE(v.skip.find("hidden > 0"), std::string::npos);
  }
  EXPECT_EQ(listed, (std::vector<std::string>{"sort", "pivot", "cluster"}));
  // The params: the rungs 1-3 refuse the LM-head form, gemm_then_sample fp32.
  SampleParams s;
  s.batch = 8;
  s.vocab = 1000;
  s.d = 64;
  s.dtype = DType::bf16;
  for (const auto& v : sample_variants())
    if (!v.applies(s)) EXPECT_NE(v.supports(s, assumed_caps()).find("hidden = 0"), std::string::npos) << v.name;
  s.dtype = DType::fp32;
  EXPECT_NE(sample_variants()[3].supports(s, assumed_caps()).find("fp16/bf16"), std::string::npos);
  EXPECT_NE(sample_variants()[4].supports(s, assumed_caps()).find("fp16/bf16"), std::string::npos);
}

// What fused_lm_head takes: temperature and greedy, batch 1-64, d a multiple of 64, sm_80+; its
// summaries' workspace rounds up a tile past the vocabulary's end.
TEST(SampleLmHead, FusedSupportsAndWorkspace) {
  const auto& fused = sample_variants()[4];
  ASSERT_EQ(std::string(fused.name), "fused_lm_head");
  const DeviceCaps caps = assumed_caps();
  SampleParams s;
  s.batch = 64;
  s.vocab = 128256;
  s.d = 4096;
  s.dtype = DType::bf16;
  EXPECT_EQ(fused.supports(s, caps), "");
  s.temperature = 0;
  EXPECT_EQ(fused.supports(s, caps), "");
  s.temperature = 0.7f;
  EXPECT_EQ(fused.supports(s, caps), "");
  for (const auto& [field, why] : std::vector<std::pair<int, const char*>>{{0, "top-k"}, {1, "top-p"}, {2, "min-p"}}) {
    SampleParams f = s;
    if (field == 0) f.top_k = 50;
    if (field == 1) f.top_p = 0.9f;
    if (field == 2) f.min_p = 0.05f;
    EXPECT_NE(fused.supports(f, caps).find(why), std::string::npos) << why;
    EXPECT_NE(fused.supports(f, caps).find("whole row"), std::string::npos) << why;
    EXPECT_EQ(sample_variants()[3].supports(f, caps), "") << "gemm_then_sample takes " << why;
    f.temperature = 0;  // greedy ignores the filters
    EXPECT_EQ(fused.supports(f, caps), "") << why;
  }
  SampleParams f = s;
  f.top_k = 128256;  // >= vocab: off
  EXPECT_EQ(fused.supports(f, caps), "");
  f = s;
  f.batch = 65;
  EXPECT_NE(fused.supports(f, caps).find("<= 64"), std::string::npos);
  f = s;
  f.d = 4096 + 32;
  EXPECT_NE(fused.supports(f, caps).find("multiple of 64"), std::string::npos);
  DeviceCaps turing = caps;
  turing.cc_major = 7;
  EXPECT_NE(fused.supports(s, turing).find("sm_80"), std::string::npos);
  for (const auto& [batch, vocab, bytes] :
       std::vector<std::tuple<int64_t, int64_t, size_t>>{{1, 2, 256}, {1, 17, 256}, {3, 1000, 3 * 63 * 8 + 256 - 3 * 63 * 8 % 256},
                                                         {64, 128256, 64u * 8016 * 8}}) {
    f = s;
    f.batch = batch;
    f.vocab = vocab;
    EXPECT_EQ(fused.workspace(f), bytes) << batch << " x " << vocab;
  }
}

// Every shipped case of the LM-head form parses, gemm_then_sample (the baseline) runs every point,
// fused_lm_head every point without a filter.
TEST(SampleLmHead, TheCasesParse) {
  int64_t points = 0, files = 0, fused = 0;
  for (const auto& e : fs::recursive_directory_iterator(std::string(ATTNBENCH_SOURCE_DIR) + "/cases")) {
    const std::string name = e.path().filename().string();
    if (e.path().extension() != ".toml" || name.find("lm_head") == std::string::npos) continue;
    const Case c = load_case(e.path().string(), {});
    ++files;
    EXPECT_EQ(c.op, "sample") << name;
    for (const CasePoint& p : c.points) {
      EXPECT_GT(p.shape.num("hidden"), 0) << name;
      EXPECT_EQ(p.baseline, "gemm_then_sample") << name;
      const auto problem = make_problem(p);
      const bool filtered = p.shape.real("temperature") > 0 &&
                            (p.shape.num("top_k") > 0 || p.shape.real("top_p") < 1 || p.shape.real("min_p") > 0);
      for (const VariantChoice& v : problem->variants(assumed_caps())) {
        if (v.name == std::string("gemm_then_sample")) EXPECT_EQ(v.skip, "") << name << " [" << p.label << "]";
        if (v.name == std::string("fused_lm_head"))
          EXPECT_EQ(v.skip.empty(), !filtered) << name << " [" << p.label << "]: " << v.skip;
      }
      fused += !filtered;
      ++points;
    }
  }
  EXPECT_EQ(files, 7);  // cases/sample/lm_head*.toml (3), cases/perf/sample_lm_head-*.toml (3), the smoke case
  EXPECT_GT(points, 80);
  EXPECT_GT(fused, 60);  // every point but lm_head-filters.toml's filtered ones runs the fused rung too
}

namespace {

// fused_lm_head's draw (5_fused_lm_head.cu) on the host, in fp32 and in the kernel's orders, from
// a row's fp32 logits: the 16-token tiles' summaries (max m_i; Σ exp((x - m_i) / T), a pair a lane
// then a tree over 8 lanes), the largest m_i, the tiles' weights S_i = s_i · exp((m_i - M) / T)
// summed in runs of `per` tiles then over the runs, and the token inside the tile where u · W
// falls, each weight exp((x - m_i) / T) · exp((m_i - M) / T). (The scan's order over the runs is
// CUB's; here a chain, as deep as the contract allows it to be.)
int64_t fused_draw(const std::vector<float>& x, float temperature, float u, int per) {
  const int64_t n = static_cast<int64_t>(x.size()), tiles = (n + 15) / 16;
  const float inv_t = 1.f / temperature;
  auto wt = [&](float v, float m) { return std::exp((v - m) * inv_t); };
  std::vector<float> m(static_cast<size_t>(tiles)), s(m.size());
  for (int64_t i = 0; i < tiles; ++i) {
    float lane[8];
    float mi = -INFINITY;
    for (int64_t k = 0; k < 16 && i * 16 + k < n; ++k) mi = std::max(mi, x[static_cast<size_t>(i * 16 + k)]);
    for (int g = 0; g < 8; ++g) {
      const int64_t r0 = i * 16 + g, r1 = r0 + 8;
      lane[g] = (r0 < n ? wt(x[static_cast<size_t>(r0)], mi) : 0.f) + (r1 < n ? wt(x[static_cast<size_t>(r1)], mi) : 0.f);
    }
    for (int off = 1; off < 8; off <<= 1)
      for (int g = 0; g < 8; ++g)
        if (g % (2 * off) == 0) lane[g] += lane[g + off];
    m[static_cast<size_t>(i)] = mi;
    s[static_cast<size_t>(i)] = lane[0];
  }
  const float top = *std::max_element(m.begin(), m.end());
  std::vector<float> w(m.size());
  for (size_t i = 0; i < w.size(); ++i) w[i] = s[i] * wt(m[i], top);
  std::vector<float> before(w.size());
  float total = 0;
  for (size_t r = 0; r < w.size(); r += static_cast<size_t>(per)) {
    float run = 0;
    for (size_t i = r; i < std::min(w.size(), r + per); ++i) before[i] = total + run, run += w[i];
    total += run;
  }
  const float target = u * total;
  size_t tile = w.size() - 1;
  for (size_t i = 0; i < w.size(); ++i)
    if (w[i] > 0 && before[i] + w[i] > target) {
      tile = i;
      break;
    }
  float acc = before[tile];
  int64_t last = -1;
  const float factor = wt(m[tile], top);
  for (int64_t k = 0; k < 16 && static_cast<int64_t>(tile) * 16 + k < n; ++k) {
    const int64_t t = static_cast<int64_t>(tile) * 16 + k;
    const float wk = wt(x[static_cast<size_t>(t)], m[tile]) * factor;
    if (wk > 0) last = t;
    if (wk > 0 && acc + wk > target) return t;
    acc += wk;
  }
  return last;
}

}  // namespace

// The fused rung's way of drawing, emulated on the host from honest fp32 logits, gives a token
// the reference accepts on every row, at every temperature and at vocabularies off the tiles,
// and almost always the fp64 draw's own token.
TEST(SampleLmHead, TheFusedDrawIsWithinTheTolerance) {
  for (const int64_t vocab : {int64_t{2}, int64_t{17}, int64_t{1000}, int64_t{32001}}) {
    const LmHead l = lm_head(48, vocab, 64, DType::bf16, 8);
    for (const float temperature : {0.7f, 1.f, 1.5f}) {
      ref::SampleOptions o;
      o.temperature = temperature;
      const std::vector<ref::SampleDraw> want =
          ref::sample_lm_head(l.h.data(), l.w.data(), l.vocab, l.d, all_rows(l.rows), o, 6);
      int64_t failed = 0, equal = 0;
      for (int64_t r = 0; r < l.rows; ++r) {
        std::vector<float> x(static_cast<size_t>(vocab));
        for (int64_t t = 0; t < vocab; ++t)
          x[static_cast<size_t>(t)] = static_cast<float>(fp32_chain(l.h.data() + r * l.d, l.w.data() + t * l.d, l.d));
        const int per = static_cast<int>((ceil_div(vocab, 16) + 255) / 256);
        const int64_t got = fused_draw(x, temperature, sample_uniform(6, static_cast<uint64_t>(r)), per);
        const ref::SampleDraw& d = want[static_cast<size_t>(r)];
        failed += std::find(d.accepted.begin(), d.accepted.end(), got) == d.accepted.end();
        equal += got == d.token;
      }
      EXPECT_EQ(failed, 0) << "vocab " << vocab << ", T " << temperature;
      EXPECT_GE(equal, l.rows - 2) << "vocab " << vocab << ", T " << temperature;
    }
  }
}
