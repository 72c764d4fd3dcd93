// gemm_q rung 3, splitk_gemv: the small-m (m <= 16) rung, one technique over rung 2: split-k
// across the blocks of a thread-block cluster (sm_90), so that the weight stream is spread over
// every SM, with all of a warp's weight bytes in flight at once, and the partial sums added in
// distributed shared memory instead of a workspace.
//
// Why rung 2 is slow at m <= 16 (H100, k 4096 n 4096 int4 g128, cold L2: 12.4 us, 698 GB/s on
// the 8.4 MB of weights, 1.43x cuBLAS fp16's 17.8 us; issue 52 asks >= 3.0x, ~5.9 us):
// - 128 blocks (n / 32) on 132 SMs, one block an SM: 64 KB of weights an SM, each of its 8 warps
//   4 k blocks of 2 KB deep, a 4-stage ring of which 3 are in flight;
// - every k block's scales (a new group each block: a DRAM miss in a cold L2) and activations
//   (k-split across warps: each warp its own slice, L2 or DRAM) are loaded only when the block is
//   consumed, so each of the 4 iterations waits out a memory latency of its own (~1 µs cold);
// - the 8 warps' partials then go through shared memory and a barrier.
//
// This rung:
// - A block is 4 warps, each one m16 tile of output channels (64 channels a block), all four over
//   the same k range: the activations a block reads are the same for its warps (L1 hits after
//   the first) and the activations' L2 reads are (n / 64) · m · k · 2 bytes, at m = 16 the weight
//   bytes again, not 4x them.
// - k is split over the `splits` blocks of a cluster (1, 2, 4 or 8: kernels/gemm_q/splitk_plan.hpp,
//   the most whose blocks are all resident at once, as cudaOccupancyMaxActiveClusters counts
//   them, ~4 an SM): k 4096 n 4096 runs 64 column blocks x 8 splits = 512 blocks of 128 threads,
//   each warp 4 steps of 128 k (16 rows x 64 bytes = 1 KB a step, 2 x 16-byte cp.async a lane);
//   k 4096 n 14336: 224 x 2 = 448 blocks, 16 steps a warp; k 14336 n 4096: 64 x 8, 14 steps a warp.
// - The weights go through rung 2's lane-private cp.async ring (each lane reads back only what it
//   copied: no barrier), here 8 stages deep, so that a warp has up to 7 KB in flight, a block 28
//   KB, an SM (4 blocks) ~112 KB: at k 4096 n 4096 a warp issues all 4 of its steps before its
//   first math, i.e. the whole 8.4 MB is asked for in the first few hundred ns.
// - The scales, zeros and activations of a block's k range are prefetched into L2 when the block
//   starts (prefetch.global.L2 per line; the activations with one bulk L2 prefetch a token), and
//   each step's activation fragments and scales are loaded into registers one step ahead, so no
//   iteration waits on a cold miss.
// - The dequant and the mma.sync m16n8k16 with W's channels as M (the swap: Cᵀ = W·Aᵀ, m = 1..8
//   pads only to one n8 token tile) are rung 2's, byte for byte the same arithmetic: (code -
//   zero) · scale exact then rounded once, fp32 accumulation.
// - The cluster's reduction: each block writes its 64 x 8·NT fp32 partials to its shared memory,
//   cluster barrier, then block r adds element slice r of the cluster's partials in rank order
//   (deterministic: the same sums in the same order on every run), rounds once and writes C,
//   cluster barrier (no block leaves while a peer reads it). No workspace, one launch.
// Requires sm_90 (clusters), m <= 16 (at m = 64 and 256 each block would re-read the
// activations of 4-16 token tiles: fused_mma / the Hopper rung's regime), k and group multiples
// of a lane's piece (32 int4 codes, 16 int8), as rung 2.
//
// Predicted (H100 SXM, cold L2, before any run): k 4096 n 4096 int4 g128, 8.4 MB of codes
// + 0.26 MB of scales at ~3.0 TB/s is 2.8 µs; with ~1.5 µs of launch, first-latency and the
// cluster reduction, ~4.5-5.5 µs at m = 1 and 4 (3.2-3.9x cuBLAS's 17.8 µs), ~5.5-6.5 µs at m = 16
// (the mma work doubles and each step's activation fragments are twice the registers). int8:
// twice the weight bytes, ~7.5-9 µs, ~2-2.3x.
// Measured (H100 80GB HBM3, run 277, cold L2, dense fp16 cuBLAS on the same weights and rung 2 in
// the same call): the prediction failed. Verified (smoke and cases/gemm_q with the other rungs,
// 378 passed, 0 failed; memcheck clean; bit for bit alike over 3 runs). int4 g128 k 4096 n 4096:
// 14.9, 15.2, 22.0 µs at m = 1, 4, 16, 1.20x, 1.18x, 0.81x dense cuBLAS (17.9, 18.0, 17.8 µs),
// slower than rung 2 (12.3, 12.9, 14.1 µs: 1.45x, 1.40x, 1.26x); int8 0.93x, 0.90x, 0.83x (rung 2
// 1.13x, 1.04x, 0.97x). Why it is slower than rung 2 is not yet profiled. Issue 52's 3.0x is met
// by no rung.
#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <array>
#include <string>
#include <type_traits>

#include "kernels/common/cluster_launch.hpp"
#include "kernels/common/copy.cuh"
#include "kernels/common/dispatch.cuh"
#include "kernels/common/mma.cuh"
#include "kernels/common/storage.cuh"
#include "kernels/gemm_q/dequant.cuh"
#include "kernels/gemm_q/rungs.hpp"
#include "kernels/gemm_q/splitk_plan.hpp"

namespace attnbench {
namespace {

namespace cg = cooperative_groups;

constexpr int kWarps = gemm_q_impl::kSplitkWarps;
constexpr int kThreads = kWarps * 32;
constexpr int kRows = gemm_q_impl::kSplitkRows;  // channels a block: one m16 tile a warp
constexpr int kPieces = 2;                       // 16-byte pieces a lane copies a step: rows g, g + 8
constexpr int kStages = 8;
constexpr int kRingBytes = kWarps * kStages * kPieces * 32 * 16;  // 32 KB

// Rung 2's dequantization in registers (dequant.cuh).
using gemm_q_impl::dequant_int4;
using gemm_q_impl::dequant_int8;
using gemm_q_impl::dequant_of;
using gemm_q_impl::Dequant;
using gemm_q_impl::word_of;

__device__ __forceinline__ void prefetch_line_l2(const void* p) {
  asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
}

// Lines [p, p + bytes) into L2, lane `part` of `parts` taking every parts-th line.
__device__ __forceinline__ void prefetch_lines(const void* p, int64_t bytes, int part, int parts) {
  if (bytes <= 0) return;
  const uintptr_t first = reinterpret_cast<uintptr_t>(p) & ~uintptr_t{127};
  const uintptr_t last = reinterpret_cast<uintptr_t>(p) + static_cast<uintptr_t>(bytes) - 1;
  for (uintptr_t line = first + 128 * static_cast<uintptr_t>(part); line <= last;
       line += 128 * static_cast<uintptr_t>(parts))
    prefetch_line_l2(reinterpret_cast<const void*>(line));
}

// What one step needs besides its weights, loaded a step ahead: the lane's activation pieces
// (token g + 8j, the k of its piece: 4 x 16 bytes int4, 2 x 16 bytes int8) and its two rows'
// scale and zero.
template <class T, int kBits, int kNt>
struct StepIn {
  static constexpr int kLoads = kBits == 4 ? 4 : 2;
  uint4 x[kNt][kLoads];
  float s[kPieces], z[kPieces];
};

template <class T, int kBits, int kNt>
__global__ void __launch_bounds__(kThreads, gemm_q_impl::kSplitkBlocksPerSm)
    splitk_gemv_kernel(const T* __restrict__ a, const uint8_t* __restrict__ w, const T* __restrict__ scales,
                       const uint8_t* __restrict__ zeros, T* __restrict__ c, int m, int n, int k, int group,
                       int groups, int steps) {
  constexpr int kK = 128 / kBits;  // k of a lane's 16-byte piece: 32 int4, 16 int8
  constexpr int kStep = 4 * kK;    // k of a step: the four lanes t of a row
  constexpr int kMt = 8 * kNt;     // tokens a block
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900  // clusters are sm_90's: supports() refuses older
                                                     // cards, whose build (sm_80) compiles a trap
  using In = StepIn<T, kBits, kNt>;
  __shared__ __align__(16) uint4 ring_all[kRingBytes / 16];
  __shared__ float part[kMt * kRows];  // this block's partials [token][channel], read by the cluster

  cg::cluster_group cluster = cg::this_cluster();
  const int splits = static_cast<int>(cluster.num_blocks()), rank = static_cast<int>(cluster.block_rank());
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int n0 = (blockIdx.x / splits) * kRows, row0 = n0 + 16 * warp;
  const int begin = static_cast<int>(static_cast<int64_t>(rank) * steps / splits);
  const int end = static_cast<int>(static_cast<int64_t>(rank + 1) * steps / splits);
  const int mine = end - begin;
  const int k_lo = begin * kStep, k_hi = min(k, end * kStep);  // this block's k range
  const int64_t row_bytes = static_cast<int64_t>(k) * kBits / 8;
  uint4* ring = ring_all + warp * kStages * kPieces * 32;  // [stage][piece][lane]

  // The block's activations, scales and zeros into L2 (each is read a step at a time below, by
  // every column block: without this each step's first reader waits on DRAM).
  if (k_hi > k_lo) {
    if (warp == 0 && lane < m)  // a token a lane, 4 KB a bulk prefetch
      for (int kb = k_lo; kb < k_hi; kb += 2048)
        prefetch_l2(a + static_cast<int64_t>(lane) * k + kb, static_cast<unsigned>(min(2048, k_hi - kb) * sizeof(T)));
    const int g_lo = k_lo / group, g_hi = (k_hi - 1) / group + 1;
#pragma unroll
    for (int p = 0; p < kPieces; ++p) {
      const int row = row0 + g + 8 * p;
      if (row < n) {
        prefetch_lines(scales + static_cast<int64_t>(row) * groups + g_lo, (g_hi - g_lo) * sizeof(T), t, 4);
        if (zeros) prefetch_lines(zeros + static_cast<int64_t>(row) * groups + g_lo, g_hi - g_lo, t, 4);
      }
    }
  }

  // The warp's i-th step into stage i % kStages; past its last an empty group, so that
  // wait_group's count stays right.
  auto issue = [&](int i) {
    if (i < mine) {
      const int kk = (begin + i) * kStep + kK * t;
#pragma unroll
      for (int p = 0; p < kPieces; ++p) {
        const int row = row0 + g + 8 * p;
        const bool valid = kk < k && row < n;
        const uint8_t* src = valid ? w + row * row_bytes + kk * kBits / 8 : w;
        cp_async_16(smem_addr(ring + ((i % kStages) * kPieces + p) * 32 + lane), src, valid);
      }
    }
    cp_async_commit();
  };
  // Step i's activations and scales into registers (zeros past m, k or n).
  auto load_in = [&](int i, In& in) {
    const int kk = (begin + i) * kStep + kK * t;
    const bool kvalid = i < mine && kk < k;
#pragma unroll
    for (int j = 0; j < kNt; ++j) {
      const int tok = 8 * j + g;
      const bool valid = kvalid && tok < m;
      const uint4* src = reinterpret_cast<const uint4*>(a + static_cast<int64_t>(valid ? tok : 0) * k + (valid ? kk : 0));
#pragma unroll
      for (int q = 0; q < In::kLoads; ++q) in.x[j][q] = valid ? __ldg(src + q) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int p = 0; p < kPieces; ++p) {
      const int row = row0 + g + 8 * p;
      const bool valid = kvalid && row < n;
      const int64_t at = static_cast<int64_t>(valid ? row : 0) * groups + (valid ? kk / group : 0);
      in.s[p] = valid ? to_float(scales[at]) : 0.f;
      in.z[p] = valid && zeros ? static_cast<float>(zeros[at]) : static_cast<float>(1 << (kBits - 1));
    }
  };

  float acc[kNt][4] = {};
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) issue(s);
  In cur;
  load_in(0, cur);
  for (int i = 0; i < mine; ++i) {
    In nxt;
    load_in(i + 1, nxt);  // a step ahead (zeros past the last)
    cp_async_wait<kStages - 2>();
    uint4 wq[kPieces];
#pragma unroll
    for (int p = 0; p < kPieces; ++p) wq[p] = ring[((i % kStages) * kPieces + p) * 32 + lane];
    issue(i + kStages - 1);  // into the stage read last iteration, whose words are in registers

    const Dequant<T> d0 = dequant_of<T>(cur.s[0], cur.z[0]), d1 = dequant_of<T>(cur.s[1], cur.z[1]);
    if constexpr (kBits == 4) {
      // Word q holds k kk + 8q + (0..7); step h takes codes (2h, 2h + 4) as slots 2t, 2t + 1 and
      // (2h + 1, 2h + 5) as slots 2t + 8, 2t + 9 (rung 2's order).
#pragma unroll
      for (int q = 0; q < 4; ++q) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const uint32_t w0 = word_of(wq[0], q), w1 = word_of(wq[1], q);
          const uint32_t a0 = dequant_int4<T>(w0, 2 * h, d0), a2 = dequant_int4<T>(w0, 2 * h + 1, d0);
          const uint32_t a1 = dequant_int4<T>(w1, 2 * h, d1), a3 = dequant_int4<T>(w1, 2 * h + 1, d1);
#pragma unroll
          for (int j = 0; j < kNt; ++j) {
            const uint4& x = cur.x[j][q];
            const uint32_t lo = h ? x.y : x.x, hi = h ? x.w : x.z;  // k (2h, 2h+1), (2h+4, 2h+5)
            mma_16816<T>(acc[j], a0, a1, a2, a3, __byte_perm(lo, hi, 0x5410), __byte_perm(lo, hi, 0x7632));
          }
        }
      }
    } else {
      // Word q holds k kk + 4q + (0..3); its step takes bytes (0, 2) as slots 2t, 2t + 1 and
      // (1, 3) as slots 2t + 8, 2t + 9.
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const uint32_t w0 = word_of(wq[0], q), w1 = word_of(wq[1], q);
        const uint32_t a0 = dequant_int8<T>(w0, 0, d0), a2 = dequant_int8<T>(w0, 1, d0);
        const uint32_t a1 = dequant_int8<T>(w1, 0, d1), a3 = dequant_int8<T>(w1, 1, d1);
#pragma unroll
        for (int j = 0; j < kNt; ++j) {
          const uint4& x = cur.x[j][q / 2];
          const uint32_t lo = q % 2 ? x.z : x.x, hi = q % 2 ? x.w : x.y;  // k (0, 1), (2, 3) of word q
          mma_16816<T>(acc[j], a0, a1, a2, a3, __byte_perm(lo, hi, 0x5410), __byte_perm(lo, hi, 0x7632));
        }
      }
    }
    cur = nxt;
  }
  cp_async_wait<0>();

  // The cluster's sum: every block's partials in shared memory, then block `rank` adds slice
  // `rank` of the elements over the cluster's blocks in rank order, one rounding, C along n.
#pragma unroll
  for (int j = 0; j < kNt; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) part[(8 * j + 2 * t + e % 2) * kRows + 16 * warp + g + 8 * (e / 2)] = acc[j][e];
  cluster.sync();
  constexpr int kElems = kMt * kRows;
  const int e_lo = rank * kElems / splits, e_hi = (rank + 1) * kElems / splits;
  for (int e = e_lo + static_cast<int>(threadIdx.x); e < e_hi; e += kThreads) {
    const int tok = e / kRows, row = e % kRows;
    if (tok >= m || n0 + row >= n) continue;
    float sum = 0.f;
    for (int r = 0; r < splits; ++r) sum += cluster.map_shared_rank(part, r)[e];
    c[static_cast<int64_t>(tok) * n + n0 + row] = from_float<T>(sum);
  }
  cluster.sync();  // no block leaves while a peer may read its partials
#else
  (void)a, (void)w, (void)scales, (void)zeros, (void)c, (void)m, (void)n, (void)k, (void)group, (void)groups, (void)steps;
  __trap();
#endif
}

// How many clusters of 1, 2, 4 and 8 blocks of this kernel the card holds at once (the GPCs'
// SM counts decide how 4 blocks an SM pack into clusters of 8), asked once per kernel on its first
// launch (verification, before any timing or graph capture); the model where the query fails, and
// an answer of 0 kept as 0 (that cluster size cannot run: the plan takes a smaller one).
template <class T, int kBits, int kNt>
int64_t resident_clusters(int splits, int sm_count) {
  static const std::array<int64_t, 4> clusters = [sm_count] {
    std::array<int64_t, 4> c{};
    for (int i = 0; i < 4; ++i) {
      const int s = 1 << i;
      const ClusterLaunch one(s, kThreads, static_cast<unsigned>(s));
      int n = 0;
      const bool queried =
          cudaOccupancyMaxActiveClusters(&n, splitk_gemv_kernel<T, kBits, kNt>, &one.cfg) == cudaSuccess;
      c[i] = gemm_q_impl::splitk_clusters(queried, n, sm_count, s);
    }
    (void)cudaGetLastError();  // a failed query is answered by the model, not by the next launch's check
    return c;
  }();
  return clusters[splits == 1 ? 0 : splits == 2 ? 1 : splits == 4 ? 2 : 3];
}

template <class T, int kBits, int kNt>
void launch(const GemmQParams& p, const LaunchContext& ctx) {
  const int sm_count = ctx.caps ? ctx.caps->sm_count : 0;
  const gemm_q_impl::SplitkPlan plan = gemm_q_impl::plan_splitk(
      p.n, p.k, p.bits, [&](int splits) { return resident_clusters<T, kBits, kNt>(splits, sm_count); });
  const ClusterLaunch launch(static_cast<int>(plan.splits), kThreads, static_cast<unsigned>(plan.blocks()),
                            ctx.stream);
  check_cuda(cudaLaunchKernelEx(&launch.cfg, splitk_gemv_kernel<T, kBits, kNt>, static_cast<const T*>(p.a), p.w,
                                static_cast<const T*>(p.scales), p.zeros, static_cast<T*>(p.c), static_cast<int>(p.m),
                                static_cast<int>(p.n), static_cast<int>(p.k), static_cast<int>(p.group),
                                static_cast<int>(p.groups()), static_cast<int>(plan.steps)),
             "gemm_q/splitk_gemv");
  check_launch("gemm_q/splitk_gemv");
}

}  // namespace

void gemm_q_impl::splitk_gemv(const GemmQParams& p, const LaunchContext& ctx) {
  gemm_q_impl::with_small_m(p, "gemm_q/splitk_gemv", [&](auto tag, auto bits, auto nt) {
    launch<decltype(tag), decltype(bits)::value, decltype(nt)::value>(p, ctx);
  });
}

std::string gemm_q_impl::splitk_gemv_supports(const GemmQParams& p, const DeviceCaps& caps) {
  std::string r = common_reason(p);
  if (!r.empty()) return r;
  if (p.m > kSplitkMaxM)
    return "m > " + std::to_string(kSplitkMaxM) +
           ": the split-k GEMV is the small-m rung (one or two 8-token tiles); fused_mma and dequant_cublas take "
           "larger m";
  if (caps.arch() < 90) return "needs sm_90 (thread-block clusters and distributed shared memory)";
  const int64_t piece = 128 / p.bits;
  if (p.k % piece != 0 || p.group % piece != 0)
    return "k and group must be multiples of " + std::to_string(piece) + " (a lane's 16 bytes of codes, one group)";
  if (plan_splitk(p.n, p.k, p.bits, caps.sm_count).blocks() > INT_MAX)
    return "n too large: its column blocks exceed gridDim.x";
  return {};
}

}  // namespace attnbench
