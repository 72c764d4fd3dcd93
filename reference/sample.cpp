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
  const double* x;
  int64_t n;
  double gamma;                 // γ_h of the sum depth contract
  std::vector<double> w, err;   // weight exp((x - max) / T) and its fp32 error bound δ·w
  std::vector<int64_t> order;   // indices by logit, descending, ties by index
  // The LM-head form: e_t = b_t + B, how far a kernel's x~_t - x~_max may be from x_t - max (its
  // own logit's bound b_t, and B = max_s b_s for the max it measures from); empty: exact logits.
  std::vector<double> e;
  double b_max = 0;             // B
  // Kept tokens with a logit strictly above v (fp64): their count in `order`, by binary search.
  int64_t above(double v) const {
    return std::partition_point(order.begin(), order.end(), [&](int64_t t) { return x[t] > v; }) - order.begin();
  }
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
  // value all kept). Compares of stored logits: exact in any arithmetic. Logits a kernel computes
  // (the LM-head form) are each within b of x: t is surely kept when x_t - b_t > kth + B (no more
  // tokens can pass it than pass kth), surely dropped when x_t + b_t < kth - B (the k tokens at or
  // above kth stay above it); between, |x_t - kth| <= e_t, the decision is near.
  if (o.top_k > 0 && o.top_k < n) {
    const double kth = r.x[r.order[static_cast<size_t>(o.top_k - 1)]];
    for (int64_t t = 0; t < n; ++t) {
      const bool exact = r.x[t] >= kth;
      if (r.e.empty()) {
        if (!exact) keep[static_cast<size_t>(t)] = 0;
        continue;
      }
      const Side s = std::fabs(r.x[t] - kth) <= r.e[static_cast<size_t>(t)] ? Side::near
                     : exact                                                 ? Side::in
                                                                             : Side::out;
      near |= s == Side::near;
      if (!keeps(s, exact, how)) keep[static_cast<size_t>(t)] = 0;
    }
  }
  // top-p over what is left, renormalised: keep t when the mass of kept tokens with a strictly
  // larger logit is below top_p · Z (the token that crosses top_p is kept; ties decided together).
  if (o.top_p < 1) {
    double z = 0, e = 0;
    for (int64_t t = 0; t < n; ++t)
      if (keep[static_cast<size_t>(t)]) z += r.w[static_cast<size_t>(t)], e += r.err[static_cast<size_t>(t)];
    const double bound = static_cast<double>(o.top_p) * z;
    const double tol = 2 * (e + r.gamma * z) + kEps * z;  // M~ and Z~ each off by e + γZ; p·Z~ rounded
    if (!r.e.empty()) {
      // Computed logits: which tokens lie above t is itself uncertain. Those with x_s > x_t + e_t
      // surely do, those with x_s <= x_t - e_t surely do not; the kernel's mass above t lies
      // between the two masses (each within tol). Decided token by token, not by tied groups.
      std::vector<double> prefix(r.order.size() + 1, 0);  // kept mass of the first i in order
      for (size_t i = 0; i < r.order.size(); ++i)
        prefix[i + 1] = prefix[i] + (keep[static_cast<size_t>(r.order[i])] ? r.w[static_cast<size_t>(r.order[i])] : 0);
      std::vector<char> out(keep);
      for (int64_t t = 0; t < n; ++t) {
        if (!keep[static_cast<size_t>(t)]) continue;
        const double x = r.x[t], et = r.e[static_cast<size_t>(t)];
        const double exact_above = prefix[static_cast<size_t>(r.above(x))];
        const double surely = prefix[static_cast<size_t>(r.above(x + et))];
        // t itself is among those above x - e_t when e_t > 0: not above itself.
        const double maybe = prefix[static_cast<size_t>(r.above(x - et))] - (et > 0 ? r.w[static_cast<size_t>(t)] : 0);
        const bool exact = exact_above < bound;
        const Side s = maybe + tol < bound ? Side::in : surely - tol >= bound ? Side::out : Side::near;
        near |= s == Side::near;
        out[static_cast<size_t>(t)] = keeps(s, exact, how);
      }
      return out;
    }
    double above = 0;  // mass of kept tokens with a strictly larger logit than the group's
    for (size_t i = 0; i < r.order.size();) {
      size_t j = i;
      double group = 0;
      const double v = r.x[r.order[i]];
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
  const std::vector<double> wide(x, x + n);
  return sample_row(wide.data(), nullptr, n, o, u);
}

SampleDraw sample_row(const double* x, const double* bound, int64_t n, const SampleOptions& o, float u) {
  require(n >= 1, "sample: vocab must be positive");
  SampleDraw d;
  const int64_t argmax = std::max_element(x, x + n) - x;  // the first of equal maxima
  if (o.temperature == 0) {
    d.token = argmax;
    d.accepted = {argmax};
    d.kept = 1;
    // Computed logits: t can be a kernel's argmax when x_t + b_t reaches every x_s - b_s.
    if (bound) {
      double floor = -INFINITY;
      for (int64_t t = 0; t < n; ++t) floor = std::max(floor, x[t] - bound[t]);
      for (int64_t t = 0; t < n; ++t)
        if (t != argmax && x[t] + bound[t] >= floor) d.accepted.push_back(t);
      d.near_tie = d.accepted.size() > 1;
    }
    return d;
  }
  Row r{x, n, 0, {}, {}, {}, {}, 0};
  // The LM-head form's sums pass a weight through 24 additions more at most: fused_lm_head's
  // tile sum (4: a pair, then 3 shuffle levels) and its prefix inside the found tile (16 + 1),
  // beside its run of tiles and CUB's scan, which the given form's depth already counts.
  const double h = static_cast<double>(sample_sum_depth(n) + (bound ? 24 : 0));
  r.gamma = h * kEps / (1 - h * kEps);
  r.w.resize(static_cast<size_t>(n));
  r.err.resize(static_cast<size_t>(n));
  if (bound) {
    r.b_max = *std::max_element(bound, bound + n);
    r.e.resize(static_cast<size_t>(n));
    for (int64_t t = 0; t < n; ++t) r.e[static_cast<size_t>(t)] = bound[t] + r.b_max;
  }
  const double m = x[argmax], temp = o.temperature;
  for (int64_t t = 0; t < n; ++t) {
    // The kernel's a~ = (x - m) · fl(1/T) carries three roundings (3ε|a|); expf adds up to 2 ulp
    // (4ε) of its result; 1% over their first-order sum covers the higher orders. A weight in
    // fp32's subnormal range (or flushed to 0) is off by up to 2^-126 whatever its size.
    const double a = (x[t] - m) / temp, w = std::exp(a);
    r.w[static_cast<size_t>(t)] = w;
    if (r.e.empty()) {
      r.err[static_cast<size_t>(t)] = x[t] == m ? 0 : 1.01 * (3 * std::fabs(a) + 4) * kEps * w + 0x1.0p-126;
    } else {
      // Computed logits: the kernel's argument is off by up to e_t / T before it is rounded
      // (its |a| up to that much larger), so its weight lies within w·exp(±e_t / T)·(1 ± δ):
      // off by at most w·(expm1(e_t / T) + exp(e_t / T)·δ). No weight is exact, the max's neither.
      // δ allows the weight as two exps and a product, exp((x - m_i) / T) · exp((m_i - M) / T)
      // (fused_lm_head's tile max m_i): three roundings of each argument, whose sizes add up to
      // |a|, 2 ulp (4ε) for each expf and ε for the product: (3|a| + 9)ε.
      const double ea = r.e[static_cast<size_t>(t)] / temp;
      const double delta = 1.01 * (3 * (std::fabs(a) + ea) + 9) * kEps;
      r.err[static_cast<size_t>(t)] = w * (std::expm1(ea) + std::exp(ea) * delta) + 0x1.0p-126;
    }
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

double lm_head_gamma(int64_t d) {
  const double n = 2.25 * static_cast<double>(d);
  return n * kEps / (1 - n * kEps);
}

void lm_head_logits(const float* h, const float* w, int64_t vocab, int64_t d, double* x, double* bound) {
  const double gamma = lm_head_gamma(d), fp64 = static_cast<double>(d) * 0x1.0p-53;
  for (int64_t t = 0; t < vocab; ++t) {
    const float* row = w + t * d;
    // The prefix sums C_k (C_0 = 0): every contiguous range's sum is a difference of two of them,
    // so R = max C - min C bounds each partial sum a kernel in K order forms.
    double sum = 0, size = 0, low = 0, high = 0;
    for (int64_t j = 0; j < d; ++j) {
      const double p = static_cast<double>(h[j]) * static_cast<double>(row[j]);  // exact: 24 x 24 bits
      sum += p;
      size += std::fabs(p);
      low = std::min(low, sum);
      high = std::max(high, sum);
    }
    x[t] = sum;
    bound[t] = gamma * (high - low) + fp64 * size;  // the kernel's fp32 error, and fp64's own
  }
}

std::vector<SampleDraw> sample_lm_head(const float* h, const float* w, int64_t vocab, int64_t d, const Rows& rows,
                                       const SampleOptions& o, uint64_t seed) {
  // The logits of every asked row, in vocabulary chunks over the cores (a row at vocab 128256 and
  // d 4096 is 5e8 products), then the draws.
  const int64_t chunk = 4096, chunks = (vocab + chunk - 1) / chunk, count = static_cast<int64_t>(rows.size());
  std::vector<double> x(static_cast<size_t>(count * vocab)), bound(x.size());
  parallel_for(count * chunks, 2.0 * static_cast<double>(chunk * d), [&](int64_t job) {
    const int64_t i = job / chunks, t0 = job % chunks * chunk, t1 = std::min(vocab, t0 + chunk);
    const int64_t row = rows[static_cast<size_t>(i)];
    lm_head_logits(h + row * d, w + t0 * d, t1 - t0, d, x.data() + i * vocab + t0, bound.data() + i * vocab + t0);
  });
  std::vector<SampleDraw> out(rows.size());
  parallel_for(count, 60.0 * static_cast<double>(vocab), [&](int64_t i) {
    const int64_t row = rows[static_cast<size_t>(i)];
    out[static_cast<size_t>(i)] = sample_row(x.data() + i * vocab, bound.data() + i * vocab, vocab, o,
                                             sample_uniform(seed, static_cast<uint64_t>(row)));
  });
  return out;
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
