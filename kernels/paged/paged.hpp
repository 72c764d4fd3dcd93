// paged family: decode attention over a KV cache kept in fixed-size blocks from a
// shared pool, found through per-sequence block tables (vLLM's layouts). Writing new
// tokens into their slots is reshape_and_cache's (kernels/reshape_and_cache).
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/common/kernels.hpp"
#include "kernels/common/rope.hpp"
#include "kernels/common/score.hpp"

namespace attnbench {

// x = 16 bytes / element size of the cache's storage type (8 for fp16/bf16, 4 for
// fp32, 16 for fp8), so that one 16-byte load holds x consecutive head dims of a key.
inline int64_t paged_x(DType kv_dtype) { return 16 / static_cast<int64_t>(dtype_bytes(kv_dtype)); }

// Token t of sequence b lives in block block_tables[b][t / block_size] at offset
// t % block_size. Sequence b attends to tokens [0, context_lens[b]) with its query at
// position context_lens[b] - 1 (ALiBi bias -alibi_slopes[h] * (context_lens[b] - 1 - t);
// the score options: kernels/common/score.hpp).
// Query head h reads kv head h / (heads / kv_heads).
// An fp8 cache stores value / scale: kernels multiply what they load by k_scale or
// v_scale. Table entries past a sequence's last block, and every pool slot no
// sequence owns, point at NaN: a kernel that reads beyond a context fails.
struct PagedParams {
  const void* q = nullptr;                // [batch, heads, head_dim], dtype
  const void* k_cache = nullptr;          // [num_blocks, kv_heads, head_dim / x, block_size, x], kv_dtype
  const void* v_cache = nullptr;          // [num_blocks, kv_heads, head_dim, block_size], kv_dtype
  void* o = nullptr;                      // [batch, heads, head_dim], dtype
  const int32_t* block_tables = nullptr;  // [batch, max_blocks_per_seq], on the device
  const int32_t* context_lens = nullptr;  // [batch], on the device; every entry >= 1
  int64_t batch = 1, heads = 1, kv_heads = 1, head_dim = 64;
  int64_t block_size = 16, num_blocks = 1, max_blocks_per_seq = 1;
  int64_t longest_context = 1;   // the largest context_lens entry, known on the host
  int64_t partition_size = 512;  // v2: tokens per partition (a multiple of block_size)
  // window > 0: the query sees only its last `window` tokens (itself included); kernels
  // skip the blocks before them.
  int64_t window = 0;
  ScoreParams score;
  // RoPE: the query is rotated at its position (context_lens[b] - 1) in the kernel; the cache
  // holds keys rotated when they were stored. The table covers positions [0, max context).
  RopeTable rope;
  DType dtype = DType::fp32;       // q and o
  DType kv_dtype = DType::fp32;    // the cache: dtype, or fp8_e4m3
  float k_scale = 1, v_scale = 1;  // fp8 dequantisation scales (1 otherwise)
  bool launch_early = false;       // as DecodeParams::launch_early
};

inline void finish_paged_params(PagedParams& p) { finish_score(p.score, p.head_dim); }

const std::vector<Variant<PagedParams>>& paged_variants();

}  // namespace attnbench
