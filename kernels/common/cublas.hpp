// The one cuBLAS call that several families make alike: a row-major activation times a weight
// stored as a checkpoint stores a projection.
#pragma once
#include <cublas_v2.h>

#include <cstdint>

#include "kernels/common/kernels.hpp"

namespace attnbench {

// C [m, n] = A [m, k] · W [n, k]ᵀ by cuBLAS with fp32 accumulation, all row-major: W as a
// checkpoint stores a projection (n rows of k), A's rows lda elements apart; cuBLAS's
// column-major view is Cᵀ = W·Aᵀ. C is stored as c_type: the dtype, or CUDA_R_32F for logits
// that must not round. Default math and host pointers first, whatever the handle was left with.
// The LM head's logits (model, sample) and gemm_q's dense baselines run through it.
inline void cublas_a_wt(const LaunchContext& ctx, const void* a, int64_t lda, const void* w, void* c,
                        cudaDataType_t c_type, int64_t m, int64_t n, int64_t k, DType dtype, const char* what) {
  check_cublas(cublasSetMathMode(ctx.cublas, CUBLAS_DEFAULT_MATH), what);
  check_cublas(cublasSetPointerMode(ctx.cublas, CUBLAS_POINTER_MODE_HOST), what);
  const float one = 1.f, zero = 0.f;
  const cudaDataType_t t = cuda_data_type(dtype);
  check_cublas(cublasGemmEx(ctx.cublas, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(m),
                            static_cast<int>(k), &one, w, t, static_cast<int>(k), a, t, static_cast<int>(lda), &zero, c,
                            c_type, static_cast<int>(n), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
               what);
}

}  // namespace attnbench
