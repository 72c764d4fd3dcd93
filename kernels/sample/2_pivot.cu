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
// token's chunk), a row is read 4-6 times for bf16 top_p, all but the first from L2. The max
// pass fused into the first search pass (rung 3) and a wider first pass are what would cut it.
// Not yet timed on a GPU (written for issue 52; compiled for sm_90a).
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>

#include "kernels/common/dispatch.cuh"
#include "kernels/common/philox.hpp"
#include "kernels/sample/draw.cuh"
#include "kernels/sample/pivot.hpp"
#include "kernels/sample/rungs.hpp"

namespace attnbench::sample_impl {
namespace {

constexpr int kPivots = kSamplePivots;
constexpr int kMasses = kPivots + 1;  // each pivot's, then Z's (the first pass of a search)
constexpr int kWarps = kSampleThreads / 32;
constexpr int kPer = 4;  // the draw's consecutive elements a thread

// What a search knows of a pivot: tokens above it, and their weight mass.
struct Stat {
  int count;
  float mass;
};

// A warp's sums of each pivot's count and mass, and its smallest key, in every lane (5 levels).
__device__ __forceinline__ void warp_sums(int (&count)[kPivots], float (&mass)[kMasses], unsigned& kmin) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) {
#pragma unroll
    for (int j = 0; j < kPivots; ++j) count[j] += __shfl_xor_sync(0xffffffffu, count[j], off);
#pragma unroll
    for (int j = 0; j < kMasses; ++j) mass[j] += __shfl_xor_sync(0xffffffffu, mass[j], off);
    kmin = min(kmin, __shfl_xor_sync(0xffffffffu, kmin, off));
  }
}

// The same over the block, in every thread: each warp's tree, then warp 0's over the 32 warps'
// partials (10 levels in all: the depth contract's block tree).
__device__ void block_sums(int (&count)[kPivots], float (&mass)[kMasses], unsigned& kmin) {
  __shared__ int part_count[kWarps][kPivots];
  __shared__ float part_mass[kWarps][kMasses];
  __shared__ unsigned part_kmin[kWarps];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  auto store = [&](int at) {
#pragma unroll
    for (int j = 0; j < kPivots; ++j) part_count[at][j] = count[j];
#pragma unroll
    for (int j = 0; j < kMasses; ++j) part_mass[at][j] = mass[j];
    part_kmin[at] = kmin;
  };
  auto load = [&](int at) {
#pragma unroll
    for (int j = 0; j < kPivots; ++j) count[j] = part_count[at][j];
#pragma unroll
    for (int j = 0; j < kMasses; ++j) mass[j] = part_mass[at][j];
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
// when kept(count, mass, z) holds of the tokens strictly above it (an up-set of keys), z being
// the mass of the tokens above zfloor <= floor, summed in the first pass: returns lo, the largest
// key it drops (kept tokens: key > lo), and `at` the stat above lo. hi: the row max's key, above
// which nothing lies (the filter keeps the max).
template <class T, class Kept>
__device__ long long search(const T* x, int n, float m, float inv_t, float min_p, long long zfloor, long long floor,
                            long long hi, Kept kept, Stat& at) {
  SampleBracket b{floor, hi, 0};
  float z = 0;
  for (bool first = true;; first = false) {
    long long pivot[kPivots];
#pragma unroll
    for (int j = 0; j < kPivots; ++j) pivot[j] = bracket_pivot(b, j);
    int count[kPivots] = {};
    float mass[kMasses] = {};
    unsigned kmin = UINT_MAX;
    for (int i = threadIdx.x; i < n; i += kSampleThreads) {
      const float v = logit(x[i]), w = weight(v, m, inv_t);
      const long long k = order_key<T>(v);  // as signed: lo starts at -1
      if (k <= zfloor || (min_p > 0 && w < min_p)) continue;
      if (first) mass[kPivots] += w;
      if (k <= b.lo) continue;
      kmin = min(kmin, static_cast<unsigned>(k));
#pragma unroll
      for (int j = 0; j < kPivots; ++j)
        if (k > pivot[j]) ++count[j], mass[j] += w;
    }
    block_sums(count, mass, kmin);
    if (first) {
      z = mass[kPivots];
      if (kept(count[0], mass[0], z)) {  // the filter keeps everything above floor
        at = {count[0], mass[0]};
        return b.lo;
      }
    }
    int j = 0;  // the last pivot the filter drops
#pragma unroll
    for (int i = 1; i < kPivots; ++i)
      if (!kept(count[i], mass[i], z)) j = i;
    at = {count[j], mass[j]};  // the stats above lo, wherever it snaps to
    if (bracket_narrow(b, pivot, count, j, kmin)) return b.lo;
  }
}

// The largest key below every logit >= v that a T holds (v rounded down to T first).
template <class T>
__device__ __forceinline__ long long key_below(float v) {
  if constexpr (std::is_same_v<T, __half>) return static_cast<long long>(order_key<T>(__half2float(__float2half_rd(v)))) - 1;
  else if constexpr (std::is_same_v<T, __nv_bfloat16>)
    return static_cast<long long>(order_key<T>(__bfloat162float(__float2bfloat16_rd(v)))) - 1;
  else return static_cast<long long>(order_key<T>(v)) - 1;
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
  long long lo = -1;
  // top-k: fewer than k tokens above.
  const bool top_k = p.top_k > 0 && p.top_k < n;
  const int k = static_cast<int>(top_k ? p.top_k : 0);
  if (top_k) lo = search(x, n, m, inv_t, min_p, -1, -1, hi, [&](int count, float, float) { return count < k; }, at);
  if (p.top_p < 1) {
    // top-p over what top-k kept (mass Z above its lo), searched from a floor top-p surely drops.
    const float top_p = p.top_p;
    const long long floor = max(lo, key_below<T>(top_p_floor(m, p.temperature, top_p, n)));
    lo = search(x, n, m, inv_t, min_p, lo, floor, hi, [&](int, float mass, float z) { return mass < top_p * z; }, at);
  }
  if (!top_k && p.top_p >= 1)  // min-p alone, or nothing: one pass for W
    lo = search(x, n, m, inv_t, min_p, -1, -1, hi, [](int, float, float) { return true; }, at);
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
