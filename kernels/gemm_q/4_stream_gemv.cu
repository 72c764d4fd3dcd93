// gemm_q rung 4, stream_gemv: the small-m (m <= 16) rung rebuilt around what Nsight Compute showed
// of rungs 2 and 3 (bench notes, session 29's first call: H100, k 4096 n 4096 int4, m = 1): both
// are latency- and issue-bound, not DRAM-bound. fused_mma ran 2.8 M warp instructions for 16.8 M
// weights (one SM block of 8 warps: 2 warps a scheduler, an instruction issued every 2.7 cycles,
// 660 GB/s); splitk_gemv 4.2 M (3.9 warps a scheduler, 530 GB/s). Two techniques over rung 2:
//
// - The scale leaves the weight path. Rungs 2-3 make each weight (code - zero) · scale in the
//   dtype (a subtract and a multiply a pair). Here each k step (128 int4 codes of a row, 64 int8)
//   lies in one scale group, so the mma takes (code - zero) itself, an exact small integer in
//   fp16/bf16, into a step partial in fp32, and the scale multiplies that partial (4 FFMA a step
//   and token tile instead of 32 HMUL2). fp16 int4 also drops most shifts: (w & 0x00f000f0) |
//   0x6400 is 1024 + 16·code exactly, and one HFMA2 by 1/16 minus (64 + zero) gives code - zero
//   exactly, so a word of 8 codes is 1 shift, 4 LOP3 and 4 half2 ops. The sum is the exact
//   dequantized product with fp32 sums: more accurate than the dtype-faithful reference, which
//   rounds each weight to the dtype.
// - The weights stream into registers, not through shared memory: each lane loads its 16-byte
//   pieces with ld.global.nc (L1 no-allocate, L2 evict-first: read once) kDepth steps ahead in a
//   register ring, no cp.async, no barriers, no shared memory until the final sum; and every SM
//   holds 16 streaming warps (2 blocks of 8, at most 128 registers a thread): at n 4096 the plan
//   (kernels/gemm_q/stream_plan.hpp) gives each m16 channel tile 8 warps, one 512-k slice each,
//   2048 warps for the card's 2112, so each warp's whole slice (4 steps, 4 KB) is asked for at once
//   and the 8.4 MB are in flight from the start.
// A block is 8 warps: 8 / splits channel tiles of 16, each tile's k split over `splits` warps;
// the warps' fp32 partials are summed in shared memory in split order (deterministic) and rounded
// once. The activations (tiny, read by every block: L2-resident) are loaded one step ahead with
// 16-byte __ldg, 8 k of a token at a time, as in rung 2; lanes past m load zeros.
// Requires m <= 16, k a multiple of a lane's piece (32 int4 codes, 16 int8), and each step in one
// scale group (group a multiple of 128 int4 / 64 int8 codes, or per channel): group 64 is rung 2's.
//
// Predicted (H100 SXM, cold L2, before any run): k 4096 n 4096 int4 g128 at m = 1: ~1.0 M warp
// instructions (0.36x fused_mma's), the weights at 2.2-2.8 TB/s: 5-7 µs cold, 4-5 µs in graph mode
// (fused_mma 12.4 / 8.0, dense cuBLAS 16.9 / 15.7): 2.4-3.4x dense cuBLAS; m = 16 8-10 µs (each
// block reads all of A for 16 rows: 4x the weight bytes from L2); n 14336: 12-15 µs (cuBLAS 42.4).
// Measured (H100 80GB HBM3, cold L2, dense fp16 cuBLAS and rungs 2-3 in the same call): the first
// build (run 285) verified (756 passed, 0 failed over smoke and cases/gemm_q; memcheck and racecheck
// clean; bit for bit over 3 runs) but ran 3.4 M warp instructions, more than fused_mma: ~420 a warp
// step, most of them 64-bit address arithmetic and a division by the group a step, and 11.5 µs at
// m = 1 (1.56x). The second (run 286: running pointers and a group counter, the AND-OR in one LOP3
// with the magic in a register, the zeros a template flag, the activations double-buffered by
// parity) ran 2.3 M (~183 a step plus ~400 a warp of set-up and sum) and, k 4096 n 4096 int4 g128:
// 10.2, 10.4, 12.5 µs at m = 1, 4, 16 = 1.77x, 1.72x, 1.45x dense cuBLAS (fused_mma 1.47x, 1.38x,
// 1.28x); graph mode (no launch in the time) 7.6 µs against cuBLAS's 16.2 = 2.13x; k 14336 n 4096:
// 20.4 µs = 2.26x (48.8% of the read floor), n 14336: 21.3 µs = 2.06x; int8 1.22-1.41x. Under ncu
// (m = 1, n 4096) the SMs are active 74% of the kernel's cycles, issue an instruction every 2.5
// cycles, and the top stall is the weights' loads (L1TEX scoreboard, 40%): the bytes in flight at
// the start, not the math, bound it now. Issue 52's 3.0x is not met.
// What bounds it (run 287, H200, cold, the op's timing): a kernel that only reads the same int4
// weights (tools/gemv_stream_bench.cu, no math) takes 5.9 µs at 4096 x 4096 (2.8 of them the
// empty launch) and 10.6 at 14336 x 4096, against 3.0x dense cuBLAS's 5.2 and 10.9 there; this
// rung, 9.7 and 20.2, is 1.6-1.9x the read alone. Bringing the weights in by TMA does not help:
// one bulk copy a 16-row tile reads them in 6.1 µs (model), and a rung built on it (a producer
// warp, 8 consumers on a 4-stage ring; commit 1ee62c4) verified but ran 9.8 and 24.0 µs.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <string>
#include <type_traits>

#include "kernels/common/copy.cuh"
#include "kernels/common/dispatch.cuh"
#include "kernels/common/mma.cuh"
#include "kernels/common/storage.cuh"
#include "kernels/gemm_q/dequant.cuh"
#include "kernels/gemm_q/rungs.hpp"
#include "kernels/gemm_q/stream_plan.hpp"

namespace attnbench {
namespace {

constexpr int kWarps = gemm_q_impl::kStreamWarps;
constexpr int kThreads = kWarps * 32;

using gemm_q_impl::scaled_step;
using gemm_q_impl::Zero;
using gemm_q_impl::zero_of;

template <class T, int kBits, int kNt, int kDepth, bool kZeros>
__global__ void __launch_bounds__(kThreads, 2)
    stream_gemv_kernel(const T* __restrict__ a, const uint8_t* __restrict__ w, const T* __restrict__ scales,
                       const uint8_t* __restrict__ zeros, T* __restrict__ c, int m, int n, int k, int groups,
                       int steps_per_group, int steps, int splits) {
  constexpr int kK = 128 / kBits;  // k of a lane's 16-byte piece: 32 int4, 16 int8
  constexpr int kStep = 4 * kK;    // k of a step: the four lanes t of a row
  constexpr int kStepBytes = kStep * kBits / 8;  // 64: a row's bytes a step
  constexpr int kLoads = kBits == 4 ? 4 : 2;  // 16-byte activation loads a token a step
  constexpr int kMt = 8 * kNt;
  constexpr int kLd = kMt + 1;  // the partials' padded row
  __shared__ float part[kWarps * 16 * kLd];

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int tile = warp / splits, split = warp % splits;
  const int n0 = (blockIdx.x * (kWarps / splits) + tile) * 16;
  const int begin = static_cast<int>(static_cast<int64_t>(split) * steps / splits);
  const int mine = static_cast<int>(static_cast<int64_t>(split + 1) * steps / splits) - begin;
  const uint64_t pol = l2_policy(true);  // every weight byte is read once

  // Everything a step loads is at a fixed stride from the last step's, so the loads walk running
  // pointers (an add a step) instead of recomputing 64-bit addresses and the step's scale group by
  // division, on which this rung's first build (run 285) spent most of its instructions.
  // Rows past n read row 0 (in bounds) with scale 0, so they add nothing; a lane's piece past k
  // (the last step of a k that ends inside one) loads nothing.
  const uint8_t* wp[2];  // row g + 8p's piece of the next step to load
  const T* sp[2];        // row g + 8p's scales
  const uint8_t* zp[2];  // and zero codes (kZeros; else the midpoint, a constant)
  bool rv[2];
  int kk_w = begin * kStep + kK * t;  // the next step's k at this lane's piece
#pragma unroll
  for (int p = 0; p < 2; ++p) {
    const int row = n0 + g + 8 * p;
    rv[p] = row < n;
    const int64_t r = rv[p] ? row : 0;
    wp[p] = w + r * (static_cast<int64_t>(k) * kBits / 8) + kk_w * kBits / 8;
    sp[p] = scales + r * groups;
    zp[p] = kZeros ? zeros + r * groups : nullptr;
  }
  int grp = begin / steps_per_group, in_grp = begin % steps_per_group;  // the next step's scale group
  const Zero<T> midpoint = zero_of<T>(1 << (kBits - 1));
  // The magic exponent in a register: hides it from constant folding, so that and_or stays one LOP3.
  uint32_t magic = gemm_q_impl::kMagic<T>;
  asm volatile("" : "+r"(magic));

  // The next step's weights (rows g, g + 8: a 16-byte piece each), scale and zero codes into one
  // slot of the ring; past the warp's last step, zeros (scale 0: it adds nothing).
  int next_w = 0;
  auto load_w = [&](uint4 (&wv)[2], float (&s)[2], int (&z)[2]) {
    const bool sv = next_w < mine;
#pragma unroll
    for (int p = 0; p < 2; ++p) {
      wv[p] = sv && kk_w < k ? ld_stream(wp[p], pol) : make_uint4(0, 0, 0, 0);
      s[p] = sv && rv[p] ? to_float(sp[p][grp]) : 0.f;
      if constexpr (kZeros) z[p] = sv ? zp[p][grp] : 0;
      wp[p] += kStepBytes;
    }
    kk_w += kStep;
    ++next_w;
    if (++in_grp == steps_per_group) in_grp = 0, ++grp;
  };
  // The next step's activations: token 8j + g, k kk .. kk + kK - 1 (zeros past m, k or the last
  // step), through a running pointer too.
  const T* xp[kNt];
  bool tv[kNt];
#pragma unroll
  for (int j = 0; j < kNt; ++j) {
    tv[j] = 8 * j + g < m;
    xp[j] = a + static_cast<int64_t>(tv[j] ? 8 * j + g : 0) * k + begin * kStep + kK * t;
  }
  int kk_x = begin * kStep + kK * t, next_x = 0;
  auto load_x = [&](uint4 (&x)[kNt][kLoads]) {
    const bool v = next_x < mine && kk_x < k;
#pragma unroll
    for (int j = 0; j < kNt; ++j) {
      const uint4* src = reinterpret_cast<const uint4*>(xp[j]);
#pragma unroll
      for (int q = 0; q < kLoads; ++q) x[j][q] = v && tv[j] ? __ldg(src + q) : make_uint4(0, 0, 0, 0);
      xp[j] += kStep;
    }
    kk_x += kStep;
    ++next_x;
  };

  float acc[kNt][4] = {};
  // One step: (code - zero) · activation into an fp32 step partial by mma.sync (W's channels as M,
  // the tokens as N: Cᵀ = W·Aᵀ), then the partial times each row's scale into acc.
  auto compute = [&](const uint4 (&wv)[2], const float (&s)[2], const int (&z)[2], const uint4 (&x)[kNt][kLoads]) {
    const Zero<T> z0 = kZeros ? zero_of<T>(z[0]) : midpoint, z1 = kZeros ? zero_of<T>(z[1]) : midpoint;
    scaled_step<T, kBits, kNt>(wv, s, z0, z1, magic, x, acc);
  };

  // The register ring: slot d holds step i0 + d; after its step is done it is refilled with step
  // i0 + d + kDepth, so kDepth steps of weights are in flight while one is computed.
  uint4 wq[kDepth][2];
  float sc[kDepth][2];
  int zc[kDepth][2] = {};
#pragma unroll
  for (int d = 0; d < kDepth; ++d) load_w(wq[d], sc[d], zc[d]);
  // The activations double-buffered by the step's parity (kDepth is even, so d's parity is the
  // step's): the next step's load goes into the other buffer, with no register copies.
  static_assert(kDepth % 2 == 0, "the activations' buffers alternate with the ring's slots");
  uint4 x[2][kNt][kLoads];
  load_x(x[0]);
  for (int i0 = 0; i0 < mine; i0 += kDepth) {
#pragma unroll
    for (int d = 0; d < kDepth; ++d) {
      if (i0 + d < mine) {
        load_x(x[(d + 1) % 2]);  // a step ahead (zeros past the last)
        compute(wq[d], sc[d], zc[d], x[d % 2]);
        load_w(wq[d], sc[d], zc[d]);  // step i0 + d + kDepth into the slot just used
      }
    }
  }

  // The partials [warp][channel][token], then each tile's summed over its splits in order, one
  // rounding, C [m, n] written along n.
#pragma unroll
  for (int j = 0; j < kNt; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) part[(warp * 16 + g + 8 * (e / 2)) * kLd + 8 * j + 2 * t + e % 2] = acc[j][e];
  __syncthreads();
  const int tiles = kWarps / splits;
  for (int e = threadIdx.x; e < tiles * 16 * kMt; e += kThreads) {
    const int row = e % (tiles * 16), tok = e / (tiles * 16);
    const int tl = row / 16, col = blockIdx.x * tiles * 16 + row;
    if (col >= n || tok >= m) continue;
    float sum = 0.f;
    for (int r = 0; r < splits; ++r) sum += part[((tl * splits + r) * 16 + row % 16) * kLd + tok];
    c[static_cast<int64_t>(tok) * n + col] = from_float<T>(sum);
  }
}

// kDepth: the steps of weights in flight a warp. 4 covers a whole 512-k slice (k 4096 over 8
// splits) in one go; two token tiles hold twice the activations (a step ahead too), so 2.
template <int kNt>
constexpr int kDepthOf = kNt == 1 ? 4 : 2;

template <class T, int kBits, int kNt, bool kZeros>
void launch(const GemmQParams& p, const LaunchContext& ctx) {
  constexpr int kDepth = kDepthOf<kNt>;
  auto kernel = stream_gemv_kernel<T, kBits, kNt, kDepth, kZeros>;
  // The card's resident warps for this kernel, asked once (the model's 2 blocks an SM if the
  // query fails).
  static const int blocks_per_sm = [&] {
    int b = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&b, kernel, kThreads, 0) != cudaSuccess || b < 1) b = 2;
    (void)cudaGetLastError();
    return b;
  }();
  const int sm_count = ctx.caps && ctx.caps->sm_count > 0 ? ctx.caps->sm_count : 132;
  const gemm_q_impl::StreamPlan plan =
      gemm_q_impl::plan_stream(p.n, p.k, p.bits, static_cast<int64_t>(blocks_per_sm) * kWarps * sm_count);
  kernel<<<static_cast<unsigned>(plan.blocks()), kThreads, 0, ctx.stream>>>(
      static_cast<const T*>(p.a), p.w, static_cast<const T*>(p.scales), p.zeros, static_cast<T*>(p.c),
      static_cast<int>(p.m), static_cast<int>(p.n), static_cast<int>(p.k), static_cast<int>(p.groups()),
      static_cast<int>(gemm_q_impl::stream_steps_per_group(p.k, p.group, p.bits)), static_cast<int>(plan.steps),
      plan.splits);
  check_launch("gemm_q/stream_gemv");
}

}  // namespace

void gemm_q_impl::stream_gemv(const GemmQParams& p, const LaunchContext& ctx) {
  gemm_q_impl::with_small_m(p, "gemm_q/stream_gemv", [&](auto tag, auto bits, auto nt) {
    using T = decltype(tag);
    constexpr int kB = decltype(bits)::value, kNt = decltype(nt)::value;
    if (p.zeros)
      launch<T, kB, kNt, true>(p, ctx);
    else
      launch<T, kB, kNt, false>(p, ctx);
  });
}

std::string gemm_q_impl::stream_gemv_supports(const GemmQParams& p, const DeviceCaps& caps) {
  std::string r = common_reason(p);
  if (!r.empty()) return r;
  if (p.m > kStreamMaxM)
    return "m > " + std::to_string(kStreamMaxM) +
           ": the streaming GEMV is a small-m rung (one or two 8-token tiles); fused_mma and dequant_cublas take "
           "larger m";
  if (caps.arch() < 80) return "needs sm_80 (mma.sync on fp16/bf16)";
  const int64_t piece = 128 / p.bits;
  if (p.k % piece != 0) return "k must be a multiple of " + std::to_string(piece) + " (a lane's 16 bytes of codes)";
  if (!stream_group_ok(p.k, p.group, p.bits))
    return "group must be a multiple of " + std::to_string(stream_step_k(p.bits)) +
           " or per channel (the scale multiplies each k step's fp32 partial, so a step must lie in one group); "
           "fused_mma takes smaller groups";
  return {};
}

}  // namespace attnbench
