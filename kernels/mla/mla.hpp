// mla family: DeepSeek-V2/V3's multi-head latent attention, decode over a paged latent cache as
// FlashMLA serves it (issue 49). Every query head of a sequence reads the same cached rows: one
// latent KV head whose rows are width = latent_dim + rope_dim values (512 + 64 = 576), the keys
// the whole row, the values its first latent_dim values. The projections are absorbed into the
// queries (576 wide) and the output (latent_dim wide), so heads 16-128 share every byte read.
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/common/kernels.hpp"

namespace attnbench {

// How the latent cache stores a token: `dtype`, the row in the queries' dtype (width elements);
// `fp8`, FlashMLA's fp8 layout, latent_dim e4m3 codes, one fp32 scale per 128 of them, then
// rope_dim bf16 RoPE values (656 bytes at 512 + 64).
enum class MlaCache { dtype, fp8 };

// Sequence b holds context_lens[b] tokens; its s_q query tokens are the last s_q of them (the
// decode's new token, and the speculative ones after it). Query token t of sequence b, head h
// (row ((b · s_q + t) · heads + h) of q and o) sees keys j <= context_lens[b] - s_q + t with
// causal, every j < context_lens[b] without. Score s_j = scale · q · K[j] (width wide), output
// Σ_j softmax(s)_j · K[j][:latent_dim].
// Token j of sequence b lives in slot j % block_size of block block_tables[b][j / block_size];
// its row is token_bytes() bytes at cache + (block · block_size + slot) · token_bytes(). Table
// entries past a sequence's last block, and every slot no token owns (the tail of each
// sequence's last block too), hold NaN (all-ones bytes): a kernel that reads past a context fails.
struct MlaParams {
  const void* q = nullptr;                // [batch, s_q, heads, width], dtype
  const void* cache = nullptr;            // [num_blocks, block_size, token_bytes()] bytes
  void* o = nullptr;                      // [batch, s_q, heads, latent_dim], dtype
  const int32_t* block_tables = nullptr;  // [batch, max_blocks_per_seq], on the device
  const int32_t* context_lens = nullptr;  // [batch], on the device; every entry >= s_q
  // context_lens on the host as well, as a serving engine's scheduler has them (FlashMLA's
  // get_mla_metadata plans its splits from them): for a rung that plans on the host; null = not given.
  const int32_t* host_context_lens = nullptr;
  int64_t batch = 1, s_q = 1, heads = 1, latent_dim = 512, rope_dim = 64;
  int64_t block_size = 64, num_blocks = 1, max_blocks_per_seq = 1;
  int64_t longest_context = 1;  // the largest context_lens entry, known on the host
  bool causal = true;
  float scale = 0;  // finish_mla_params: 0 becomes 1/sqrt(width)
  DType dtype = DType::bf16;  // q and o: fp32, fp16 or bf16
  MlaCache cache_format = MlaCache::dtype;

  ATTNBENCH_HOST_DEVICE int64_t width() const { return latent_dim + rope_dim; }
  // Bytes of one cached token: width elements of dtype, or the fp8 layout's codes, scales and bf16
  // RoPE (on the host; a kernel knows it from its cache type).
  int64_t token_bytes() const {
    return cache_format == MlaCache::fp8 ? latent_dim + 4 * (latent_dim / 128) + 2 * rope_dim
                                         : width() * static_cast<int64_t>(dtype_bytes(dtype));
  }
};

inline void finish_mla_params(MlaParams& p) {
  if (p.scale == 0) p.scale = static_cast<float>(1 / std::sqrt(static_cast<double>(p.width())));
}

const std::vector<Variant<MlaParams>>& mla_variants();

}  // namespace attnbench
