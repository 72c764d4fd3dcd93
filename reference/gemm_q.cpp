#include "reference/gemm_q.hpp"

#include <algorithm>

namespace attnbench::ref {

using namespace detail;

int unpack_code(const uint8_t* row, int bits, int64_t kk) {
  if (bits == 8) return row[kk];
  const uint8_t byte = row[kk / 2];
  return kk % 2 == 0 ? byte & 0xf : byte >> 4;  // even k in the low nibble
}

int QuantWeights::code(int64_t j, int64_t kk) const { return unpack_code(codes + j * row_bytes(), bits, kk); }

int QuantWeights::zero(int64_t j, int64_t kk) const {
  return zeros ? zeros[j * groups() + kk / group] : 1 << (bits - 1);
}

std::vector<uint8_t> pack_codes(const std::vector<int>& codes, int64_t rows, int64_t k, int bits) {
  require(bits == 4 || bits == 8, "pack_codes: bits must be 4 or 8");
  require(bits == 8 || k % 2 == 0, "pack_codes: int4 rows need an even k");
  require(static_cast<int64_t>(codes.size()) == rows * k, "pack_codes: codes must be rows · k");
  const int64_t row_bytes = k * bits / 8;
  std::vector<uint8_t> out(static_cast<size_t>(rows * row_bytes), 0);
  for (int64_t j = 0; j < rows; ++j)
    for (int64_t kk = 0; kk < k; ++kk) {
      const int c = codes[static_cast<size_t>(j * k + kk)];
      require(c >= 0 && c < (1 << bits), "pack_codes: a code outside [0, 2^bits)");
      uint8_t& byte = out[static_cast<size_t>(j * row_bytes + (bits == 8 ? kk : kk / 2))];
      byte = static_cast<uint8_t>(bits == 8 ? c : kk % 2 == 0 ? (byte & 0xf0) | c : (byte & 0x0f) | (c << 4));
    }
  return out;
}

// Cᵢⱼ = Σₖ Aᵢₖ Wⱼₖ with W dequantized exactly. Tasks are column tiles of C (output channels):
// each dequantizes its kColsPerTask rows of W once and multiplies every requested row of A by them.
Matrix gemm_q(const float* a, const QuantWeights& w, int64_t m, const Rows& rows, const Faithful& faithful) {
  require(m > 0 && w.n > 0 && w.k > 0, "gemm_q: m, n and k must be positive");
  require(w.bits == 4 || w.bits == 8, "gemm_q: bits must be 4 or 8");
  require(w.group > 0 && w.k % w.group == 0, "gemm_q: group must divide k");
  require(w.bits == 8 || w.k % 2 == 0, "gemm_q: int4 rows need an even k");
  check_rows("gemm_q", rows, m);
  const int64_t n = w.n, k = w.k, tiles = (n + kColsPerTask - 1) / kColsPerTask;
  Matrix c(rows.size(), n);
  parallel_for(tiles, 2.0 * static_cast<double>(rows.size() + 1) * n * k, [&](int64_t tile) {
    const int64_t col0 = tile * kColsPerTask, cols = std::min(kColsPerTask, n - col0);
    if (faithful.on) {
      FloatMatrix wt(cols, k);
      for (int64_t j = 0; j < cols; ++j)
        for (int64_t kk = 0; kk < k; ++kk) wt(j, kk) = faithful.round_in(static_cast<float>(w.value(col0 + j, kk)));
      const FloatMatrix a_rows = view(a, m, k, k)(rows, Eigen::all);
      const FloatMatrix c_tile = a_rows * wt.transpose();
      c.block(0, col0, static_cast<int64_t>(rows.size()), cols) = c_tile.cast<double>();
      return;
    }
    Matrix wt(cols, k);
    for (int64_t j = 0; j < cols; ++j)
      for (int64_t kk = 0; kk < k; ++kk) wt(j, kk) = w.value(col0 + j, kk);
    const Matrix a_rows = view(a, m, k, k)(rows, Eigen::all).cast<double>();
    c.block(0, col0, static_cast<int64_t>(rows.size()), cols) = a_rows * wt.transpose();
  });
  return c;
}

}  // namespace attnbench::ref
