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

void softmax_rows(Eigen::Ref<Matrix> s, double sink) {
  for (Eigen::Index i = 0; i < s.rows(); ++i) {
    auto row = s.row(i);
    const double max = std::max(row.maxCoeff(), sink);
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
    row /= row.sum() + (sink == -kInf ? 0.0 : std::exp(sink - max));
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

void round_all(Eigen::Ref<Matrix> m, Faithful::Round round) {
  if (round) m = m.unaryExpr([round](double x) { return static_cast<double>(round(static_cast<float>(x))); });
}

void attention_weights(Eigen::Ref<Matrix> s, const std::vector<int64_t>& pos, const Mask& mask, double softcap,
                       double sink) {
  if (softcap > 0) s = s.unaryExpr([softcap](double x) { return softcap * std::tanh(x / softcap); });
  for (Eigen::Index i = 0; i < s.rows(); ++i) {
    for (Eigen::Index j = 0; j < s.cols(); ++j) {
      s(i, j) = mask.visible(pos[i], j) ? s(i, j) - mask.slope * std::abs(pos[i] - j) : -kInf;
    }
  }
  softmax_rows(s, sink);
}

namespace {

// A task of the dtype-faithful reference (Faithful): the same math as run_attention's fp64 one, in fp32 as an honest
// kernel computes it. S = Q Kᵀ·scale in fp32 (a rotated query or key rounded back to the inputs' dtype first), the
// weights p = exp(s - max) in fp32, their sum l over the unrounded p, P·V from P rounded where the kernel rounds it,
// then divided by l.
void faithful_task(const KvTask& t, Matrix& o) {
  using FloatArray = Eigen::Array<float, 1, Eigen::Dynamic>;
  const Faithful& f = t.faithful;
  const int64_t seq_k = t.k.rows();
  const auto turned = [&](FloatMatrix x, const std::vector<int64_t>& pos) {
    Matrix wide = x.cast<double>();
    apply_rope(wide, pos, t.rope);
    x = wide.cast<float>();
    return FloatMatrix(x.unaryExpr([&f](float v) { return f.round_in(v); }));
  };
  FloatMatrix k_turned;
  if (t.rope.on() && t.rotate_keys) {
    std::vector<int64_t> key_pos(static_cast<size_t>(seq_k));
    for (int64_t j = 0; j < seq_k; ++j) key_pos[static_cast<size_t>(j)] = j;
    k_turned = turned(t.k, key_pos);
  }
  const float scale = static_cast<float>(t.score.scale), cap = static_cast<float>(t.score.softcap);
  const float inf = std::numeric_limits<float>::infinity();
  for (const HeadRows& h : t.heads) {
    std::vector<int64_t> pos = h.query;
    for (int64_t& p : pos) p += t.offset;
    FloatMatrix q = h.q(h.query, Eigen::all);
    if (t.rope.on()) q = turned(q, pos);
    FloatMatrix s = k_turned.size() ? FloatMatrix(q * k_turned.transpose()) : FloatMatrix(q * t.k.transpose());
    s *= scale;
    std::vector<float> sums(static_cast<size_t>(s.rows()));
    const float slope = static_cast<float>(h.mask.slope);
    for (Eigen::Index i = 0; i < s.rows(); ++i) {
      auto row = s.row(i).array();
      if (cap > 0) row = cap * (row / cap).tanh();
      for (Eigen::Index j = 0; j < s.cols(); ++j)
        row(j) = h.mask.visible(pos[i], j) ? row(j) - slope * static_cast<float>(std::abs(pos[i] - j)) : -inf;
      if (row.maxCoeff() == -inf) {
        row.setZero();
        sums[static_cast<size_t>(i)] = 0;
        continue;
      }
      FloatArray p = row;
      float sink_weight = 0;
      f.note_score(exp2_weights(p, static_cast<float>(t.score.sink(h.head)), &sink_weight));
      sums[static_cast<size_t>(i)] = sequential_sum(p) + sink_weight;
      row = p.unaryExpr([&f](float v) { return f.round_p(v); });
    }
    const FloatMatrix oh = s * t.v;
    for (size_t r = 0; r < h.out.size(); ++r) {
      const float l = sums[r];
      o.row(h.out[r]) = l > 0 ? (oh.row(static_cast<int64_t>(r)) / l).cast<double>().eval()
                              : Eigen::RowVectorXd::Zero(oh.cols()).eval();
    }
  }
}

}  // namespace

Matrix run_attention(const std::vector<KvTask>& tasks, size_t rows, int64_t head_dim) {
  Matrix o(rows, head_dim);
  double work = 0;
  for (const KvTask& t : tasks) work += 4.0 * t.rows * t.k.rows() * head_dim;
  parallel_for(tasks.size(), work, [&](int64_t n) {
    const KvTask& t = tasks[n];
    if (t.faithful.on) {
      faithful_task(t, o);
      return;
    }
    const int64_t seq_k = t.k.rows();
    // Per head: its queries' positions, the queries (rotated), and S = Q Kᵀ·scale, then P = weights(S).
    std::vector<std::vector<int64_t>> pos;
    std::vector<Matrix> q, s;
    for (const HeadRows& h : t.heads) {
      pos.push_back(h.query);
      for (int64_t& p : pos.back()) p += t.offset;
      q.push_back(h.q(h.query, Eigen::all).cast<double>());
      apply_rope(q.back(), pos.back(), t.rope);
      s.emplace_back(q.back().rows(), seq_k);
    }
    // K and V are widened to double a block of keys at a time, once for every head of the group: the whole of a
    // long cache in double is written and read back through memory (a 128k-token head is 128 MB a tensor).
    Matrix block;
    std::vector<int64_t> key_pos;
    for (int64_t j0 = 0; j0 < seq_k; j0 += kKeysPerBlock) {
      const int64_t keys = std::min(kKeysPerBlock, seq_k - j0);
      block = t.k.middleRows(j0, keys).cast<double>();
      if (t.rope.on() && t.rotate_keys) {
        key_pos.resize(static_cast<size_t>(keys));
        for (int64_t j = 0; j < keys; ++j) key_pos[static_cast<size_t>(j)] = j0 + j;
        apply_rope(block, key_pos, t.rope);
      }
      for (size_t h = 0; h < s.size(); ++h) s[h].middleCols(j0, keys).noalias() = q[h] * block.transpose() * t.score.scale;
    }
    for (size_t h = 0; h < s.size(); ++h) attention_weights(s[h], pos[h], t.heads[h].mask, t.score.softcap, t.score.sink(t.heads[h].head));
    std::vector<Matrix> oh;
    for (const Matrix& sh : s) oh.push_back(Matrix::Zero(sh.rows(), head_dim));
    for (int64_t j0 = 0; j0 < seq_k; j0 += kKeysPerBlock) {
      const int64_t keys = std::min(kKeysPerBlock, seq_k - j0);
      block = t.v.middleRows(j0, keys).cast<double>();
      for (size_t h = 0; h < s.size(); ++h) oh[h].noalias() += s[h].middleCols(j0, keys) * block;
    }
    for (size_t h = 0; h < s.size(); ++h)
      for (size_t r = 0; r < t.heads[h].out.size(); ++r) o.row(t.heads[h].out[r]) = oh[h].row(static_cast<int64_t>(r));
  });
  return o;
}

}  // namespace attnbench::ref::detail
