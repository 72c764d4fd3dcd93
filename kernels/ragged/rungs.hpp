// The ragged ladder's launchers and supports, one set per rung file, for the variant table
// (variants.cpp).
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "kernels/ragged/ragged.hpp"

namespace attnbench::ragged_impl {

// What every rung checks: the dtypes, the shape, the options, the fp8 scales ("" = all well).
std::string common_reason(const RaggedParams& p);  // 1_naive.cu
void naive(const RaggedParams& p, const LaunchContext& ctx);  // 1_naive.cu
std::string naive_supports(const RaggedParams& p, const DeviceCaps& caps);
void separate(const RaggedParams& p, const LaunchContext& ctx);  // 2_separate.cu
std::string separate_supports(const RaggedParams& p, const DeviceCaps& caps);
std::size_t separate_workspace(const RaggedParams& p);
// What separate launches for p on caps, in order: "gather", "decode/<variant>", "scatter" (for
// decodes not consecutive in the batch), "attention/<variant>" per other sequence; {} when it
// cannot run p. For the tests and for reading a row.
std::vector<std::string> separate_launches(const RaggedParams& p, const DeviceCaps& caps);
void varlen(const RaggedParams& p, const LaunchContext& ctx);  // 3_varlen.cu
std::string varlen_supports(const RaggedParams& p, const DeviceCaps& caps);
void split_kv(const RaggedParams& p, const LaunchContext& ctx);  // 4_split_kv.cu
std::string split_kv_supports(const RaggedParams& p, const DeviceCaps& caps);
std::size_t split_kv_workspace(const RaggedParams& p);
void ws(const RaggedParams& p, const LaunchContext& ctx);  // 5_ws.cu
std::string ws_supports(const RaggedParams& p, const DeviceCaps& caps);
std::size_t ws_workspace(const RaggedParams& p);
void ws_tma(const RaggedParams& p, const LaunchContext& ctx);  // 6_ws_tma.cu
std::string ws_tma_supports(const RaggedParams& p, const DeviceCaps& caps);
std::size_t ws_tma_workspace(const RaggedParams& p);

}  // namespace attnbench::ragged_impl
