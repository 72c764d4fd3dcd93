// gemm rung 4, mma (fp16/bf16): tensor cores through mma.sync m16n8k16 with fp32 accumulators,
// fragments by ldmatrix (.trans for B in nn), a 3-stage cp.async pipeline into XOR-swizzled
// shared memory, grouped block rasterization for L2 reuse; 128x256x64 block tile, 8 warps of
// 64x64. Portable to sm_80; tops out near 70% of the mma.sync peak `attnbench info` measures.
// H200, run 36: bf16 nt 8192³ 0.63x cuBLAS (run 1, with 128x256x32 tiles: 412.8 TFLOP/s).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "kernels/common/dispatch.cuh"
#include "kernels/common/copy.cuh"
#include "kernels/common/mma.cuh"
#include "kernels/gemm/tiles.cuh"

namespace attnbench {
namespace {

using namespace gemm_impl;

// One instantiation of the mma kernel: block tile BM x BN x BK, warps laid out WARPS_M (m)
// x WARPS_N (n), STAGES shared-memory stages. Every config gives each warp 64x64 = 4 x 8
// tiles of m16n8: 128 fp32 accumulators per thread, the most the register file allows
// with double-buffered fragments, so an SM holds 8 such warps (~240 of 255 registers
// each): one block of 8 or, with BLOCKS_PER_SM = 2 (the __launch_bounds__ minimum), two
// blocks of 4. The bigger the block tile, the fewer L2->SM bytes per flop: 128x256 moves
// a quarter fewer than 128x128 (3/256 vs 1/64 elements per multiply-add), and near 500
// TFLOP/s that traffic (~6 TB/s) is a wall as real as mma.sync's own peak.
template <int BM_, int BN_, int BK_, int WARPS_M_, int WARPS_N_, int STAGES_, int BLOCKS_PER_SM_ = 1>
struct MmaConfig {
  static constexpr int BM = BM_, BN = BN_, BK = BK_, STAGES = STAGES_;
  static constexpr int WARPS_M = WARPS_M_, WARPS_N = WARPS_N_, THREADS = 32 * WARPS_M * WARPS_N;
  static constexpr int BLOCKS_PER_SM = BLOCKS_PER_SM_;
  static constexpr int MT = BM / WARPS_M / 16;  // m16 tiles per warp
  static constexpr int NT = BN / WARPS_N / 8;   // n8 tiles per warp
  static constexpr int KSTEPS = BK / 16;        // mma k steps per block tile
  static constexpr int CH = BK / 8;             // 16-byte chunks per k-contiguous row (A; B in nt)
  static constexpr int NN_CH = BN / 8;          // 16-byte chunks per n-contiguous row (B in nn)
  static constexpr int A_BYTES = BM * BK * 2, B_BYTES = BN * BK * 2;
  static constexpr int STAGE_BYTES = A_BYTES + B_BYTES, SMEM_BYTES = STAGES * STAGE_BYTES;
  // Rows of block tiles per raster group, 2048 rows of C: the ~132 x 32K outputs resident
  // at once then cover about 2048 x 2048 of C, the squarest footprint, so A and B panels
  // are each read from DRAM about once per wave.
  static constexpr int GROUP_M = 2048 / BM;
  static_assert(MT == 4 && NT == 8, "warp tile 64x64: the register budget above is sized for it");
  static_assert(CH == 4 || CH == 8, "k-contiguous rows of 64 or 128 bytes (kmajor_offset)");
  static_assert(NN_CH >= 8, "n-contiguous rows of at least 128 bytes (nmajor_offset)");
  // Each thread's copy slots lie whole swizzle periods (8 rows) apart, so they share one
  // swizzled column: the k loop adds constants to an offset computed once.
  static_assert(BM * CH % THREADS == 0 && BN * CH % THREADS == 0 && THREADS / CH % 8 == 0,
                "k-contiguous tiles split evenly over threads, 8-row steps");
  static_assert(BK * NN_CH % THREADS == 0 && THREADS / NN_CH % 8 == 0,
                "n-contiguous tiles split evenly over threads, 8-row steps");
};
// BK = 64 with 3 stages: two 48 KB tiles in flight and one barrier per 128 mma per warp.
// Against BK = 32 with 4 or 6 stages, deeper BK = 64 pipelines and 128x128 blocks (two
// per SM), it was the fastest on an H200 (docs/bench/runs/2026-11-26.md).
using MmaMain = MmaConfig<128, 256, 64, 2, 4, 3>;

// The same for B in nn: rows are k, NN_CH chunks (BN n) of at least 128 bytes, so all rows
// share a bank alignment and ldmatrix.trans down 8 k rows would be an 8-way conflict.
template <int NN_CH>
__device__ __forceinline__ uint32_t nmajor_offset(int row, int chunk) {
  return row * (NN_CH * 16) + ((chunk ^ (row % 8)) * 16);
}

// Requires K % 8 == 0 (and N % 8 == 0 for nn) and 16-byte aligned bases: every 16-byte
// chunk cp.async moves is then aligned and lies wholly inside or outside the matrix.
template <class T, GemmLayout L, class Cfg>
__global__ __launch_bounds__(Cfg::THREADS, Cfg::BLOCKS_PER_SM) void mma_kernel(const T* __restrict__ a,
                                                                               const T* __restrict__ b,
                                                                               T* __restrict__ c, int M, int N, int K) {
  // a: [batch, M, K]; b: nt [batch, N, K], nn [batch, K, N]; c: [batch, M, N]
  constexpr int BM = Cfg::BM, BN = Cfg::BN, BK = Cfg::BK, STAGES = Cfg::STAGES, CH = Cfg::CH, NN_CH = Cfg::NN_CH;
  constexpr int THREADS = Cfg::THREADS, MT = Cfg::MT, NT = Cfg::NT, KSTEPS = Cfg::KSTEPS;
  extern __shared__ __align__(128) unsigned char smem[];  // STAGES x {A tile [BM][BK], B tile}
  const uint32_t smem_base = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int warp_m = warp / Cfg::WARPS_N, warp_n = warp % Cfg::WARPS_N;

  const int2 tile = grouped_tile<BM, BN, Cfg::GROUP_M>(M, N);
  const int m0 = tile.x, n0 = tile.y;
  const int64_t z = blockIdx.y;
  a += z * M * K;
  b += z * N * K;
  c += z * M * N;

  // cp.async slots. k-contiguous tiles: thread t copies chunk t % CH of rows t / CH + i *
  // ROW_STEP. nn B tile (BK rows x NN_CH chunks): chunk t % NN_CH of rows t / NN_CH + i *
  // NN_ROW_STEP. Both steps are multiples of 8, so every slot of a thread has the same
  // swizzle. Each operand keeps one source pointer (its first slot's row, clamped into the
  // matrix) and walks to the next slot by a fixed stride: per-slot pointers hoisted out of
  // the k loop would cost two registers each, more than this kernel has left.
  constexpr int ROW_STEP = THREADS / CH, NN_ROW_STEP = THREADS / NN_CH;
  const int ld_row = tid / CH, ld_chunk = tid % CH;
  const int nn_row = tid / NN_CH, nn_chunk = tid % NN_CH;
  constexpr bool kNT = L == GemmLayout::nt;
  const uint32_t a_st = kmajor_offset<CH>(ld_row, ld_chunk);
  const uint32_t b_st = kNT ? kmajor_offset<CH>(ld_row, ld_chunk) : nmajor_offset<NN_CH>(nn_row, nn_chunk);
  const int a_rows_left = M - m0 - ld_row;  // slot i is inside A iff i * ROW_STEP < a_rows_left
  const T* a_src = a + static_cast<int64_t>(min(m0 + ld_row, M - 1)) * K + 8 * ld_chunk;
  const int64_t a_step = static_cast<int64_t>(ROW_STEP) * K;
  // nt: rows of B are n; nn: rows are k, and the chunk's columns must lie inside N.
  const int b_rows_left = kNT ? N - n0 - ld_row : (n0 + 8 * nn_chunk < N ? K - nn_row : 0);
  const T* b_src = kNT ? b + static_cast<int64_t>(min(n0 + ld_row, N - 1)) * K + 8 * ld_chunk
                       : b + static_cast<int64_t>(nn_row) * N + min(n0 + 8 * nn_chunk, N - 8);
  const int64_t b_step = kNT ? static_cast<int64_t>(ROW_STEP) * K : static_cast<int64_t>(NN_ROW_STEP) * N;

  auto load_stage = [&](int stage, int kt) {
    const int k0 = kt * BK;
    const uint32_t sa = smem_base + stage * Cfg::STAGE_BYTES;
    const uint32_t sb = sa + Cfg::A_BYTES;
    const bool k_ok = k0 + 8 * ld_chunk < K;
    const T* src = a_src + k0;
#pragma unroll
    for (int i = 0; i < BM / ROW_STEP; ++i, src += a_step) {
      const bool ok = k_ok && i * ROW_STEP < a_rows_left;
      cp_async_16<L2Prefetch::b128>(sa + a_st + i * ROW_STEP * CH * 16, ok ? src : a, ok);
    }
    if constexpr (kNT) {
      src = b_src + k0;
#pragma unroll
      for (int i = 0; i < BN / ROW_STEP; ++i, src += b_step) {
        const bool ok = k_ok && i * ROW_STEP < b_rows_left;
        cp_async_16<L2Prefetch::b128>(sb + b_st + i * ROW_STEP * CH * 16, ok ? src : b, ok);
      }
    } else {
      src = b_src + static_cast<int64_t>(k0) * N;
#pragma unroll
      for (int i = 0; i < BK / NN_ROW_STEP; ++i, src += b_step) {
        const bool ok = k0 + i * NN_ROW_STEP < b_rows_left;
        cp_async_16<L2Prefetch::b128>(sb + b_st + i * NN_ROW_STEP * NN_CH * 16, ok ? src : b, ok);
      }
    }
  };

  // ldmatrix.x4 lane addresses. A fragment (16x16 at rows r.., k k..): lanes 0-15 give
  // rows r+0..15 at k, lanes 16-31 the same rows at k+8, so registers 0..3 are a0..a3 of
  // mma's A layout. B (two n8 tiles at n.., k16 at k..): matrices (n+0..7, k), (n+0..7,
  // k+8), (n+8..15, k), (n+8..15, k+8) = b0, b1 of tile j and b0, b1 of tile j+1; nn
  // stores B as [k][n] and ldmatrix.trans turns those 8x8 blocks into the same registers.
  // The swizzle depends on the row only modulo 8, so the m16 / n16 tile index (nt) and the
  // k step (nn) add a constant to a per-lane offset computed once.
  constexpr int ROW_BYTES = CH * 16, NN_ROW_BYTES = NN_CH * 16;
  uint32_t a_frag_off[KSTEPS], b_frag_off[L == GemmLayout::nt ? KSTEPS : NT / 2];
#pragma unroll
  for (int ks = 0; ks < KSTEPS; ++ks)
    a_frag_off[ks] = kmajor_offset<CH>(warp_m * (MT * 16) + lane % 16, 2 * ks + lane / 16);
  if constexpr (L == GemmLayout::nt) {
#pragma unroll
    for (int ks = 0; ks < KSTEPS; ++ks)
      b_frag_off[ks] = kmajor_offset<CH>(warp_n * (NT * 8) + lane % 8 + (lane / 16) * 8, 2 * ks + (lane / 8) % 2);
  } else {
#pragma unroll
    for (int p = 0; p < NT / 2; ++p)
      b_frag_off[p] = nmajor_offset<NN_CH>(lane % 8 + ((lane / 8) % 2) * 8, warp_n * NT + p * 2 + lane / 16);
  }

  uint32_t af[2][MT][4];     // A fragments, double-buffered across k steps
  uint32_t bf[2][NT][2];     // B fragments
  float acc[MT][NT][4] = {};  // fp32 accumulators, 64x64 per warp

  auto load_frags = [&](int buf, int stage, int ks) {
    const uint32_t sa = smem_base + stage * Cfg::STAGE_BYTES;
    const uint32_t sb = sa + Cfg::A_BYTES;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) ldsm_x4(af[buf][mt], sa + a_frag_off[ks] + mt * 16 * ROW_BYTES);
#pragma unroll
    for (int p = 0; p < NT / 2; ++p) {
      uint32_t r[4];
      if constexpr (L == GemmLayout::nt)
        ldsm_x4(r, sb + b_frag_off[ks] + p * 16 * ROW_BYTES);
      else
        ldsm_x4_trans(r, sb + b_frag_off[p] + ks * 16 * NN_ROW_BYTES);
      bf[buf][2 * p][0] = r[0];
      bf[buf][2 * p][1] = r[1];
      bf[buf][2 * p + 1][0] = r[2];
      bf[buf][2 * p + 1][1] = r[3];
    }
  };

  // Pipeline: tile kt lives in stage kt % STAGES. The prologue puts STAGES-1 tiles in
  // flight; each iteration refills the stage that the previous iteration finished reading.
  // One barrier per block tile, just before the first fragment load from tile kt+1: it
  // both publishes tile kt+1 (after cp.async.wait) and certifies that every warp is done
  // reading stage kt, which the next iteration overwrites. Fragments for k step s+1 load
  // while the mma of step s run, so ldmatrix latency hides behind 32 mma per warp.
  const int num_tiles = (K + BK - 1) / BK;
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < num_tiles) load_stage(s, s);
    cp_async_commit();  // empty groups keep the wait_group arithmetic uniform
  }
  cp_async_wait<STAGES - 2>();
  __syncthreads();
  load_frags(0, 0, 0);

  int read_stage = 0, write_stage = STAGES - 1;
  for (int kt = 0; kt < num_tiles; ++kt) {
#pragma unroll
    for (int ks = 0; ks < KSTEPS; ++ks) {
      if (ks == KSTEPS - 1) {
        // Groups committed so far: tiles 0 .. kt+STAGES-1; tile kt+1 is complete once
        // at most STAGES-2 remain pending.
        cp_async_wait<STAGES - 2>();
        __syncthreads();
        read_stage = read_stage == STAGES - 1 ? 0 : read_stage + 1;
      }
      // The last iteration loads fragments of a tile that does not exist: harmless reads
      // of a stage, never used.
      load_frags((ks + 1) % 2, read_stage, (ks + 1) % KSTEPS);
      if (ks == 0) {
        if (kt + STAGES - 1 < num_tiles) load_stage(write_stage, kt + STAGES - 1);
        cp_async_commit();
        write_stage = write_stage == STAGES - 1 ? 0 : write_stage + 1;
      }
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) mma_16816<T>(acc[mt][nt], af[ks % 2][mt], bf[ks % 2][nt]);
    }
  }

  // Epilogue: accumulator (c0, c1) is row lane/4, columns 2*(lane%4) + {0, 1} of its m16n8
  // tile, (c2, c3) the same 8 rows down. A store instruction writes 8 rows x 16 bytes and
  // the next n8 tile's store the other half of each 32-byte sector, merged in L2. Staging
  // through shared memory for 16-byte stores is not worth its code here: at m = n = k =
  // 8192 a 128x256 block writes 64 KB after ~150 us of mma (well under 1%).
  const int g = lane / 4, t4 = lane % 4;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = m0 + warp_m * (MT * 16) + mt * 16 + h * 8 + g;
      if (row >= M) continue;
      T* c_row = c + static_cast<int64_t>(row) * N;
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        const int col = n0 + warp_n * (NT * 8) + nt * 8 + 2 * t4;
        store_pair<T>(c_row, col, N, acc[mt][nt][2 * h], acc[mt][nt][2 * h + 1]);
      }
    }
  }
}

template <class T, GemmLayout L, class Cfg>
void launch_mma(const GemmParams& p, const LaunchContext& ctx, const char* name) {
  const auto kernel = mma_kernel<T, L, Cfg>;
  // More than 48 KB of dynamic shared memory needs an opt-in, once per kernel.
  static const cudaError_t opt_in =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::SMEM_BYTES);
  check_cuda(opt_in, name);
  const int64_t tiles = ceil_div(p.m, Cfg::BM) * ceil_div(p.n, Cfg::BN);
  const dim3 grid(static_cast<unsigned>(tiles), static_cast<unsigned>(p.batch));
  kernel<<<grid, Cfg::THREADS, Cfg::SMEM_BYTES, ctx.stream>>>(static_cast<const T*>(p.a), static_cast<const T*>(p.b),
                                                              static_cast<T*>(p.c), static_cast<int>(p.m),
                                                              static_cast<int>(p.n), static_cast<int>(p.k));
  check_launch(name);
}

template <class Cfg>
void launch_mma_config(const GemmParams& p, const LaunchContext& ctx, const char* name) {
  with_16bit(p.dtype, name, [&](auto t) {
    with_value<GemmLayout::nt, GemmLayout::nn>(p.layout, name, "layout", [&](auto layout) {
      launch_mma<decltype(t), decltype(layout)::value, Cfg>(p, ctx, name);
    });
  });
}

}  // namespace

void gemm_impl::mma(const GemmParams& p, const LaunchContext& ctx) { launch_mma_config<MmaMain>(p, ctx, "gemm/mma"); }

std::string gemm_impl::mma_supports(const GemmParams& p, const DeviceCaps& caps) {
  std::string r = kernel_reason(p, 1);
  if (!r.empty()) return r;
  if (p.dtype != DType::fp16 && p.dtype != DType::bf16) return "fp16/bf16 only (mma.sync on 16-bit inputs)";
  if (caps.arch() < 80) return "needs sm_80+ (mma.sync m16n8k16, ldmatrix, cp.async)";
  return tile_copy_reason<MmaMain>(p, caps);
}

}  // namespace attnbench
