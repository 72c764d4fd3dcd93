// The helpers of common.hpp: argument checks, the stable softmax, and the dense attention core.
#include "reference/common.hpp"

#include <cmath>
#include <limits>
#include <stdexcept>

namespace attnbench::ref::detail {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
const double kExpUnderflow = std::log(std::numeric_limits<double>::min());  // exp(x) is denormal below
}  // namespace

void require(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument(what);
}

void check_rows(const char* op, const Rows& rows, int64_t count) {
  for (int64_t r : rows) {
    if (r < 0 || (count >= 0 && r >= count)) {
      throw std::out_of_range(std::string(op) + ": output row " + std::to_string(r) + " is out of range" +
                              (count >= 0 ? " [0, " + std::to_string(count) + ")" : ""));
    }
  }
}

void softmax_rows(Eigen::Ref<Matrix> s) {
  for (Eigen::Index i = 0; i < s.rows(); ++i) {
    auto row = s.row(i);
    const double max = row.maxCoeff();
    if (max == -kInf) {
      row.setZero();
      continue;
    }
    // Weights below the smallest normal double are exactly 0, masked scores (-inf) among
    // them: Eigen's vectorised exp clamps its argument and gives them ~5.6e-309, and the
    // denormals that follow made the product with V (so causal and ALiBi references)
    // several times slower on some CPUs. The error is below 2.3e-308 a weight.
    const auto x = row.array() - max;
    row = (x < kExpUnderflow).select(0.0, x.exp()).matrix();
    row /= row.sum();
  }
}

void apply_rope(Eigen::Ref<Matrix> x, const std::vector<int64_t>& pos, const Rope& rope) {
  if (!rope.on()) return;
  const int64_t r = rope.rotary_dim > 0 ? rope.rotary_dim : x.cols(), half = r / 2;
  require(r % 2 == 0 && r <= x.cols(), "rope: rotary_dim must be even and at most head_dim");
  require(static_cast<int64_t>(pos.size()) == x.rows(), "rope: one position per row");
  const bool neox = rope.style == Rope::Style::neox;
  for (Eigen::Index row = 0; row < x.rows(); ++row) {
    for (int64_t i = 0; i < half; ++i) {
      const double angle = static_cast<double>(pos[row]) * std::pow(rope.theta, -2.0 * i / r);
      const double c = std::cos(angle), s = std::sin(angle);
      const int64_t a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
      const double x1 = x(row, a), x2 = x(row, b);
      x(row, a) = x1 * c - x2 * s;
      x(row, b) = x2 * c + x1 * s;
    }
  }
}

Matrix attend_head(const Matrix& q, const Matrix& k, const Matrix& v, const std::vector<int64_t>& pos,
                   const Mask& mask, double scale, double softcap) {
  Matrix s = q * k.transpose() * scale;
  if (softcap > 0) s = s.unaryExpr([softcap](double x) { return softcap * std::tanh(x / softcap); });
  for (Eigen::Index i = 0; i < s.rows(); ++i) {
    for (Eigen::Index j = 0; j < s.cols(); ++j) {
      s(i, j) = mask.visible(pos[i], j) ? s(i, j) - mask.slope * std::abs(pos[i] - j) : -kInf;
    }
  }
  softmax_rows(s);
  return s * v;
}

Matrix run_attention(const std::vector<KvTask>& tasks, size_t rows, int64_t head_dim) {
  Matrix o(rows, head_dim);
  double work = 0;
  for (const KvTask& t : tasks) work += 4.0 * t.rows * t.k.rows() * head_dim;
  parallel_for(tasks.size(), work, [&](int64_t n) {
    const KvTask& t = tasks[n];
    Matrix k = t.k.cast<double>();
    const Matrix v = t.v.cast<double>();
    if (t.rope.on() && t.rotate_keys) {
      std::vector<int64_t> key_pos(static_cast<size_t>(k.rows()));
      for (size_t j = 0; j < key_pos.size(); ++j) key_pos[j] = static_cast<int64_t>(j);
      apply_rope(k, key_pos, t.rope);
    }
    for (const HeadRows& h : t.heads) {
      std::vector<int64_t> pos(h.query);
      for (int64_t& p : pos) p += t.offset;
      Matrix q = h.q(h.query, Eigen::all).cast<double>();
      apply_rope(q, pos, t.rope);
      const Matrix oh = attend_head(q, k, v, pos, h.mask, t.scale, t.softcap);
      for (size_t r = 0; r < h.out.size(); ++r) o.row(h.out[r]) = oh.row(r);
    }
  });
  return o;
}

}  // namespace attnbench::ref::detail
