// gemm family: C = A·Bᵀ (layout nt) or C = A·B (layout nn), batched, row-major,
// storage in dtype, accumulation in fp32.
//
// Variants, one idea each, from the vendor baseline up the SGEMM ladder:
//   cublas      vendor baseline: cublasGemmStridedBatchedEx on the row-major problem
//               seen as column-major Cᵀ = op(B)ᵀ·Aᵀ; fp32 is true fp32 (no TF32).
//   naive       one thread per output, the k loop straight from global memory.
//   smem_tiled  32x32 tiles of A and B staged in shared memory; every element a block
//               loads is reused 32 times.
//   reg_tiled   fp32 only: 128x128x16 block tile, 256 threads, 8x8 outputs per thread
//               (warp tile 32x64), A (and B in nt) stored k-major, i.e. transposed, in
//               shared memory so the inner loop reads float4s; float4 global loads,
//               double-buffered shared memory fed by a register prefetch of the next tile.
//   mma         fp16/bf16 tensor cores: mma.sync m16n8k16 with fp32 accumulators,
//               ldmatrix (.trans for B in nn), a 3-stage cp.async pipeline, XOR-swizzled
//               shared memory, grouped block rasterization for L2 reuse; 128x256x64 block
//               tile, 8 warps of 64x64 (the tuning history is in cases/perf/BENCH_NOTES.md).
//   wgmma       fp16/bf16 on sm_90a: Hopper's warpgroup mma (m64n256k16) reading A and B (k-
//               or n-major) from 128-byte-swizzled shared memory through descriptors, a
//               4-stage cp.async pipeline, 128x256x64 block tile of two warpgroups.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/common.cuh"
#include "kernels/gemm.hpp"

namespace attnbench {
namespace {

// ---------------------------------------------------------------- helpers

// gridDim.y and gridDim.z are limited to 65535.
constexpr int64_t kMaxGridYZ = 65535;

// What no variant can run; empty when the shape and dtype are fine.
std::string common_reason(const GemmParams& p) {
  if (p.dtype == DType::fp8_e4m3) return "gemm has no fp8_e4m3 path";
  if (p.batch < 1 || p.m < 1 || p.n < 1 || p.k < 1) return "batch, m, n and k must be >= 1";
  if (p.m > INT_MAX || p.n > INT_MAX || p.k > INT_MAX || p.batch > INT_MAX)
    return "m, n, k and batch must fit in int (cuBLAS's and our index type)";
  return {};
}

// Our kernels: common_reason, plus batch as a grid dimension and `m_tiles` (the grid's
// y extent, or 1 where m is not a grid dimension) within gridDim.y.
std::string kernel_reason(const GemmParams& p, int64_t m_tiles) {
  std::string r = common_reason(p);
  if (r.empty() && p.batch > kMaxGridYZ) r = "batch > 65535 (batch is a grid dimension)";
  if (r.empty() && m_tiles > kMaxGridYZ) r = "m too large: its row tiles exceed gridDim.y (65535)";
  return r;
}

bool aligned16(const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; }

[[noreturn]] void unsupported_dtype(const char* variant, DType t) {
  throw std::invalid_argument(std::string("gemm/") + variant + ": no " + dtype_name(t) + " path");
}

// ---------------------------------------------------------------- naive / smem_tiled kernels

template <class T>
__global__ void naive_kernel(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ c, int M, int N, int K,
                             bool nn) {
  // a: [batch, M, K]; b: nt [batch, N, K], nn [batch, K, N]; c: [batch, M, N]
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  const int row = blockIdx.y * blockDim.y + threadIdx.y;
  if (row >= M || col >= N) return;
  const int64_t z = blockIdx.z;
  const T* a_row = a + z * M * K + static_cast<int64_t>(row) * K;
  // Threads of a warp share `row` and own consecutive columns: nn reads of B coalesce,
  // nt reads stride by K (that is what smem_tiled fixes).
  const T* b_col = b + z * N * K + (nn ? col : static_cast<int64_t>(col) * K);
  const int64_t b_step = nn ? N : 1;
  float acc = 0.f;
  for (int kk = 0; kk < K; ++kk) acc = fmaf(to_float(a_row[kk]), to_float(b_col[kk * b_step]), acc);
  c[z * M * N + static_cast<int64_t>(row) * N + col] = from_float<T>(acc);
}

constexpr int kTile = 32;

template <class T>
__global__ __launch_bounds__(kTile* kTile) void smem_tiled_kernel(const T* __restrict__ a, const T* __restrict__ b,
                                                                  T* __restrict__ c, int M, int N, int K, bool nn) {
  // a: [batch, M, K]; b: nt [batch, N, K], nn [batch, K, N]; c: [batch, M, N]
  __shared__ float As[kTile][kTile];      // [m][k]
  // [k][n]. The nt load writes it transposed (column tx of a warp's row of B goes to
  // row tx); the +1 pad puts those 32 writes in 32 different banks.
  __shared__ float Bs[kTile][kTile + 1];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int row = blockIdx.y * kTile + ty, col = blockIdx.x * kTile + tx;
  const int64_t z = blockIdx.z;
  a += z * M * K;
  b += z * N * K;
  float acc = 0.f;
  for (int k0 = 0; k0 < K; k0 += kTile) {
    As[ty][tx] = row < M && k0 + tx < K ? to_float(a[static_cast<int64_t>(row) * K + k0 + tx]) : 0.f;
    if (nn) {
      Bs[ty][tx] = k0 + ty < K && col < N ? to_float(b[static_cast<int64_t>(k0 + ty) * N + col]) : 0.f;
    } else {
      const int bn = blockIdx.x * kTile + ty;  // reads along k coalesce
      Bs[tx][ty] = bn < N && k0 + tx < K ? to_float(b[static_cast<int64_t>(bn) * K + k0 + tx]) : 0.f;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kTile; ++kk) acc = fmaf(As[ty][kk], Bs[kk][tx], acc);
    __syncthreads();
  }
  if (row < M && col < N) c[z * M * N + static_cast<int64_t>(row) * N + col] = from_float<T>(acc);
}

// ---------------------------------------------------------------- reg_tiled kernel (fp32)

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

// ---------------------------------------------------------------- mma kernel (fp16/bf16 tensor cores)

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
// per SM), it was the fastest on an H200 (cases/perf/BENCH_NOTES.md, 2026-11-26).
using MmaMain = MmaConfig<128, 256, 64, 2, 4, 3>;

// Byte offset of 16-byte chunk `chunk` of row `row` in a k-contiguous tile (rows of CH
// chunks, CH * 16 = 64 or 128 bytes). ldmatrix reads one chunk column from 8 consecutive
// rows; unswizzled, those rows repeat the same banks every 128 bytes (a 4-way conflict
// for 64-byte rows, 8-way for 128-byte rows). XOR-ing the chunk with the row's index
// among the rows that share a bank alignment spreads the 8 reads over the 8 16-byte bank
// groups. cp.async's writes (8 lanes = 128 contiguous logical bytes) stay conflict-free.
template <int CH>
__device__ __forceinline__ uint32_t kmajor_offset(int row, int chunk) {
  constexpr int rows_per_128b = 8 / CH;
  return row * (CH * 16) + ((chunk ^ ((row / rows_per_128b) % CH)) * 16);
}
// The same for B in nn: rows are k, NN_CH chunks (BN n) of at least 128 bytes, so all rows
// share a bank alignment and ldmatrix.trans down 8 k rows would be an 8-way conflict.
template <int NN_CH>
__device__ __forceinline__ uint32_t nmajor_offset(int row, int chunk) {
  return row * (NN_CH * 16) + ((chunk ^ (row % 8)) * 16);
}

// Grouped rasterization: consecutive blocks walk down GROUP_M tile rows before moving
// right, so blocks resident together share A and B panels in L2. The block's (m0, n0).
template <int BM, int BN, int GROUP_M>
__device__ __forceinline__ int2 grouped_tile(int M, int N) {
  const int tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN;
  const int per_group = GROUP_M * tiles_n;
  const int group = blockIdx.x / per_group, in_group = blockIdx.x % per_group;
  const int first_m = group * GROUP_M;
  const int group_rows = min(tiles_m - first_m, GROUP_M);
  return make_int2((first_m + in_group % group_rows) * BM, (in_group / group_rows) * BN);
}

__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src, bool valid) {
  // src-size 0 zero-fills the 16 bytes: out-of-range rows and the k tail read as zeros.
  // .cg keeps the tile out of L1 (it is used once per block). The L2 prefetch hint pulls
  // the aligned 128 bytes around the chunk into L2 before a neighbouring block asks.
  asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0));
}
// common.cuh's cp_async_wait with no "memory" clobber: every wait here is followed by a
// __syncthreads(), which orders the shared reads; the kernel was tuned and verified so.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}


template <class T>
__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  if constexpr (std::is_same_v<T, __half>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
}

// Two adjacent outputs of one row; a single 4-byte store when both are in range and
// aligned (N even), else one element at a time.
template <class T>
__device__ __forceinline__ void store_pair(T* c_row, int col, int N, float x, float y) {
  if (N % 2 == 0 && col + 1 < N) {
    if constexpr (std::is_same_v<T, __half>)
      *reinterpret_cast<__half2*>(c_row + col) = __floats2half2_rn(x, y);
    else
      *reinterpret_cast<__nv_bfloat162*>(c_row + col) = __floats2bfloat162_rn(x, y);
  } else {
    if (col < N) c_row[col] = from_float<T>(x);
    if (col + 1 < N) c_row[col + 1] = from_float<T>(y);
  }
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
      cp_async_16(sa + a_st + i * ROW_STEP * CH * 16, ok ? src : a, ok);
    }
    if constexpr (kNT) {
      src = b_src + k0;
#pragma unroll
      for (int i = 0; i < BN / ROW_STEP; ++i, src += b_step) {
        const bool ok = k_ok && i * ROW_STEP < b_rows_left;
        cp_async_16(sb + b_st + i * ROW_STEP * CH * 16, ok ? src : b, ok);
      }
    } else {
      src = b_src + static_cast<int64_t>(k0) * N;
#pragma unroll
      for (int i = 0; i < BK / NN_ROW_STEP; ++i, src += b_step) {
        const bool ok = k0 + i * NN_ROW_STEP < b_rows_left;
        cp_async_16(sb + b_st + i * NN_ROW_STEP * NN_CH * 16, ok ? src : b, ok);
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

// ---------------------------------------------------------------- wgmma kernel (sm_90a, nt)

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

// d (64 x 256, fp32, this thread's 128) += A (64 x 16) · B, both from shared memory: A
// K-major; B K-major (B stored n x k, kTransB = 0) or N-major (k x n, kTransB = 1).
template <class T, int kTransB>
__device__ __forceinline__ void wgmma_64x256x16(float (&d)[128], uint64_t da, uint64_t db) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define ATTNBENCH_D8(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), "+f"(d[i + 7])
#define ATTNBENCH_D32(i) ATTNBENCH_D8(i), ATTNBENCH_D8(i + 8), ATTNBENCH_D8(i + 16), ATTNBENCH_D8(i + 24)
#define ATTNBENCH_WGMMA(TYPE, TB)                                                                        \
  asm volatile("wgmma.mma_async.sync.aligned.m64n256k16.f32." TYPE "." TYPE " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, %128, %129, 1, 1, 1, 0, " TB \
               ";\n"                                                                                     \
               : ATTNBENCH_D32(0), ATTNBENCH_D32(32), ATTNBENCH_D32(64), ATTNBENCH_D32(96)             \
               : "l"(da), "l"(db))
  if constexpr (std::is_same_v<T, __half>) {
    if constexpr (kTransB) ATTNBENCH_WGMMA("f16", "1"); else ATTNBENCH_WGMMA("f16", "0");
  } else {
    if constexpr (kTransB) ATTNBENCH_WGMMA("bf16", "1"); else ATTNBENCH_WGMMA("bf16", "0");
  }
#undef ATTNBENCH_WGMMA
#undef ATTNBENCH_D32
#undef ATTNBENCH_D8
#endif
}

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
      cp_async_16(sa + st_off + i * ROW_STEP * 128, ok ? src : a, ok);
    }
    if constexpr (kNT) {
      src = b_src + k0;
#pragma unroll
      for (int i = 0; i < (BN + ROW_STEP - 1) / ROW_STEP; ++i, src += step) {
        if (BN % ROW_STEP != 0 && ld_row + i * ROW_STEP >= BN) break;
        const bool ok = k_ok && i * ROW_STEP < b_rows_left;
        cp_async_16(sb + st_off + i * ROW_STEP * 128, ok ? src : b, ok);
      }
    } else {
      src = nn_src + static_cast<int64_t>(k0) * N;
#pragma unroll
      for (int i = 0; i < BK / KSTEP; ++i, src += static_cast<int64_t>(KSTEP) * N) {
        const bool ok = nn_col_ok && k0 + nn_k + i * KSTEP < K;
        cp_async_16(sb + nn_off + i * KSTEP * 128, ok ? src : b, ok);
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
    for (int ks = 0; ks < BK / 16; ++ks) wgmma_64x256x16<T, kNT ? 0 : 1>(d, da + 2 * ks, db + (kNT ? 2 : 128) * ks);
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

// ---------------------------------------------------------------- launchers

void cublas(const GemmParams& p, const LaunchContext& ctx) {
  cudaDataType_t type;
  switch (p.dtype) {
    case DType::fp32: type = CUDA_R_32F; break;
    case DType::fp16: type = CUDA_R_16F; break;
    case DType::bf16: type = CUDA_R_16BF; break;
    default: unsupported_dtype("cublas", p.dtype);
  }
  // Default math: fp32 stays fp32 (TF32 only under CUBLAS_TF32_TENSOR_OP_MATH), while
  // fp16/bf16 still get tensor cores. Pointer mode host: alpha and beta live here.
  check_cublas(cublasSetMathMode(ctx.cublas, CUBLAS_DEFAULT_MATH), "gemm/cublas: cublasSetMathMode");
  check_cublas(cublasSetPointerMode(ctx.cublas, CUBLAS_POINTER_MODE_HOST), "gemm/cublas: cublasSetPointerMode");
  const float alpha = 1.f, beta = 0.f;
  const int m = static_cast<int>(p.m), n = static_cast<int>(p.n), k = static_cast<int>(p.k);
  const bool nt = p.layout == GemmLayout::nt;
  // cuBLAS is column-major: row-major C [m, n] is column-major Cᵀ [n, m] = op(B)ᵀ·Aᵀ, and
  // row-major A [m, k] is already column-major Aᵀ [k, m] (ld k). Row-major B is
  // column-major [k, n] (nt, ld k: transpose it) or [n, k] = Bᵀ (nn, ld n: use as is).
  check_cublas(cublasGemmStridedBatchedEx(ctx.cublas, nt ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &alpha,
                                          p.b, type, nt ? k : n, p.n * p.k,  //
                                          p.a, type, k, p.m * p.k,           //
                                          &beta, p.c, type, n, p.m * p.n, static_cast<int>(p.batch),
                                          CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
               "gemm/cublas");
}

template <class T>
void launch_naive(const GemmParams& p, const LaunchContext& ctx) {
  const dim3 block(32, 8);
  const dim3 grid(static_cast<unsigned>(ceil_div(p.n, 32)), static_cast<unsigned>(ceil_div(p.m, 8)),
                  static_cast<unsigned>(p.batch));
  naive_kernel<T><<<grid, block, 0, ctx.stream>>>(static_cast<const T*>(p.a), static_cast<const T*>(p.b),
                                                  static_cast<T*>(p.c), static_cast<int>(p.m), static_cast<int>(p.n),
                                                  static_cast<int>(p.k), p.layout == GemmLayout::nn);
  check_launch("gemm/naive");
}

void naive(const GemmParams& p, const LaunchContext& ctx) {
  switch (p.dtype) {
    case DType::fp32: return launch_naive<float>(p, ctx);
    case DType::fp16: return launch_naive<__half>(p, ctx);
    case DType::bf16: return launch_naive<__nv_bfloat16>(p, ctx);
    default: unsupported_dtype("naive", p.dtype);
  }
}

template <class T>
void launch_smem_tiled(const GemmParams& p, const LaunchContext& ctx) {
  const dim3 block(kTile, kTile);
  const dim3 grid(static_cast<unsigned>(ceil_div(p.n, kTile)), static_cast<unsigned>(ceil_div(p.m, kTile)),
                  static_cast<unsigned>(p.batch));
  smem_tiled_kernel<T><<<grid, block, 0, ctx.stream>>>(static_cast<const T*>(p.a), static_cast<const T*>(p.b),
                                                       static_cast<T*>(p.c), static_cast<int>(p.m),
                                                       static_cast<int>(p.n), static_cast<int>(p.k),
                                                       p.layout == GemmLayout::nn);
  check_launch("gemm/smem_tiled");
}

void smem_tiled(const GemmParams& p, const LaunchContext& ctx) {
  switch (p.dtype) {
    case DType::fp32: return launch_smem_tiled<float>(p, ctx);
    case DType::fp16: return launch_smem_tiled<__half>(p, ctx);
    case DType::bf16: return launch_smem_tiled<__nv_bfloat16>(p, ctx);
    default: unsupported_dtype("smem_tiled", p.dtype);
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

void reg_tiled(const GemmParams& p, const LaunchContext& ctx) {
  if (p.dtype != DType::fp32) unsupported_dtype("reg_tiled", p.dtype);
  switch (p.layout) {
    case GemmLayout::nt: return launch_reg_tiled<GemmLayout::nt>(p, ctx);
    case GemmLayout::nn: return launch_reg_tiled<GemmLayout::nn>(p, ctx);
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
  const bool nt = p.layout == GemmLayout::nt;
  switch (p.dtype) {
    case DType::fp16:
      return nt ? launch_mma<__half, GemmLayout::nt, Cfg>(p, ctx, name)
                : launch_mma<__half, GemmLayout::nn, Cfg>(p, ctx, name);
    case DType::bf16:
      return nt ? launch_mma<__nv_bfloat16, GemmLayout::nt, Cfg>(p, ctx, name)
                : launch_mma<__nv_bfloat16, GemmLayout::nn, Cfg>(p, ctx, name);
    default: unsupported_dtype("mma", p.dtype);
  }
}

void mma(const GemmParams& p, const LaunchContext& ctx) { launch_mma_config<MmaMain>(p, ctx, "gemm/mma"); }

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

void wgmma(const GemmParams& p, const LaunchContext& ctx) {
  const bool nt = p.layout == GemmLayout::nt;
  switch (p.dtype) {
    case DType::fp16:
      return nt ? launch_wgmma<__half, GemmLayout::nt, WgMain>(p, ctx)
                : launch_wgmma<__half, GemmLayout::nn, WgMain>(p, ctx);
    case DType::bf16:
      return nt ? launch_wgmma<__nv_bfloat16, GemmLayout::nt, WgMain>(p, ctx)
                : launch_wgmma<__nv_bfloat16, GemmLayout::nn, WgMain>(p, ctx);
    default: unsupported_dtype("wgmma", p.dtype);
  }
}

// ---------------------------------------------------------------- supports

std::string cublas_supports(const GemmParams& p, const DeviceCaps&) { return common_reason(p); }

std::string naive_supports(const GemmParams& p, const DeviceCaps&) { return kernel_reason(p, ceil_div(p.m, 8)); }

std::string smem_tiled_supports(const GemmParams& p, const DeviceCaps&) {
  return kernel_reason(p, ceil_div(p.m, kTile));
}

std::string reg_tiled_supports(const GemmParams& p, const DeviceCaps&) {
  std::string r = kernel_reason(p, ceil_div(p.m, rt::BM));
  if (!r.empty()) return r;
  if (p.dtype != DType::fp32) return "fp32 only (fp16/bf16 belong on tensor cores: see mma)";
  return {};
}

// What the cp.async-fed tensor-core kernels (mma, wgmma) need of a problem, for Cfg's
// block tile (BM x BN) and shared memory.
template <class Cfg>
std::string tile_copy_reason(const GemmParams& p, const DeviceCaps& caps) {
  if (caps.smem_per_block_optin < static_cast<std::size_t>(Cfg::SMEM_BYTES))
    return "needs " + std::to_string(Cfg::SMEM_BYTES / 1024) + " KB of shared memory per block";
  if (p.k % 8 != 0) return "k % 8 != 0 (rows are copied in 16-byte cp.async chunks of 8 elements)";
  if (p.layout == GemmLayout::nn && p.n % 8 != 0) return "layout nn needs n % 8 == 0 (B rows are copied in 16-byte chunks)";
  if ((p.a && !aligned16(p.a)) || (p.b && !aligned16(p.b))) return "A and B must be 16-byte aligned (cp.async)";
  if (ceil_div(p.m, Cfg::BM) * ceil_div(p.n, Cfg::BN) > INT_MAX) return "too many tiles for gridDim.x";
  return {};
}

template <class Cfg>
std::string mma_config_supports(const GemmParams& p, const DeviceCaps& caps) {
  std::string r = kernel_reason(p, 1);
  if (!r.empty()) return r;
  if (p.dtype != DType::fp16 && p.dtype != DType::bf16) return "fp16/bf16 only (mma.sync on 16-bit inputs)";
  if (caps.arch() < 80) return "needs sm_80+ (mma.sync m16n8k16, ldmatrix, cp.async)";
  return tile_copy_reason<Cfg>(p, caps);
}

std::string wgmma_supports(const GemmParams& p, const DeviceCaps& caps) {
  std::string r = kernel_reason(p, 1);
  if (!r.empty()) return r;
  if (p.dtype != DType::fp16 && p.dtype != DType::bf16) return "fp16/bf16 only (wgmma on 16-bit inputs)";
  if (caps.cc_major != 9) return "needs sm_90 (wgmma; the binary's sm_90a build)";
  return tile_copy_reason<WgMain>(p, caps);
}

}  // namespace

// ---------------------------------------------------------------- table

const std::vector<Variant<GemmParams>>& gemm_variants() {
  static const std::vector<Variant<GemmParams>> table = {
      {"cublas", "cuBLAS GemmStridedBatchedEx, fp32 compute, no TF32 (vendor baseline)", cublas, cublas_supports},
      {"naive", "one thread per output, k loop from global memory", naive, naive_supports},
      {"smem_tiled", "32x32 shared-memory tiles, one output per thread", smem_tiled, smem_tiled_supports},
      {"reg_tiled", "fp32: 128x128x16 tiles, 8x8 outputs/thread, float4, double buffer", reg_tiled,
       reg_tiled_supports},
      {"mma", "fp16/bf16: mma.sync + ldmatrix, 3-stage cp.async, 128x256x64, swizzled", mma,
       mma_config_supports<MmaMain>},
      {"wgmma", "fp16/bf16, sm_90a: wgmma m64n256k16 from swizzled shared memory, 4-stage cp.async", wgmma,
       wgmma_supports},
  };
  return table;
}

}  // namespace attnbench
