// The reshape_and_cache ladder's launchers, one per rung file, for the variant table
// (variants.cpp).
#pragma once

#include "kernels/reshape_and_cache/reshape_and_cache.hpp"

namespace attnbench::reshape_and_cache_impl {

void scatter(const ReshapeAndCacheParams& p, const LaunchContext& ctx);      // 1_scatter.cu
void token_major(const ReshapeAndCacheParams& p, const LaunchContext& ctx);  // 2_token_major.cu

}  // namespace attnbench::reshape_and_cache_impl
