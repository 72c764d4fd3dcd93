// Split-KV machinery shared by dense decode (kernels/decode: flash_decode, split_kv) and paged
// decode (kernels/paged: paged_flash), which run the same scheme over different cache layouts: one block per
// (sequence, kv head, head tile, split) computes the query heads of its GQA group over one chunk
// of keys, its slices (warps or row groups) merge their (m, l, o) in shared memory (Partials),
// and with several splits each block writes an fp32 partial, [batch, heads, splits, head_dim]
// unnormalised o then [batch, heads, splits] (m, l) with m in log2 units, which combine_kernel
// merges; the combine is a programmatic dependent launch on sm_90 (launch_split).
//
// Here: the split limits (min_chunk, kMaxSlots, kMaxContext), the block's work (Work,
// block_work), the device helpers both families' kernels use beyond the common library (the
// online-softmax tile of the mma kernels, the warp partials, PDL), the (m, l, o) merges (of a
// block's slices, merge_and_store; of the splits, the combine kernel), and the host side (resident blocks per SM; the
// partials' workspace size and placement, the combine block shape, the main + combine launch).
//
// The kernel parameter struct (decode's Decode, paged's Paged) is a template parameter P:
// it must have the fields heads, kv_heads, group, head_dim, head_tiles, splits, chunk,
// window, key_align, alibi, slopes, context_lens, o, part_o and part_ml (and v_scale for merge_and_store<T, true>). The
// host parameters (DecodeParams, PagedParams) likewise need batch, heads and head_dim. Everything is inline or a
// template, so that both families' rungs can include this header.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "kernels/common/copy.cuh"
#include "kernels/common/kernels.hpp"
#include "kernels/common/mask.cuh"
#include "kernels/common/mma.cuh"
#include "kernels/common/pdl.cuh"
#include "kernels/common/reduce.cuh"
#include "kernels/common/rope.cuh"
#include "kernels/common/softmax_math.cuh"
#include "kernels/common/storage.cuh"

namespace attnbench {
namespace splitkv {

// ---------------------------------------------------------------------------------------
// Limits

// A split streams at least min_chunk keys (the K/V it reads must outweigh its partial and its
// share of the combine), in whole key steps of its kernel (16-key tiles of the mma kernels):
// 256, or at head_dim 64 and below 128, 64 or 32 keys, where a block of 256 keys left a short
// context's few heads on a fraction of the card. Measured on an H100 (bench notes run 179):
// GPT-2's decode (head_dim 64, 12 heads, contexts 512-640) took 4-11% less time a step on
// 128-key chunks than on 256 (batch 1: 24 blocks became 48-60), while the pipeline case's
// head_dim 128 at batch 8 ran 3.7% slower on them (512 blocks against 256); 64-key chunks
// helped batch 1 more but gave batch 8 most of the gain back. So shorter chunks only where
// their splits still make few blocks (`units` = batch x kv heads, times longest / chunk, at
// most kFewBlocks), and batch 8 keeps 128 (bench notes, run 202). On an H200 (runs 237-238)
// GPT-2 at batch 1 (contexts to 640: 12 x 20 blocks) took 2.3% less a step on 32-key chunks
// than on 64 (paged: 2.7%); 16-key chunks (480 blocks, one warp of two idle) were no faster,
// and slower paged.
constexpr int64_t kFewBlocks = 256;
constexpr int64_t min_chunk(int64_t head_dim, int64_t longest, int64_t units) {
  if (head_dim > 64) return 256;
  if (units * (longest / 32) <= kFewBlocks) return 32;
  return units * (longest / 64) <= kFewBlocks ? 64 : 128;
}
// Variant::workspace gets no DeviceCaps, so the workspace is sized for one round of up to
// kMaxSlots resident blocks (SMs x blocks per SM; 132 x 4 on an H100/H200 at d128), and the
// launch never asks for more splits than that.
constexpr int64_t kMaxSlots = 2048;
// Keys stay below this, so that key indices, chunk ends and tile starts fit in int.
constexpr int64_t kMaxContext = int64_t{1} << 30;

// The most splits a launch over `longest` keys may plan: chunks of at least min_chunk keys,
// and no more than kMaxSlots blocks over the fewest blocks per split (one per kv head).
inline int64_t max_splits_by_slots(int64_t longest, int64_t head_dim, int64_t batch, int64_t kv_heads) {
  return std::max<int64_t>(
      1, std::min(longest / min_chunk(head_dim, longest, batch * kv_heads), kMaxSlots / (batch * kv_heads)));
}

// ---------------------------------------------------------------------------------------
// Device helpers

// Sliding window (window > 0): the query at position ctx - 1 sees keys [ctx - window, ctx).
// Blocks walk the keys from that bound rounded down to the kernel's key step (key_align: its
// tile, block step or cache block), so that their first step still holds a key they see, and
// mask the keys below it: the work follows the window, not the context.
__host__ __device__ __forceinline__ int window_first(int ctx, int window) {
  return window > 0 && ctx > window ? ctx - window : 0;
}
__host__ __device__ __forceinline__ int window_base(int ctx, int window, int key_align) {
  return window_first(ctx, window) / key_align * key_align;
}

// What one block computes: query heads [h0, h0 + nheads) of sequence b, which read kv head
// kvh, over keys [begin, end) of its context ctx, of which it sees those from `first` on.
struct Work {
  int b, kvh, h0, nheads, split, ctx, first, begin, end;
};

// Query head h's ALiBi slope in exp2 units; 0 without ALiBi and for the padding heads past
// the last (h >= heads), whose outputs are dropped.
template <class P>
__device__ __forceinline__ float head_slope_log2(const P& p, int h) {
  return alibi_slope(p.score.alibi && h < p.heads, p.score.slopes, h, kLog2e);
}

// Whether the block's query sees `key` (first <= key < end): one unsigned compare.
__device__ __forceinline__ bool sees(const Work& w, int key) {
  return static_cast<unsigned>(key - w.first) < static_cast<unsigned>(w.end - w.first);
}

// blockIdx.x = (b·kv_heads + kvh)·head_tiles + tile, so that the tiles of one kv head run
// together and share its bytes through L2; blockIdx.y = split.
template <int kHeads, class P>
__device__ __forceinline__ Work block_work(const P& p) {
  Work w;
  const int tile = static_cast<int>(blockIdx.x % p.head_tiles);
  const int bk = static_cast<int>(blockIdx.x / p.head_tiles);
  w.kvh = bk % p.kv_heads;
  w.b = bk / p.kv_heads;
  w.h0 = w.kvh * p.group + tile * kHeads;
  w.nheads = min(kHeads, p.group - tile * kHeads);
  w.split = static_cast<int>(blockIdx.y);
  w.ctx = p.context_lens[w.b];
  w.first = window_first(w.ctx, p.window);
  w.begin = window_base(w.ctx, p.window, p.key_align) + w.split * p.chunk;
  // The last split runs to the end of the context, whatever longest_context promised.
  w.end = w.split == p.splits - 1 ? w.ctx : min(w.ctx, w.begin + p.chunk);
  return w;
}

// The (m, l, o) of a block's slices (warps, or row groups) for its kHeads heads, merged at the
// end of the kernel (merge_and_store). o rows are padded by 4 floats so that the
// float4 writes of the lanes that hold different heads spread over more banks.
template <int kSlices, int kHeads, int kD>
struct Partials {
  float o[kSlices][kHeads][kD + 4];
  float m[kSlices][kHeads];
  float l[kSlices][kHeads];
};

// A warp's (m, l, Oᵀ) as slice `warp` of the block's partials (heads 2t, 2t + 1 of lane 4g + t;
// Oᵀ's C fragments, rows dims 16mt + g and 16mt + g + 8), l first summed over the 8 lanes
// that share the heads. A barrier must follow before the partials are read.
template <int kSlices, int kHeads, int kD, int kMTiles>
__device__ __forceinline__ void store_warp_partial(Partials<kSlices, kHeads, kD>& part, int warp,
                                                   const float (&o)[kMTiles][4], const float (&m)[2], float (&l)[2]) {
  const int g = (threadIdx.x % 32) / 4, t = threadIdx.x % 4;
  allreduce<8, XorOrder::low_first, 4>(l, SumOp{});
#pragma unroll
  for (int jj = 0; jj < 2; ++jj) {
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
      part.o[warp][2 * t + jj][16 * mt + g] = o[mt][jj];
      part.o[warp][2 * t + jj][16 * mt + g + 8] = o[mt][2 + jj];
    }
    if (g == 0) {
      part.m[warp][2 * t + jj] = m[jj];
      part.l[warp][2 * t + jj] = l[jj];
    }
  }
}

// Merges the slices of `part` per (head, 8-dim chunk) and writes o (one split) or the block's
// partial (several); kVScale: times p.v_scale (paged's fp8 cache scale). The block's key
// range is not empty, so some slice saw a key and the max mx is finite; a slice that saw none
// has m = -inf, o = l = 0 and weight exp2(-inf - mx) = 0.
template <class T, bool kVScale, int kSlices, int kHeads, int kD, class P>
__device__ __forceinline__ void merge_and_store(const Partials<kSlices, kHeads, kD>& part, const P& p, const Work& w) {
  constexpr int kChunks = kD / 8;
  const int nchunks = p.head_dim / 8;
  for (int i = threadIdx.x; i < kHeads * kChunks; i += blockDim.x) {
    const int n = i / kChunks, c = i % kChunks;
    if (n >= w.nheads || c >= nchunks) continue;
    float mx = -INFINITY;
#pragma unroll
    for (int s = 0; s < kSlices; ++s) mx = fmaxf(mx, part.m[s][n]);
    float l = 0.f, acc[8] = {};
#pragma unroll
    for (int s = 0; s < kSlices; ++s) {
      const float wgt = exp2_approx(part.m[s][n] - mx);
      l = fmaf(wgt, part.l[s][n], l);
      const float4 a = *reinterpret_cast<const float4*>(&part.o[s][n][8 * c]);
      const float4 b = *reinterpret_cast<const float4*>(&part.o[s][n][8 * c + 4]);
      const float x[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
      for (int e = 0; e < 8; ++e) acc[e] = fmaf(wgt, x[e], acc[e]);
    }
    const int64_t bh = int64_t{w.b} * p.heads + w.h0 + n;
    // l >= 1 with one split: the key at the max contributes exp2(0). The sink joins it here with
    // one split, in the combine with several.
    if (p.splits == 1) l = plus_sink(l, mx, sink_log2(p.score.sinks, w.h0 + n));
    if constexpr (kVScale) {
      const float f = p.splits == 1 ? p.v_scale / l : p.v_scale;
#pragma unroll
      for (int e = 0; e < 8; ++e) acc[e] *= f;
    }
    if (p.splits == 1) {
      if constexpr (!kVScale) {
        const float inv_l = 1.f / l;
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[e] *= inv_l;
      }
      store_n<T, 8>(static_cast<T*>(p.o) + bh * p.head_dim + 8 * c, acc);
    } else {
      const int64_t row = bh * p.splits + w.split;
      store_n<float, 8>(p.part_o + row * p.head_dim + 8 * c, acc);
      if (c == 0) p.part_ml[row] = make_float2(mx, l);
    }
  }
}

// One key tile of the online softmax, for a warp whose Sᵀ = K Qᵀ C fragments hold kSub 16-key
// sub-tiles x 8 heads (rows g, g + 8 = keys, cols 2t, 2t + 1 = heads; lane = 4g + t). x[sub] =
// {row g: heads 2t, 2t + 1; row g + 8: heads 2t, 2t + 1}: scores in exp2 units with the bias,
// -inf where masked (not every key of the tile is). m: running max per head (log2 units, the
// same in the 8 lanes that share t); l: this lane's share of the sum; o: Oᵀ's C fragments
// (rows = dims, cols = heads 2t, 2t + 1), rescaled by exp2(m_old - m_new) only when some
// head's max grew: after the first few tiles it rarely does (m = -inf at the start gives the
// factor exp2(-inf) = 0 on o = l = 0). Returns Pᵀ as the B fragments of Oᵀ += Vᵀ Pᵀ, rounded
// to M (16 bits, as FlashAttention does; l keeps fp32): pb0 = k rows 2t, 2t + 1 and pb1 =
// k rows 2t + 8, 2t + 9 of head g, Sᵀ's C fragment transposed by movmatrix.
template <class M, int kSub, int kMTiles>
__device__ __forceinline__ void softmax_tile(const float (&x)[kSub][4], float (&m)[2], float (&l)[2],
                                             float (&o)[kMTiles][4], uint32_t (&pb0)[kSub], uint32_t (&pb1)[kSub]) {
  float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int sub = 0; sub < kSub; ++sub) {
    mx[0] = fmaxf(mx[0], fmaxf(x[sub][0], x[sub][2]));
    mx[1] = fmaxf(mx[1], fmaxf(x[sub][1], x[sub][3]));
  }
  // Over the tile's keys (lanes g = 0..7): finite, since the tile's first key is in range.
  allreduce<8, XorOrder::low_first, 4>(mx, MaxOp{});
  const bool grew = mx[0] > m[0] || mx[1] > m[1];
  if (__any_sync(0xffffffffu, grew)) {
    float alpha[2];
#pragma unroll
    for (int jj = 0; jj < 2; ++jj) {
      const float m_new = fmaxf(m[jj], mx[jj]);
      alpha[jj] = exp2_approx(m[jj] - m_new);
      m[jj] = m_new;
      l[jj] *= alpha[jj];
    }
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
      o[mt][0] *= alpha[0];
      o[mt][1] *= alpha[1];
      o[mt][2] *= alpha[0];
      o[mt][3] *= alpha[1];
    }
  }
#pragma unroll
  for (int sub = 0; sub < kSub; ++sub) {
    float pr[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) pr[e] = exp2_approx(x[sub][e] - m[e & 1]);
    l[0] += pr[0] + pr[2];
    l[1] += pr[1] + pr[3];
    pb0[sub] = movmatrix_trans(pack2<M>(pr[0], pr[1]));
    pb1[sub] = movmatrix_trans(pack2<M>(pr[2], pr[3]));
  }
}

// ---------------------------------------------------------------------------------------
// Combine

// The combine's block: cols = head_dim / 4 float4 columns x lanes (a power of two, at most
// kCombineMaxThreads threads; combine_lanes), each thread loading kCombineBatch splits at once.
constexpr int kCombineMaxThreads = 512;
constexpr int kCombineBatch = 8;

// Block b·heads + h merges the splits of query head h of sequence b that hold keys (the first
// ceil(ctx / chunk); the blocks of the others wrote nothing): M = max m_s, L = sum_s
// exp2(m_s - M) l_s, o = sum_s exp2(m_s - M) o_s / L. Thread (col, lane) takes float4 column
// col and splits lane, lane + lanes, ...: it issues the loads of kCombineBatch of them before
// merging any (online, merge_mlo), so that up to kCombineBatch·lanes splits cost one L2 round
// trip; then the lanes of a column merge pairwise through shared memory, log2(lanes) steps.
template <class T, class P>
__global__ void __launch_bounds__(kCombineMaxThreads) combine_kernel(const P p) {
  __shared__ float2 red_ml[kCombineMaxThreads];
  __shared__ float4 red_o[kCombineMaxThreads];
  const int bh = static_cast<int>(blockIdx.x);
  const int cols = p.head_dim / 4, lanes = static_cast<int>(blockDim.x) / cols;
  const int col = static_cast<int>(threadIdx.x) % cols, lane = static_cast<int>(threadIdx.x) / cols;
  // context_lens is the launch's input, not the main kernel's output: read before the wait.
  const int ctx = p.context_lens[bh / p.heads];
  const int n = min(p.splits, (ctx - window_base(ctx, p.window, p.key_align) + p.chunk - 1) / p.chunk);
  const float2* ml = p.part_ml + int64_t{bh} * p.splits;
  const float* po = p.part_o + int64_t{bh} * p.splits * p.head_dim + 4 * col;
  allow_dependents();  // a model's next projection may start fetching its weights
  wait_for_primary();

  float m = -INFINITY, l = 0.f;
  float4 o = make_float4(0.f, 0.f, 0.f, 0.f);
  for (int s0 = lane; s0 < n; s0 += kCombineBatch * lanes) {
    float2 x[kCombineBatch];
    float4 v[kCombineBatch];
#pragma unroll
    for (int i = 0; i < kCombineBatch; ++i) {
      const int s = s0 + i * lanes;
      x[i] = make_float2(-INFINITY, 0.f);
      v[i] = make_float4(0.f, 0.f, 0.f, 0.f);
      if (s < n) {
        x[i] = ml[s];
        v[i] = *reinterpret_cast<const float4*>(po + int64_t{s} * p.head_dim);
      }
    }
#pragma unroll
    for (int i = 0; i < kCombineBatch; ++i) merge_mlo(m, l, o, x[i].x, x[i].y, v[i]);
  }
  // Lanes [half, 2 half) hand over to lanes [0, half); each slot is written once, then read
  // once after the barrier, so one barrier per step.
  for (int half = lanes / 2; half > 0; half /= 2) {
    if (lane >= half && lane < 2 * half) {
      red_ml[threadIdx.x] = make_float2(m, l);
      red_o[threadIdx.x] = o;
    }
    __syncthreads();
    if (lane < half) {
      const int from = static_cast<int>(threadIdx.x) + half * cols;
      merge_mlo(m, l, o, red_ml[from].x, red_ml[from].y, red_o[from]);
    }
  }
  if (lane == 0) {
    l = plus_sink(l, m, sink_log2(p.score.sinks, bh % p.heads));
    const float inv_l = 1.f / l;  // l >= 1: the split holding the max contributes exp2(0)
    const float out[4] = {o.x * inv_l, o.y * inv_l, o.z * inv_l, o.w * inv_l};
    store_n<T, 4>(static_cast<T*>(p.o) + int64_t{bh} * p.head_dim + 4 * col, out);
  }
}

// ---------------------------------------------------------------------------------------
// Host side

// [batch, heads, splits, head_dim] fp32 o, then [batch, heads, splits] float2 (m, l).
template <class Params>
std::size_t partial_o_bytes(const Params& p, int64_t splits) {
  return static_cast<std::size_t>(ceil_div(p.batch * p.heads * splits * p.head_dim * 4, 256) * 256);
}

// Workspace of `splits` splits' partials: none for one split (the kernel writes o itself).
template <class Params>
std::size_t partials_workspace(const Params& p, int64_t splits) {
  return splits == 1 ? 0 : partial_o_bytes(p, splits) + static_cast<std::size_t>(p.batch * p.heads * splits * 8);
}

// SMs of the launch's device; `what` is the error message when the context has no caps.
inline int sm_count(const LaunchContext& ctx, const char* what) {
  if (!ctx.caps || ctx.caps->sm_count <= 0) throw std::invalid_argument(what);
  return ctx.caps->sm_count;
}

// Resident blocks per SM of `kernel` with `threads` threads and smem_bytes of dynamic shared
// memory (opted in above the default 48 KB), at least 1. Call it once per kernel: the opt-in
// is per function.
template <class Kernel>
int resident_blocks(Kernel kernel, int threads, int smem_bytes, const char* what) {
  if (smem_bytes > 48 * 1024)
    check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes), what);
  int n = 0;
  check_cuda(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, threads, smem_bytes), what);
  return n > 1 ? n : 1;
}

// Lanes per float4 column of the combine (combine_kernel): the fewest, as a power of two, whose
// kCombineBatch loads each cover every split, within kCombineMaxThreads.
inline int combine_lanes(int head_dim, int splits) {
  const int cols = head_dim / 4;
  int lanes = 1;
  while (lanes * kCombineBatch < splits && 2 * lanes * cols <= kCombineMaxThreads) lanes *= 2;
  return lanes;
}

// Launches `kernel` over units x d.splits blocks of `threads` threads with smem_bytes of dynamic
// shared memory (d's splits and chunk already planned) and, with splits, places the partials in
// ctx.workspace and launches the combine as a programmatic dependent launch (sm_90).
template <class T, class P, class Params, class Kernel>
void launch_split(P& d, const Params& p, const LaunchContext& ctx, Kernel kernel, int64_t units, int threads,
                  const char* name, int smem_bytes = 0) {
  if (d.splits > 1) {
    d.part_o = static_cast<float*>(ctx.workspace);
    d.part_ml = reinterpret_cast<float2*>(static_cast<char*>(ctx.workspace) + partial_o_bytes(p, d.splits));
  }
  // The combine is a programmatic dependent launch: the main kernel lets it launch early, and it
  // waits for the partials. So is the main kernel where the caller asks (p.launch_early): its
  // blocks start while the kernel ahead runs, if that one allows it, and wait for it before
  // reading anything.
  const int arch = ctx.caps->arch();
  launch_pdl(kernel, dim3(static_cast<unsigned>(units), static_cast<unsigned>(d.splits)),
             dim3(static_cast<unsigned>(threads)), static_cast<std::size_t>(smem_bytes), ctx.stream, p.launch_early,
             arch, name, d);
  check_launch(name);
  if (d.splits == 1) return;
  launch_pdl(combine_kernel<T, P>, dim3(static_cast<unsigned>(p.batch * p.heads)),
             dim3(static_cast<unsigned>(d.head_dim / 4 * combine_lanes(d.head_dim, d.splits))), 0, ctx.stream, true,
             arch, name, d);
  check_launch(name);
}

}  // namespace splitkv
}  // namespace attnbench
