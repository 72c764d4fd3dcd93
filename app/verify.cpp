#include "app/verify.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

#include "app/numeric.hpp"
#include "kernels/common/random.hpp"

namespace attnbench {

Tolerance default_tolerance(DType t) {
  switch (t) {
    case DType::fp32: return {1e-5, 1e-4};
    case DType::fp16: return {1e-3, 2e-3};       // 2^-10 = 9.8e-4
    case DType::bf16: return {8e-3, 1.6e-2};     // 2^-7 = 7.8e-3
    case DType::fp8_e4m3: return {6e-2, 1.25e-1};  // 2^-3 = 0.125; only used for fp8 KV caches
  }
  return {0, 0};
}

// k_l2: the rel-L2 error averages over every checked element, so an honest kernel's sits
// close to the faithful reference's (measured ratios in docs/measuring.md): 2 leaves room for
// rounding at other points (P normalised before or after its rounding, a running max) and
// still catches a scale off by 1/sqrt(d+1) in bf16. k_max: a maximum over many elements is
// noisier. fp32's floor (2^-17, 128 units in the last place) admits what the faithful
// reference cannot model: the order of long sums (a tree, a strided loop, a split), and
// approximate exp2 and reciprocal; every bug of the mutant suite is far past it.
BoundRule default_bound_rule(DType t) {
  switch (t) {
    case DType::fp32: return {4, 3, std::ldexp(1.0, -17)};
    case DType::fp16: return {4, 2, 0};
    case DType::bf16: return {4, 2, 0};
    case DType::fp8_e4m3: return {4, 2, 0};
  }
  return {4, 2, 0};
}

Bound scaled_bound(const ref::Matrix& ref, const ref::Matrix& faithful, DType store, BoundRule rule,
                   double largest_score) {
  Bound b;
  b.k_max = rule.k_max;
  b.k_l2 = rule.k_l2;
  double err2 = 0, ref2 = 0, store2 = 0, largest = 0;
  for (int64_t r = 0; r < ref.rows(); ++r)
    for (int64_t j = 0; j < ref.cols(); ++j) {
      const double want = ref(r, j), err = std::fabs(faithful(r, j) - want);
      const double stored = round_to(store, static_cast<float>(want)) - want;
      if (std::isfinite(err)) b.faithful_max = std::max(b.faithful_max, err);
      else b.faithful_max = INFINITY;
      err2 += err * err;
      ref2 += want * want;
      store2 += stored * stored;
      largest = std::max(largest, std::fabs(want));
    }
  const double n = static_cast<double>(std::max<int64_t>(1, ref.size()));
  b.rms = std::sqrt(ref2 / n);
  b.faithful_l2 = ref2 > 0 ? std::sqrt(err2 / ref2) : std::sqrt(err2);
  // A score s held in fp32 is off by up to |s| 2^-25, and exp turns that into the same relative
  // error of its weight. An online softmax keeps partial sums relative to their own running
  // maxima, each rounded into the log2 domain (exp2(s log2e - fl(m log2e))), and rescales them
  // to the row's max without taking that rounding back: an error of its weights that grows
  // with |max score|, which the faithful reference, one pass with the row's max, does not
  // have (tests/test_verify.cpp emulates warp_online's 32 lanes on logits to 791: rel-L2 0.41
  // units of 2^-24 |s|). Four units of the largest score: negligible at N(0, 1) inputs
  // (scores of a few units, under fp32's 2^-17), the whole floor at logits of hundreds in fp32.
  b.score_floor = 4 * std::ldexp(1.0, -24) * largest_score;
  b.floor = std::max({ref2 > 0 ? std::sqrt(store2 / ref2) : 0.0, rule.min_floor, b.score_floor});
  // The floor of the max error is at the output's largest value, where a rounding is largest; a
  // reference that is 0 everywhere (every row masked) leaves no scale: the floor is then absolute.
  b.largest = largest;
  b.allowed_max = b.k_max * b.faithful_max + b.floor * (largest > 0 ? largest : 1.0);
  b.allowed_l2 = b.k_l2 * b.faithful_l2 + b.floor;
  return b;
}

Comparison compare_integers(const std::vector<IntegerCheck>& want, const std::vector<double>& got,
                            const ref::Rows& row_ids, int64_t* accepted_other) {
  Comparison c;
  c.rows_checked = static_cast<int64_t>(want.size());
  int64_t other = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    ++c.elements_checked;
    const double g = got[i], w = static_cast<double>(want[i].want);
    if (g == w) continue;
    const auto& also = want[i].also;
    const bool id = std::isfinite(g) && std::fabs(g) < 0x1.0p62 && std::floor(g) == g;  // before any cast
    if (id && std::find(also.begin(), also.end(), static_cast<int64_t>(g)) != also.end()) {
      ++other;
      continue;
    }
    ++c.mismatches;
    const double off = std::isfinite(g) ? std::fabs(g - w) : INFINITY;
    if (c.worst_row < 0 || off > c.max_abs) {
      c.max_abs = off;
      c.worst_row = row_ids[i];
      c.worst_col = 0;
      c.worst_got = g;
      c.worst_ref = w;
    }
  }
  if (accepted_other) *accepted_other = other;
  return c;
}

void apply_bound(Comparison& c, const Bound& b) {
  c.bound = b;
  const auto used = [](double err, double allowed) {
    if (std::isnan(err)) return static_cast<double>(INFINITY);
    return allowed > 0 ? err / allowed : err > 0 ? static_cast<double>(INFINITY) : 0.0;
  };
  // rel_l2 with a reference that is 0 everywhere is the absolute L2 error (compare()).
  c.margin = std::max(used(c.max_abs, b.allowed_max), used(c.rel_l2, b.allowed_l2));
}

std::string fmt_margin(double m) {
  if (!std::isfinite(m)) return "inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, m < 10 ? "%.2f" : m < 1e6 ? "%.0f" : "%.1e", m);
  return buf;
}

std::string to_string(const Coord& c) {
  return "(" + std::to_string(c.b) + ", " + std::to_string(c.h) + ", " + std::to_string(c.i) + ", " +
         std::to_string(c.d) + ")";
}

void Comparison::merge(const Comparison& o) {
  rows_checked += o.rows_checked;
  rows_total = std::max(rows_total, o.rows_total);
  elements_checked += o.elements_checked;
  mismatches += o.mismatches;
  nonfinite += o.nonfinite;
  if (also_wrong.empty()) also_wrong = o.also_wrong;
  if (note.empty()) note = o.note;
  if (o.max_abs > max_abs || worst_row < 0) {
    worst_row = o.worst_row;
    worst_col = o.worst_col;
    worst_got = o.worst_got;
    worst_ref = o.worst_ref;
  }
  if (o.bound && (!bound || o.margin > margin)) {
    bound = o.bound;
    margin = o.margin;
  }
  max_abs = std::max(max_abs, o.max_abs);
  max_rel = std::max(max_rel, o.max_rel);
  rel_l2 = std::max(rel_l2, o.rel_l2);
}

Comparison compare(const ref::Matrix& ref, const std::vector<double>& got, const ref::Rows& row_ids, Tolerance tol,
                   const ref::Matrix* magnitude) {
  Comparison c;
  c.rows_checked = ref.rows();
  double err2 = 0, ref2 = 0, worst_excess = -INFINITY;
  for (int64_t r = 0; r < ref.rows(); ++r) {
    for (int64_t j = 0; j < ref.cols(); ++j) {
      const double want = ref(r, j), have = got[static_cast<size_t>(r * ref.cols() + j)];
      const double err = std::fabs(have - want);
      const double allowed =
          tol.atol + tol.rtol * (magnitude ? std::max(std::fabs(want), std::fabs((*magnitude)(r, j))) : std::fabs(want));
      ++c.elements_checked;
      // NaN compares false everywhere, so test for a pass rather than a failure.
      const bool ok = err <= allowed;
      if (!ok) ++c.mismatches;
      const double excess = std::isnan(err) ? INFINITY : err - allowed;
      if (excess > worst_excess) {
        worst_excess = excess;
        c.worst_row = row_ids[static_cast<size_t>(r)];
        c.worst_col = j;
        c.worst_got = have;
        c.worst_ref = want;
      }
      if (std::isfinite(err)) {
        c.max_abs = std::max(c.max_abs, err);
        if (want != 0) c.max_rel = std::max(c.max_rel, err / std::fabs(want));
        err2 += err * err;
      } else {
        c.max_abs = INFINITY;
      }
      ref2 += want * want;
    }
  }
  c.rel_l2 = ref2 > 0 ? std::sqrt(err2 / ref2) : std::sqrt(err2);
  return c;
}

ref::Rows sample_rows(int64_t total, int64_t max_rows, uint64_t seed, const ref::Rows& must) {
  ref::Rows rows;
  if (total <= 0) return rows;
  if (max_rows <= 0 || max_rows >= total) {
    rows.resize(static_cast<size_t>(total));
    for (int64_t i = 0; i < total; ++i) rows[static_cast<size_t>(i)] = i;
    return rows;
  }
  std::set<int64_t> chosen = {0, total - 1};
  for (int64_t r : must) {
    if (static_cast<int64_t>(chosen.size()) >= max_rows) break;
    if (r >= 0 && r < total) chosen.insert(r);
  }
  // Evenly spread strata, one seeded row in each, so every region of the output
  // (every batch, head and tile edge over trials) gets looked at.
  const int64_t room = max_rows - static_cast<int64_t>(chosen.size());
  for (int64_t s = 0; s < room; ++s) {
    const int64_t lo = total * s / room, hi = total * (s + 1) / room;
    if (hi <= lo) continue;
    chosen.insert(lo + static_cast<int64_t>(random_bits(seed, 0x5a3, static_cast<uint64_t>(s)) %
                                            static_cast<uint64_t>(hi - lo)));
  }
  rows.assign(chosen.begin(), chosen.end());
  return rows;
}

}  // namespace attnbench
