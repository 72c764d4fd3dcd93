// The gemm ladder's launchers and supports, one pair per rung file, for the variant table
// (variants.cpp), and the checks every rung shares.
#pragma once
#include <climits>
#include <stdexcept>
#include <string>

#include "kernels/gemm/gemm.hpp"

namespace attnbench::gemm_impl {

void cublas(const GemmParams& p, const LaunchContext& ctx);  // 0_cublas.cu
std::string cublas_supports(const GemmParams& p, const DeviceCaps& caps);
void naive(const GemmParams& p, const LaunchContext& ctx);  // 1_naive.cu
std::string naive_supports(const GemmParams& p, const DeviceCaps& caps);
void smem_tiled(const GemmParams& p, const LaunchContext& ctx);  // 2_smem_tiled.cu
void smem_tiled_unpadded(const GemmParams& p, const LaunchContext& ctx);  // 2_smem_tiled.cu: B's tile unpadded
std::string smem_tiled_supports(const GemmParams& p, const DeviceCaps& caps);  // both
void reg_tiled(const GemmParams& p, const LaunchContext& ctx);  // 3_reg_tiled.cu
std::string reg_tiled_supports(const GemmParams& p, const DeviceCaps& caps);
void mma(const GemmParams& p, const LaunchContext& ctx);  // 4_mma.cu
std::string mma_supports(const GemmParams& p, const DeviceCaps& caps);
void wgmma(const GemmParams& p, const LaunchContext& ctx);  // 5_wgmma.cu
std::string wgmma_supports(const GemmParams& p, const DeviceCaps& caps);
void wgmma_ws(const GemmParams& p, const LaunchContext& ctx);  // 6_wgmma_ws.cu: clusters of 2
void wgmma_ws_1cta(const GemmParams& p, const LaunchContext& ctx);  // the same without clusters
std::string wgmma_ws_supports(const GemmParams& p, const DeviceCaps& caps);

// What no variant can run; empty when the shape and dtype are fine. A rung that takes the
// epilogue (bias, column split) says so with takes_epilogue.
inline std::string common_reason(const GemmParams& p, bool takes_epilogue = false) {
  if (p.dtype == DType::fp8_e4m3) return "gemm has no fp8_e4m3 path";
  if (has_epilogue(p) && !takes_epilogue) return "no fused epilogue (bias, column split): naive and wgmma_ws have one";
  if (p.split_n[0] < 0 || p.split_n[1] < 0 || p.split_n[0] + p.split_n[1] > p.n)
    return "split_n must cut n into three parts";
  if (p.batch < 1 || p.m < 1 || p.n < 1 || p.k < 1) return "batch, m, n and k must be >= 1";
  if (p.m > INT_MAX || p.n > INT_MAX || p.k > INT_MAX || p.batch > INT_MAX)
    return "m, n, k and batch must fit in int (cuBLAS's and our index type)";
  return {};
}

// Our kernels: common_reason, plus batch as a grid dimension and `m_tiles` (the grid's
// y extent, or 1 where m is not a grid dimension) within gridDim.y.
inline std::string kernel_reason(const GemmParams& p, int64_t m_tiles, bool takes_epilogue = false) {
  std::string r = common_reason(p, takes_epilogue);
  if (r.empty() && p.batch > kMaxGridYZ) r = "batch > 65535 (batch is a grid dimension)";
  if (r.empty() && m_tiles > kMaxGridYZ) r = "m too large: its row tiles exceed gridDim.y (65535)";
  return r;
}

[[noreturn]] inline void unsupported_dtype(const char* variant, DType t) {
  throw std::invalid_argument(std::string("gemm/") + variant + ": no " + dtype_name(t) + " path");
}

}  // namespace attnbench::gemm_impl
