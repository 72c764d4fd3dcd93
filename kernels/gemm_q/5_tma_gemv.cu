// gemm_q rung 5, tma_gemv: rung 4 (4_stream_gemv.cu) with the weights brought in by the TMA unit's
// bulk copies instead of each lane's loads. The one technique over rung 4 is the load path.
//
// Why: Nsight Compute on rung 4 (run 286, H100, k 4096 n 4096 int4, m = 1) found its warps
// waiting on their weight loads (the top stall, 40%) while DRAM ran at 25% of its peak and the
// SMs idled 26% of the kernel: 16 warps an SM had asked for their whole 64 KB at once, yet the
// bytes came at ~0.85 TB/s. A lane's ld.global is tracked per thread by the SM's load unit; a
// bulk copy is one instruction for kilobytes, tracked by the TMA unit and completed on an
// mbarrier, which is how paged_flash's cache regions went from ~70% to ~92% of the read
// bandwidth (bench notes, run 23) and how cuBLAS's GEMV here streams (2.14 TB/s under ncu).
//
// A block is one 16-channel tile: 8 consumer warps and one producer warp. A stage is 8 k steps
// (512 bytes of each of the tile's 16 rows: 1024 int4 codes, 512 int8): the producer's lane 0
// posts the stage's bytes on its "full" mbarrier and issues one bulk copy a row into a ring of
// 4 stages (k 4096 int4: the whole 32 KB tile in flight from the start), rows 576 bytes apart
// so that a quarter-warp's 16-byte reads of rows g and g + 1 fall on disjoint banks; consumer
// warp w takes step w of each stage (rung 4's split of the tile's k over 8 warps, interleaved
// by stage), reads its lane's two 16-byte pieces from shared memory, releases the stage on its
// "empty" mbarrier (8 arrivals) and runs rung 4's step: (code - zero) exact into mma.sync, the
// scale on the step's fp32 partial (dequant.cuh's scaled_step). Each stage's scales, zeros and
// activations are loaded a stage ahead. The 8 warps' partials are summed in warp order
// (deterministic) and rounded once. Rows past n are not copied (their scale is 0; any bytes
// there are finite codes); a lane's piece past k reads stale codes against zero activations.
// Requires sm_90 (bulk copies, mbarriers), m <= 16, k a multiple of a lane's piece (32 int4
// codes, 16 int8: whole 16-byte rows), each k step in one scale group (rung 4's rule).
//
// Predicted (H100 SXM, cold L2, before any run; tools/gemv_stream_bench.cu measures the load
// paths alone): k 4096 n 4096 int4 g128 at m = 1 5.5-7.5 µs (rung 4: 10.2), 2.4-3.3x dense
// cuBLAS; k 14336 n 4096 14-17 µs (rung 4: 20.4), 2.7-3.3x.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <string>

#include "kernels/common/copy.cuh"
#include "kernels/common/dispatch.cuh"
#include "kernels/common/storage.cuh"
#include "kernels/common/tma.cuh"
#include "kernels/gemm_q/dequant.cuh"
#include "kernels/gemm_q/rungs.hpp"
#include "kernels/gemm_q/stream_plan.hpp"

namespace attnbench {
namespace {

constexpr int kConsumers = 8;                      // one k step a stage each
constexpr int kThreads = (kConsumers + 1) * 32;    // and the producer warp
constexpr int kStageSteps = kConsumers;
constexpr int kStageRowBytes = kStageSteps * 64;   // 512: a row's bytes a stage (64 a step)
constexpr int kRowPitch = kStageRowBytes + 64;     // rows g, g + 1 of a quarter-warp 16 banks apart
constexpr int kStageBytes = 16 * kRowPitch;
constexpr int kRing = 4;
constexpr int kSmemBytes = kRing * kStageBytes;    // 36 KB

using gemm_q_impl::scaled_step;
using gemm_q_impl::Zero;
using gemm_q_impl::zero_of;

// Two blocks an SM at one token tile; two tiles' activations, a stage ahead, need more registers
// than two blocks of 288 threads leave (spills at 96), so one block an SM there (still 32 KB of
// copies in flight an SM).
template <class T, int kBits, int kNt, bool kZeros>
__global__ void __launch_bounds__(kThreads, kNt == 1 ? 2 : 1)
    tma_gemv_kernel(const T* __restrict__ a, const uint8_t* __restrict__ w, const T* __restrict__ scales,
                    const uint8_t* __restrict__ zeros, T* __restrict__ c, int m, int n, int k, int groups,
                    int steps_per_group, int steps) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900  // bulk copies are sm_90's: supports() refuses older
                                                     // cards, whose build (sm_80) compiles a trap
  constexpr int kK = 128 / kBits;  // k of a lane's 16-byte piece: 32 int4, 16 int8
  constexpr int kStep = 4 * kK;    // k of a step: the four lanes t of a row
  constexpr int kLoads = kBits == 4 ? 4 : 2;
  constexpr int kMt = 8 * kNt;
  constexpr int kLd = kMt + 1;
  extern __shared__ __align__(128) uint8_t ring[];  // [kRing][16 rows][kRowPitch]
  __shared__ __align__(8) uint64_t full[kRing], empty[kRing];
  __shared__ float part[kConsumers * 16 * kLd];

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int n0 = blockIdx.x * 16;
  const int stages = (steps + kStageSteps - 1) / kStageSteps;
  const int64_t row_bytes = static_cast<int64_t>(k) * kBits / 8;
  if (threadIdx.x == 0)
    for (int r = 0; r < kRing; ++r) {
      mbar_init(smem_addr(&full[r]), 1);
      mbar_init(smem_addr(&empty[r]), kConsumers);
    }
  __syncthreads();

  if (warp == kConsumers) {
    // The producer: stage s into slot s % kRing once the consumers have released its last use.
    if (lane == 0) {
      const int rows = min(16, n - n0);
      for (int s = 0; s < stages; ++s) {
        const int slot = s % kRing;
        if (s >= kRing) mbar_wait(smem_addr(&empty[slot]), (s / kRing - 1) & 1);
        const int64_t off = static_cast<int64_t>(s) * kStageRowBytes;
        const int bytes = static_cast<int>(row_bytes - off < kStageRowBytes ? row_bytes - off : kStageRowBytes);
        const uint32_t bar = smem_addr(&full[slot]), dst = smem_addr(ring + slot * kStageBytes);
        mbar_expect_tx(bar, rows * bytes);
        for (int r = 0; r < rows; ++r) bulk_copy(dst + r * kRowPitch, w + (n0 + r) * row_bytes + off, bytes, bar);
      }
    }
    return;  // the consumers' barriers below are named, of their 256 threads
  }

  // The consumers. Warp `warp` takes step s·8 + warp of stage s.
  const int g = lane / 4, t = lane % 4;
  bool rv[2];
  const T* sp[2];
  const uint8_t* zp[2];
#pragma unroll
  for (int p = 0; p < 2; ++p) {
    const int row = n0 + g + 8 * p;
    rv[p] = row < n;
    const int64_t r = rv[p] ? row : 0;
    sp[p] = scales + r * groups;
    zp[p] = kZeros ? zeros + r * groups : nullptr;
  }
  const Zero<T> midpoint = zero_of<T>(1 << (kBits - 1));
  uint32_t magic = gemm_q_impl::kMagic<T>;
  asm volatile("" : "+r"(magic));  // kept in a register: and_or stays one LOP3 (dequant.cuh)

  // What a stage's step needs besides its weights, loaded a stage ahead: scales and zero codes of
  // rows g, g + 8 at the step's group, and the lane's activations (token 8j + g, its piece's k).
  struct In {
    float s[2];
    int z[2];
    uint4 x[kNt][kLoads];
  };
  auto load_in = [&](int s, In& in) {
    const int st = s * kStageSteps + warp;
    const bool sv = s < stages && st < steps;
    const int grp = sv ? st / steps_per_group : 0;
    const int kk = st * kStep + kK * t;
#pragma unroll
    for (int p = 0; p < 2; ++p) {
      in.s[p] = sv && rv[p] ? to_float(sp[p][grp]) : 0.f;
      in.z[p] = kZeros && sv ? zp[p][grp] : 0;
    }
#pragma unroll
    for (int j = 0; j < kNt; ++j) {
      const int tok = 8 * j + g;
      const bool v = sv && kk < k && tok < m;
      const uint4* src = reinterpret_cast<const uint4*>(a + static_cast<int64_t>(v ? tok : 0) * k + (v ? kk : 0));
#pragma unroll
      for (int q = 0; q < kLoads; ++q) in.x[j][q] = v ? __ldg(src + q) : make_uint4(0, 0, 0, 0);
    }
  };

  float acc[kNt][4] = {};
  // Stage s: wait for its bytes, take the lane's two pieces, release the slot, then the math.
  auto stage = [&](int s, const In& cur, In& nxt) {
    load_in(s + 1, nxt);
    const int slot = s % kRing;
    const bool mine = s * kStageSteps + warp < steps;
    mbar_wait(smem_addr(&full[slot]), (s / kRing) & 1);
    uint4 wv[2] = {};
    if (mine) {
      const uint8_t* piece = ring + slot * kStageBytes + g * kRowPitch + warp * 64 + 16 * t;
      wv[0] = *reinterpret_cast<const uint4*>(piece);
      wv[1] = *reinterpret_cast<const uint4*>(piece + 8 * kRowPitch);
    }
    __syncwarp();
    if (lane == 0) mbar_arrive(smem_addr(&empty[slot]));  // release: the reads above are done
    if (mine) {
      const Zero<T> z0 = kZeros ? zero_of<T>(cur.z[0]) : midpoint, z1 = kZeros ? zero_of<T>(cur.z[1]) : midpoint;
      scaled_step<T, kBits, kNt>(wv, cur.s, z0, z1, magic, cur.x, acc);
    }
  };
  // Two buffers of In alternate by the stage's parity (unrolled by two: no register copies).
  In in[2];
  load_in(0, in[0]);
  for (int s = 0; s < stages; s += 2) {
    stage(s, in[0], in[1]);
    if (s + 1 < stages) stage(s + 1, in[1], in[0]);
  }

  // The 8 warps' partials [warp][channel][token], summed in warp order, one rounding, C along n.
#pragma unroll
  for (int j = 0; j < kNt; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) part[(warp * 16 + g + 8 * (e / 2)) * kLd + 8 * j + 2 * t + e % 2] = acc[j][e];
  named_bar_sync(1, kConsumers * 32);
  for (int e = threadIdx.x; e < 16 * kMt; e += kConsumers * 32) {
    const int row = e % 16, tok = e / 16;
    if (n0 + row >= n || tok >= m) continue;
    float sum = 0.f;
#pragma unroll
    for (int v = 0; v < kConsumers; ++v) sum += part[(v * 16 + row) * kLd + tok];
    c[static_cast<int64_t>(tok) * n + n0 + row] = from_float<T>(sum);
  }
#else
  (void)a, (void)w, (void)scales, (void)zeros, (void)c, (void)m, (void)n, (void)k, (void)groups,
      (void)steps_per_group, (void)steps;
  __trap();
#endif
}

template <class T, int kBits, int kNt, bool kZeros>
void launch(const GemmQParams& p, const LaunchContext& ctx) {
  auto kernel = tma_gemv_kernel<T, kBits, kNt, kZeros>;
  static const cudaError_t opt_in = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes);
  check_cuda(opt_in, "gemm_q/tma_gemv: shared memory opt-in");
  const int64_t steps = ceil_div(p.k, gemm_q_impl::stream_step_k(p.bits));
  kernel<<<static_cast<unsigned>(ceil_div(p.n, 16)), kThreads, kSmemBytes, ctx.stream>>>(
      static_cast<const T*>(p.a), p.w, static_cast<const T*>(p.scales), p.zeros, static_cast<T*>(p.c),
      static_cast<int>(p.m), static_cast<int>(p.n), static_cast<int>(p.k), static_cast<int>(p.groups()),
      static_cast<int>(gemm_q_impl::stream_steps_per_group(p.k, p.group, p.bits)), static_cast<int>(steps));
  check_launch("gemm_q/tma_gemv");
}

}  // namespace

void gemm_q_impl::tma_gemv(const GemmQParams& p, const LaunchContext& ctx) {
  with_16bit(p.dtype, "gemm_q/tma_gemv", [&](auto tag) {
    using T = decltype(tag);
    with_value<4, 8>(p.bits, "gemm_q/tma_gemv", "bits", [&](auto bits) {
      with_value<1, 2>(p.m <= 8 ? 1 : 2, "gemm_q/tma_gemv", "token tiles", [&](auto nt) {
        constexpr int kB = decltype(bits)::value, kNt = decltype(nt)::value;
        if (p.zeros)
          launch<T, kB, kNt, true>(p, ctx);
        else
          launch<T, kB, kNt, false>(p, ctx);
      });
    });
  });
}

std::string gemm_q_impl::tma_gemv_supports(const GemmQParams& p, const DeviceCaps& caps) {
  std::string r = stream_gemv_supports(p, caps);  // rung 4's rules: m, k, group
  if (!r.empty()) return r;
  if (caps.arch() < 90) return "needs sm_90 (bulk copies by the TMA unit, mbarriers)";
  if (caps.smem_per_block_optin != 0 && caps.smem_per_block_optin < static_cast<std::size_t>(kSmemBytes))
    return "needs 36 KB of shared memory a block";
  return {};
}

}  // namespace attnbench
