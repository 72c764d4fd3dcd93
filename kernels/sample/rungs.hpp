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
void gemm_then_sample(const SampleParams& p, const LaunchContext& ctx);        // 4_gemm_then_sample.cu
std::size_t gemm_then_sample_workspace(const SampleParams& p);                 // 4_gemm_then_sample.cu
void fused_lm_head(const SampleParams& p, const LaunchContext& ctx);           // 5_fused_lm_head.cu
std::string fused_lm_head_supports(const SampleParams& p, const DeviceCaps& caps);  // 5_fused_lm_head.cu
std::size_t fused_lm_head_workspace(const SampleParams& p);                    // 5_fused_lm_head.cu

}  // namespace attnbench::sample_impl
