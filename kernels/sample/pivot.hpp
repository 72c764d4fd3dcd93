// The pivot rung's search bracket (2_pivot.cu), for g++ and nvcc alike, so that the CPU tests
// run the same narrowing on host-side counts (tests/test_sample.cpp) that the kernel runs on
// its block sums.
//
// A filter keeps a token when a statistic of the tokens strictly above it (their count, their
// mass) passes: an up-set of order keys. The bracket (lo, top] holds the threshold: the filter
// drops lo, keeps top. A pass evaluates kSamplePivots pivots, lo and evenly inside, and the
// bracket shrinks to the pivots around the change, or snaps up to the first key a logit holds.
#pragma once
#include <cmath>

#include "kernels/common/host_device.hpp"

namespace attnbench {

constexpr int kSamplePivots = 8;  // per pass: the bracket's low end, then 7 inside it

struct SampleBracket {
  long long lo, top;  // the filter drops lo (or lo is below every key) and keeps top
  int top_count;      // tokens above top
};

ATTNBENCH_HOST_DEVICE inline long long bracket_pivot(const SampleBracket& b, int j) {
  return b.lo + (b.top - b.lo) * j / kSamplePivots;
}

// After a pass: the filter drops pivot `lo` (count_lo tokens above it) and, when `inside`, keeps
// the next pivot `next` (count_next above it); else it drops every pivot and top stays. kmin: the
// smallest key above the old lo that a token holds. No token lies between the old lo and kmin,
// so lo moves up to min(kmin, top) - 1 (the same tokens above). Returns true when no token is
// left undecided between lo and top: the kept tokens are then those with key > lo.
ATTNBENCH_HOST_DEVICE inline bool bracket_narrow(SampleBracket& b, long long lo, int count_lo, bool inside,
                                                 long long next, int count_next, long long kmin) {
  if (inside) b.top = next, b.top_count = count_next;
  b.lo = lo;
  const long long snap = (kmin < b.top ? kmin : b.top) - 1;
  if (snap > b.lo) b.lo = snap;
  return count_lo == b.top_count || b.top - b.lo <= 1;
}

// A logit below which top-p drops every token, for the search's floor: a token of weight under
// (1 - top_p) / (2 vocab) has less than (1 - top_p) / 2 of mass at or below it in all, so more
// than Z - (1 - top_p) / 2 > top_p · Z above it (Z >= 1, the max's own weight): dropped, by a
// margin far beyond fp32's. The logit m + T · ln((1 - top_p) / (2 vocab)); keys at or above it
// (rounded down to the storage type) are all the search needs to look at.
ATTNBENCH_HOST_DEVICE inline float top_p_floor(float m, float temperature, float top_p, int vocab) {
  return m + temperature * logf((1.f - top_p) / (2.f * static_cast<float>(vocab)));
}

}  // namespace attnbench
