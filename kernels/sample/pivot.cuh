// The pivot search of the sample ladder's sorting-free rungs (2_pivot.cu, 3_cluster.cu): one
// pass over the row evaluates kSamplePivots pivots of a bracket (kernels/sample/pivot.hpp) with
// each pivot's count and weight mass summed in registers, and the search narrows the bracket
// until no token is left undecided. Written once; the rungs differ in how a pass's statistics
// are summed (a block's, or a cluster's blocks').
#pragma once
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>

#include "kernels/sample/draw.cuh"
#include "kernels/sample/pivot.hpp"
#include "kernels/sample/sample.hpp"

namespace attnbench::sample_impl {

constexpr int kPivots = kSamplePivots;
constexpr int kMasses = kPivots + 1;  // each pivot's, then Z's (the first pass of a search)

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
template <int kThreads = kSampleThreads>
__device__ void block_sums(int (&count)[kPivots], float (&mass)[kMasses], unsigned& kmin) {
  constexpr int kWarps = kThreads / 32;
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
    if (lane < kWarps) {
      load(lane);
    } else {  // a block of fewer than 32 warps: nothing from the lanes past them
#pragma unroll
      for (int j = 0; j < kPivots; ++j) count[j] = 0;
#pragma unroll
      for (int j = 0; j < kMasses; ++j) mass[j] = 0;
      kmin = UINT_MAX;
    }
    warp_sums(count, mass, kmin);
    if (lane == 0) store(0);
  }
  __syncthreads();
  load(0);
  __syncthreads();  // the partials may be rewritten by the next pass
}

// block_sums as the search's `sums`.
struct BlockSums {
  __device__ void operator()(int (&count)[kPivots], float (&mass)[kMasses], unsigned& kmin) const {
    block_sums(count, mass, kmin);
  }
};

// Among the tokens min-p keeps with key > floor, the threshold of a filter that keeps a token
// when kept(count, mass, z) holds of the tokens strictly above it (an up-set of keys), z being
// the mass of the tokens above zfloor <= floor, summed in the first pass: returns lo, the largest
// key it drops (kept tokens: key > lo), and `at` the stat above lo. hi: the row max's key, above
// which nothing lies (the filter keeps the max).
// sums(count, mass, kmin) turns a thread's statistics into the row's, in every thread: block_sums
// for a block per row, more for a row split over blocks (3_cluster.cu), x and n the block's part.
template <int kThreads = kSampleThreads, class T, class Sums, class Kept>
__device__ long long search(const T* x, int n, float m, float inv_t, float min_p, long long zfloor, long long floor,
                            long long hi, Sums sums, Kept kept, Stat& at) {
  SampleBracket b{floor, hi, 0};
  float z = 0;
  for (bool first = true;; first = false) {
    // The pivots as offsets above lo, in 32 bits (the bracket is at most 2^32 keys wide, and no
    // finite logit's key is 2^32 - 1), so each logit's compares are 32-bit.
    unsigned offset[kPivots];
#pragma unroll
    for (int j = 0; j < kPivots; ++j) offset[j] = static_cast<unsigned>(bracket_pivot(b, j) - b.lo);
    int count[kPivots] = {};
    float mass[kMasses] = {};
    unsigned kmin = UINT_MAX;
    for (int i = threadIdx.x; i < n; i += kThreads) {
      const float v = logit(x[i]), w = weight(v, m, inv_t);
      const long long k = order_key<T>(v);  // as signed: lo starts at -1
      if (k <= zfloor || (min_p > 0 && w < min_p)) continue;
      if (first) mass[kPivots] += w;
      if (k <= b.lo) continue;
      kmin = min(kmin, static_cast<unsigned>(k));
      const unsigned d = static_cast<unsigned>(k - b.lo);
#pragma unroll
      for (int j = 0; j < kPivots; ++j)
        if (d > offset[j]) ++count[j], mass[j] += w;
    }
    sums(count, mass, kmin);
    if (first) {
      z = mass[kPivots];
      if (kept(count[0], mass[0], z)) {  // the filter keeps everything above floor
        at = {count[0], mass[0]};
        return b.lo;
      }
    }
    // The last pivot the filter drops (pivot 0, lo, is dropped) and the one after it, picked with
    // compile-time indices only, so the arrays stay in registers.
    int count_lo = count[0], count_next = 0;
    float mass_lo = mass[0];
    unsigned offset_lo = 0, offset_next = 0;
    bool inside = false;
#pragma unroll
    for (int i = 1; i < kPivots; ++i) {
      const bool dropped = !kept(count[i], mass[i], z);
      if (dropped) count_lo = count[i], mass_lo = mass[i], offset_lo = offset[i], inside = false;
      if (!dropped && !inside) count_next = count[i], offset_next = offset[i], inside = true;
    }
    at = {count_lo, mass_lo};  // the stats above lo, wherever it snaps to
    if (bracket_narrow(b, b.lo + offset_lo, count_lo, inside, b.lo + offset_next, count_next, kmin)) return b.lo;
  }
}

// The largest key below every logit >= v that a T holds (v rounded down to T first).
template <class T>
__device__ __forceinline__ long long key_below(float v) {
  if constexpr (std::is_same_v<T, __half>)
    return static_cast<long long>(order_key<T>(__half2float(__float2half_rd(v)))) - 1;
  else if constexpr (std::is_same_v<T, __nv_bfloat16>)
    return static_cast<long long>(order_key<T>(__bfloat162float(__float2bfloat16_rd(v)))) - 1;
  else
    return static_cast<long long>(order_key<T>(v)) - 1;
}

// The filters' threshold, in vLLM's order: top-k's search (fewer than k tokens above), then top-p's
// over what it kept (less than top_p · Z above, Z the mass above top-k's lo) from a floor top-p
// surely drops; with neither, one pass for the kept mass. x and n: the block's part of a row of
// `vocab` whose max is m. Returns lo (kept tokens: key > lo and min-p's weight) and `at` the count
// and mass above it (W, the draw's total).
template <int kThreads = kSampleThreads, class T, class Sums>
__device__ long long kept_threshold(const T* x, int n, int vocab, float m, const SampleParams& p, Sums sums, Stat& at) {
  const float inv_t = 1.f / p.temperature, min_p = p.min_p;
  const long long hi = order_key<T>(m);
  long long lo = -1;
  const bool top_k = p.top_k > 0 && p.top_k < vocab;
  const int k = static_cast<int>(top_k ? p.top_k : 0);
  if (top_k)
    lo = search<kThreads>(
        x, n, m, inv_t, min_p, -1, -1, hi, sums, [&](int c, float, float) { return c < k; }, at);
  if (p.top_p < 1) {
    const float top_p = p.top_p;
    const long long floor = max(lo, key_below<T>(top_p_floor(m, p.temperature, top_p, vocab)));
    lo = search<kThreads>(
        x, n, m, inv_t, min_p, lo, floor, hi, sums, [&](int, float mass, float z) { return mass < top_p * z; }, at);
  }
  if (!top_k && p.top_p >= 1)  // min-p alone, or nothing: one pass for W
    lo = search<kThreads>(
        x, n, m, inv_t, min_p, -1, -1, hi, sums, [](int, float, float) { return true; }, at);
  return lo;
}

}  // namespace attnbench::sample_impl
