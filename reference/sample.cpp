#include "reference/sample.hpp"

#include <numeric>

#include "kernels/common/philox.hpp"

namespace attnbench::ref {

using namespace detail;

namespace {

constexpr double kEps = 0x1.0p-24;  // fp32's unit roundoff

// Membership of a token in a filter: out, in, or within the filter's tolerance of its threshold.
enum class Side : char { out, in, near };
// Which way the near decisions go: dropped, as fp64 decides them, kept.
enum class Resolve { low, exact, high };

bool keeps(Side s, bool exact, Resolve r) {
  if (s != Side::near) return s == Side::in;
  return r == Resolve::low ? false : r == Resolve::high ? true : exact;
}

struct Row {
  const float* x;
  int64_t n;
  double gamma;                 // γ_h of the sum depth contract
  std::vector<double> w, err;   // weight exp((x - max) / T) and its fp32 error bound δ·w
  std::vector<int64_t> order;   // indices by logit, descending, ties by index
};

// The kept set under a resolution, and whether any decision was near.
std::vector<char> kept_set(const Row& r, const SampleOptions& o, Resolve how, bool& near) {
  const int64_t n = r.n;
  std::vector<char> keep(static_cast<size_t>(n), 1);
  // min-p: p_t >= min_p · p_max, i.e. w_t >= min_p. The kernel's w~ is within err of w, except
  // at the max (exp(0) = 1 in fp32 too).
  if (o.min_p > 0)
    for (int64_t t = 0; t < n; ++t) {
      const double w = r.w[static_cast<size_t>(t)], e = r.err[static_cast<size_t>(t)];
      const bool exact = w >= o.min_p;
      const Side s = std::fabs(w - o.min_p) <= e ? Side::near : exact ? Side::in : Side::out;
      near |= s == Side::near;
      keep[static_cast<size_t>(t)] = keeps(s, exact, how);
    }
  // top-k: keep t when fewer than k tokens have a strictly larger logit (ties with the k-th largest
  // value all kept). Compares of stored logits: exact in any arithmetic.
  if (o.top_k > 0 && o.top_k < n) {
    const float kth = r.x[r.order[static_cast<size_t>(o.top_k - 1)]];
    for (int64_t t = 0; t < n; ++t)
      if (r.x[t] < kth) keep[static_cast<size_t>(t)] = 0;
  }
  // top-p over what is left, renormalised: keep t when the mass of kept tokens with a strictly
  // larger logit is below top_p · Z (the token that crosses top_p is kept; ties decided together).
  if (o.top_p < 1) {
    double z = 0, e = 0;
    for (int64_t t = 0; t < n; ++t)
      if (keep[static_cast<size_t>(t)]) z += r.w[static_cast<size_t>(t)], e += r.err[static_cast<size_t>(t)];
    const double bound = static_cast<double>(o.top_p) * z;
    const double tol = 2 * (e + r.gamma * z) + kEps * z;  // M~ and Z~ each off by e + γZ; p·Z~ rounded
    double above = 0;  // mass of kept tokens with a strictly larger logit than the group's
    for (size_t i = 0; i < r.order.size();) {
      size_t j = i;
      double group = 0;
      const float v = r.x[r.order[i]];
      for (; j < r.order.size() && r.x[r.order[j]] == v; ++j)
        if (keep[static_cast<size_t>(r.order[j])]) group += r.w[static_cast<size_t>(r.order[j])];
      const bool exact = above < bound;
      const Side s = std::fabs(above - bound) <= tol && above > 0 ? Side::near : exact ? Side::in : Side::out;
      near |= s == Side::near && group > 0;
      const bool k = keeps(s, exact, how);
      for (size_t g = i; g < j; ++g)
        if (!k) keep[static_cast<size_t>(r.order[g])] = 0;
      above += group;
      i = j;
    }
  }
  return keep;
}

// The inverse-CDF draw over a kept set in vocabulary order, and the tokens whose CDF interval
// meets the window around u·W.
void draw(const Row& r, const std::vector<char>& keep, float u, SampleDraw& d, bool exact) {
  double total = 0, e = 0;
  int64_t kept = 0;
  for (int64_t t = 0; t < r.n; ++t)
    if (keep[static_cast<size_t>(t)])
      total += r.w[static_cast<size_t>(t)], e += r.err[static_cast<size_t>(t)], ++kept;
  const double target = static_cast<double>(u) * total;
  // A prefix P~ and the kernel's W~ are each within e + γW of the fp64 sums; u·W~ rounds once.
  const double tol = 2 * (e + r.gamma * total) + kEps * total;
  double before = 0;
  int64_t token = -1;
  for (int64_t t = 0; t < r.n; ++t) {
    if (!keep[static_cast<size_t>(t)]) continue;
    const double after = before + r.w[static_cast<size_t>(t)];
    if (token < 0 && after > target) token = t;
    if (after >= target - tol && before <= target + tol &&
        std::find(d.accepted.begin(), d.accepted.end(), t) == d.accepted.end())
      d.accepted.push_back(t);
    before = after;
  }
  if (exact) {
    d.token = token;
    d.kept = kept;
    d.window = tol / total;
  }
}

}  // namespace

int64_t sample_sum_depth(int64_t n) { return (n + 1023) / 1024 + 48; }

SampleDraw sample_row(const float* x, int64_t n, const SampleOptions& o, float u) {
  require(n >= 1, "sample: vocab must be positive");
  SampleDraw d;
  const int64_t argmax = std::max_element(x, x + n) - x;  // the first of equal maxima
  if (o.temperature == 0) {
    d.token = argmax;
    d.accepted = {argmax};
    d.kept = 1;
    return d;
  }
  Row r{x, n, 0, {}, {}, {}};
  const double h = static_cast<double>(sample_sum_depth(n));
  r.gamma = h * kEps / (1 - h * kEps);
  r.w.resize(static_cast<size_t>(n));
  r.err.resize(static_cast<size_t>(n));
  const double m = x[argmax], temp = o.temperature;
  for (int64_t t = 0; t < n; ++t) {
    // The kernel's a~ = (x - m) · fl(1/T) carries three roundings (3ε|a|); expf adds up to 2 ulp
    // (4ε) of its result; 1% over their first-order sum covers the higher orders. A weight in
    // fp32's subnormal range (or flushed to 0) is off by up to 2^-126 whatever its size.
    const double a = (x[t] - m) / temp, w = std::exp(a);
    r.w[static_cast<size_t>(t)] = w;
    r.err[static_cast<size_t>(t)] = x[t] == m ? 0 : 1.01 * (3 * std::fabs(a) + 4) * kEps * w + 0x1.0p-126;
  }
  r.order.resize(static_cast<size_t>(n));
  std::iota(r.order.begin(), r.order.end(), int64_t{0});
  std::stable_sort(r.order.begin(), r.order.end(), [&](int64_t a, int64_t b) { return x[a] > x[b]; });

  bool near = false;
  const std::vector<char> exact = kept_set(r, o, Resolve::exact, near);
  draw(r, exact, u, d, true);
  // The fp64 token first, then the others in vocabulary order.
  std::stable_partition(d.accepted.begin(), d.accepted.end(), [&](int64_t t) { return t == d.token; });
  d.near_tie = d.accepted.size() > 1;
  if (near) {
    d.filter_near_tie = true;
    bool ignored = false;
    for (Resolve how : {Resolve::low, Resolve::high}) draw(r, kept_set(r, o, how, ignored), u, d, false);
  }
  return d;
}

std::vector<SampleDraw> sample(const float* x, int64_t n, const Rows& rows, const SampleOptions& o, uint64_t seed) {
  std::vector<SampleDraw> out(rows.size());
  parallel_for(static_cast<int64_t>(rows.size()), 40.0 * static_cast<double>(n), [&](int64_t i) {
    const int64_t row = rows[static_cast<size_t>(i)];
    out[static_cast<size_t>(i)] = sample_row(x + row * n, n, o, sample_uniform(seed, static_cast<uint64_t>(row)));
  });
  return out;
}

}  // namespace attnbench::ref
