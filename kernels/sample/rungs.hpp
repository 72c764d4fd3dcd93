// The sample ladder's launchers, one per rung file, for the variant table (variants.cpp).
#pragma once
#include <cstddef>

#include "kernels/sample/sample.hpp"

namespace attnbench::sample_impl {

void sort(const SampleParams& p, const LaunchContext& ctx);  // 1_sort.cu
std::size_t sort_workspace(const SampleParams& p);           // 1_sort.cu
void pivot(const SampleParams& p, const LaunchContext& ctx);  // 2_pivot.cu

}  // namespace attnbench::sample_impl
