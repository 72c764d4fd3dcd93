// gemm rung 2, smem_tiled: 32x32 tiles of A and B staged in shared memory, so that every
// element a block loads is reused 32 times instead of read again from memory, and nt's B is
// read along k (coalesced) and transposed in shared memory.
// H200, run 1: fp32 nn 4096³ 17.6 ms, 7.8 TFLOP/s (2.9x rung 1, 0.15x cuBLAS).
//
// The bank-conflict lesson (issue 52): `smem_tiled_unpadded` is this kernel with B's tile
// unpadded, the one difference (kPad). Shared memory has 32 banks of 4 bytes; word w of a
// [32][32 + pad] float tile sits in bank w % 32. The nt load stores a warp's 32 threads (tx =
// 0..31, one ty) to Bs[tx][ty], words 32 tx + ty without the pad: all in bank ty, 32 addresses
// in one bank, served one after another (a 32-way conflict: 32 wavefronts for one store
// instruction). With the pad the words are 33 tx + ty, banks (tx + ty) % 32: all 32 differ,
// one wavefront. The compute loop's reads are conflict-free either way (Bs[kk][tx]: one row;
// As[ty][kk]: one word a warp, broadcast), and nn's loads store rows, so only nt shows it.
// In Nsight Compute: l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum (the extra
// wavefronts of shared stores) is 31 a store instruction of the nt load unpadded, 0 padded;
// l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum over sass__inst_executed_shared_stores
// is the wavefronts a store (the profile notes below; docs/profiling.md, "One counter").
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/common/dispatch.cuh"
#include "kernels/common/storage.cuh"
#include "kernels/gemm/rungs.hpp"

namespace attnbench {
namespace {

constexpr int kTile = 32;

// kPad: 1 (smem_tiled) or 0 (smem_tiled_unpadded, the conflicted half of the lesson).
template <class T, int kPad>
__global__ __launch_bounds__(kTile* kTile) void smem_tiled_kernel(const T* __restrict__ a, const T* __restrict__ b,
                                                                  T* __restrict__ c, int M, int N, int K, bool nn) {
  // a: [batch, M, K]; b: nt [batch, N, K], nn [batch, K, N]; c: [batch, M, N]
  __shared__ float As[kTile][kTile];      // [m][k]
  // [k][n]. The nt load writes it transposed (column tx of a warp's row of B goes to
  // row tx); the +1 pad puts those 32 writes in 32 different banks.
  __shared__ float Bs[kTile][kTile + kPad];
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

template <class T, int kPad>
void launch_smem_tiled(const GemmParams& p, const LaunchContext& ctx, const char* name) {
  const dim3 block(kTile, kTile);
  const dim3 grid(static_cast<unsigned>(ceil_div(p.n, kTile)), static_cast<unsigned>(ceil_div(p.m, kTile)),
                  static_cast<unsigned>(p.batch));
  smem_tiled_kernel<T, kPad><<<grid, block, 0, ctx.stream>>>(static_cast<const T*>(p.a), static_cast<const T*>(p.b),
                                                             static_cast<T*>(p.c), static_cast<int>(p.m),
                                                             static_cast<int>(p.n), static_cast<int>(p.k),
                                                             p.layout == GemmLayout::nn);
  check_launch(name);
}

}  // namespace

void gemm_impl::smem_tiled(const GemmParams& p, const LaunchContext& ctx) {
  with_storage(p.dtype, "gemm/smem_tiled", [&](auto t) { launch_smem_tiled<decltype(t), 1>(p, ctx, "gemm/smem_tiled"); });
}

void gemm_impl::smem_tiled_unpadded(const GemmParams& p, const LaunchContext& ctx) {
  with_storage(p.dtype, "gemm/smem_tiled_unpadded",
               [&](auto t) { launch_smem_tiled<decltype(t), 0>(p, ctx, "gemm/smem_tiled_unpadded"); });
}

std::string gemm_impl::smem_tiled_supports(const GemmParams& p, const DeviceCaps&) {
  return kernel_reason(p, ceil_div(p.m, kTile));
}

}  // namespace attnbench
