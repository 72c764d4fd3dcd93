// fp64 reference of the weight-only quantized GEMM (op gemm_q, issue 52): C = A · dequant(W)ᵀ.
//
// The layout (docs/cases.md, op gemm_q; kernels/gemm_q/gemm_q.hpp says the same for the kernels):
// W is [n, k], one row per output channel (PyTorch's Linear weight [out, in]), stored as codes
// packed along k, row after row: row j is k·bits/8 bytes. int4: byte b of a row holds code
// k = 2b in its low nibble and k = 2b + 1 in its high nibble, so a little-endian 32-bit word holds
// codes 8i..8i+7 at bits 4(k % 8) (GPTQ's order within its int32 words). int8: one code a byte.
// Codes are unsigned (0..15, 0..255). Per row, one scale per `group` consecutive k (the group's
// scale, in the activations' dtype: scales [n, k / group]; group = k is per-channel) and, with
// zero points, one zero code per group (zeros [n, k / group], one uint8 each); without them the
// zero is the midpoint 2^(bits-1) (8, 128: GPTQ's symmetric quantization). Exactly
//     W[j, kk] = (code[j, kk] - zero[j, kk / group]) · scale[j, kk / group].
#pragma once
#include <cstdint>
#include <vector>

#include "reference/common.hpp"

namespace attnbench::ref {

struct QuantWeights {
  const uint8_t* codes = nullptr;  // [n, k · bits / 8], packed as above
  const float* scales = nullptr;   // [n, k / group]: the stored scales' exact values
  const uint8_t* zeros = nullptr;  // [n, k / group], one zero code a byte; null: the midpoint
  int bits = 4;                    // 4 or 8
  int64_t n = 0, k = 0, group = 0;

  int64_t groups() const { return k / group; }
  int64_t row_bytes() const { return k * bits / 8; }
  int code(int64_t j, int64_t kk) const;
  int zero(int64_t j, int64_t kk) const;
  // (code - zero) · scale, exact in fp64 (and in fp32: a 16-bit scale times an integer of at most
  // 9 bits).
  double value(int64_t j, int64_t kk) const {
    return static_cast<double>(code(j, kk) - zero(j, kk)) * scales[j * groups() + kk / group];
  }
};

// The code at k = kk of a packed row of `bits`-bit codes.
int unpack_code(const uint8_t* row, int bits, int64_t kk);
// Codes [rows, k] (each in [0, 2^bits)) packed into the layout above: rows · k · bits / 8 bytes.
std::vector<uint8_t> pack_codes(const std::vector<int>& codes, int64_t rows, int64_t k, int bits);

// C = A · dequant(W)ᵀ for the requested rows of C (rows of A): a [m, k]; returns [rows.size(), n].
// With `faithful` on: each dequantized weight rounded to the dtype (faithful.round_in: the value
// the kernels hand the tensor cores) and the products summed in fp32.
Matrix gemm_q(const float* a, const QuantWeights& w, int64_t m, const Rows& rows, const Faithful& faithful = {});

}  // namespace attnbench::ref
