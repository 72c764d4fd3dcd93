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

}  // namespace attnbench::backward_impl
