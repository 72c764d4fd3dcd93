// The paged ladder's launchers, supports and workspaces, one set per rung file, for the variant
// table (variants.cpp).
#pragma once
#include <cstddef>
#include <string>

#include "kernels/paged/paged.hpp"

namespace attnbench::paged_impl {

void v1(const PagedParams& p, const LaunchContext& ctx);  // 1_v1.cu
std::string v1_supports(const PagedParams& p, const DeviceCaps& caps);
void v2(const PagedParams& p, const LaunchContext& ctx);  // 2_v2.cu
std::string v2_supports(const PagedParams& p, const DeviceCaps& caps);
std::size_t v2_workspace(const PagedParams& p);
void paged_flash(const PagedParams& p, const LaunchContext& ctx);  // 3_paged_flash.cu
std::string paged_flash_supports(const PagedParams& p, const DeviceCaps& caps);
std::size_t paged_flash_workspace(const PagedParams& p);

}  // namespace attnbench::paged_impl
