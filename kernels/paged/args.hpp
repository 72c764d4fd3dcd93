// What the paged rungs share: the kernel parameter struct derived from PagedParams (Paged) and
// the checks every rung makes.
#pragma once
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <string>

#include "kernels/common/split_kv.cuh"
#include "kernels/paged/paged.hpp"

namespace attnbench::paged_impl {

using namespace splitkv;

// Block-table entries a paged_flash block keeps in shared memory (4 KB): splits are cut so that
// a split's keys span at most kTable cache blocks (max_splits, and so the workspace, count those).
constexpr int kTable = 1024;
// The longest key step of any paged_flash kernel (the CUDA-core kernel's 128 keys).
constexpr int64_t kMaxStep = 128;

// Everything a kernel reads, derived once on the host from PagedParams.
struct Paged {
  const void* q;                // [batch, heads, head_dim], T
  const void* k;                // [num_blocks, kv_heads, head_dim / x, block_size, x], C
  const void* v;                // [num_blocks, kv_heads, head_dim, block_size], C
  void* o;                      // [batch, heads, head_dim], T
  const int32_t* block_tables;  // [batch, max_blocks]
  const int32_t* context_lens;  // [batch]
  // paged_flash, splits > 1: [batch, heads, splits, head_dim] unnormalised o (times v_scale) and
  // [batch, heads, splits] (m, l), m in log2 units.
  float* part_o;
  float2* part_ml;
  // v2, several partitions: [batch, heads, max_parts, head_dim] normalised o (times v_scale),
  // [batch, heads, max_parts] max logit (log2 units) and exp sum.
  float* tmp_out;
  float* max_logits;
  float* exp_sums;
  int64_t block_stride;  // cache elements between pool blocks: kv_heads·head_dim·block_size
  int head_stride;       // cache elements between kv heads of a block: head_dim·block_size
  int heads, kv_heads, group, head_dim, block_size, log2_bs, max_blocks;
  int head_tiles;    // paged_flash blocks per (sequence, kv head) side by side
  int splits;        // paged_flash blocks along the context; 1: the block writes o itself
  int chunk;         // paged_flash keys per split
  int partition;     // v1 / v2 tokens per partition (v1: the whole context)
  int window;        // 0 = none
  int key_align;     // the kernel's key step (v1/v2: the block size): windows start on a multiple
  int max_parts;     // v2 partitions of the longest context
  float score_log2;  // softmax scale · log2(e) · k_scale
  float v_scale;
  ScoreArgs score;   // in the units of a loaded code's q·k (soft-capping: softcap / (scale · k_scale))
  RopeTable rope;              // the query is rotated at its position (context - 1) as it is loaded
};

inline int log2_exact(int64_t x) {
  int l = 0;
  while ((int64_t{1} << l) < x) ++l;
  return l;
}

// The most tokens a sequence's blocks walk: its context, or with a window the window and
// less than one key step (`align`, at least the block size) before it.
inline int64_t longest_context(const PagedParams& p, int64_t align = 1) {
  const int64_t longest = std::clamp<int64_t>(p.longest_context, 1, p.max_blocks_per_seq * p.block_size);
  return p.window > 0 ? std::min(longest, p.window + std::max(align, p.block_size) - 1) : longest;
}

inline Paged make_paged(const PagedParams& p) {
  Paged d{};
  d.q = p.q;
  d.k = p.k_cache;
  d.v = p.v_cache;
  d.o = p.o;
  d.block_tables = p.block_tables;
  d.context_lens = p.context_lens;
  d.block_stride = p.kv_heads * p.head_dim * p.block_size;
  d.head_stride = static_cast<int>(p.head_dim * p.block_size);
  d.heads = static_cast<int>(p.heads);
  d.kv_heads = static_cast<int>(p.kv_heads);
  d.group = static_cast<int>(p.heads / p.kv_heads);
  d.head_dim = static_cast<int>(p.head_dim);
  d.block_size = static_cast<int>(p.block_size);
  d.log2_bs = log2_exact(p.block_size);
  d.max_blocks = static_cast<int>(p.max_blocks_per_seq);
  d.head_tiles = 1;
  d.splits = 1;
  d.chunk = static_cast<int>(kMaxContext);
  d.partition = static_cast<int>(p.max_blocks_per_seq * p.block_size);
  d.max_parts = 1;
  d.window = static_cast<int>(std::min<int64_t>(p.window, kMaxContext));
  d.key_align = static_cast<int>(p.block_size);
  d.score_log2 = p.score.scale_log2 * p.k_scale;
  d.v_scale = p.v_scale;
  d.score = score_args(p.score, p.score.scale * p.k_scale);
  d.rope = p.rope;
  return d;
}

inline std::string common_reason(const PagedParams& p, const DeviceCaps& caps) {
  if (p.dtype != DType::fp32 && p.dtype != DType::fp16 && p.dtype != DType::bf16)
    return std::string("dtype ") + dtype_name(p.dtype) + " is not a query/output type (fp32, fp16, bf16)";
  if (p.kv_dtype != p.dtype && p.kv_dtype != DType::fp8_e4m3)
    return std::string("kv_dtype ") + dtype_name(p.kv_dtype) + " must be the query's dtype or fp8_e4m3";
  if (p.batch < 1 || p.heads < 1 || p.kv_heads < 1) return "batch, heads and kv_heads must be >= 1";
  if (p.heads % p.kv_heads != 0) return "heads must be a multiple of kv_heads";
  if (p.window < 0) return "window must be >= 0";
  if (const std::string r = score_reason(p.score); !r.empty()) return r;
  if (p.head_dim < 8 || p.head_dim > 256 || p.head_dim % 8 != 0) return "head_dim must be a multiple of 8, at most 256";
  if (p.head_dim % paged_x(p.kv_dtype) != 0)
    return "head_dim must be a multiple of x = " + std::to_string(paged_x(p.kv_dtype)) +
           " (16 bytes of the cache's type) for the K layout";
  if (p.num_blocks < 1 || p.max_blocks_per_seq < 1) return "num_blocks and max_blocks_per_seq must be >= 1";
  if (p.longest_context < 1 || p.longest_context > p.max_blocks_per_seq * p.block_size)
    return "longest_context must be in [1, max_blocks_per_seq * block_size]";
  if (p.max_blocks_per_seq * p.block_size >= kMaxContext) return "max_blocks_per_seq * block_size must be < 2^30";
  if (p.batch * p.heads > INT_MAX) return "batch * heads must be < 2^31";
  if (p.kv_dtype == DType::fp8_e4m3 &&
      !(p.k_scale > 0 && p.v_scale > 0 && std::isfinite(p.k_scale) && std::isfinite(p.v_scale)))
    return "k_scale and v_scale must be positive and finite";
  if (caps.cc_major != 0 && caps.arch() < 80) return "needs sm_80+";
  if (caps.cc_major != 0 && p.kv_dtype == DType::fp8_e4m3 && caps.arch() < 89)
    return "an fp8 cache needs sm_89+ (cvt e4m3x2 -> f16x2)";
  for (const void* ptr : {p.q, p.k_cache, p.v_cache, static_cast<const void*>(p.o)})
    if (ptr && !aligned16(ptr)) return "q, k_cache, v_cache and o must be 16-byte aligned";
  return {};
}

}  // namespace attnbench::paged_impl
