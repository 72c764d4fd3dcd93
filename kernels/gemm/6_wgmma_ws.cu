// gemm rung 6, wgmma_ws: Hopper's GEMM design (sm_90a), as cuBLAS and CUTLASS build it. What
// rung 5 (wgmma) does not have:
//   - TMA: one producer thread issues each stage's tiles as tensor-map bulk copies, which land
//     already in the 128-byte swizzle wgmma's descriptors read. Rung 5's 256 threads spent
//     their issue slots on cp.async addresses and met at a __syncthreads every k tile.
//   - Warp specialization: warpgroup 0 is the producer (setmaxnreg 40), warpgroups 1 and 2 the
//     consumers (232), each 64 of the tile's 128 rows by 256 columns. A 3-deep ring of
//     stages, each with a "full" mbarrier (its bytes landed) and an "empty" one (every
//     consumer warp is done reading it): the consumers never wait on each other.
//   - A persistent grid: one block per SM walks the tiles in grouped order, so the producer
//     loads the next tile's first stages while the consumers store the last one's outputs.
//   - The epilogue through shared memory and TMA stores: stmatrix puts a consumer's outputs
//     in its staging buffer, and the stores leave while it starts its next tile (0.90x ->
//     1.00x cuBLAS, bench notes run 144). The 64 KB of staging cost a fourth stage.
//   - Clusters of two blocks on vertically adjacent tiles (the same columns of B): each block
//     copies half of the stage's B tile and multicasts it into both, so the L2 serves 32 KB a
//     stage per block instead of 48 KB. A block frees a stage only when the consumers of both
//     have read it, since its peer's next copy writes into both.
//   - The fused projection's epilogue (GemmParams::bias, split_n; mha's epilogue step), an
//     instantiation of its own: the bias is added to the accumulators before they are rounded,
//     and with a column split each 64-column box is stored into the part it lies in, at its
//     column there. The parts are multiples of 64 columns (heads · head_dim for head_dim 64,
//     128, 256, and 80 or 96 at head counts that make them so): a box that straddled two
//     parts would need a store at a negative column of the second, which the H100 stopped
//     with an illegal instruction (bench notes, run 267).
// C = A·Bᵀ (nt) or A·B (nn), batched, any M; K % 8 == 0 and N % 8 == 0: TMA's global strides
// are multiples of 16 bytes. Reads past an edge come back as zeros, writes past it are dropped.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>
#include <type_traits>

#include "kernels/common/cluster_launch.hpp"
#include "kernels/common/dispatch.cuh"
#include "kernels/common/copy.cuh"
#include "kernels/common/mma.cuh"
#include "kernels/common/storage.cuh"
#include "kernels/common/tma.cuh"
#include "kernels/common/wgmma.cuh"
#include "kernels/gemm/tiles.cuh"

namespace attnbench {
namespace {

using namespace gemm_impl;

constexpr int BM = 128, BN = 256, BK = 64, STAGES = 3, THREADS = 384;
constexpr int A_BYTES = BM * BK * 2, B_BYTES = BN * BK * 2, STAGE_BYTES = A_BYTES + B_BYTES;
// Each consumer's 64 x 256 outputs are staged in shared memory for the TMA store: four 64 x 64
// boxes of [row][128 bytes] in the 128-byte swizzle.
constexpr int C_BYTES = 64 * BN * 2;
constexpr int SMEM_BYTES = STAGES * STAGE_BYTES + 2 * C_BYTES + 1024;  // + slack to align the atoms to 1024 bytes
constexpr int GROUP_M = 16;                              // tile rows per rasterization group
// The block is launched with 168 registers a thread (__launch_bounds__(384, 1)); the
// warpgroups trade within that. The consumers hold 128 accumulators.
constexpr int PRODUCER_REGS = 40, CONSUMER_REGS = 232;
static_assert(128 * PRODUCER_REGS + 256 * CONSUMER_REGS <= THREADS * 168, "more registers than launched");
constexpr int CONSUMER_WARPS = 8;

struct Bars {
  uint64_t full[STAGES], empty[STAGES];
};

// The plain epilogue: the accumulators rounded and stored to C.
struct NoEpilogue {
  static constexpr bool kOn = false;
};
// The fused projection's: bias [N] (or null) added, columns [0, n_c) stored to C (tc), the next
// n_c1 to tc1, the rest to tc2. Without a split n_c = N.
struct Epilogue {
  static constexpr bool kOn = true;
  CUtensorMap tc1, tc2;
  const void* bias;
  int n_c, n_c1;
};

// Work unit u of the persistent order: CLUSTER vertically adjacent tiles (one per block of a
// cluster) of batch entry z, the units in grouped order within a batch entry.
struct Unit {
  int z, m0, n0;
};
template <int CLUSTER>
__device__ __forceinline__ Unit unit_at(int u, int units_m, int tiles_n, uint32_t rank) {
  const int per_batch = units_m * tiles_n;
  const int z = u / per_batch;
  const int2 t = grouped_index<GROUP_M / CLUSTER>(static_cast<unsigned>(u - z * per_batch), units_m, tiles_n);
  return {z, (t.x * CLUSTER + static_cast<int>(rank)) * BM, t.y * BN};
}

template <class T, GemmLayout L, int CLUSTER, class Epi>
__global__ __launch_bounds__(THREADS, 1) void wgmma_ws_kernel(const __grid_constant__ CUtensorMap ta,
                                                              const __grid_constant__ CUtensorMap tb,
                                                              const __grid_constant__ CUtensorMap tc, int M, int N,
                                                              int K, int units, const __grid_constant__ Epi epi) {
#if !defined(__CUDA_ARCH__) || defined(__CUDA_ARCH_FEAT_SM90_ALL)  // the host pass parses it too
  constexpr bool kNT = L == GemmLayout::nt;
  extern __shared__ unsigned char smem_raw[];
  __shared__ Bars bars;
  const uint32_t smem_base = (static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw)) + 1023u) & ~1023u;
  const auto bar = [](const uint64_t& b) { return smem_addr(&b); };
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, wg = tid / 128;
  const uint32_t rank = CLUSTER > 1 ? cluster_rank() : 0;
  const int cluster = static_cast<int>(blockIdx.x) / CLUSTER, clusters = static_cast<int>(gridDim.x) / CLUSTER;
  const int units_m = (M + BM * CLUSTER - 1) / (BM * CLUSTER), tiles_n = (N + BN - 1) / BN;
  const int k_tiles = (K + BK - 1) / BK;

  if (tid == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(bar(bars.full[s]), 1);
      mbar_init(bar(bars.empty[s]), CONSUMER_WARPS * CLUSTER);
    }
  }
  // The peer's copies and arrivals reach these barriers: initialised everywhere first.
  if constexpr (CLUSTER > 1)
    cluster_sync();
  else
    __syncthreads();

  if (wg == 0) {
    setmaxnreg_dec<PRODUCER_REGS>();
    if (tid == 0) {
      tma_prefetch_map(ta);
      tma_prefetch_map(tb);
      tma_prefetch_map(tc);
      int it = 0;  // k tiles issued, over all of this block's units: stage it % STAGES
      for (int u = cluster; u < units; u += clusters) {
        const Unit w = unit_at<CLUSTER>(u, units_m, tiles_n, rank);
        for (int kt = 0; kt < k_tiles; ++kt, ++it) {
          const int s = it % STAGES;
          mbar_wait(bar(bars.empty[s]), ((it / STAGES) & 1) ^ 1);
          const uint32_t sa = smem_base + s * STAGE_BYTES, sb = sa + A_BYTES, full = bar(bars.full[s]);
          mbar_expect_tx(full, STAGE_BYTES);  // A, and all of B: this block's part and the peer's
          const int k0 = kt * BK;
          tma_load_3d(sa, ta, k0, w.m0, w.z, full);
          // B: nt is 256 n rows of 128 bytes; nn is four 64-column blocks of 64 k rows, 8 KB apart.
          // Each block copies its 1 / CLUSTER of that, with a cluster into every block.
          constexpr int kPart = BN / CLUSTER;  // n rows or columns of B this block copies
          const auto load_b = [&](uint32_t dst, int c0, int c1) {
            if constexpr (CLUSTER == 1)
              tma_load_3d(dst, tb, c0, c1, w.z, full);
            else
              tma_load_3d_multicast(dst, tb, c0, c1, w.z, full, (1u << CLUSTER) - 1);
          };
          if constexpr (kNT) {
            load_b(sb + rank * kPart * 128, k0, w.n0 + static_cast<int>(rank) * kPart);
          } else {
            for (int j = 0; j < kPart / 64; ++j) {
              const int blk = static_cast<int>(rank) * (kPart / 64) + j;
              load_b(sb + blk * 8192, w.n0 + 64 * blk, k0);
            }
          }
        }
      }
    }
    __syncwarp();
  } else {
    setmaxnreg_inc<CONSUMER_REGS>();
    const int cw = wg - 1;  // this consumer's 64 rows of the tile
    // A stage read by every warp of this consumer is released to the producer of each block
    // that writes into it: the own block's, and with a cluster the peer's too.
    const auto release = [&](int s) {
      __syncwarp();
      if (lane == 0) {
        if constexpr (CLUSTER == 1)
          mbar_arrive(bar(bars.empty[s]));
        else
          for (uint32_t r = 0; r < CLUSTER; ++r) mbar_arrive_cluster(bar(bars.empty[s]), r);
      }
    };
    int it = 0;
    for (int u = cluster; u < units; u += clusters) {
      const Unit w = unit_at<CLUSTER>(u, units_m, tiles_n, rank);
      float d[128];
#pragma unroll
      for (int i = 0; i < 128; ++i) d[i] = 0.f;
      for (int kt = 0; kt < k_tiles; ++kt, ++it) {
        const int s = it % STAGES;
        mbar_wait(bar(bars.full[s]), (it / STAGES) & 1);
        const uint32_t sa = smem_base + s * STAGE_BYTES;
        const uint64_t da = wgmma_desc_sw128(sa + cw * 64 * 128), db = wgmma_desc_sw128(sa + A_BYTES, kNT ? 16 : 8192);
        wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < BK / 16; ++ks)
          wgmma_m64n256k16_ss<T, kNT ? 0 : 1>(d, da + 2 * ks, db + (kNT ? 2 : 128) * ks);
        wgmma_commit();
        // The products of the tile before are done: its stage goes back to the producer.
        wgmma_wait<1>();
        if (kt > 0) release((it - 1) % STAGES);
      }
      wgmma_wait<0>();
      if (k_tiles > 0) release((it - 1) % STAGES);

      // The epilogue: the outputs go to shared memory with stmatrix (16 instructions a thread
      // where stores from registers took 128) and leave in four TMA stores, which run while
      // the consumer starts its next tile. Its buffer is free again once the last tile's
      // stores have read it.
      const uint32_t cbuf = smem_base + STAGES * STAGE_BYTES + cw * C_BYTES;
      const bool leader = tid % 128 == 0;
      if (leader) bulk_wait_read<0>();
      named_bar_sync(1 + cw, 128);
      // d[4j + e]: row 16 (warp % 4) + lane / 4 (+ 8 for e >= 2) of the consumer's 64, column
      // 8j + 2 (lane % 4) + e % 2. stmatrix's matrices, per two column chunks j and j + 1:
      // (rows 0-7, chunk j), (rows 8-15, j), (rows 0-7, j + 1), (rows 8-15, j + 1), lane l
      // addressing row l % 8 of matrix l / 8.
      const int st_row = 16 * (warp % 4) + 8 * ((lane / 8) % 2) + lane % 8, st_chunk = lane / 16;
      if constexpr (Epi::kOn) {
        if (epi.bias) {  // d[4j + e]'s column: 8j + 2 (lane % 4) + e % 2; N is even, so a pair is in or out
          const T* bias = static_cast<const T*>(epi.bias);
#pragma unroll
          for (int j = 0; j < BN / 8; ++j) {
            const int col = w.n0 + 8 * j + 2 * (lane % 4);
            if (col < N) {
              const float b0 = to_float(bias[col]), b1 = to_float(bias[col + 1]);
              d[4 * j] += b0;
              d[4 * j + 1] += b1;
              d[4 * j + 2] += b0;
              d[4 * j + 3] += b1;
            }
          }
        }
      }
#pragma unroll
      for (int j = 0; j < BN / 8; j += 2) {
        const int chunk = j + st_chunk;  // 16-byte chunk of the 256 columns
        const uint32_t addr = cbuf + (chunk / 8) * 8192 + st_row * 128 + (((chunk % 8) ^ (st_row % 8)) * 16);
        stsm_x4(addr, pack2<T>(d[4 * j], d[4 * j + 1]), pack2<T>(d[4 * j + 2], d[4 * j + 3]),
                pack2<T>(d[4 * j + 4], d[4 * j + 5]), pack2<T>(d[4 * j + 6], d[4 * j + 7]));
      }
      fence_proxy_async_shared();  // the stmatrix writes -> the TMA unit's reads
      named_bar_sync(1 + cw, 128);
      if (leader) {
        for (int b = 0; b < BN / 64; ++b) {
          const int col = w.n0 + 64 * b, row = w.m0 + cw * 64;
          if constexpr (Epi::kOn) {
            const int end_c1 = epi.n_c + epi.n_c1;
            if (col < epi.n_c)
              tma_store_3d(tc, col, row, w.z, cbuf + b * 8192);
            else if (col < end_c1)
              tma_store_3d(epi.tc1, col - epi.n_c, row, w.z, cbuf + b * 8192);
            else if (col < N)
              tma_store_3d(epi.tc2, col - end_c1, row, w.z, cbuf + b * 8192);
          } else {
            tma_store_3d(tc, col, row, w.z, cbuf + b * 8192);
          }
        }
        bulk_commit();
      }
    }
    if (tid % 128 == 0) bulk_wait<0>();  // the last stores written before the block ends
  }
  // No block leaves while its peer may still arrive on its barriers or copy into it.
  if constexpr (CLUSTER > 1) cluster_sync();
#else
  __trap();  // built without sm_90a: wgmma_ws_supports refuses other cards
#endif
}

// A 16-bit [batch][rows][cols] row-major tensor as a 3-dimensional tensor map, boxes of 64
// columns (128 bytes: the swizzle's row) by box_rows.
template <class T>
CUtensorMap map_of(const void* base, int64_t batch, int64_t rows, int64_t cols, uint32_t box_rows) {
  const uint64_t dims[3] = {static_cast<uint64_t>(cols), static_cast<uint64_t>(rows), static_cast<uint64_t>(batch)};
  const uint64_t strides[2] = {static_cast<uint64_t>(cols) * 2, static_cast<uint64_t>(rows * cols) * 2};
  const uint32_t box[3] = {64, box_rows, 1};
  constexpr auto type = tensor_map_type<T>();
  return make_tensor_map_sw128(base, 3, dims, strides, box, type, "gemm/wgmma_ws");
}

// Clusters of `cluster` blocks of `kernel` the card holds at once.
template <class Kernel>
int resident_clusters(cudaLaunchConfig_t cfg, Kernel kernel, int sm_count, int cluster) {
  cfg.gridDim = dim3(static_cast<unsigned>(sm_count / cluster * cluster));
  int n = 0;
  if (cudaOccupancyMaxActiveClusters(&n, kernel, &cfg) != cudaSuccess || n < 1) {
    (void)cudaGetLastError();
    n = sm_count / cluster;
  }
  return n;
}

template <class T, GemmLayout L, int CLUSTER, class Epi>
void launch_ws(const GemmParams& p, const LaunchContext& ctx) {
  const auto kernel = wgmma_ws_kernel<T, L, CLUSTER, Epi>;
  static const cudaError_t opt_in =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_BYTES);
  check_cuda(opt_in, "gemm/wgmma_ws");
  const bool nt = L == GemmLayout::nt;
  const CUtensorMap ta = map_of<T>(p.a, p.batch, p.m, p.k, BM);
  const CUtensorMap tb = nt ? map_of<T>(p.b, p.batch, p.n, p.k, BN / CLUSTER) : map_of<T>(p.b, p.batch, p.k, p.n, 64);
  // With a column split, C's map covers its own columns only (c1's and c2's are epi's).
  const int64_t n_c = p.split_n[0] > 0 ? p.split_n[0] : p.n;
  const CUtensorMap tc = map_of<T>(p.c, p.batch, p.m, n_c, 64);
  Epi epi{};
  if constexpr (Epi::kOn) {
    epi.bias = p.biased ? p.bias : nullptr;
    epi.n_c = static_cast<int>(n_c);
    epi.n_c1 = static_cast<int>(p.split_n[1]);
    const int64_t n_c2 = p.n - n_c - p.split_n[1];
    // A part with no columns still needs a valid map: it is never stored to.
    epi.tc1 = p.split_n[1] > 0 ? map_of<T>(p.c1, p.batch, p.m, p.split_n[1], 64) : tc;
    epi.tc2 = n_c2 > 0 ? map_of<T>(p.c2, p.batch, p.m, n_c2, 64) : tc;
  }
  const int64_t units = ceil_div(p.m, int64_t{BM} * CLUSTER) * ceil_div(p.n, BN) * p.batch;

  ClusterLaunch launch(CLUSTER, THREADS, 0, ctx.stream, SMEM_BYTES);
  cudaLaunchConfig_t& cfg = launch.cfg;
  // As many clusters as fit on the card at once (an SM left over in a GPC of odd size stays
  // idle), no more than there are units.
  static const int resident = resident_clusters(cfg, kernel, ctx.caps->sm_count, CLUSTER);
  cfg.gridDim = dim3(static_cast<unsigned>(std::min<int64_t>(resident, units) * CLUSTER));
  check_cuda(cudaLaunchKernelEx(&cfg, kernel, ta, tb, tc, static_cast<int>(p.m),
                                static_cast<int>(p.n), static_cast<int>(p.k), static_cast<int>(units), epi),
             "gemm/wgmma_ws");
  check_launch("gemm/wgmma_ws");
}

template <int CLUSTER>
void dispatch(const GemmParams& p, const LaunchContext& ctx) {
  with_16bit(p.dtype, "gemm/wgmma_ws", [&](auto t) {
    with_value<GemmLayout::nt, GemmLayout::nn>(p.layout, "gemm/wgmma_ws", "layout", [&](auto layout) {
      if (has_epilogue(p))
        launch_ws<decltype(t), decltype(layout)::value, CLUSTER, Epilogue>(p, ctx);
      else
        launch_ws<decltype(t), decltype(layout)::value, CLUSTER, NoEpilogue>(p, ctx);
    });
  });
}

}  // namespace

void gemm_impl::wgmma_ws(const GemmParams& p, const LaunchContext& ctx) { dispatch<2>(p, ctx); }
void gemm_impl::wgmma_ws_1cta(const GemmParams& p, const LaunchContext& ctx) { dispatch<1>(p, ctx); }

std::string gemm_impl::wgmma_ws_supports(const GemmParams& p, const DeviceCaps& caps) {
  std::string r = common_reason(p, true);
  if (!r.empty()) return r;
  if (p.dtype != DType::fp16 && p.dtype != DType::bf16) return "fp16/bf16 only (wgmma on 16-bit inputs)";
  if (caps.cc_major != 9) return "needs sm_90 (wgmma, TMA and clusters; the binary's sm_90a build)";
  if (caps.smem_per_block_optin < static_cast<std::size_t>(SMEM_BYTES))
    return "needs " + std::to_string(SMEM_BYTES / 1024) + " KB of shared memory per block";
  if (p.k % 8 != 0) return "k % 8 != 0 (TMA's row strides are multiples of 16 bytes)";
  if (p.n % 8 != 0) return "n % 8 != 0 (TMA's row strides of C, and nn's B, are multiples of 16 bytes)";
  if ((p.a && !aligned16(p.a)) || (p.b && !aligned16(p.b)) || (p.c && !aligned16(p.c)))
    return "A, B and C must be 16-byte aligned (TMA)";
  if (p.split_n[0] % 64 != 0 || p.split_n[1] % 64 != 0 || (p.c1 && !aligned16(p.c1)) || (p.c2 && !aligned16(p.c2)))
    return "a column split needs parts of a multiple of 64 columns (the TMA stores' boxes), 16-byte aligned";
  if (ceil_div(p.m, int64_t{BM}) * ceil_div(p.n, BN) * p.batch > INT_MAX) return "more than 2^31 tiles";
  return {};
}

}  // namespace attnbench
