// The mla ladder's launchers and supports, one set per rung file, for the variant table
// (variants.cpp).
#pragma once
#include <string>

#include "kernels/mla/mla.hpp"

namespace attnbench::mla_impl {

// What every rung checks: the dtypes, the sizes, the cache layout ("" = all well).
std::string common_reason(const MlaParams& p);  // 1_naive.cu
void naive(const MlaParams& p, const LaunchContext& ctx);  // 1_naive.cu
std::string naive_supports(const MlaParams& p, const DeviceCaps& caps);

}  // namespace attnbench::mla_impl
