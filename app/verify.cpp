#include "app/verify.hpp"

#include <algorithm>
#include <cmath>
#include <set>

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
