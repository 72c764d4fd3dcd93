// gemm_q family (issue 52): weight-only quantized GEMM, C = A · dequant(W)ᵀ, the activations and
// the output in fp16/bf16, the weights int4 or int8 codes with per-group scales and optional zero
// points, accumulation in fp32.
//
// The layout (the same words as docs/cases.md's op gemm_q and reference/gemm_q.hpp):
// - w [n, k · bits / 8] bytes: W [n, k] (PyTorch's Linear weight [out, in]), row j the codes of
//   output channel j along k, rows one after another. int4: byte b of a row holds k = 2b in its
//   low nibble and k = 2b + 1 in its high nibble, so a little-endian 32-bit word holds 8
//   consecutive k at bits 4 (k % 8), GPTQ's order within its int32 words; int8: a code a byte.
//   Codes are unsigned: 0..15, 0..255.
// - scales [n, k / group] in the dtype: the scale of row j's group kk / group.
// - zeros [n, k / group] uint8, one zero code a byte, or none: then the zero is 2^(bits - 1)
//   (8, 128; GPTQ's symmetric quantization).
// - W[j, kk] = (code - zero) · scale exactly; the kernels round it to the dtype once (the
//   tensor cores' operand), as the faithful reference does.
// Why this and not GPTQ's own [k/8, n] int32 words: it is GPTQ's word array transposed (qweight.T,
// scales.T, qzeros unpacked a code a byte), and with each output channel's codes contiguous along
// k a warp streams whole 16-byte pieces of its rows (32 int4 codes of one channel, of one group),
// which is what the memory-bound small-m rungs need; a row's scale is one value per piece.
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/common/kernels.hpp"

namespace attnbench {

struct GemmQParams {
  const void* a = nullptr;       // [m, k] dtype
  const uint8_t* w = nullptr;    // [n, k · bits / 8] packed codes
  const void* scales = nullptr;  // [n, k / group] dtype
  const uint8_t* zeros = nullptr;  // [n, k / group] uint8, or null (the midpoint)
  // W dequantized into the dtype by the problem before any launch (untimed): only the
  // dense_cublas measuring stick reads it. Null: not prepared.
  const void* w_dense = nullptr;  // [n, k] dtype
  void* c = nullptr;              // [m, n] dtype
  int64_t m = 0, n = 0, k = 0;
  int64_t group = 0;  // k's per scale: divides k; k = per channel
  int bits = 4;       // 4 or 8
  DType dtype = DType::fp16;

  int64_t groups() const { return group > 0 ? k / group : 0; }
  int64_t row_bytes() const { return k * bits / 8; }
  int zero_default() const { return 1 << (bits - 1); }
};

const std::vector<Variant<GemmQParams>>& gemm_q_variants();

}  // namespace attnbench
