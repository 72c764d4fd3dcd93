// The mla ladder's launchers and supports, one set per rung file, for the variant table
// (variants.cpp).
#pragma once
#include <cstddef>
#include <string>

#include "kernels/mla/mla.hpp"

namespace attnbench::mla_impl {

// What every rung checks: the dtypes, the sizes, the cache layout ("" = all well).
std::string common_reason(const MlaParams& p);  // 1_naive.cu
void naive(const MlaParams& p, const LaunchContext& ctx);  // 1_naive.cu
std::string naive_supports(const MlaParams& p, const DeviceCaps& caps);
void split_kv(const MlaParams& p, const LaunchContext& ctx);  // 2_split_kv.cu
std::string split_kv_supports(const MlaParams& p, const DeviceCaps& caps);
std::size_t split_kv_workspace(const MlaParams& p);
void split_kv_reg(const MlaParams& p, const LaunchContext& ctx);  // 3_split_kv_reg.cu
std::string split_kv_reg_supports(const MlaParams& p, const DeviceCaps& caps);
std::size_t split_kv_reg_workspace(const MlaParams& p);
void split_kv_wgmma(const MlaParams& p, const LaunchContext& ctx);  // 4_split_kv_wgmma.cu
std::string split_kv_wgmma_supports(const MlaParams& p, const DeviceCaps& caps);
std::size_t split_kv_wgmma_workspace(const MlaParams& p);

}  // namespace attnbench::mla_impl
