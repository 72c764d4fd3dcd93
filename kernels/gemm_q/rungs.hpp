// The gemm_q ladder's launchers, supports and workspaces, one set per rung file, for the variant
// table (variants.cpp), and the checks every rung shares.
#pragma once
#include <climits>
#include <string>

#include "kernels/gemm_q/gemm_q.hpp"

namespace attnbench::gemm_q_impl {

void dequant_cublas(const GemmQParams& p, const LaunchContext& ctx);  // 1_dequant_cublas.cu
std::string dequant_cublas_supports(const GemmQParams& p, const DeviceCaps& caps);
std::size_t dequant_cublas_workspace(const GemmQParams& p);
void dense_cublas(const GemmQParams& p, const LaunchContext& ctx);  // 1_dequant_cublas.cu
std::string dense_cublas_supports(const GemmQParams& p, const DeviceCaps& caps);
void fused_mma(const GemmQParams& p, const LaunchContext& ctx);  // 2_fused_mma.cu
std::string fused_mma_supports(const GemmQParams& p, const DeviceCaps& caps);
void splitk_gemv(const GemmQParams& p, const LaunchContext& ctx);  // 3_splitk_gemv.cu
std::string splitk_gemv_supports(const GemmQParams& p, const DeviceCaps& caps);
void stream_gemv(const GemmQParams& p, const LaunchContext& ctx);  // 4_stream_gemv.cu
std::string stream_gemv_supports(const GemmQParams& p, const DeviceCaps& caps);

// What no variant can run; empty when the point is fine.
inline std::string common_reason(const GemmQParams& p) {
  if (p.dtype != DType::fp16 && p.dtype != DType::bf16) return "fp16/bf16 activations only";
  if (p.bits != 4 && p.bits != 8) return "bits must be 4 or 8";
  if (p.m < 1 || p.n < 1 || p.k < 1) return "m, n and k must be >= 1";
  if (p.k % 8 != 0) return "k must be a multiple of 8 (whole 32-bit words of codes)";
  if (p.group < 1 || p.k % p.group != 0) return "group must divide k";
  if (p.m > INT_MAX || p.n > INT_MAX || p.k > INT_MAX || p.n * p.k > INT_MAX)
    return "m, n, k and n·k must fit in int (cuBLAS's and our index type)";
  return {};
}

}  // namespace attnbench::gemm_q_impl
