// What the decode rungs share: the kernel parameter struct derived from DecodeParams (Decode),
// the checks, and the fused launch of 2_flash_decode.cu that 3_split_kv.cu plans splits for.
#pragma once
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <string>

#include "kernels/common/split_kv.cuh"
#include "kernels/decode/decode.hpp"

namespace attnbench::decode_impl {

using namespace splitkv;

// Everything a kernel reads, derived once on the host from DecodeParams.
struct Decode {
  const void* q;                // [batch, heads, head_dim]
  const void* k;                // [batch, max_context, kv_heads, head_dim]
  const void* v;                // [batch, max_context, kv_heads, head_dim]
  void* o;                      // [batch, heads, head_dim]
  const int32_t* context_lens;  // [batch]
  float* part_o;                // [batch, heads, splits, head_dim] unnormalised o per split (splits > 1)
  float2* part_ml;              // [batch, heads, splits] (m, l) per split, m in log2 units
  int64_t seq_stride;           // elements between sequences of the cache: max_context·kv_heads·head_dim
  int64_t row_stride;           // elements between keys: kv_heads·head_dim
  int heads, kv_heads, group, head_dim;
  int head_tiles;  // blocks per (sequence, kv head) side by side, each taking kHeads of the group
  int splits;      // blocks along the context; 1: the block writes o itself
  int chunk;       // keys per split
  int window;      // 0 = none
  int key_align;   // the kernel's key step: blocks start their window on a multiple of it
  float scale, scale_log2;
  ScoreArgs score;             // in raw q·k units
  RopeTable rope;              // the query is rotated at its position (context - 1) as it is loaded
  const void* k_new;  // [batch, kv_heads, head_dim]: rows the kernel stores at context - 1 (append_row), or null
  const void* v_new;
  const float* sinks;  // [heads] attention sinks in score units, or null (1_naive.cu only)
};

inline Decode make_decode(const DecodeParams& p) {
  Decode d{};
  d.q = p.q;
  d.k = p.k_cache;
  d.v = p.v_cache;
  d.o = p.o;
  d.context_lens = p.context_lens;
  d.row_stride = p.kv_heads * p.head_dim;
  d.seq_stride = p.max_context * d.row_stride;
  d.heads = static_cast<int>(p.heads);
  d.kv_heads = static_cast<int>(p.kv_heads);
  d.group = static_cast<int>(p.heads / p.kv_heads);
  d.head_dim = static_cast<int>(p.head_dim);
  d.head_tiles = 1;
  d.splits = 1;
  d.chunk = static_cast<int>(p.max_context);
  d.window = static_cast<int>(std::min<int64_t>(p.window, kMaxContext));
  d.key_align = 1;
  d.scale = p.score.scale;
  d.scale_log2 = p.score.scale_log2;
  d.score = score_args(p.score, p.score.scale);
  d.rope = p.rope;
  d.k_new = p.k_new;
  d.v_new = p.v_new;
  d.sinks = p.score.sinks ? p.score.sink_logits : nullptr;
  return d;
}

// The most keys a sequence's blocks walk: its context, or with a window the window and
// less than one key step (`align`) before it.
inline int64_t longest_context(const DecodeParams& p, int64_t align = 1) {
  const int64_t longest = std::clamp<int64_t>(p.longest_context, 1, p.max_context);
  return p.window > 0 ? std::min(longest, p.window + align - 1) : longest;
}

inline std::string common_reason(const DecodeParams& p) {
  if (p.dtype != DType::fp32 && p.dtype != DType::fp16 && p.dtype != DType::bf16)
    return std::string("dtype ") + dtype_name(p.dtype) +
           " is not a decode storage type (fp32, fp16, bf16; an fp8 cache needs a dequantisation scale)";
  if (p.batch < 1 || p.heads < 1 || p.kv_heads < 1 || p.max_context < 1)
    return "batch, heads, kv_heads and max_context must be >= 1";
  if (p.heads % p.kv_heads != 0) return "heads must be a multiple of kv_heads";
  if (p.window < 0) return "window must be >= 0";
  if (const std::string r = score_reason(p.score); !r.empty()) return r;
  if (p.head_dim < 8 || p.head_dim > 256 || p.head_dim % 8 != 0) return "head_dim must be a multiple of 8, at most 256";
  if (p.max_context >= kMaxContext) return "max_context must be < 2^30";
  if (p.longest_context < 1 || p.longest_context > p.max_context) return "longest_context must be in [1, max_context]";
  if (p.batch * p.heads > INT_MAX) return "batch * heads must be < 2^31 (blocks in gridDim.x)";
  return {};
}

// How a fused launch spreads over the card.
struct Policy {
  const char* name;
  // Chooses d.splits and d.chunk for `units` blocks per split, `slots` resident blocks and
  // `step`-key steps of the kernel (split_kv's plan_splits); nullptr: one split, flash_decode.
  void (*plan)(Decode& d, const DecodeParams& p, int64_t units, int64_t slots, int64_t step);
};

// Launches the fused kernel of p's dtype and head_dim class (2_flash_decode.cu) and, with
// splits, the combine.
void launch_fused_variant(const DecodeParams& p, const LaunchContext& ctx, const Policy& policy);

}  // namespace attnbench::decode_impl
