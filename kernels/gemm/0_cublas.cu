// gemm rung 0, cublas: the vendor baseline every other rung is measured against:
// cublasGemmStridedBatchedEx on the row-major problem seen as column-major Cᵀ = op(B)ᵀ·Aᵀ; fp32
// is true fp32 (no TF32), fp16/bf16 get tensor cores.
// H200, run 1: fp32 nn 4096³ 51.2 TFLOP/s; run 36: bf16 nt 8192³ 1.54-1.62 ms (~700 TFLOP/s).
#include <cublas_v2.h>

#include <string>

#include "kernels/gemm/rungs.hpp"

namespace attnbench {

void gemm_impl::cublas(const GemmParams& p, const LaunchContext& ctx) {
  if (p.dtype == DType::fp8_e4m3) unsupported_dtype("cublas", p.dtype);
  const cudaDataType_t type = cuda_data_type(p.dtype);
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

std::string gemm_impl::cublas_supports(const GemmParams& p, const DeviceCaps&) { return common_reason(p); }

}  // namespace attnbench
