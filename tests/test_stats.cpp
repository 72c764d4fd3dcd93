// Timing statistics, the stopping rule and the bootstrap.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>

#include "app/clocks.hpp"
#include "app/stats.hpp"

using namespace attnbench;

TEST(Stats, QuantilesOfAKnownSet) {
  const Summary s = summarize({5, 1, 4, 2, 3});
  EXPECT_EQ(s.samples, 5);
  EXPECT_DOUBLE_EQ(s.median, 3);
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.max, 5);
  EXPECT_DOUBLE_EQ(s.q1, 2);
  EXPECT_DOUBLE_EQ(s.q3, 4);
  EXPECT_DOUBLE_EQ(s.mean, 3);
  // MAD of {1..5} around 3 is 1.
  EXPECT_NEAR(s.noise, 1.4826 / 3, 1e-12);
}

TEST(Stats, MedianOfEvenCountInterpolates) { EXPECT_DOUBLE_EQ(summarize({1, 2, 3, 10}).median, 2.5); }

TEST(Stats, OneStraySampleBarelyMovesTheNoise) {
  std::vector<double> v(100, 1.0);
  for (size_t i = 0; i < v.size(); ++i) v[i] += 0.001 * static_cast<double>(i % 5);
  const double before = summarize(v).noise;
  v.push_back(50.0);  // a preempted sample
  EXPECT_LT(summarize(v).noise, before * 1.5);
  EXPECT_DOUBLE_EQ(summarize(v).max, 50.0);
}

TEST(Stats, EmptyAndConstant) {
  EXPECT_EQ(summarize({}).samples, 0);
  EXPECT_DOUBLE_EQ(summarize({2, 2, 2}).noise, 0);
}

TEST(StoppingRule, NeedsMinimumSamplesAndTime) {
  StoppingRule r;  // 10 samples, 100 ms
  const std::vector<double> steady(9, 1.0);
  EXPECT_FALSE(r.done(steady, 500));  // too few samples
  const std::vector<double> ten(10, 1.0);
  EXPECT_FALSE(r.done(ten, 50));  // too little time
  EXPECT_TRUE(r.done(ten, 150));  // quiet, enough of both
}

TEST(StoppingRule, MaxTimeAlwaysEnds) {
  StoppingRule r;
  EXPECT_TRUE(r.done({1.0}, r.max_time_ms));
}

TEST(StoppingRule, NoisySamplesKeepGoingUntilNoiseStopsImproving) {
  StoppingRule r;
  r.patience = 20;
  std::vector<double> v;
  for (int i = 0; i < 12; ++i) v.push_back(i % 2 ? 1.0 : 1.2);  // 10% noise, far above 0.5%
  EXPECT_FALSE(r.done(v, 200));
  for (int i = 0; i < 40; ++i) v.push_back(i % 2 ? 1.0 : 1.2);  // the spread stays put
  EXPECT_TRUE(r.done(v, 400));
}

TEST(Clocks, MeanAndLowSamples) {
  // 1980 MHz maximum: below 1782 MHz (90%) is flagged; 0 means "not read".
  const ClockStats c = summarize_clocks({1980, 1980, 1755, 0, 1410}, 1980);
  EXPECT_EQ(c.samples, 4);
  EXPECT_EQ(c.low_samples, 2);
  EXPECT_DOUBLE_EQ(c.mean_mhz, (1980 + 1980 + 1755 + 1410) / 4.0);
  EXPECT_DOUBLE_EQ(c.max_mhz, 1980);
  EXPECT_EQ(summarize_clocks({}, 1980).samples, 0);
  EXPECT_EQ(summarize_clocks({1000}, 0).low_samples, 0);  // no maximum known: nothing to flag against
}

TEST(Clocks, WithoutNvmlOrTheDeviceTheClockIsInactive) {
  // No GPU at this bus id on any machine: NVML absent or not, it must come up inactive.
  SmClock clock("ffff:ff:1f.7");
  EXPECT_FALSE(clock.active());
  EXPECT_EQ(clock.current_mhz(), 0);
}

// ---- The bootstrap compare judges by.

namespace {

// P(X >= k) for X ~ Binomial(n, p).
double binomial_tail(int n, double p, int k) {
  double sum = 0;
  for (int j = k; j <= n; ++j)
    sum += std::exp(std::lgamma(n + 1.0) - std::lgamma(j + 1.0) - std::lgamma(n - j + 1.0) + j * std::log(p) +
                    (n - j) * std::log1p(-p));
  return p >= 1 ? (k <= n ? 1 : 0) : sum;
}

}  // namespace

TEST(Bootstrap, ResampledMedianOfAnOddSetHasTheExactDistribution) {
  // A resample of n = 7 values has median <= x_(k) exactly when at least 4 of its 7 draws
  // fall on the k smallest: P = P(Binomial(7, k/7) >= 4).
  const std::vector<double> x = {1, 2, 3, 4, 5, 6, 7};
  const int draws = 200000;
  std::vector<int> seen(8, 0);
  SplitMix rng(1);
  for (int i = 0; i < draws; ++i) ++seen[static_cast<size_t>(resampled_median(x, rng))];
  for (int k = 1; k <= 7; ++k) {
    const double p = binomial_tail(7, k / 7.0, 4) - binomial_tail(7, (k - 1) / 7.0, 4);
    const double sigma = std::sqrt(p * (1 - p) / draws);
    EXPECT_NEAR(seen[static_cast<size_t>(k)] / double(draws), p, 5 * sigma + 1e-12) << "median " << k;
  }
}

TEST(Bootstrap, ResampledMedianOfAnEvenSetMatchesResamplingByHand) {
  // n = 6: each resample's median is the mean of its 3rd and 4th smallest. Drawn directly
  // and by drawing 6 values with another generator, the frequencies must agree.
  const std::vector<double> x = {1, 2, 4, 8, 16, 32};
  const int draws = 200000;
  std::map<double, int> direct, by_hand;
  SplitMix rng(2);
  std::mt19937_64 other(3);
  std::uniform_int_distribution<size_t> pick(0, x.size() - 1);
  for (int i = 0; i < draws; ++i) {
    ++direct[resampled_median(x, rng)];
    std::vector<double> r;
    for (size_t j = 0; j < x.size(); ++j) r.push_back(x[pick(other)]);
    ++by_hand[summarize(r).median];
  }
  EXPECT_EQ(direct.size(), by_hand.size());
  for (const auto& [median, count] : by_hand) {
    const double p = count / double(draws), sigma = std::sqrt(2 * p * (1 - p) / draws);
    EXPECT_NEAR(direct[median] / double(draws), p, 5 * sigma + 1e-12) << "median " << median;
  }
}

TEST(Bootstrap, IntervalCoversTheRatioAndNarrowsWithMoreSamples) {
  // Samples spread evenly over +-20% of 1.0 and of 1.3: the ratio of medians is 1.3.
  const auto spread = [](double center, int n) {
    std::vector<double> v;
    for (int i = 0; i < n; ++i) v.push_back(center * (0.8 + 0.4 * i / (n - 1)));
    return v;
  };
  const Interval few = median_ratio_interval(spread(1.0, 15), spread(1.3, 15), 0.95);
  const Interval many = median_ratio_interval(spread(1.0, 1500), spread(1.3, 1500), 0.95);
  EXPECT_LT(few.lo, 1.3);
  EXPECT_GT(few.hi, 1.3);
  EXPECT_LT(many.lo, 1.3);
  EXPECT_GT(many.hi, 1.3);
  EXPECT_LT(many.hi - many.lo, (few.hi - few.lo) / 5);  // width ~ 1/sqrt(n): 10x more samples
  // A higher confidence widens it; the same samples against themselves straddle 1.
  const Interval wide = median_ratio_interval(spread(1.0, 15), spread(1.3, 15), 0.99);
  EXPECT_LT(wide.lo, few.lo);
  EXPECT_GT(wide.hi, few.hi);
  const Interval self = median_ratio_interval(spread(1.0, 15), spread(1.0, 15), 0.95);
  EXPECT_LT(self.lo, 1.0);
  EXPECT_GT(self.hi, 1.0);
}

TEST(Bootstrap, TheSameSamplesGiveTheSameIntervalInAnyOrder) {
  std::vector<double> base, now;
  for (int i = 0; i < 50; ++i) {
    base.push_back(1.0 + 0.01 * ((i * 17) % 50));
    now.push_back(1.1 + 0.01 * ((i * 23) % 50));
  }
  const Interval a = median_ratio_interval(base, now, 0.95);
  std::reverse(base.begin(), base.end());
  const Interval b = median_ratio_interval(base, now, 0.95);
  EXPECT_EQ(a.lo, b.lo);
  EXPECT_EQ(a.hi, b.hi);
  EXPECT_LT(a.lo, a.hi);
}
