// sample rung 2, pivot: sorting-free, in the spirit of FlashInfer's sampling kernels (which
// find the top-k / top-p boundary by pivots over the row instead of sorting it). A block per
// row. Every filter keeps the tokens whose logit is at least a threshold (reference/sample.hpp),
// so the kernel searches for that threshold among the logits' order keys (the stored bits made
// monotone: 16 bits for fp16/bf16, 32 for fp32). A pass over the row evaluates 8 pivots at once
// (the bracket's low end and 7 evenly inside it, kernels/sample/pivot.hpp): per pivot the count
// and the weight mass of the tokens above it, summed in registers (a thread's run, then a warp
// tree and a tree over the 32 warps), and the bracket shrinks 8-fold, or snaps to the first key
// a logit holds. Top-k searches on counts (fewer than k above), top-p on masses (less than
// top_p · Z above, Z summed in its first pass) from a floor it surely drops (a weight under
// (1 - top_p) / (2 vocab)), at most 6 passes each for 16-bit logits, 11 for fp32. On N(0, 4.5²)
// logits at vocab 32000 the CPU test that runs this bracket (tests/test_sample.cpp,
// SamplePivot) counts 3.0 search passes a row for bf16 top_p 0.9, 7.3 for fp32, 5.8 for bf16
// top_k 50 and 7.9 for both; with the max pass before and the draw after (which stops at its
// token's chunk), a row is read 4-6 times for bf16 top_p, all but the first from L2, by one SM:
// at batch 1-16 the other SMs idle, which rung 3 (3_cluster.cu) splits a row over. The max pass
// fused into the first search pass and a wider first pass would cut the passes themselves.
// Not yet timed on a GPU (written for issue 52; compiled for sm_90a).
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>

#include "kernels/common/dispatch.cuh"
#include "kernels/common/philox.hpp"
#include "kernels/sample/pivot.cuh"
#include "kernels/sample/rungs.hpp"

namespace attnbench::sample_impl {
namespace {

constexpr int kPer = 4;  // the draw's consecutive elements a thread

template <class T>
__global__ void __launch_bounds__(kSampleThreads) pivot_kernel(SampleParams p) {
  const int64_t row = blockIdx.x;
  const int n = static_cast<int>(p.vocab);
  const T* x = static_cast<const T*>(p.logits) + row * n;
  float m;
  int arg;
  row_max(x, n, m, arg);
  if (p.temperature == 0) {
    if (threadIdx.x == 0) p.tokens[row] = static_cast<int32_t>(arg);
    return;
  }
  Stat at{};
  const long long lo = kept_threshold(x, n, n, m, p, BlockSums{}, at);
  const float inv_t = 1.f / p.temperature, min_p = p.min_p;
  const float target = sample_uniform(p.seed, static_cast<uint64_t>(row)) * at.mass;
  const int token = draw_token<kPer>(
      x, n, m, inv_t, target, [&](float v, float w) { return order_key<T>(v) > lo && (min_p <= 0 || w >= min_p); });
  if (threadIdx.x == 0) p.tokens[row] = static_cast<int32_t>(token);
}

}  // namespace

void pivot(const SampleParams& p, const LaunchContext& ctx) {
  with_storage(p.dtype, "sample pivot", [&](auto tag) {
    using T = decltype(tag);
    pivot_kernel<T><<<static_cast<unsigned>(p.batch), kSampleThreads, 0, ctx.stream>>>(p);
  });
  check_launch("sample/pivot");
}

}  // namespace attnbench::sample_impl
