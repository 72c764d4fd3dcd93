#include "reference/softmax.hpp"

namespace attnbench::ref {

using namespace detail;

// y = softmax(x) row by row: the requested rows of x, widened, then softmax_rows() on tasks of kRowsPerTask rows.
Matrix softmax(const float* x, int64_t cols, const Rows& rows, const Faithful& faithful) {
  require(cols > 0, "softmax: cols must be positive");
  check_rows("softmax", rows, -1);
  const int64_t count = rows.empty() ? 0 : *std::max_element(rows.begin(), rows.end()) + 1;
  if (faithful.on) {
    Matrix y(rows.size(), cols);
    parallel_for(static_cast<int64_t>(rows.size()), 10.0 * y.size(), [&](int64_t r) {
      Eigen::Array<float, 1, Eigen::Dynamic> e = view(x + rows[r] * cols, 1, cols, cols).array();
      faithful.note_score(exp2_weights(e));
      y.row(r) = (e / sequential_sum(e)).cast<double>();
    });
    return y;
  }
  Matrix y = view(x, count, cols, cols)(rows, Eigen::all).cast<double>();
  const int64_t tasks = (y.rows() + kRowsPerTask - 1) / kRowsPerTask;
  parallel_for(tasks, 10.0 * y.size(), [&](int64_t t) {
    softmax_rows(y.middleRows(t * kRowsPerTask, std::min(kRowsPerTask, y.rows() - t * kRowsPerTask)));
  });
  return y;
}

}  // namespace attnbench::ref
