// sample rung 2, pivot: sorting-free, in the spirit of FlashInfer's sampling kernels (which
// find the top-k / top-p boundary by pivots over the row instead of sorting it). A block per
// row. Every filter keeps the tokens whose logit is at least a threshold (reference/sample.hpp),
// so the kernel searches for that threshold among the logits' order keys (the stored bits made
// monotone: 16 bits for fp16/bf16, 32 for fp32). A pass over the row evaluates 8 pivots at once
// (the bracket's low end and 7 evenly inside it): per pivot the count and the weight mass of the
// tokens above it, summed in registers (a thread's run, then a warp tree and a tree over the 32
// warps), and the bracket shrinks 8-fold, or to nothing when the pass finds no logit inside it.
// Top-k searches on counts (fewer than k above), top-p on masses (less than top_p · Z above),
// each at most 6 passes for 16-bit logits (11 for fp32), typically 2-4; then the draw
// (draw.cuh). The passes read the row from L2 after the first: at batch <= 132 one SM reads
// its row at most ~15 times, which is what rung 3 (the softmax's statistics and the first
// search pass fused) and a histogram pass would cut.
// Not yet timed on a GPU (written for issue 52; compiled for sm_90a).
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>

#include "kernels/common/dispatch.cuh"
#include "kernels/common/philox.hpp"
#include "kernels/sample/draw.cuh"
#include "kernels/sample/rungs.hpp"

namespace attnbench::sample_impl {
namespace {

constexpr int kPivots = 8;  // per pass: the bracket's low end, then 7 inside it
constexpr int kWarps = kSampleThreads / 32;
constexpr int kPer = 4;  // the draw's consecutive elements a thread

// What a search knows of a pivot: tokens above it, and their weight mass.
struct Stat {
  int count;
  float mass;
};

// A warp's sums of each pivot's count and mass, and its smallest key, in every lane (5 levels).
__device__ __forceinline__ void warp_sums(int (&count)[kPivots], float (&mass)[kPivots], unsigned& kmin) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) {
#pragma unroll
    for (int j = 0; j < kPivots; ++j) {
      count[j] += __shfl_xor_sync(0xffffffffu, count[j], off);
      mass[j] += __shfl_xor_sync(0xffffffffu, mass[j], off);
    }
    kmin = min(kmin, __shfl_xor_sync(0xffffffffu, kmin, off));
  }
}

// The same over the block, in every thread: each warp's tree, then warp 0's over the 32 warps'
// partials (10 levels in all: the depth contract's block tree).
__device__ void block_sums(int (&count)[kPivots], float (&mass)[kPivots], unsigned& kmin) {
  __shared__ int part_count[kWarps][kPivots];
  __shared__ float part_mass[kWarps][kPivots];
  __shared__ unsigned part_kmin[kWarps];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  auto store = [&](int at) {
#pragma unroll
    for (int j = 0; j < kPivots; ++j) part_count[at][j] = count[j], part_mass[at][j] = mass[j];
    part_kmin[at] = kmin;
  };
  auto load = [&](int at) {
#pragma unroll
    for (int j = 0; j < kPivots; ++j) count[j] = part_count[at][j], mass[j] = part_mass[at][j];
    kmin = part_kmin[at];
  };
  warp_sums(count, mass, kmin);
  if (lane == 0) store(warp);
  __syncthreads();
  if (warp == 0) {
    load(lane);
    warp_sums(count, mass, kmin);
    if (lane == 0) store(0);
  }
  __syncthreads();
  load(0);
  __syncthreads();  // the partials may be rewritten by the next pass
}

// Among the tokens min-p keeps with key > floor, the threshold of a filter that keeps a token
// when kept(stat of the tokens strictly above it) holds, an up-set of keys: returns lo, the
// largest key it drops (kept tokens: key > lo), and `at` the stat above lo. hi: the row max's
// key, above which nothing lies (kept(0 tokens) holds).
template <class T, class Kept>
__device__ long long search(const T* x, int n, float m, float inv_t, float min_p, long long floor, long long hi,
                            Kept kept, Stat& at) {
  long long lo = floor, top = hi;
  int top_count = 0;
  for (bool first = true;; first = false) {
    long long pivot[kPivots];
#pragma unroll
    for (int j = 0; j < kPivots; ++j) pivot[j] = lo + (top - lo) * j / kPivots;
    int count[kPivots] = {};
    float mass[kPivots] = {};
    unsigned kmin = UINT_MAX;
    for (int i = threadIdx.x; i < n; i += kSampleThreads) {
      const float v = logit(x[i]), w = weight(v, m, inv_t);
      const long long k = order_key<T>(v);  // as signed: lo starts at -1
      if (k <= lo || (min_p > 0 && w < min_p)) continue;
      kmin = min(kmin, static_cast<unsigned>(k));
#pragma unroll
      for (int j = 0; j < kPivots; ++j)
        if (k > pivot[j]) ++count[j], mass[j] += w;
    }
    block_sums(count, mass, kmin);
    if (first && kept(count[0], mass[0])) {  // the filter keeps everything above floor
      at = {count[0], mass[0]};
      return lo;
    }
    int j = 0;  // the last pivot the filter drops (pivot 0, the low end, is dropped)
#pragma unroll
    for (int i = 1; i < kPivots; ++i)
      if (!kept(count[i], mass[i])) j = i;
    const int lo_count = count[j];
    at = {count[j], mass[j]};
    if (j + 1 < kPivots) top = pivot[j + 1], top_count = count[j + 1];
    lo = pivot[j];
    // No logit lies between the old low end and kmin (the smallest key above it), so none between
    // lo and min(kmin, top) - 1: the stats there are lo's, and lo moves up to it (to top - 1,
    // done, when the bracket holds no logit below top).
    const long long snap = min(static_cast<long long>(kmin), top) - 1;
    if (snap > lo) lo = snap;
    if (lo_count == top_count || top - lo <= 1) return lo;  // nothing undecided between lo and top
  }
}

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
  const float inv_t = 1.f / p.temperature, min_p = p.min_p;
  const long long hi = order_key<T>(m);
  Stat at{};
  // top-k: fewer than k tokens above; off, it keeps all and gives Z.
  const bool top_k = p.top_k > 0 && p.top_k < n;
  const int k = static_cast<int>(top_k ? p.top_k : 0);
  long long lo = search(x, n, m, inv_t, min_p, -1, hi, [&](int count, float) { return !top_k || count < k; }, at);
  if (p.top_p < 1) {
    const float bound = p.top_p * at.mass;
    lo = search(x, n, m, inv_t, min_p, lo, hi, [&](int, float mass) { return mass < bound; }, at);
  }
  const float target = sample_uniform(p.seed, static_cast<uint64_t>(row)) * at.mass;
  const int token = draw_token<kPer>(x, n, m, inv_t, target, [&](float v, float w) {
    return order_key<T>(v) > lo && (min_p <= 0 || w >= min_p);
  });
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
