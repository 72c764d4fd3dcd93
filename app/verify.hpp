// Verification against the fp64 reference, on the sampled rows, plus a scan of the whole
// output for elements the kernel never wrote (the output is NaN-poisoned before each launch).
// Where the op has a dtype-faithful reference (reference/common.hpp, Faithful) the verdict is
// the scaled bound (docs/measuring.md, "The bounds"): the variant's max error and rel-L2 error
// each within k times the faithful reference's own, plus a floor. Elsewhere, and beside it
// when a case sets atol or rtol, per element |got - ref| <= atol + rtol * |ref|.
#pragma once
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "kernels/common/dtype.hpp"
#include "reference/reference.hpp"

namespace attnbench {

struct Tolerance {
  double atol = 0, rtol = 0;
};

// Defaults per storage dtype (docs/design.md): about one unit in the
// last place of the output's storage type, twice that relative, so storage
// rounding passes and a wrong index or a lost term does not. fp32 leaves
// room for fp32 accumulation over long sums.
Tolerance default_tolerance(DType t);

// The scaled bound's constants for one output dtype: a variant passes when
//   max |got - ref| <= k_max * max |faithful - ref| + floor * max |ref|   and
//   rel_l2(got)     <= k_l2  * rel_l2(faithful)     + floor,
// floor = max(the rel-L2 error of the reference itself stored in the dtype, min_floor,
//             4 * 2^-24 * the largest |score| a softmax was taken of).
struct BoundRule {
  double k_max = 0, k_l2 = 0, min_floor = 0;
};
BoundRule default_bound_rule(DType t);

// One trial's bound, from the reference and the faithful reference over the same rows.
struct Bound {
  double k_max = 0, k_l2 = 0;
  double faithful_max = 0, faithful_l2 = 0;  // the faithful reference's errors against the fp64 one
  double rms = 0, largest = 0, floor = 0;    // rms and max |.| of the reference; the floor (relative)
  double score_floor = 0;                    // the floor's term from the largest score
  double allowed_max = 0, allowed_l2 = 0;
};
// `store`: the output dtype, whose rounding of the reference sets the floor.
// `largest_score`: what Problem::faithful_bound() reads after faithful() (0 without softmax).
Bound scaled_bound(const ref::Matrix& ref, const ref::Matrix& faithful, DType store, BoundRule rule,
                   double largest_score = 0);

// Where an output element sits in the op's natural coordinates.
struct Coord {
  int64_t b = 0, h = 0, i = 0, d = 0;
};
std::string to_string(const Coord& c);

struct Comparison {
  int64_t rows_checked = 0, rows_total = 0;
  int64_t elements_checked = 0, mismatches = 0;
  int64_t nonfinite = 0;       // NaN or Inf anywhere in the output (also outside the sampled rows)
  double max_abs = 0, max_rel = 0, rel_l2 = 0;
  int64_t worst_row = -1, worst_col = -1;  // the element with the largest excess over its tolerance
  double worst_got = 0, worst_ref = 0;
  std::string also_wrong;  // an op's own check beyond the output failed (e.g. a KV cache's contents)
  std::string note;        // what an op's own check adds that passed or not (a model's greedy tokens)
  // The scaled bound, when the op has a faithful reference, and how much of it the error
  // used: the larger of max_abs / allowed_max and rel_l2 / allowed_l2 (> 1 fails). With
  // several trials, the trial whose margin was largest.
  std::optional<Bound> bound;
  double margin = 0;
  bool within_bound() const { return !bound || margin <= 1; }
  bool passed() const {
    return mismatches == 0 && nonfinite == 0 && elements_checked > 0 && also_wrong.empty() && within_bound();
  }
  void merge(const Comparison& other);  // the worse of two trials, for the report
};

// got: the same rows as ref, row-major [ref.rows(), ref.cols()]. `row_ids` maps
// each ref row to its row index in the whole output (for worst_row).
// `magnitude`, when given (the shape of ref), is what the relative tolerance applies to
// beside |ref|: an element passes when |got - ref| <= atol + rtol * max(|ref|, magnitude).
Comparison compare(const ref::Matrix& ref, const std::vector<double>& got, const ref::Rows& row_ids, Tolerance tol,
                   const ref::Matrix* magnitude = nullptr);
// Integer outputs (token ids): no tolerance at all. A checked element passes when it equals the
// reference's value, or is one of the alternatives the op's documented rule accepts for it (the
// sample op: a token whose fp64 CDF interval meets the window an fp32 kernel's rounding allows);
// those are counted in `accepted_other`, never a widened tolerance. A mismatch's distance is
// |got - want| in ids, reported as max_abs with the worst row; a value that is no integer id
// (NaN, -1) is a mismatch too.
struct IntegerCheck {
  int64_t want = 0;
  std::vector<int64_t> also;  // the other values the op's rule accepts; empty for most elements
};
Comparison compare_integers(const std::vector<IntegerCheck>& want, const std::vector<double>& got,
                            const ref::Rows& row_ids, int64_t* accepted_other = nullptr);
// Holds a comparison to a scaled bound: sets c.bound and c.margin.
void apply_bound(Comparison& c, const Bound& b);
// A margin as the report prints it: "0.41", "37", "inf".
std::string fmt_margin(double margin);
// An elementwise tolerance that no finite error exceeds: the scaled bound alone decides.
inline Tolerance no_elementwise() { return {std::numeric_limits<double>::infinity(), 0}; }

// Deterministic sample of at most max_rows (0 = all) of `total` rows: always the
// first and last, then every row in `must` (e.g. fully masked rows) while room
// remains, then evenly spread rows with a seeded jitter. Sorted, unique.
ref::Rows sample_rows(int64_t total, int64_t max_rows, uint64_t seed, const ref::Rows& must = {});

}  // namespace attnbench
