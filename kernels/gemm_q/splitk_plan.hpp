// gemm_q rung 3 (splitk_gemv, kernels/gemm_q/3_splitk_gemv.cu): its host-side plan, in plain C++
// so that the CPU tests check it (tests/test_gemm_q_splitk.cpp). The grid is col_blocks column
// blocks of kSplitkRows output channels, each split along k over `splits` blocks of one thread-block
// cluster; a k step is what one warp's 32 lanes take of a row per iteration (4 lanes x 16 bytes:
// 128 int4 codes, 64 int8), and split r of `splits` takes steps [r·steps/splits, (r+1)·steps/splits).
#pragma once
#include <algorithm>
#include <cstdint>

namespace attnbench::gemm_q_impl {

constexpr int kSplitkWarps = 4;                  // a block: one m16 channel tile a warp
constexpr int kSplitkRows = 16 * kSplitkWarps;   // output channels a block
constexpr int kSplitkMaxM = 16;                  // tokens: two n8 tiles at most
constexpr int kSplitkMaxSplits = 8;              // the portable cluster size
constexpr int kSplitkBlocksPerSm = 4;            // __launch_bounds__'s minimum: <= 128 registers a thread

// k a step covers: 4 lanes x 16 bytes of codes.
constexpr int64_t splitk_step_k(int bits) { return 4 * 128 / bits; }

struct SplitkPlan {
  int64_t col_blocks = 0;  // ceil(n / kSplitkRows)
  int64_t steps = 0;       // ceil(k / step)
  int splits = 1;          // blocks a column block's k is split over (a cluster): 1, 2, 4 or 8
  int64_t blocks() const { return col_blocks * splits; }
};

// The most splits (a power of two, at most 8) whose blocks all fit on the card at once (one wave:
// `clusters(s)` is how many clusters of s blocks the card holds at once, the launcher asks
// cudaOccupancyMaxActiveClusters), and no more splits than k steps: so that the card's every SM
// streams weights (n 4096: 64 column blocks alone fill half the SMs with one small block each)
// without a second wave's tail.
template <class Clusters>
SplitkPlan plan_splitk(int64_t n, int64_t k, int bits, Clusters&& clusters) {
  SplitkPlan p;
  p.col_blocks = (n + kSplitkRows - 1) / kSplitkRows;
  const int64_t step = splitk_step_k(bits);
  p.steps = (k + step - 1) / step;
  p.splits = kSplitkMaxSplits;
  while (p.splits > 1 && (p.col_blocks > static_cast<int64_t>(clusters(p.splits)) || p.splits > p.steps))
    p.splits /= 2;
  return p;
}

// The model of the card when it is not asked: kSplitkBlocksPerSm blocks on each of sm_count SMs,
// packed into clusters without loss.
inline int64_t splitk_model_clusters(int sm_count, int splits) {
  return static_cast<int64_t>(kSplitkBlocksPerSm) * std::max(sm_count, 1) / splits;
}
inline SplitkPlan plan_splitk(int64_t n, int64_t k, int bits, int sm_count) {
  return plan_splitk(n, k, bits, [&](int splits) { return splitk_model_clusters(sm_count, splits); });
}

// What the launcher plans with for clusters of `splits` blocks: the card's answer when
// cudaOccupancyMaxActiveClusters succeeded, 0 included (no cluster of that size fits at all, so a
// launch with it would fail: the plan splits less), and the model only when the query failed.
inline int64_t splitk_clusters(bool queried, int answer, int sm_count, int splits) {
  return queried ? std::max<int64_t>(answer, 0) : splitk_model_clusters(sm_count, splits);
}

// Split `rank`'s steps [begin, end): balanced, each non-empty when splits <= steps.
inline void splitk_range(int64_t steps, int splits, int rank, int64_t& begin, int64_t& end) {
  begin = rank * steps / splits;
  end = (rank + 1) * steps / splits;
}

}  // namespace attnbench::gemm_q_impl
