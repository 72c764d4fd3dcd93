// Statistics of timing samples, the rule that decides when to stop sampling, and the
// bootstrap interval `compare` judges two runs by.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace attnbench {

struct Summary {
  int64_t samples = 0;
  double median = 0, min = 0, max = 0, q1 = 0, q3 = 0, mean = 0;
  // Relative noise: 1.4826 * median absolute deviation / median, a spread
  // estimate that one stray sample (a clock dip, a preemption) cannot inflate.
  double noise = 0;
};

// Quantile q in [0, 1] of sorted values, linear between neighbours.
double quantile(const std::vector<double>& sorted, double q);
Summary summarize(std::vector<double> samples);

// Keep sampling until at least `min_samples` samples and `min_time_ms` have
// passed and the noise is below `max_noise`, or the noise has stopped improving
// over the last `patience` samples; `max_time_ms` always ends it.
struct StoppingRule {
  int min_samples = 10;
  double min_time_ms = 100, max_noise = 0.005, max_time_ms = 2000;
  int patience = 50;
  bool done(const std::vector<double>& samples, double elapsed_ms) const;
};

// A fixed-seed generator for the bootstrap: splitmix64 over a counter, so an interval
// depends on its two sample sets only, never on the run or the rows around it.
class SplitMix {
 public:
  explicit SplitMix(uint64_t seed) : counter_(seed) {}
  uint64_t bits();
  double uniform();                 // in (0, 1): never 0, so its log is finite
  double normal();                  // standard normal
  double gamma(double shape);       // shape >= 1
  double beta(double a, double b);  // a, b >= 1

 private:
  uint64_t counter_;
};

// The median of one bootstrap resample of `sorted` (n draws with replacement), as
// summarize() takes a median. Drawn in O(1), not O(n): see stats.cpp.
double resampled_median(const std::vector<double>& sorted, SplitMix& rng);

// A two-sided interval of median(now) / median(base): the percentile bootstrap, both
// sample sets resampled independently `resamples` times with a fixed seed, so the same
// samples always give the same interval. `confidence` in (0, 1), e.g. 0.95.
struct Interval {
  double lo = 0, hi = 0;
};
constexpr int kBootstrapResamples = 2000;
// Fewer samples than this on either side make no bootstrap interval worth the name.
constexpr size_t kMinBootstrapSamples = 5;
Interval median_ratio_interval(std::vector<double> base, std::vector<double> now, double confidence,
                               int resamples = kBootstrapResamples);

}  // namespace attnbench
