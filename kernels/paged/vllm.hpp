// What the vLLM rungs (1_v1.cu, 2_v2.cu) share: the block shape, the head_dim class and
// partitions, the checks, and the main kernel's launch (1_v1.cu), which v2 runs over partitions.
#pragma once
#include <cstdint>
#include <string>

#include "kernels/paged/args.hpp"

namespace attnbench::paged_impl {

constexpr int kVllmWarps = 4;
constexpr int kVllmThreads = 32 * kVllmWarps;

// Bytes of static shared memory of vllm_kernel<kD>: q, the warps' output rows, the reductions.
constexpr int64_t vllm_static_smem(int kD) { return 4 * (kD + kVllmWarps * kD + kVllmWarps); }

inline int64_t vllm_class(int64_t head_dim) { return head_dim <= 128 ? 128 : 256; }

// v1: one partition of the longest context rounded up to whole blocks.
inline int64_t v1_tokens(const PagedParams& p) { return ceil_div(longest_context(p), p.block_size) * p.block_size; }
inline int64_t v2_parts(const PagedParams& p) { return ceil_div(longest_context(p), p.partition_size); }

inline std::string vllm_reason(const PagedParams& p, const DeviceCaps& caps) {
  std::string r = common_reason(p, caps);
  if (!r.empty()) return r;
  if (p.block_size != 8 && p.block_size != 16 && p.block_size != 32) return "block_size must be 8, 16 or 32 (vLLM's)";
  if (p.batch > 65535) return "batch must be <= 65535 (gridDim.y)";
  if (p.window > 0) return "no sliding window (vLLM's v1/v2 read every token; paged_flash skips the blocks before it)";
  if (const std::string r = score_unimplemented(p.score); !r.empty()) return r;
  return {};
}

// Shared memory a vllm_kernel block asks for with `tokens` logits.
inline std::string smem_reason(const PagedParams& p, const DeviceCaps& caps, int64_t tokens, const char* what) {
  const int64_t bytes = tokens * 4 + vllm_static_smem(static_cast<int>(vllm_class(p.head_dim)));
  if (caps.smem_per_block_optin != 0 && bytes > static_cast<int64_t>(caps.smem_per_block_optin))
    return std::string(what) + " needs " + std::to_string(bytes) + " bytes of shared memory (" +
           std::to_string(tokens) + " fp32 logits), more than the card's " +
           std::to_string(caps.smem_per_block_optin) + " per block";
  return {};
}

// Launches vllm_kernel over `parts` partitions of d.partition tokens (1_v1.cu); with several,
// d's tmp_out, max_logits and exp_sums must point into the workspace.
void launch_vllm(const PagedParams& p, const Paged& d, int64_t parts, const LaunchContext& ctx, const char* name);

}  // namespace attnbench::paged_impl
