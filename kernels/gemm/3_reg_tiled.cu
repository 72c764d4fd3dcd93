// gemm rung 3, reg_tiled (fp32): the SGEMM register tiling. 128x128x16 block tile, 256
// threads, 8x8 outputs per thread (warp tile 32x64): each k step is 4 float4 shared loads for
// 64 FMAs, where rung 2 does one load per FMA. A (and B in nt) stored k-major, i.e.
// transposed, in shared memory so the inner loop reads float4s; float4 global loads,
// double-buffered shared memory fed by a register prefetch of the next tile.
// H200, run 1: fp32 nn 4096³ 3.307 ms, 41.6 TFLOP/s, 0.81x cuBLAS (5.3x rung 2).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/gemm/rungs.hpp"

namespace attnbench {
namespace {

namespace rt {
constexpr int BM = 128, BN = 128, BK = 16, THREADS = 256;
// Shared rows hold 128 floats (m or n) per k. The +4 pad keeps float4 alignment and
// makes the transposing stores conflict-free: a warp writes 16 rows x 2 chunks, and
// with a 132-float stride chunk c+1 lands 16 banks after chunk c.
constexpr int LD = BM + 4;
}  // namespace rt

// 4 consecutive floats of one row, zero past `cols` or when the row is out of range.
// `vec`: the row is 16-byte aligned, so an in-range float4 can be one 16-byte load.
__device__ __forceinline__ float4 load_row4(const float* __restrict__ row_ptr, bool row_ok, int col, int cols,
                                            bool vec) {
  if (row_ok && vec && col + 4 <= cols) return __ldg(reinterpret_cast<const float4*>(row_ptr + col));
  float4 v;
  v.x = row_ok && col + 0 < cols ? __ldg(row_ptr + col + 0) : 0.f;
  v.y = row_ok && col + 1 < cols ? __ldg(row_ptr + col + 1) : 0.f;
  v.z = row_ok && col + 2 < cols ? __ldg(row_ptr + col + 2) : 0.f;
  v.w = row_ok && col + 3 < cols ? __ldg(row_ptr + col + 3) : 0.f;
  return v;
}

// vec_a: A rows are float4-loadable (K % 4 == 0, 16-byte base); vec_b: likewise B rows
// (nt: K % 4, nn: N % 4); vec_c: C rows take float4 stores (N % 4 == 0, 16-byte base).
// Unaligned shapes take the scalar branches: correct at any size, fast where aligned.
template <GemmLayout L>
__global__ __launch_bounds__(rt::THREADS, 2) void reg_tiled_kernel(const float* __restrict__ a,
                                                                   const float* __restrict__ b, float* __restrict__ c,
                                                                   int M, int N, int K, bool vec_a, bool vec_b,
                                                                   bool vec_c) {
  // a: [batch, M, K]; b: nt [batch, N, K], nn [batch, K, N]; c: [batch, M, N]
  using namespace rt;
  __shared__ __align__(16) float As[2][BK][LD];  // [buffer][k][m]
  __shared__ __align__(16) float Bs[2][BK][LD];  // [buffer][k][n]
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  const int64_t z = blockIdx.z;
  a += z * M * K;
  b += z * N * K;
  c += z * M * N;

  // Loading a k-contiguous 128x16 slab (A, and B in nt): thread t takes row t/2 and the
  // float4 chunks t%2 and t%2+2, so a warp covers 16 rows x 32 bytes (whole sectors).
  const int slab_row = tid / 2, slab_chunk = tid % 2;
  const bool a_ok = m0 + slab_row < M;
  const float* a_src = a + static_cast<int64_t>(a_ok ? m0 + slab_row : 0) * K;
  // B in nn is n-contiguous already: thread t takes k rows t/32 and t/32+8, float4 t%32.
  const int b_row = L == GemmLayout::nt ? slab_row : tid / 32;
  const int b_chunk = L == GemmLayout::nt ? slab_chunk : tid % 32;
  const bool bt_ok = n0 + slab_row < N;
  const float* bt_src = b + static_cast<int64_t>(bt_ok ? n0 + slab_row : 0) * K;

  float4 pa[2], pb[2];  // the next tile, in flight while the current one is multiplied
  auto load_tile = [&](int k0) {
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      pa[j] = load_row4(a_src, a_ok, k0 + 4 * (slab_chunk + 2 * j), K, vec_a);
      if constexpr (L == GemmLayout::nt) {
        pb[j] = load_row4(bt_src, bt_ok, k0 + 4 * (slab_chunk + 2 * j), K, vec_b);
      } else {
        const int kr = k0 + b_row + 8 * j;
        const bool ok = kr < K;
        pb[j] = load_row4(b + static_cast<int64_t>(ok ? kr : 0) * N, ok, n0 + 4 * b_chunk, N, vec_b);
      }
    }
  };
  auto store_tile = [&](int buf) {
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int kc = 4 * (slab_chunk + 2 * j);
      As[buf][kc + 0][slab_row] = pa[j].x;
      As[buf][kc + 1][slab_row] = pa[j].y;
      As[buf][kc + 2][slab_row] = pa[j].z;
      As[buf][kc + 3][slab_row] = pa[j].w;
      if constexpr (L == GemmLayout::nt) {
        Bs[buf][kc + 0][b_row] = pb[j].x;
        Bs[buf][kc + 1][b_row] = pb[j].y;
        Bs[buf][kc + 2][b_row] = pb[j].z;
        Bs[buf][kc + 3][b_row] = pb[j].w;
      } else {
        *reinterpret_cast<float4*>(&Bs[buf][b_row + 8 * j][4 * b_chunk]) = pb[j];
      }
    }
  };

  // 8 warps as 4 (m) x 2 (n), warp tile 32x64; lanes as 4 (m) x 8 (n). A thread owns
  // rows {0..3, 16..19} + 4*ty and columns {0..3, 32..35} + 4*tx of its warp tile, so each
  // k step is 4 float4 shared loads (A: 4 distinct addresses per warp, broadcast; B: 128
  // contiguous bytes) for 64 FMAs.
  const int wm = (warp / 2) * 32, wn = (warp % 2) * 64;
  const int ty = lane / 8, tx = lane % 8;
  float acc[8][8] = {};

  const int num_tiles = static_cast<int>(ceil_div(K, BK));
  load_tile(0);
  store_tile(0);
  __syncthreads();
  for (int t = 0; t < num_tiles; ++t) {
    const int cur = t % 2;
    const bool more = t + 1 < num_tiles;
    if (more) load_tile((t + 1) * BK);
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
      const float4 a0 = *reinterpret_cast<const float4*>(&As[cur][kk][wm + 4 * ty]);
      const float4 a1 = *reinterpret_cast<const float4*>(&As[cur][kk][wm + 16 + 4 * ty]);
      const float4 b0 = *reinterpret_cast<const float4*>(&Bs[cur][kk][wn + 4 * tx]);
      const float4 b1 = *reinterpret_cast<const float4*>(&Bs[cur][kk][wn + 32 + 4 * tx]);
      const float av[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
      const float bv[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
      for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
    }
    // One barrier per tile suffices: this iteration reads buffer cur and writes cur^1;
    // the next writes cur only after every warp has passed this barrier, i.e. finished
    // reading cur.
    if (more) store_tile(cur ^ 1);
    __syncthreads();
  }

  // A warp's store instruction writes 4 rows x 128 contiguous bytes: coalesced as is.
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int row = m0 + wm + (i / 4) * 16 + 4 * ty + i % 4;
    if (row >= M) continue;
    float* c_row = c + static_cast<int64_t>(row) * N;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int col = n0 + wn + 32 * h + 4 * tx;
      if (vec_c && col + 4 <= N) {
        *reinterpret_cast<float4*>(c_row + col) =
            make_float4(acc[i][4 * h], acc[i][4 * h + 1], acc[i][4 * h + 2], acc[i][4 * h + 3]);
      } else {
#pragma unroll
        for (int e = 0; e < 4; ++e)
          if (col + e < N) c_row[col + e] = acc[i][4 * h + e];
      }
    }
  }
}

template <GemmLayout L>
void launch_reg_tiled(const GemmParams& p, const LaunchContext& ctx) {
  const bool vec_a = p.k % 4 == 0 && aligned16(p.a);
  const bool vec_b = (L == GemmLayout::nt ? p.k : p.n) % 4 == 0 && aligned16(p.b);
  const bool vec_c = p.n % 4 == 0 && aligned16(p.c);
  const dim3 grid(static_cast<unsigned>(ceil_div(p.n, rt::BN)), static_cast<unsigned>(ceil_div(p.m, rt::BM)),
                  static_cast<unsigned>(p.batch));
  reg_tiled_kernel<L><<<grid, rt::THREADS, 0, ctx.stream>>>(
      static_cast<const float*>(p.a), static_cast<const float*>(p.b), static_cast<float*>(p.c), static_cast<int>(p.m),
      static_cast<int>(p.n), static_cast<int>(p.k), vec_a, vec_b, vec_c);
  check_launch("gemm/reg_tiled");
}

}  // namespace

void gemm_impl::reg_tiled(const GemmParams& p, const LaunchContext& ctx) {
  if (p.dtype != DType::fp32) unsupported_dtype("reg_tiled", p.dtype);
  switch (p.layout) {
    case GemmLayout::nt: return launch_reg_tiled<GemmLayout::nt>(p, ctx);
    case GemmLayout::nn: return launch_reg_tiled<GemmLayout::nn>(p, ctx);
  }
}

std::string gemm_impl::reg_tiled_supports(const GemmParams& p, const DeviceCaps&) {
  std::string r = kernel_reason(p, ceil_div(p.m, rt::BM));
  if (!r.empty()) return r;
  if (p.dtype != DType::fp32) return "fp32 only (fp16/bf16 belong on tensor cores: see mma)";
  return {};
}

}  // namespace attnbench
