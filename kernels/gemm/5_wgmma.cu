// gemm rung 5, wgmma (fp16/bf16, sm_90a): Hopper's warpgroup mma (m64n256k16) reading A and
// B (k- or n-major) straight from 128-byte-swizzled shared memory through descriptors: no
// ldmatrix and no fragment registers, so the tensor cores are fed at the rate mma.sync cannot
// reach (bf16 peaks in `attnbench info`, H200: wgmma 969, mma.sync 611 TFLOP/s). A 4-stage
// cp.async pipeline, 128x256x64 block tile of two warpgroups.
// H200, run 32: bf16 nt 8192³ 606.8 TFLOP/s, 0.83x cuBLAS, 1.36x rung 4; run 36: 0.84x cuBLAS.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "kernels/common/dispatch.cuh"
#include "kernels/common/copy.cuh"
#include "kernels/common/wgmma.cuh"
#include "kernels/gemm/tiles.cuh"

namespace attnbench {
namespace {

using namespace gemm_impl;

// Hopper's warpgroup mma: m64n256k16 reads both operands from shared memory through matrix
// descriptors, so no ldmatrix and no fragment registers: 128 fp32 accumulators per thread
// and the tensor cores fed at the rate mma.sync cannot reach (bf16: 956 vs 630 TFLOP/s in
// `attnbench info` on an H200). Block tile (64 x warpgroups) x 256 x 64, a warpgroup per 64
// rows. Tiles are copied with cp.async (every thread, as the mma kernel does) into the
// 128-byte swizzle wgmma's descriptors describe, which is kmajor_offset<8>: chunk c of row r
// at r * 128 + (c ^ r % 8) * 16, in 1024-byte atoms of 8 rows.
template <int WGS_, int STAGES_>
struct WgConfig {
  static constexpr int WGS = WGS_, STAGES = STAGES_;  // warpgroups (64 rows each), pipeline stages
  static constexpr int BM = 64 * WGS, BN = 256, BK = 64, THREADS = 128 * WGS;
  static constexpr int A_BYTES = BM * BK * 2, B_BYTES = BN * BK * 2, STAGE_BYTES = A_BYTES + B_BYTES;
  static constexpr int SMEM_BYTES = STAGES * STAGE_BYTES + 1024;  // + slack to align the atoms to 1024 bytes
};
// 2 warpgroups x 4 stages (192 KB). 3 warpgroups (192 x 256, a fifth fewer L2 bytes per flop)
// with 3 or 4 stages timed 2-4% slower on an H200 (bench notes, run 26).
using WgMain = WgConfig<2, 4>;

// C = A·Bᵀ (nt) or A·B (nn), any M and N, K % 8 == 0 (and N % 8 == 0 for nn), 16-byte aligned
// A and B (as the mma kernel). nn's B tile (64 k rows x 256 n) is N-major: four 64-column
// blocks of [k][128 bytes], the same swizzle on each k row, 8 KB apart.
// Pipeline: tile kt lives in stage kt % 4; two tiles are in flight ahead of the one the
// tensor cores read, and the stage a copy refills was read by the wgmma two tiles back,
// which every warpgroup has waited for (wait_group 1) before the barrier the copy follows.
template <class T, GemmLayout L, class Cfg>
__global__ __launch_bounds__(Cfg::THREADS, 1) void wgmma_kernel(const T* __restrict__ a, const T* __restrict__ b,
                                                               T* __restrict__ c, int M, int N, int K) {
#if !defined(__CUDA_ARCH__) || defined(__CUDA_ARCH_FEAT_SM90_ALL)  // the host pass parses it too
  constexpr int BM = Cfg::BM, BN = Cfg::BN, BK = Cfg::BK, STAGES = Cfg::STAGES, THREADS = Cfg::THREADS;
  constexpr int A_BYTES = Cfg::A_BYTES, STAGE_BYTES = Cfg::STAGE_BYTES;
  constexpr int GROUP_M = 16;  // tile rows per rasterization group
  // Descriptors (wgmma_desc_sw128): A and nt's B K-major, k by 16 = 32 bytes; nn's B N-major,
  // 8 KB between its 64-column blocks, k by 16 = 2 KB.
  constexpr bool kNT = L == GemmLayout::nt;
  extern __shared__ unsigned char smem_raw[];
  const uint32_t smem_base = (static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw)) + 1023u) & ~1023u;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, wgi = tid / 128;

  const int2 tile = grouped_tile<BM, BN, GROUP_M>(M, N);
  const int m0 = tile.x, n0 = tile.y;
  const int64_t z = blockIdx.y;
  a += z * M * K;
  b += z * N * K;
  c += z * M * N;

  // Copy slots: thread t takes chunk t % 8 of rows t / 8 + 32 i (one swizzle for all i).
  constexpr int ROW_STEP = THREADS / 8;
  const int ld_row = tid / 8, ld_chunk = tid % 8;
  const uint32_t st_off = kmajor_offset<8>(ld_row, ld_chunk);
  const int a_rows_left = M - m0 - ld_row, b_rows_left = N - n0 - ld_row;
  const T* a_src = a + static_cast<int64_t>(min(m0 + ld_row, M - 1)) * K + 8 * ld_chunk;
  const T* b_src = b + static_cast<int64_t>(min(n0 + ld_row, N - 1)) * K + 8 * ld_chunk;
  const int64_t step = static_cast<int64_t>(ROW_STEP) * K;
  // nn: thread t takes n chunk t % 32 (block of 64 columns t % 32 / 8) of k rows t / 32 + KSTEP i.
  constexpr int KSTEP = THREADS / 32;
  const int nn_k = tid / 32, nn_ch = tid % 32;
  const uint32_t nn_off = (nn_ch / 8) * 8192 + nn_k * 128 + (((nn_ch % 8) ^ (nn_k % 8)) * 16);
  const bool nn_col_ok = n0 + 8 * nn_ch < N;
  const T* nn_src = b + static_cast<int64_t>(nn_k) * N + min(n0 + 8 * nn_ch, N - 8);
  auto load_stage = [&](int kt) {
    const int k0 = kt * BK;
    const uint32_t sa = smem_base + (kt % STAGES) * STAGE_BYTES, sb = sa + A_BYTES;
    const bool k_ok = k0 + 8 * ld_chunk < K;
    const T* src = a_src + k0;
#pragma unroll
    for (int i = 0; i < (BM + ROW_STEP - 1) / ROW_STEP; ++i, src += step) {
      if (BM % ROW_STEP != 0 && ld_row + i * ROW_STEP >= BM) break;
      const bool ok = k_ok && i * ROW_STEP < a_rows_left;
      cp_async_16<L2Prefetch::b128>(sa + st_off + i * ROW_STEP * 128, ok ? src : a, ok);
    }
    if constexpr (kNT) {
      src = b_src + k0;
#pragma unroll
      for (int i = 0; i < (BN + ROW_STEP - 1) / ROW_STEP; ++i, src += step) {
        if (BN % ROW_STEP != 0 && ld_row + i * ROW_STEP >= BN) break;
        const bool ok = k_ok && i * ROW_STEP < b_rows_left;
        cp_async_16<L2Prefetch::b128>(sb + st_off + i * ROW_STEP * 128, ok ? src : b, ok);
      }
    } else {
      src = nn_src + static_cast<int64_t>(k0) * N;
#pragma unroll
      for (int i = 0; i < BK / KSTEP; ++i, src += static_cast<int64_t>(KSTEP) * N) {
        const bool ok = nn_col_ok && k0 + nn_k + i * KSTEP < K;
        cp_async_16<L2Prefetch::b128>(sb + nn_off + i * KSTEP * 128, ok ? src : b, ok);
      }
    }
  };

  float d[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) d[i] = 0.f;
  const int num_tiles = (K + BK - 1) / BK;
#pragma unroll
  for (int s = 0; s < STAGES - 2; ++s) {
    if (s < num_tiles) load_stage(s);
    cp_async_commit();
  }
  for (int kt = 0; kt < num_tiles; ++kt) {
    cp_async_wait<STAGES - 3>();  // tile kt has landed (tile kt + 1 may still be in flight)
    fence_proxy_async_shared();  // cp.async's writes -> wgmma's reads
    __syncthreads();
    if (kt + STAGES - 2 < num_tiles) load_stage(kt + STAGES - 2);
    cp_async_commit();
    const uint32_t sa = smem_base + (kt % STAGES) * STAGE_BYTES;
    const uint64_t da = wgmma_desc_sw128(sa + wgi * 64 * 128), db = wgmma_desc_sw128(sa + A_BYTES, kNT ? 16 : 8192);
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < BK / 16; ++ks) wgmma_m64n256k16_ss<T, kNT ? 0 : 1>(d, da + 2 * ks, db + (kNT ? 2 : 128) * ks);
    wgmma_commit();
    wgmma_wait<1>();
  }
  wgmma_wait<0>();

  // d[4j + e]: row 16 (warp % 4) + lane / 4 (+ 8 for e >= 2) of the warpgroup's 64, column
  // 8j + 2 (lane % 4) + e % 2.
  const int row0 = m0 + wgi * 64 + 16 * (warp % 4) + lane / 4;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = row0 + 8 * h;
    if (row >= M) continue;
    T* c_row = c + static_cast<int64_t>(row) * N;
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) store_pair<T>(c_row, n0 + 8 * j + 2 * (lane % 4), N, d[4 * j + 2 * h], d[4 * j + 2 * h + 1]);
  }
#else
  __trap();  // built without sm_90a: wgmma_supports refuses other cards
#endif
}

template <class T, GemmLayout L, class Cfg>
void launch_wgmma(const GemmParams& p, const LaunchContext& ctx) {
  const auto kernel = wgmma_kernel<T, L, Cfg>;
  static const cudaError_t opt_in =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::SMEM_BYTES);
  check_cuda(opt_in, "gemm/wgmma");
  const int64_t tiles = ceil_div(p.m, Cfg::BM) * ceil_div(p.n, Cfg::BN);
  const dim3 grid(static_cast<unsigned>(tiles), static_cast<unsigned>(p.batch));
  kernel<<<grid, Cfg::THREADS, Cfg::SMEM_BYTES, ctx.stream>>>(static_cast<const T*>(p.a), static_cast<const T*>(p.b),
                                                            static_cast<T*>(p.c), static_cast<int>(p.m),
                                                            static_cast<int>(p.n), static_cast<int>(p.k));
  check_launch("gemm/wgmma");
}

}  // namespace

void gemm_impl::wgmma(const GemmParams& p, const LaunchContext& ctx) {
  with_16bit(p.dtype, "gemm/wgmma", [&](auto t) {
    with_value<GemmLayout::nt, GemmLayout::nn>(p.layout, "gemm/wgmma", "layout", [&](auto layout) {
      launch_wgmma<decltype(t), decltype(layout)::value, WgMain>(p, ctx);
    });
  });
}

std::string gemm_impl::wgmma_supports(const GemmParams& p, const DeviceCaps& caps) {
  std::string r = kernel_reason(p, 1);
  if (!r.empty()) return r;
  if (p.dtype != DType::fp16 && p.dtype != DType::bf16) return "fp16/bf16 only (wgmma on 16-bit inputs)";
  if (caps.cc_major != 9) return "needs sm_90 (wgmma; the binary's sm_90a build)";
  return tile_copy_reason<WgMain>(p, caps);
}

}  // namespace attnbench
