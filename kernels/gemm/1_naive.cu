// gemm rung 1, naive: one thread per output, the k loop straight from global memory. A
// warp's threads share a row of A (a broadcast) and own consecutive columns: nn reads of B
// coalesce, nt reads stride by k.
// H200, run 1: fp32 nn 4096³ 51.0 ms, 2.7 TFLOP/s (0.05x cuBLAS).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/common/dispatch.cuh"
#include "kernels/common/storage.cuh"
#include "kernels/gemm/rungs.hpp"

namespace attnbench {
namespace {

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

}  // namespace

void gemm_impl::naive(const GemmParams& p, const LaunchContext& ctx) {
  with_storage(p.dtype, "gemm/naive", [&](auto t) { launch_naive<decltype(t)>(p, ctx); });
}

std::string gemm_impl::naive_supports(const GemmParams& p, const DeviceCaps&) {
  return kernel_reason(p, ceil_div(p.m, 8));
}

}  // namespace attnbench
