#include "reference/gemm.hpp"

#include <map>

namespace attnbench::ref {

using namespace detail;

// Cᵢⱼ = Σₖ Aᵢₖ Bⱼₖ (nt) or Σₖ Aᵢₖ Bₖⱼ (nn), for the requested rows i. Tasks are tiles of C: up to kRowsPerTask
// requested rows of one batch by kColsPerTask columns.
Matrix gemm(const float* a, const float* b, bool nn, int64_t m, int64_t n, int64_t k, const Rows& rows,
            const Faithful& faithful) {
  require(m > 0 && n > 0 && k > 0, "gemm: m, n and k must be positive");
  check_rows("gemm", rows, -1);
  struct Tile {
    int64_t batch, col0, cols;
    std::vector<int64_t> row = {}, out = {};  // row within the batch, and the output row it fills
  };
  std::map<int64_t, std::vector<int64_t>> by_batch;  // batch -> indices into rows
  for (size_t i = 0; i < rows.size(); ++i) by_batch[rows[i] / m].push_back(i);
  std::vector<Tile> tiles;
  for (const auto& [batch, indices] : by_batch) {
    for (size_t r0 = 0; r0 < indices.size(); r0 += kRowsPerTask) {
      for (int64_t c0 = 0; c0 < n; c0 += kColsPerTask) {
        Tile& t = tiles.emplace_back(Tile{batch, c0, std::min(kColsPerTask, n - c0)});
        for (size_t i = r0; i < std::min(indices.size(), r0 + kRowsPerTask); ++i) {
          t.row.push_back(rows[indices[i]] % m);
          t.out.push_back(indices[i]);
        }
      }
    }
  }

  Matrix c(rows.size(), n);
  parallel_for(tiles.size(), 2.0 * rows.size() * n * k, [&](int64_t i) {
    const Tile& t = tiles[i];
    const float* bb = b + t.batch * n * k;
    if (faithful.on) {
      const FloatMatrix a_rows = view(a + t.batch * m * k, m, k, k)(t.row, Eigen::all);
      const FloatMatrix c_tile = nn ? FloatMatrix(a_rows * view(bb + t.col0, k, t.cols, n))
                                    : FloatMatrix(a_rows * view(bb + t.col0 * k, t.cols, k, k).transpose());
      for (size_t r = 0; r < t.out.size(); ++r) c.row(t.out[r]).segment(t.col0, t.cols) = c_tile.row(r).cast<double>();
      return;
    }
    const Matrix a_rows = view(a + t.batch * m * k, m, k, k)(t.row, Eigen::all).cast<double>();  // a: [batch, m, k]
    // nn: C = A·B with b [batch, k, n], so the tile needs columns of B; nt: C = A·Bᵀ with b [batch, n, k], rows of B.
    const Matrix c_tile = nn ? Matrix(a_rows * view(bb + t.col0, k, t.cols, n).cast<double>())
                             : Matrix(a_rows * view(bb + t.col0 * k, t.cols, k, k).cast<double>().transpose());
    for (size_t r = 0; r < t.out.size(); ++r) c.row(t.out[r]).segment(t.col0, t.cols) = c_tile.row(r);
  });
  return c;
}

}  // namespace attnbench::ref
