// fp64 reference of multi-head latent attention decode (DeepSeek-V2/V3's MLA as FlashMLA serves
// it; issue 49). Every query head reads one shared latent cache: each cached token is one row of
// width = latent_dim + rope_dim values (512 latent values, the compressed KV, then 64 RoPE
// values: d_qk = 576), and the value of a token is the first latent_dim values of that same row
// (d_v = 512). Per sequence b, query token t (of s_q, speculative tokens) and query head h:
//
//   s_j  = scale · q[b, t, h, :] · K_b[j, :]          (the 576-wide dot product)
//   P    = softmax over the keys t sees: j <= context[b] - s_q + t (causal: the s_q new tokens
//          are the sequence's last ones and see each other causally), every j < context[b]
//          without causal
//   o[b, t, h, :] = Σ_j P_j · K_b[j, :latent_dim]
//
// K_b is sequence b's context read out of a paged cache: token j in slot j % block_size of block
// block_table[b][j / block_size], the cache [num_blocks, block_size, width] as it holds its values
// (an fp8 cache's dequantised, mla_fp8_dequantize). The attention itself is the dense core's
// (common.hpp, run_attention) with K [context, width] and V = K's first latent_dim columns.
#pragma once
#include <cstdint>
#include <vector>

#include "reference/common.hpp"

namespace attnbench::ref {

struct MlaShape {
  int64_t s_q = 1, heads = 1, latent_dim = 512, rope_dim = 64;
  std::vector<int64_t> context;  // per sequence: s_q <= context[b]
  bool causal = true;
  double scale = 0;  // 0 = 1/sqrt(latent_dim + rope_dim)
  // The paged cache: block_table is [batch, max_blocks], entries in [0, num_blocks).
  int64_t block_size = 64, num_blocks = 1, max_blocks = 1;
  Faithful faithful;  // off: fp64; on: the dtype-faithful reference (common.hpp)
  int64_t width() const { return latent_dim + rope_dim; }
  int64_t batch() const { return static_cast<int64_t>(context.size()); }
};

// q: [batch, s_q, heads, width]; cache: [num_blocks, block_size, width]; block_table: [batch,
// max_blocks]. Output row r = (b · s_q + t) · heads + h of o [batch, s_q, heads, latent_dim];
// returns [rows.size(), latent_dim]. Only the slots of each sequence's context are read (the
// others may hold NaN).
Matrix mla(const MlaShape& s, const float* q, const float* cache, const int32_t* block_table, const Rows& rows);

// FlashMLA's fp8 cache (its "V32" layout, flash_mla_with_kvcache with is_fp8_kvcache): each token
// is latent_dim e4m3 codes, then one fp32 scale per 128 latent values (little-endian), then
// rope_dim bf16 RoPE values: 512 + 16 + 128 = 656 bytes at FlashMLA's dims. latent_dim must be a
// multiple of 128.
constexpr int64_t kMlaFp8Tile = 128;
inline int64_t mla_fp8_token_bytes(int64_t latent_dim, int64_t rope_dim) {
  return latent_dim + 4 * (latent_dim / kMlaFp8Tile) + 2 * rope_dim;
}
// What an e4m3 (OCP E4M3FN) code means, from its bits: (-1)^sign · 2^(exponent - 7) · (1 +
// mantissa / 8), exponent 0 the subnormals 2^-6 · mantissa / 8, S.1111.111 NaN (no infinities).
double e4m3_value(uint8_t code);
// One token's width values from its mla_fp8_token_bytes bytes: latent value i is code i times the
// scale of its tile (i / 128), RoPE value i the bf16 that follows the scales. All-ones bytes (a
// slot no token owns) give NaN.
void mla_fp8_dequantize(const uint8_t* token, int64_t latent_dim, int64_t rope_dim, float* out);

}  // namespace attnbench::ref
