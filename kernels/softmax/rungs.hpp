// The softmax ladder's launchers, one per rung file, for the variant table (variants.cpp).
#pragma once
#include <string>

#include "kernels/softmax/softmax.hpp"

namespace attnbench::softmax_impl {

void naive(const SoftmaxParams& p, const LaunchContext& ctx);         // 1_naive.cu
void block_reduce(const SoftmaxParams& p, const LaunchContext& ctx);  // 2_block_reduce.cu
void warp_online(const SoftmaxParams& p, const LaunchContext& ctx);   // 3_warp_online.cu

}  // namespace attnbench::softmax_impl
