// fp64 reference of the sample op: one token per row of logits, by temperature, min-p, top-k
// and top-p (vLLM's order), drawn by inverse CDF with the row's Philox uniform
// (kernels/common/philox.hpp). docs/cases.md, "op sample", states the same rules.
#pragma once
#include <cstdint>
#include <vector>

#include "reference/common.hpp"

namespace attnbench::ref {

// What the kernels receive too, as the same fp32 values (widened exactly here).
struct SampleOptions {
  float temperature = 1;  // 0: greedy (argmax, lowest index on ties); the filters are then ignored
  int64_t top_k = 0;      // 0: off
  float top_p = 1;        // 1: off; else in (0, 1)
  float min_p = 0;        // 0: off; else in (0, 1]
};

// A row's draw and what the verdict accepts of a kernel's answer.
//   token:     the fp64 answer.
//   accepted:  every token a kernel computing in fp32 may honestly return (token first): those whose CDF
//              interval meets the window [u·W - tol, u·W + tol], under every resolution of a filter
//              decision within its own tolerance (below). One element unless the row is a near-tie.
//   near_tie:  the window holds another token's boundary (a draw near-tie).
//   filter_near_tie: a min-p or top-p decision was within its tolerance (the kept set is uncertain).
//   kept:      tokens kept by the filters (fp64); window: tol / W, the window's relative half width.
struct SampleDraw {
  int64_t token = -1;
  std::vector<int64_t> accepted;
  bool near_tie = false, filter_near_tie = false;
  int64_t kept = 0;
  double window = 0;
};

// The longest chain of fp32 additions a kernel may pass a weight through in its sums over a row
// of n: ceil(n / 1024) + 48, a thread's run of n / 1024 logits and 48 more for a block's trees
// (CUB's block reduce: 5 shuffle levels, then 31 warp totals in a row; its raking scan: 32, then
// 5) and the draw's carry per chunk (n / 4096 chunks of 4 a thread). The contract the tolerance
// is derived from; both rungs keep it (kernels/sample/).
int64_t sample_sum_depth(int64_t n);

// One row: x [n] the stored logits, u the row's uniform (sample_uniform).
SampleDraw sample_row(const float* x, int64_t n, const SampleOptions& o, float u);

// Rows of x [rows, n] drawn with seed's uniforms, in the order asked.
std::vector<SampleDraw> sample(const float* x, int64_t n, const Rows& rows, const SampleOptions& o, uint64_t seed);

}  // namespace attnbench::ref
