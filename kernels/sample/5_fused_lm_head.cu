// sample rung 5, fused_lm_head: the LM-head form with the logits never in memory (the FMMS idea,
// fused matmul-and-sample): rung 4 writes batch · vocab fp32 logits and reads them back, here
// W is streamed once and each logit lives in registers only.
//   Kernel 1, the tiles: a block of 8 warps takes 128 rows of W, a warp 16 of them (its tile),
//   and computes the tile's logits for every batch row with mma.sync m16n8k16 (W rows as M, the
//   batch rows as N in n-tiles of 8, fp32 accumulate): W's fragments come straight from global
//   memory into two register buffers of a 64-column chunk each, taken in turn, so up to two
//   chunks are in flight a warp (no shared memory: each W value is used from its register by
//   every n-tile), the hidden rows are staged in shared memory 256 columns at a time for all warps. Per (row, tile) it writes only a summary: the tile's max
//   logit m_i and s_i = Σ exp((x - m_i) / T) over its 16 tokens (greedy: the max and its first
//   index), 8 bytes where rung 4 writes 64.
//   Kernel 2, the draw, a block per row: M = max m_i, the tiles' weights S_i = s_i · exp((m_i - M)
//   / T) and their prefix sum (a thread's run of tiles, then CUB's block scan) find the tile where
//   u · W falls; the block recomputes that tile's 16 logits for the row (a warp a logit) and finds
//   the token inside it, in vocabulary order, as every rung does.
// The sums' order, within the reference's contract (reference/sample.hpp): a logit's k16 steps
// chained in K order, each step over 16 consecutive columns (lane t holds columns 4t..4t+3 of the
// step, the same permutation in A and B), so every partial sum is a contiguous range of K; the
// recompute sums contiguous runs a lane and adjacent lanes in a tree. A weight is two exps
// (exp((x - m_i) / T) · exp((m_i - M) / T)) and a product, which reference/sample.cpp counts for
// the LM-head form, and its prefix passes 4 (the tile's sum) + a run + the scan + 16 (inside the
// tile) additions.
// Temperature and greedy only: top-k, top-p and min-p need a threshold over the whole row, which
// a summary of max and sum does not hold (supports() refuses them at T > 0; greedy ignores them).
// Batch 1-64 (8 n-tiles), d a multiple of 64 (the chunk), fp16/bf16, sm_80+ (mma.sync).
// Verified on an H200 (run 289: every LM-head case it runs, memcheck and racecheck clean) and
// timed beside rung 4 (cold, W [128256, 4096] bf16): batch 1, 8, 64: 0.3134, 0.3348, 0.5369 ms =
// 0.91x, 0.86x, 0.70x rung 4 (75.4%, 70.6%, 44.1% of the floor): slower everywhere; issue 52's
// "the fused form faster than GEMM + our sampling" is not met. Where it loses: cuBLAS streams W at
// 3.7 TB/s, this kernel's 8-byte loads two 64-column chunks ahead at 3.35 TB/s at batch 1, and at
// batch 64 its 8 n-tiles of mma.sync a 16-row tile and the hidden rows re-staged from L2 for
// every 128 rows of W (64 x 4096 x 2 bytes, 1002 times: 0.5 GB) make it compute- and L2-bound,
// while the logits it saves are 3% of W's bytes. What would change that: 16-byte loads deeper in
// flight (stream_gemv's register ring, kernels/gemm_q/4_stream_gemv.cu), and at batch 64 a
// Hopper tile (wgmma, W through TMA) that keeps the hidden rows in shared memory across many
// vocab tiles.
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include "kernels/common/dispatch.cuh"
#include "kernels/common/mma.cuh"
#include "kernels/common/philox.hpp"
#include "kernels/sample/draw.cuh"
#include "kernels/sample/rungs.hpp"

namespace attnbench::sample_impl {
namespace {

constexpr int kTile = 16;                  // vocab rows a warp (an mma's M)
constexpr int kWarps = 8;                  // a block: 128 rows of W
constexpr int kChunk = 64;                 // K columns a warp's registers hold: 4 k16 steps
constexpr int kStage = 256;                // K columns of the hidden rows staged in shared memory
constexpr int kStageRow = kStage + 16;     // elements a staged row: 544 bytes, so the 8-byte B
                                           // loads of a half-warp (4 rows x 32 bytes) hit distinct banks
constexpr int kMostNTiles = 8;             // batch <= 64
constexpr int kDrawThreads = 256;          // kernel 2's block

// A tile's summary for one batch row: T > 0 {m_i, s_i}; greedy {max, first index as bits}.
struct Summary {
  float m, s;
};

__host__ __device__ inline int64_t tiles(const SampleParams& p) { return (p.vocab + kTile - 1) / kTile; }

// Kernel 1. kNTiles: ceil(batch / 8).
template <class T, int kNTiles>
__global__ void __launch_bounds__(kWarps * 32, 2) tile_kernel(SampleParams p, Summary* summaries) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* staged = reinterpret_cast<T*>(smem_raw);  // [kNTiles * 8][kStageRow]
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int vocab = static_cast<int>(p.vocab), d = static_cast<int>(p.d), batch = static_cast<int>(p.batch);
  const int64_t tile = static_cast<int64_t>(blockIdx.x) * kWarps + warp;
  const int row0 = static_cast<int>(tile * kTile) + g, row1 = row0 + 8;
  // Rows past the vocabulary read the last row (valid memory) and are masked below.
  const T* w0 = static_cast<const T*>(p.lm_head) + static_cast<int64_t>(min(row0, vocab - 1)) * d + 4 * t;
  const T* w1 = static_cast<const T*>(p.lm_head) + static_cast<int64_t>(min(row1, vocab - 1)) * d + 4 * t;
  const T* hidden = static_cast<const T*>(p.hidden);

  // A chunk's A fragments: step s, rows g and g + 8, columns 16 s + 4 t .. + 3 (8 bytes each).
  auto load = [&](uint2(&a)[4][2], int col) {
#pragma unroll
    for (int s = 0; s < 4; ++s) {
      a[s][0] = __ldg(reinterpret_cast<const uint2*>(w0 + col + 16 * s));
      a[s][1] = __ldg(reinterpret_cast<const uint2*>(w1 + col + 16 * s));
    }
  };
  float acc[kNTiles][4] = {};
  // A chunk's 4 k16 steps (each over 16 consecutive columns, in order) for every n-tile.
  auto steps = [&](const uint2(&a)[4][2], int col) {
    const T* b = staged + g * kStageRow + col % kStage + 4 * t;
#pragma unroll
    for (int s = 0; s < 4; ++s) {
#pragma unroll
      for (int j = 0; j < kNTiles; ++j) {
        // B (k, n) = hidden (batch row 8 j + g, column): the same columns as A's, in the same order.
        const uint2 bv = *reinterpret_cast<const uint2*>(b + j * 8 * kStageRow + 16 * s);
        mma_16816<T>(acc[j], a[s][0].x, a[s][1].x, a[s][0].y, a[s][1].y, bv.x, bv.y);
      }
    }
  };
  // Two register buffers in turn, chunks 2i and 2i + 1: a buffer is reloaded as soon as its
  // steps are issued, so while a warp waits for one chunk the next is in flight too.
  uint2 even[4][2], odd[4][2] = {};
  load(even, 0);
  if (kChunk < d) load(odd, kChunk);
  for (int col = 0; col < d; col += 2 * kChunk) {
    if (col % kStage == 0) {
      // Stage the hidden rows' next kStage columns (rows past the batch as zeros).
      __syncthreads();  // every warp is done with the last stage
      const int width = min(kStage, d - col);
      for (int i = threadIdx.x; i < kNTiles * 8 * (width / 4); i += kWarps * 32) {
        const int r = i / (width / 4), c = i % (width / 4) * 4;
        uint2 v = make_uint2(0, 0);
        if (r < batch) v = *reinterpret_cast<const uint2*>(hidden + static_cast<int64_t>(r) * d + col + c);
        *reinterpret_cast<uint2*>(staged + r * kStageRow + c) = v;
      }
      __syncthreads();
    }
    steps(even, col);
    if (col + 2 * kChunk < d) load(even, col + 2 * kChunk);
    if (col + kChunk < d) {  // d / 64 odd: the last pair has one chunk
      steps(odd, col + kChunk);
      if (col + 3 * kChunk < d) load(odd, col + 3 * kChunk);
    }
  }

  // The summaries. acc[j] = rows g, g, g + 8, g + 8 x batch columns 8 j + 2 t, + 1, 8 j + 2 t, + 1;
  // a column's 16 logits lie in the 8 lanes of one t (lane bits 2-4).
  if (tile >= tiles(p)) return;
  const bool valid0 = row0 < vocab, valid1 = row1 < vocab;
  const float inv_t = p.temperature > 0 ? 1.f / p.temperature : 0.f;
  Summary* out = summaries + tile;
#pragma unroll
  for (int j = 0; j < kNTiles; ++j) {
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      const float x0 = acc[j][c], x1 = acc[j][c + 2];
      const int col = 8 * j + 2 * t + c;
      if (p.temperature == 0) {
        // The max and its first index: row0's before row1's, lower lanes' before higher.
        float v = valid0 ? x0 : -INFINITY;
        int at = valid0 ? row0 : INT_MAX;
        if (valid1 && x1 > v) v = x1, at = row1;
#pragma unroll
        for (int off = 4; off < 32; off <<= 1) {
          const float ov = __shfl_xor_sync(0xffffffffu, v, off);
          const int oat = __shfl_xor_sync(0xffffffffu, at, off);
          if (ov > v || (ov == v && oat < at)) v = ov, at = oat;
        }
        if (g == 0 && col < batch) out[static_cast<int64_t>(col) * tiles(p)] = {v, __int_as_float(at)};
      } else {
        float m = fmaxf(valid0 ? x0 : -INFINITY, valid1 ? x1 : -INFINITY);
#pragma unroll
        for (int off = 4; off < 32; off <<= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
        float s = (valid0 ? weight(x0, m, inv_t) : 0.f) + (valid1 ? weight(x1, m, inv_t) : 0.f);
#pragma unroll
        for (int off = 4; off < 32; off <<= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
        if (g == 0 && col < batch) out[static_cast<int64_t>(col) * tiles(p)] = {m, s};
      }
    }
  }
}

// One logit of `row` recomputed by a warp: lane l sums columns [l d / 32, (l + 1) d / 32) in
// order, then adjacent lanes pair up (offsets 1, 2, 4, 8, 16): every partial sum a contiguous
// range of K. The result in lane 0.
template <class T>
__device__ float recompute(const T* h, const T* w, int d) {
  const int lane = threadIdx.x % 32, run = d / 32;  // d a multiple of 64: run even
  const T* hl = h + lane * run;
  const T* wl = w + lane * run;
  float sum = 0;
#pragma unroll 8
  for (int j = 0; j < run; j += 2) {
    const uint32_t hw = __ldg(reinterpret_cast<const unsigned*>(hl + j)), ww = __ldg(reinterpret_cast<const unsigned*>(wl + j));
    float a[2], b[2];
    to_floats<T, 1>(&hw, a);
    to_floats<T, 1>(&ww, b);
    sum += a[0] * b[0];  // exact: 16-bit values multiply exactly in fp32
    sum += a[1] * b[1];
  }
#pragma unroll
  for (int off = 1; off < 32; off <<= 1) {
    const float other = __shfl_down_sync(0xffffffffu, sum, off);
    if (lane % (2 * off) == 0) sum += other;
  }
  return sum;
}

// Kernel 2: a block per row.
template <class T>
__global__ void __launch_bounds__(kDrawThreads) draw_kernel(SampleParams p, const Summary* summaries) {
  const int64_t row = blockIdx.x;
  const int n = static_cast<int>(tiles(p)), vocab = static_cast<int>(p.vocab), d = static_cast<int>(p.d);
  const Summary* sum = summaries + row * n;
  // A thread's contiguous run of tiles.
  const int per = (n + kDrawThreads - 1) / kDrawThreads, first = threadIdx.x * per, last = min(n, first + per);
  struct Best {
    float v;
    int i;
  };
  using Reduce = cub::BlockReduce<Best, kDrawThreads>;
  using Scan = cub::BlockScan<float, kDrawThreads>;
  using MinReduce = cub::BlockReduce<int, kDrawThreads>;
  __shared__ union {
    typename Reduce::TempStorage reduce;
    typename Scan::TempStorage scan;
    typename MinReduce::TempStorage min_reduce;
  } tmp;
  __shared__ Best best;
  __shared__ int found_tile;
  __shared__ float found_before;
  __shared__ float logits[kTile];

  // M: the largest tile max, the first tile holding it (greedy: its summary's first index).
  Best mine{-INFINITY, INT_MAX};
  for (int i = first; i < last; ++i)
    if (sum[i].m > mine.v) mine = {sum[i].m, i};
  const Best b = Reduce(tmp.reduce).Reduce(mine, [](const Best& a, const Best& c) {
    return a.v > c.v || (a.v == c.v && a.i < c.i) ? a : c;
  });
  if (threadIdx.x == 0) best = b;
  __syncthreads();
  if (p.temperature == 0) {
    if (threadIdx.x == 0) p.tokens[row] = __float_as_int(sum[best.i].s);
    return;
  }
  const float m = best.v, inv_t = 1.f / p.temperature;
  // The tiles' weights S_i = s_i · exp((m_i - M) / T), their prefix sum and W.
  // __fmul_rn: no FMA contraction, so the run's sum and the search below add the same S_i.
  float run = 0;
  for (int i = first; i < last; ++i) run += __fmul_rn(sum[i].s, weight(sum[i].m, m, inv_t));
  float before, total;
  Scan(tmp.scan).ExclusiveSum(run, before, total);
  const float target = sample_uniform(p.seed, static_cast<uint64_t>(row)) * total;
  // The first tile, in order, whose prefix passes the target; else the last of positive weight.
  int hit = INT_MAX, positive = -1;
  float at = before, hit_before = 0, positive_before = 0;
  for (int i = first; i < last; ++i) {
    const float w = __fmul_rn(sum[i].s, weight(sum[i].m, m, inv_t));
    if (w > 0) positive = i, positive_before = at;
    if (hit == INT_MAX && w > 0 && at + w > target) hit = i, hit_before = at;
    at += w;
  }
  __syncthreads();  // tmp is reused
  const int first_hit = MinReduce(tmp.min_reduce).Reduce(hit, [](int a, int c) { return a < c ? a : c; });
  if (threadIdx.x == 0) found_tile = first_hit;
  __syncthreads();
  if (found_tile != INT_MAX) {
    if (hit == found_tile) found_before = hit_before;
  } else {
    __syncthreads();
    const int last_positive =
        MinReduce(tmp.min_reduce).Reduce(positive, [](int a, int c) { return a > c ? a : c; });
    if (threadIdx.x == 0) found_tile = last_positive;
    __syncthreads();
    if (positive == found_tile) found_before = positive_before;
  }
  __syncthreads();
  const int tile = found_tile;
  // Its 16 logits for this row, a warp each (8 warps, 2 rounds).
  const T* h = static_cast<const T*>(p.hidden) + row * d;
  for (int k = threadIdx.x / 32; k < kTile; k += kDrawThreads / 32) {
    const int token = tile * kTile + k;
    if (token < vocab) {
      const float x = recompute(h, static_cast<const T*>(p.lm_head) + static_cast<int64_t>(token) * d, d);
      if (threadIdx.x % 32 == 0) logits[k] = x;
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    // The token inside the tile, in vocabulary order, each weight exp((x - m_i) / T) · exp((m_i - M) / T).
    const float mi = sum[tile].m, factor = weight(mi, m, inv_t);
    float acc = found_before;
    int token = -1, last_positive = -1;
    for (int k = 0; k < kTile && tile * kTile + k < vocab; ++k) {
      const float w = __fmul_rn(weight(logits[k], mi, inv_t), factor);
      if (w > 0) last_positive = tile * kTile + k;
      if (token < 0 && w > 0 && acc + w > target) token = tile * kTile + k;
      acc += w;
    }
    p.tokens[row] = static_cast<int32_t>(token >= 0 ? token : last_positive >= 0 ? last_positive : tile * kTile);
  }
}

template <class T, int kNTiles>
void launch_tiles(const SampleParams& p, Summary* summaries, cudaStream_t stream) {
  const int64_t blocks = (tiles(p) + kWarps - 1) / kWarps;
  const std::size_t smem = static_cast<std::size_t>(kNTiles) * 8 * kStageRow * sizeof(T);
  tile_kernel<T, kNTiles><<<static_cast<unsigned>(blocks), kWarps * 32, smem, stream>>>(p, summaries);
}

}  // namespace

std::string fused_lm_head_supports(const SampleParams& p, const DeviceCaps& caps) {
  if (p.temperature > 0) {  // greedy ignores the filters
    if (p.top_k > 0 && p.top_k < p.vocab) return "temperature and greedy only: top-k needs the whole row's threshold";
    if (p.top_p < 1) return "temperature and greedy only: top-p needs the whole row's threshold";
    if (p.min_p > 0) return "temperature and greedy only: min-p needs the whole row's max before any weight";
  }
  if (p.batch > 8 * kMostNTiles) return "batch must be <= 64 (8 n-tiles of the mma a block)";
  if (p.d % kChunk != 0) return "hidden must be a multiple of 64 (the kernel's K chunk)";
  if (caps.cc_major < 8) return "needs sm_80 (mma.sync m16n8k16 on fp16/bf16)";
  return "";
}

std::size_t fused_lm_head_workspace(const SampleParams& p) {
  return round_up_256(static_cast<std::size_t>(p.batch * tiles(p)) * sizeof(Summary));
}

void fused_lm_head(const SampleParams& p, const LaunchContext& ctx) {
  auto* summaries = static_cast<Summary*>(ctx.workspace);
  with_16bit(p.dtype, "sample fused_lm_head", [&](auto tag) {
    using T = decltype(tag);
    with_value<1, 2, 3, 4, 5, 6, 7, 8>(static_cast<int>((p.batch + 7) / 8), "sample fused_lm_head", "n-tiles",
                                       [&](auto n_tiles) {
                                         launch_tiles<T, decltype(n_tiles)::value>(p, summaries, ctx.stream);
                                       });
    check_launch("sample/fused_lm_head: tiles");
    draw_kernel<T><<<static_cast<unsigned>(p.batch), kDrawThreads, 0, ctx.stream>>>(p, summaries);
  });
  check_launch("sample/fused_lm_head: draw");
}

}  // namespace attnbench::sample_impl
