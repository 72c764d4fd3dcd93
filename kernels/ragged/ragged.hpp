// ragged family: one batch of sequences as a serving engine runs it in one launch (vLLM V1's
// unified attention, FlashInfer's batch prefill over a paged cache): chunked prefills,
// speculative verifications and decodes side by side, each sequence with its own number of new
// query tokens over its own context in a shared pool of KV blocks. Issue 48.
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/common/kernels.hpp"
#include "kernels/common/rope.hpp"
#include "kernels/common/score.hpp"

namespace attnbench {

// Sequence b has query_len[b] = cu_seqlens_q[b + 1] - cu_seqlens_q[b] new tokens, the last
// query_len[b] of its context_lens[b] keys: their keys and values are in the cache already.
// Query t of sequence b (packed row cu_seqlens_q[b] + t of q and o) sits at position
// context_lens[b] - query_len[b] + t and sees keys [0, position] (causal, aligned bottom-right
// within its own sequence), with a window the last `window` of those (itself included).
// Query head h reads kv head h / (heads / kv_heads).
//
// The cache is the "flash" layout (FlashInfer's NHD pages, vLLM V1's FlashAttention backend):
// k_cache and v_cache are [num_blocks, block_size, kv_heads, head_dim], one key's heads and dims
// contiguous, so any block_size works (1 and 24 as well as 16). Key j of sequence b is token
// j % block_size of block block_tables[b][j / block_size]. Table entries past a sequence's last
// block, and every slot no sequence owns (those after a sequence's last key in its last block
// included), hold NaN: a kernel that reads past a context fails verification.
// An fp8 e4m3 cache stores value / scale: kernels multiply what they load by k_scale or v_scale.
// The score options: kernels/common/score.hpp (ALiBi's distance is position - j).
struct RaggedParams {
  const void* q = nullptr;                // [total_queries, heads, head_dim], dtype
  const void* k_cache = nullptr;          // [num_blocks, block_size, kv_heads, head_dim], kv_dtype
  const void* v_cache = nullptr;          // [num_blocks, block_size, kv_heads, head_dim], kv_dtype
  void* o = nullptr;                      // [total_queries, heads, head_dim], dtype
  const int32_t* cu_seqlens_q = nullptr;  // [batch + 1], on the device: 0, then each sequence's end in q
  const int32_t* context_lens = nullptr;  // [batch], on the device: query_len[b] <= context_lens[b]
  const int32_t* block_tables = nullptr;  // [batch, max_blocks_per_seq], on the device
  // cu_seqlens_q and context_lens on the host as well, as a serving engine's scheduler has them:
  // a rung that launches per sequence (2_separate.cu) plans from them; null = not given.
  const int32_t* host_cu_seqlens_q = nullptr;  // [batch + 1]
  const int32_t* host_context_lens = nullptr;  // [batch]
  int64_t batch = 1, total_queries = 1, heads = 1, kv_heads = 1, head_dim = 64;
  int64_t block_size = 16, num_blocks = 1, max_blocks_per_seq = 1;
  int64_t longest_context = 1;  // the largest context_lens entry, known on the host
  int64_t longest_query = 1;    // the largest query_len, known on the host
  int64_t window = 0;           // 0 = none
  ScoreParams score;
  // RoPE: each query is rotated at its position in the kernel; the cache holds keys rotated
  // when they were stored. The table covers positions [0, longest_context).
  RopeTable rope;
  DType dtype = DType::fp32;       // q and o: fp32, fp16 or bf16
  DType kv_dtype = DType::fp32;    // the cache: dtype, or fp8_e4m3
  float k_scale = 1, v_scale = 1;  // fp8 dequantisation scales (1 otherwise)
};

inline void finish_ragged_params(RaggedParams& p) { finish_score(p.score, p.head_dim); }

const std::vector<Variant<RaggedParams>>& ragged_variants();

}  // namespace attnbench
