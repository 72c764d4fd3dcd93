// The ragged ladder's launchers and supports, one set per rung file, for the variant table
// (variants.cpp).
#pragma once
#include <string>

#include "kernels/ragged/ragged.hpp"

namespace attnbench::ragged_impl {

void naive(const RaggedParams& p, const LaunchContext& ctx);  // 1_naive.cu
std::string naive_supports(const RaggedParams& p, const DeviceCaps& caps);

}  // namespace attnbench::ragged_impl
