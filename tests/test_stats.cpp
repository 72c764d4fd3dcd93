// Timing statistics and the stopping rule.
#include <gtest/gtest.h>

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
