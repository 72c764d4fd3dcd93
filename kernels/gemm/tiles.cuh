// What gemm's tensor-core rungs (4_mma.cu, 5_wgmma.cu) share: the k-major swizzle of their
// shared tiles, grouped rasterization, the epilogue's paired stores, and the copy
// requirements supports() checks.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>
#include <string>
#include <type_traits>

#include "kernels/common/storage.cuh"
#include "kernels/gemm/rungs.hpp"

namespace attnbench::gemm_impl {

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
// Grouped rasterization: consecutive tiles walk down GROUP_M tile rows before moving
// right, so blocks resident together share A and B panels in L2. grouped_index: the (tile
// row, tile column) of the idx-th tile in that order; grouped_tile: block blockIdx.x's
// (m0, n0).
template <int GROUP_M>
__device__ __forceinline__ int2 grouped_index(unsigned idx, int tiles_m, int tiles_n) {
  const int per_group = GROUP_M * tiles_n;
  const int group = idx / per_group, in_group = idx % per_group;
  const int first_m = group * GROUP_M;
  const int group_rows = min(tiles_m - first_m, GROUP_M);
  return make_int2(first_m + in_group % group_rows, in_group / group_rows);
}
template <int BM, int BN, int GROUP_M>
__device__ __forceinline__ int2 grouped_tile(int M, int N) {
  const int2 t = grouped_index<GROUP_M>(blockIdx.x, (M + BM - 1) / BM, (N + BN - 1) / BN);
  return make_int2(t.x * BM, t.y * BN);
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

// What the cp.async-fed tensor-core kernels (mma, wgmma) need of a problem, for Cfg's
// block tile (BM x BN) and shared memory.
template <class Cfg>
inline std::string tile_copy_reason(const GemmParams& p, const DeviceCaps& caps) {
  if (caps.smem_per_block_optin < static_cast<std::size_t>(Cfg::SMEM_BYTES))
    return "needs " + std::to_string(Cfg::SMEM_BYTES / 1024) + " KB of shared memory per block";
  if (p.k % 8 != 0) return "k % 8 != 0 (rows are copied in 16-byte cp.async chunks of 8 elements)";
  if (p.layout == GemmLayout::nn && p.n % 8 != 0) return "layout nn needs n % 8 == 0 (B rows are copied in 16-byte chunks)";
  if ((p.a && !aligned16(p.a)) || (p.b && !aligned16(p.b))) return "A and B must be 16-byte aligned (cp.async)";
  if (ceil_div(p.m, Cfg::BM) * ceil_div(p.n, Cfg::BN) > INT_MAX) return "too many tiles for gridDim.x";
  return {};
}

}  // namespace attnbench::gemm_impl
