// What the mla op's adapter (mla.cpp) shares with its tests: FlashMLA's fp8 latent cache as the
// host writes it (reference/mla.hpp reads it back, kernels/mla/mla.hpp describes the layout).
#pragma once
#include <cstdint>
#include <vector>

namespace attnbench {

// FlashMLA's scale of one tile of 128 latent values (tests/quant.py, a "UE8M0" scale): the
// smallest power of two at or above max|x| / 448, and at least the power of two at or above
// 1e-4 (2^-13), so a tile's codes x / scale never pass e4m3's 448 and a tile of zeros has a scale.
float mla_fp8_tile_scale(float amax);

// A pool of `pool_slots` token slots in FlashMLA's fp8 layout (mla_fp8_token_bytes(latent_dim,
// rope_dim) bytes a slot): token t of `tokens` ([slots.size(), latent_dim + rope_dim] values) goes
// to slot slots[t] as its latent values' e4m3 codes (x / its tile's scale, to nearest even), the
// tiles' fp32 scales, and its RoPE values rounded to bf16. Every other slot is all-ones bytes
// (NaN codes, scales and RoPE values alike).
std::vector<uint8_t> mla_fp8_pool(const float* tokens, const std::vector<int64_t>& slots, int64_t latent_dim,
                                  int64_t rope_dim, int64_t pool_slots);

}  // namespace attnbench
