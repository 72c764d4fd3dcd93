#include "app/stats.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "kernels/common/random.hpp"

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

uint64_t SplitMix::bits() {
  // splitmix64(x) mixes x + golden ratio: this is the usual splitmix64 sequence.
  const uint64_t r = splitmix64(counter_);
  counter_ += 0x9e3779b97f4a7c15ull;
  return r;
}

double SplitMix::uniform() { return (static_cast<double>(bits() >> 11) + 0.5) * 0x1.0p-53; }

double SplitMix::normal() {
  const double u1 = uniform(), u2 = uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);  // Box-Muller
}

double SplitMix::gamma(double shape) {
  // Marsaglia and Tsang (2000), "A simple method for generating gamma variables": exact
  // for shape >= 1, about one normal and one uniform per draw.
  const double d = shape - 1.0 / 3, c = 1 / std::sqrt(9 * d);
  while (true) {
    double x = 0, v = 0;
    do {
      x = normal();
      v = 1 + c * x;
    } while (v <= 0);
    v = v * v * v;
    const double u = uniform();
    if (u < 1 - 0.0331 * x * x * x * x || std::log(u) < 0.5 * x * x + d * (1 - v + std::log(v))) return d * v;
  }
}

double SplitMix::beta(double a, double b) {
  const double x = gamma(a);
  return x / (x + gamma(b));
}

double resampled_median(const std::vector<double>& sorted, SplitMix& rng) {
  // A resample draws n indices uniformly, i = floor(n * V) with V uniform in (0, 1). As
  // `sorted` is sorted, the resample's k-th smallest value is sorted[floor(n * V_(k))],
  // with V_(k) the k-th smallest of n uniforms, which is Beta(k, n - k + 1). So the
  // resample's median is drawn directly, whatever n is, instead of drawing n values:
  // thousands of rows with thousands of samples each stay quick.
  const size_t n = sorted.size();
  const auto at = [&](double v) { return sorted[std::min(n - 1, static_cast<size_t>(v * static_cast<double>(n)))]; };
  const double nd = static_cast<double>(n);
  if (n % 2 == 1) {
    const double k = (nd + 1) / 2;
    return at(rng.beta(k, nd - k + 1));
  }
  // Even n: the mean of the (n/2)-th and the next smallest, as summarize() takes it. The
  // next is the smallest of the n/2 uniforms above V_(n/2), each uniform on (V_(n/2), 1);
  // the smallest of m uniforms on (0, 1) is 1 - U^(1/m).
  const double k = nd / 2;
  const double v1 = rng.beta(k, nd - k + 1);
  const double v2 = v1 + (1 - v1) * (1 - std::pow(rng.uniform(), 1 / (nd - k)));
  return (at(v1) + at(v2)) / 2;
}

Interval median_ratio_interval(std::vector<double> base, std::vector<double> now, double confidence, int resamples) {
  std::sort(base.begin(), base.end());
  std::sort(now.begin(), now.end());
  // Any fixed seed will do; a fixed one makes the verdict a function of the samples alone.
  SplitMix rng(0x636f6d70617265ull);
  std::vector<double> ratios(static_cast<size_t>(resamples));
  for (double& r : ratios) {
    const double b = resampled_median(base, rng);
    r = resampled_median(now, rng) / b;
  }
  std::sort(ratios.begin(), ratios.end());
  return {quantile(ratios, (1 - confidence) / 2), quantile(ratios, (1 + confidence) / 2)};
}

}  // namespace attnbench
