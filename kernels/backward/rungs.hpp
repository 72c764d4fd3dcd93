// The attention_backward ladder's launchers, supports and workspaces, one set per rung file,
// for the variant table (variants.cpp).
#pragma once
#include <cstddef>
#include <string>

#include "kernels/backward/backward.hpp"

namespace attnbench::backward_impl {

void naive(const BackwardParams& p, const LaunchContext& ctx);  // 1_naive.cu
std::string naive_supports(const BackwardParams& p, const DeviceCaps& caps);
std::size_t naive_workspace(const BackwardParams& p);

void flash_mma(const BackwardParams& p, const LaunchContext& ctx);  // 2_flash_mma.cu
std::string flash_mma_supports(const BackwardParams& p, const DeviceCaps& caps);  // rung 3's too
std::size_t flash_mma_workspace(const BackwardParams& p);

void flash_mma_det(const BackwardParams& p, const LaunchContext& ctx);  // 3_flash_mma_det.cu
std::size_t flash_mma_det_workspace(const BackwardParams& p);

void flash_wgmma(const BackwardParams& p, const LaunchContext& ctx);  // 4_flash_wgmma.cu
std::string flash_wgmma_supports(const BackwardParams& p, const DeviceCaps& caps);
std::size_t flash_wgmma_workspace(const BackwardParams& p);

void flash_wgmma_det(const BackwardParams& p, const LaunchContext& ctx);  // 5_flash_wgmma_det.cu
std::string flash_wgmma_det_supports(const BackwardParams& p, const DeviceCaps& caps);
std::size_t flash_wgmma_det_workspace(const BackwardParams& p);

}  // namespace attnbench::backward_impl
