// The attention ladder's launchers, supports and workspaces, one set per rung file, for the
// variant table (variants.cpp).
#pragma once
#include <cstddef>
#include <string>

#include "kernels/attention/attention.hpp"

namespace attnbench::attention_impl {

void naive(const AttentionParams& p, const LaunchContext& ctx);  // 1_naive.cu
std::string naive_supports(const AttentionParams& p, const DeviceCaps& caps);
std::size_t naive_workspace(const AttentionParams& p);
void cublas(const AttentionParams& p, const LaunchContext& ctx);  // 2_cublas.cu
std::string cublas_supports(const AttentionParams& p, const DeviceCaps& caps);
std::size_t cublas_workspace(const AttentionParams& p);
void flash_fp32(const AttentionParams& p, const LaunchContext& ctx);  // 3_flash_fp32.cu
std::string flash_fp32_supports(const AttentionParams& p, const DeviceCaps& caps);
void flash_mma(const AttentionParams& p, const LaunchContext& ctx);  // 4_flash_mma.cu
std::string flash_mma_supports(const AttentionParams& p, const DeviceCaps& caps);
std::size_t flash_mma_workspace(const AttentionParams& p);
void flash_wgmma(const AttentionParams& p, const LaunchContext& ctx);  // 5_flash_wgmma.cu
std::string flash_wgmma_supports(const AttentionParams& p, const DeviceCaps& caps);
void flash_ws(const AttentionParams& p, const LaunchContext& ctx);  // 6_flash_ws.cu
std::string flash_ws_supports(const AttentionParams& p, const DeviceCaps& caps);
std::size_t flash_ws_workspace(const AttentionParams& p);

}  // namespace attnbench::attention_impl
