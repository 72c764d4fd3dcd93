// gemm rung 1, naive: one thread per output, the k loop straight from global memory. A
// warp's threads share a row of A (a broadcast) and own consecutive columns: nn reads of B
// coalesce, nt reads stride by k. It also takes GemmParams' epilogue (bias, column split), the
// reference form of what wgmma_ws fuses for mha's epilogue step.
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

// The fused projection's epilogue (GemmParams::bias, split_n): mha's epilogue step.
struct Epilogue {
  const void* bias;  // [N] or null
  void *c1, *c2;     // with n_c > 0: columns [n_c, n_c + n_c1) to c1, the rest to c2
  int n_c, n_c1;
};

template <class T, bool kEpilogue>
__global__ void naive_kernel(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ c, int M, int N, int K,
                             bool nn, Epilogue epi) {
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
  if constexpr (kEpilogue) {
    if (epi.bias) acc += to_float(static_cast<const T*>(epi.bias)[col]);
    if (epi.n_c > 0) {  // the column's part, and its place there
      int part_col = col, width = epi.n_c;
      T* out = c;
      if (col >= epi.n_c + epi.n_c1) {
        out = static_cast<T*>(epi.c2);
        part_col = col - epi.n_c - epi.n_c1;
        width = N - epi.n_c - epi.n_c1;
      } else if (col >= epi.n_c) {
        out = static_cast<T*>(epi.c1);
        part_col = col - epi.n_c;
        width = epi.n_c1;
      }
      out[(z * M + row) * width + part_col] = from_float<T>(acc);
      return;
    }
  }
  c[z * M * N + static_cast<int64_t>(row) * N + col] = from_float<T>(acc);
}

template <class T>
void launch_naive(const GemmParams& p, const LaunchContext& ctx) {
  const dim3 block(32, 8);
  const dim3 grid(static_cast<unsigned>(ceil_div(p.n, 32)), static_cast<unsigned>(ceil_div(p.m, 8)),
                  static_cast<unsigned>(p.batch));
  const Epilogue epi{p.biased ? p.bias : nullptr, p.c1, p.c2, static_cast<int>(p.split_n[0]), static_cast<int>(p.split_n[1])};
  with_bool(has_epilogue(p), [&](auto on) {
    naive_kernel<T, decltype(on)::value><<<grid, block, 0, ctx.stream>>>(
        static_cast<const T*>(p.a), static_cast<const T*>(p.b), static_cast<T*>(p.c), static_cast<int>(p.m),
        static_cast<int>(p.n), static_cast<int>(p.k), p.layout == GemmLayout::nn, epi);
  });
  check_launch("gemm/naive");
}

}  // namespace

void gemm_impl::naive(const GemmParams& p, const LaunchContext& ctx) {
  with_storage(p.dtype, "gemm/naive", [&](auto t) { launch_naive<decltype(t)>(p, ctx); });
}

std::string gemm_impl::naive_supports(const GemmParams& p, const DeviceCaps&) {
  return kernel_reason(p, ceil_div(p.m, 8), true);
}

}  // namespace attnbench
