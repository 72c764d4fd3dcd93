// gemm_q rung 2, fused_mma: the dequantization fused into the GEMM, on mma.sync (sm_80+), with
// the weights read once, packed. At m <= 16 the op is a stream of weight bytes (W4A16 at
// 4096 x 14336 is 29 MB against 0.5 MB of activations), so the rung is built around making that
// stream run at the card's read bandwidth; the tensor cores have little to do.
//
// The swap: C ᵀ = W · Aᵀ. W's rows (output channels) are the mma's M (16 a tile) and the tokens
// its N (8 a tile), so m = 1..8 wastes nothing of the 16-row M a token GEMM would pad m to.
// A block owns 32 channels (two m16 tiles) and up to 8·NT tokens (NT = 1, 2, 4 by m; larger m
// runs several token tiles, grid y); its 8 warps split k among themselves (warp w takes k blocks
// w, w + 8, ...: the split-k that fills the SMs without a second launch or a workspace: at n =
// 4096, 128 blocks of 8 warps), and add their fp32 partials in shared memory in a fixed order
// (deterministic) before the one rounding.
//
// How the weight stream reaches the bandwidth:
// - Wide loads of whole pieces: lane (g, t) = (lane / 4, lane % 4) of a warp copies, per k block,
//   16 bytes of each of its four channel rows g, g + 8, 16 + g, 24 + g (32 int4 codes, or 16
//   int8, of one group), so a warp moves 2 KB per block in 128 16-byte cp.async, each row's 64
//   consecutive bytes in two full 32-byte sectors.
// - Bytes in flight without registers: the copies are a 4-stage cp.async ring private to each
//   lane (each lane reads back only the bytes it copied itself, so no barrier is needed, only
//   cp.async.wait_group), 8 KB a warp, 64 KB a block, up to two blocks an SM: 128 KB in flight
//   an SM, several times what Little's law asks for at 3.35 TB/s (~25 KB an SM at ~1 µs).
// - The dequant is cheap because the k order inside an mma is free: the k slots of the A and B
//   fragments may stand for any k, as long as both use the same. A lane's 16 bytes of a row are
//   4 words of 8 codes; (w >> 4i) & 0x000F000F | 0x6400 6400 makes codes i and i + 4 into two
//   fp16 1024 + code at once (bf16: 0x4300, 128 + code), one LOP3 and one shift per two weights;
//   (x - (1024 + zero)) · scale is exact then rounded once (HSUB2, HMUL2), the value the faithful
//   reference rounds. The activations' fragment takes k i and i + 4 to match (one PRMT a pair).
//   int8: PRMT with 0x64 bytes builds (1024 + byte) pairs in fp16; bf16 goes through fp32 (8 bits
//   do not fit bf16's mantissa above 128).
// - The activations (small, read by every block: L2-resident) are loaded per k block with
//   16-byte __ldg, 8 k of a token at a time.
// Requires k a multiple of a lane's piece (32 int4 codes, 16 int8) and group a multiple of it
// (each piece in one group): group 128 and per-channel at the Llama shapes.
// m = 64, 256 is not this rung's target: every token tile of 32 streams W again (from L2 after
// the first) and every block reads its activations from L2; the Hopper rung (issue 52) is for that.
// Verified on an H100 over every case (runs 273 and 277). Timed (H100 80GB HBM3, run 277, cold
// L2, dense fp16 cuBLAS on the same weights in the same call), int4 g128 k 4096 n 4096: 12.3,
// 12.9, 14.1 µs at m = 1, 4, 16 (1.45x, 1.40x, 1.26x dense), 22.5 µs at 64 (0.72x), 71.6 µs at
// 256 (0.29x); int8 1.13x, 1.04x, 0.97x at m = 1, 4, 16. Issue 52's 3.0x not met.
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

namespace attnbench {
namespace {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kTiles = 2;               // m16 channel tiles a block (and a warp)
constexpr int kRows = 16 * kTiles;      // channels a block
constexpr int kPieces = 2 * kTiles;     // 16-byte pieces a lane copies per k block: rows g, g + 8 of each tile
constexpr int kStages = 4;
constexpr int kRingBytes = kWarps * kStages * kPieces * 32 * 16;  // 64 KB

template <int kBits>
struct Piece {
  static constexpr int kK = 128 / kBits;  // k a lane's 16 bytes hold: 32 int4, 16 int8
  static constexpr int kBlock = 4 * kK;   // k a warp's block covers: the four lanes t of a row
};

using gemm_q_impl::as_t2;
using gemm_q_impl::as_u32;
using gemm_q_impl::dequant_int4;
using gemm_q_impl::dequant_int8;
using gemm_q_impl::dequant_of;
using gemm_q_impl::Dequant;
using gemm_q_impl::word_of;

template <class T, int kBits, int kNt>
__global__ void __launch_bounds__(kThreads, 2)
    fused_mma_kernel(const T* __restrict__ a, const uint8_t* __restrict__ w, const T* __restrict__ scales,
                     const uint8_t* __restrict__ zeros, T* __restrict__ c, int m, int n, int k, int group,
                     int groups) {
  using P = Piece<kBits>;
  constexpr int kMt = 8 * kNt;  // tokens a block
  extern __shared__ uint4 smem[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int n0 = blockIdx.x * kRows, tok0 = blockIdx.y * kMt;
  const int64_t row_bytes = static_cast<int64_t>(k) * kBits / 8;
  const int blocks = (k + P::kBlock - 1) / P::kBlock;
  const int mine = blocks > warp ? (blocks - warp + kWarps - 1) / kWarps : 0;  // this warp's k blocks
  uint4* ring = smem + warp * kStages * kPieces * 32;  // [stage][piece][lane]

  // Piece p of a lane is row g + 8 (p % 2) of tile p / 2.
  auto row_of = [&](int p) { return n0 + 16 * (p / 2) + g + 8 * (p % 2); };
  // The warp's i-th k block into stage i % kStages; past its last block an empty group, so that
  // wait_group's count stays right.
  auto issue = [&](int i) {
    if (i < mine) {
      const int kk = (warp + i * kWarps) * P::kBlock + P::kK * t;
#pragma unroll
      for (int p = 0; p < kPieces; ++p) {
        const bool valid = kk < k && row_of(p) < n;
        const uint8_t* src = valid ? w + row_of(p) * row_bytes + kk * kBits / 8 : w;
        cp_async_16(smem_addr(ring + ((i % kStages) * kPieces + p) * 32 + lane), src, valid);
      }
    }
    cp_async_commit();
  };

  float acc[kTiles][kNt][4] = {};
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) issue(s);
  for (int i = 0; i < mine; ++i) {
    cp_async_wait<kStages - 2>();
    uint4 wq[kPieces];
#pragma unroll
    for (int p = 0; p < kPieces; ++p) wq[p] = ring[((i % kStages) * kPieces + p) * 32 + lane];
    issue(i + kStages - 1);  // into the stage read last iteration, whose words are in registers

    const int kk = (warp + i * kWarps) * P::kBlock + P::kK * t;  // this lane's piece: k kk.. kk + kK - 1
    const bool kvalid = kk < k;
    Dequant<T> dq[kPieces];
#pragma unroll
    for (int p = 0; p < kPieces; ++p) {
      const bool valid = kvalid && row_of(p) < n;
      const int64_t at = static_cast<int64_t>(row_of(p)) * groups + (valid ? kk / group : 0);
      const float s = valid ? to_float(scales[at]) : 0.f;
      const float z = valid && zeros ? static_cast<float>(zeros[at]) : static_cast<float>(1 << (kBits - 1));
      dq[p] = dequant_of<T>(s, z);
    }
    // Activations: token tok0 + 8j + g, 8 k a load (zeros past m or k).
    const T* arow[kNt];
    bool avalid[kNt];
#pragma unroll
    for (int j = 0; j < kNt; ++j) {
      const int tok = tok0 + 8 * j + g;
      avalid[j] = kvalid && tok < m;
      arow[j] = a + static_cast<int64_t>(avalid[j] ? tok : 0) * k + (kvalid ? kk : 0);
    }

    if constexpr (kBits == 4) {
      // Word q holds k kk + 8q + (0..7); step h takes codes (2h, 2h + 4) as slots 2t, 2t + 1 and
      // (2h + 1, 2h + 5) as slots 2t + 8, 2t + 9.
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        uint4 x[kNt];
#pragma unroll
        for (int j = 0; j < kNt; ++j)
          x[j] = avalid[j] ? __ldg(reinterpret_cast<const uint4*>(arow[j] + 8 * q)) : make_uint4(0, 0, 0, 0);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          uint32_t b[kNt][2];
#pragma unroll
          for (int j = 0; j < kNt; ++j) {
            const uint32_t lo = h ? x[j].y : x[j].x, hi = h ? x[j].w : x[j].z;  // k (2h, 2h+1), (2h+4, 2h+5)
            b[j][0] = __byte_perm(lo, hi, 0x5410);  // k 2h, 2h + 4
            b[j][1] = __byte_perm(lo, hi, 0x7632);  // k 2h + 1, 2h + 5
          }
#pragma unroll
          for (int r = 0; r < kTiles; ++r) {
            const uint32_t w0 = word_of(wq[2 * r], q), w1 = word_of(wq[2 * r + 1], q);
            const uint32_t a0 = dequant_int4<T>(w0, 2 * h, dq[2 * r]), a2 = dequant_int4<T>(w0, 2 * h + 1, dq[2 * r]);
            const uint32_t a1 = dequant_int4<T>(w1, 2 * h, dq[2 * r + 1]);
            const uint32_t a3 = dequant_int4<T>(w1, 2 * h + 1, dq[2 * r + 1]);
#pragma unroll
            for (int j = 0; j < kNt; ++j) mma_16816<T>(acc[r][j], a0, a1, a2, a3, b[j][0], b[j][1]);
          }
        }
      }
    } else {
      // Word q holds k kk + 4q + (0..3); its step takes bytes (0, 2) as slots 2t, 2t + 1 and
      // (1, 3) as slots 2t + 8, 2t + 9.
#pragma unroll
      for (int q2 = 0; q2 < 2; ++q2) {
        uint4 x[kNt];
#pragma unroll
        for (int j = 0; j < kNt; ++j)
          x[j] = avalid[j] ? __ldg(reinterpret_cast<const uint4*>(arow[j] + 8 * q2)) : make_uint4(0, 0, 0, 0);
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int q = 2 * q2 + e;
          uint32_t b[kNt][2];
#pragma unroll
          for (int j = 0; j < kNt; ++j) {
            const uint32_t lo = e ? x[j].z : x[j].x, hi = e ? x[j].w : x[j].y;  // k (0, 1), (2, 3) of word q
            b[j][0] = __byte_perm(lo, hi, 0x5410);  // k 0, 2
            b[j][1] = __byte_perm(lo, hi, 0x7632);  // k 1, 3
          }
#pragma unroll
          for (int r = 0; r < kTiles; ++r) {
            const uint32_t w0 = word_of(wq[2 * r], q), w1 = word_of(wq[2 * r + 1], q);
            const uint32_t a0 = dequant_int8<T>(w0, 0, dq[2 * r]), a2 = dequant_int8<T>(w0, 1, dq[2 * r]);
            const uint32_t a1 = dequant_int8<T>(w1, 0, dq[2 * r + 1]), a3 = dequant_int8<T>(w1, 1, dq[2 * r + 1]);
#pragma unroll
            for (int j = 0; j < kNt; ++j) mma_16816<T>(acc[r][j], a0, a1, a2, a3, b[j][0], b[j][1]);
          }
        }
      }
    }
  }
  cp_async_wait<0>();
  __syncthreads();  // every warp done with its ring: the partials take its place

  // The warps' partials [warp][channel][token] (a padded row: conflict-free reads below), then
  // summed in warp order, one rounding, C [m, n] written along n.
  constexpr int kLd = kMt + 1;
  float* part = reinterpret_cast<float*>(smem);
#pragma unroll
  for (int r = 0; r < kTiles; ++r)
#pragma unroll
    for (int j = 0; j < kNt; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int row = 16 * r + g + 8 * (e / 2), tok = 8 * j + 2 * t + e % 2;
        part[(warp * kRows + row) * kLd + tok] = acc[r][j][e];
      }
  __syncthreads();
  for (int e = threadIdx.x; e < kRows * kMt; e += kThreads) {
    const int row = e % kRows, tok = e / kRows;
    if (n0 + row >= n || tok0 + tok >= m) continue;
    float sum = 0.f;
#pragma unroll
    for (int v = 0; v < kWarps; ++v) sum += part[(v * kRows + row) * kLd + tok];
    c[static_cast<int64_t>(tok0 + tok) * n + n0 + row] = from_float<T>(sum);
  }
}

static_assert(kWarps * kRows * (32 + 1) * 4 <= kRingBytes, "the partials fit in the ring");

template <class T, int kBits, int kNt>
void launch(const GemmQParams& p, const LaunchContext& ctx) {
  auto kernel = fused_mma_kernel<T, kBits, kNt>;
  // More than 48 KB of dynamic shared memory needs an opt-in, once per kernel.
  static const cudaError_t opt_in =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kRingBytes);
  check_cuda(opt_in, "gemm_q/fused_mma: shared memory opt-in");
  const dim3 grid(static_cast<unsigned>(ceil_div(p.n, kRows)), static_cast<unsigned>(ceil_div(p.m, 8 * kNt)));
  kernel<<<grid, kThreads, kRingBytes, ctx.stream>>>(
      static_cast<const T*>(p.a), p.w, static_cast<const T*>(p.scales), p.zeros, static_cast<T*>(p.c),
      static_cast<int>(p.m), static_cast<int>(p.n), static_cast<int>(p.k), static_cast<int>(p.group),
      static_cast<int>(p.groups()));
  check_launch("gemm_q/fused_mma");
}

// Token tiles of 8, 16 or 32: the smallest that holds m, 32 past it.
int tokens_per_block(int64_t m) { return m <= 8 ? 1 : m <= 16 ? 2 : 4; }

}  // namespace

void gemm_q_impl::fused_mma(const GemmQParams& p, const LaunchContext& ctx) {
  with_16bit(p.dtype, "gemm_q/fused_mma", [&](auto tag) {
    using T = decltype(tag);
    with_value<4, 8>(p.bits, "gemm_q/fused_mma", "bits", [&](auto bits) {
      with_value<1, 2, 4>(tokens_per_block(p.m), "gemm_q/fused_mma", "token tile", [&](auto nt) {
        launch<T, decltype(bits)::value, decltype(nt)::value>(p, ctx);
      });
    });
  });
}

std::string gemm_q_impl::fused_mma_supports(const GemmQParams& p, const DeviceCaps& caps) {
  std::string r = common_reason(p);
  if (!r.empty()) return r;
  if (caps.arch() < 80) return "needs sm_80 (mma.sync on fp16/bf16)";
  const int64_t piece = 128 / p.bits;
  if (p.k % piece != 0 || p.group % piece != 0)
    return "k and group must be multiples of " + std::to_string(piece) + " (a lane's 16 bytes of codes, one group)";
  if (ceil_div(p.m, 32) > kMaxGridYZ) return "m too large: its token tiles exceed gridDim.y (65535)";
  if (caps.smem_per_block_optin != 0 && caps.smem_per_block_optin < static_cast<std::size_t>(kRingBytes))
    return "needs 64 KB of shared memory a block";
  return {};
}

}  // namespace attnbench
