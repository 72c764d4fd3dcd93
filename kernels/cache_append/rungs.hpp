// The cache_append ladder's launchers, one per rung file, for the variant table (variants.cpp).
#pragma once

#include "kernels/cache_append/cache_append.hpp"

namespace attnbench::cache_append_impl {

void vec_copy(const CacheAppendParams& p, const LaunchContext& ctx);  // 1_vec_copy.cu

}  // namespace attnbench::cache_append_impl
