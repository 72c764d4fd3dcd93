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

// One row of fp64 logits x [n] that a kernel holds only within bound [n] each (|x~_t - x_t| <=
// bound_t; null: exact, as stored logits are): every comparison of logits (greedy's argmax,
// top-k's, top-p's order) is a near-tie within the bounds, and each weight's error grows by the
// exp of its logit's error over T (reference/sample.cpp derives it).
SampleDraw sample_row(const double* x, const double* bound, int64_t n, const SampleOptions& o, float u);

// The LM-head form (shape.hidden = d > 0): the logits are hidden [batch, d] · W [vocab, d]ᵀ, which a
// kernel sums in fp32 from exact products (16-bit values multiply exactly in fp32). The contract
// its order keeps: every partial sum is the sum of a contiguous range of j (a GEMM walking K in
// order: cuBLAS's tiles, split-K's slices, mma.sync's k16 steps chained), so none exceeds R_t =
// max_k C_k - min_k C_k, C_k the prefix sums of h_j · W_tj. Each scalar addition errs by at most
// 2^-23 of its result (round to nearest: 2^-24; a tensor core truncates), each tensor-core k16
// step by at most 18 · 2^-23 of its largest term (17 terms aligned to the largest and truncated,
// then normalised by truncation): d - 1 additions or d / 16 steps give
//   |x~_t - x_t| <= γ_n · R_t,  n = 2.25 d,  γ_n = n · 2^-24 / (1 - n · 2^-24).
// lm_head_gamma(d) is that γ.
double lm_head_gamma(int64_t d);

// Row r's logits x [vocab] in fp64 from the stored h [d] and W [vocab, d], and each one's bound
// lm_head_gamma(d) · R_t (plus fp64's own rounding of the sum, d · 2^-53 · Σ_j |h_j W_tj|).
void lm_head_logits(const float* h, const float* w, int64_t vocab, int64_t d, double* x, double* bound);

// Rows of the LM-head form: h [batch, d], W [vocab, d], drawn with seed's uniforms, in the order asked.
std::vector<SampleDraw> sample_lm_head(const float* h, const float* w, int64_t vocab, int64_t d, const Rows& rows,
                                       const SampleOptions& o, uint64_t seed);

// Rows of x [rows, n] drawn with seed's uniforms, in the order asked.
std::vector<SampleDraw> sample(const float* x, int64_t n, const Rows& rows, const SampleOptions& o, uint64_t seed);

}  // namespace attnbench::ref
