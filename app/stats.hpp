// Statistics of timing samples and the rule that decides when to stop sampling.
#pragma once
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

}  // namespace attnbench
