// The sample ladder's launchers, one per rung file, for the variant table (variants.cpp).
#pragma once
#include <cstddef>
#include <string>

#include "kernels/sample/sample.hpp"

namespace attnbench::sample_impl {

void sort(const SampleParams& p, const LaunchContext& ctx);  // 1_sort.cu
std::size_t sort_workspace(const SampleParams& p);           // 1_sort.cu
void pivot(const SampleParams& p, const LaunchContext& ctx);  // 2_pivot.cu
void cluster(const SampleParams& p, const LaunchContext& ctx);                 // 3_cluster.cu
std::string cluster_supports(const SampleParams& p, const DeviceCaps& caps);  // 3_cluster.cu
int cluster_split(const SampleParams& p, const DeviceCaps& caps);              // 3_cluster.cu: blocks a row

}  // namespace attnbench::sample_impl
