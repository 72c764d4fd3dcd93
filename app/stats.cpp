#include "app/stats.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace attnbench {

double quantile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (pos - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]);
}

Summary summarize(std::vector<double> samples) {
  Summary s;
  if (samples.empty()) return s;
  std::sort(samples.begin(), samples.end());
  s.samples = static_cast<int64_t>(samples.size());
  s.min = samples.front();
  s.max = samples.back();
  s.median = quantile(samples, 0.5);
  s.q1 = quantile(samples, 0.25);
  s.q3 = quantile(samples, 0.75);
  s.mean = std::accumulate(samples.begin(), samples.end(), 0.0) / static_cast<double>(samples.size());
  std::vector<double> dev(samples.size());
  for (size_t i = 0; i < samples.size(); ++i) dev[i] = std::fabs(samples[i] - s.median);
  std::sort(dev.begin(), dev.end());
  s.noise = s.median > 0 ? 1.4826 * quantile(dev, 0.5) / s.median : 0;
  return s;
}

bool StoppingRule::done(const std::vector<double>& samples, double elapsed_ms) const {
  if (elapsed_ms >= max_time_ms) return true;
  const auto n = static_cast<int>(samples.size());
  if (n < min_samples || elapsed_ms < min_time_ms) return false;
  const double noise = summarize(samples).noise;
  if (noise <= max_noise) return true;
  // Noise that has not improved over the last `patience` samples will not reach
  // max_noise by waiting: the spread is the kernel's, not the estimate's.
  if (n >= min_samples + patience) {
    const std::vector<double> earlier(samples.begin(), samples.end() - patience);
    return noise >= 0.98 * summarize(earlier).noise;
  }
  return false;
}

}  // namespace attnbench
