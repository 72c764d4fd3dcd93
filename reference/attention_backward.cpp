#include "reference/attention_backward.hpp"

#include <cmath>
#include <limits>

namespace attnbench::ref {

using namespace detail;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

void validate(const AttentionShape& s) {
  require(s.batch > 0 && s.heads > 0 && s.kv_heads > 0 && s.seq_q > 0 && s.seq_k > 0 && s.head_dim > 0,
          "attention_backward: batch, heads, kv_heads, seq_q, seq_k and head_dim must be positive");
  require(s.heads % s.kv_heads == 0, "attention_backward: heads (" + std::to_string(s.heads) +
                                         ") must be a multiple of kv_heads (" + std::to_string(s.kv_heads) + ")");
  require(s.window >= 0, "attention_backward: window must be >= 0");
  require(s.score.alibi_slopes.empty() || static_cast<int64_t>(s.score.alibi_slopes.size()) == s.heads,
          "attention_backward: " + std::to_string(s.score.alibi_slopes.size()) + " ALiBi slopes for " +
              std::to_string(s.heads) + " heads");
  require(s.score.softcap >= 0, "attention_backward: softcap must be >= 0");
  require(!s.rope.on(), "attention_backward: no RoPE yet");
  require(s.sparse.empty(), "attention_backward: no block-sparse masks yet");
  require(s.score.sinks.empty(), "attention_backward: no attention sinks yet");
}

// The logits z = cap(s) - slope·|p - j| of the keys query i (at position pos[i]) sees, -inf
// elsewhere: what attention_weights() takes its softmax of (the same Mask, the same order of
// cap, bias and mask), kept here for the LSE and for P from a stored LSE.
Matrix logits(const Matrix& s, const std::vector<int64_t>& pos, const Mask& mask, double softcap) {
  Matrix z(s.rows(), s.cols());
  for (Eigen::Index i = 0; i < s.rows(); ++i)
    for (Eigen::Index j = 0; j < s.cols(); ++j) {
      const double capped = softcap > 0 ? softcap * std::tanh(s(i, j) / softcap) : s(i, j);
      z(i, j) = mask.visible(pos[i], j) ? capped - mask.slope * std::abs(pos[i] - j) : -kInf;
    }
  return z;
}

// One (batch b, kv head g): every query head of the group, all its queries and keys.
void group_backward(const AttentionShape& s, const float* q, const float* k, const float* v, const float* d_o,
                    const StoredForward& stored, int64_t b, int64_t g, Pass what, AttentionGrads& out) {
  const int64_t d = s.head_dim, group = s.heads / s.kv_heads;
  const double scale = s.score.scale != 0 ? s.score.scale : 1 / std::sqrt(static_cast<double>(d));
  const double cap = s.score.softcap;
  const int64_t offset = s.top_left ? 0 : s.seq_k - s.seq_q;  // query i sits at key position i + offset
  std::vector<int64_t> pos(static_cast<size_t>(s.seq_q));
  for (int64_t i = 0; i < s.seq_q; ++i) pos[static_cast<size_t>(i)] = i + offset;
  const int64_t kv = (b * s.seq_k * s.kv_heads + g) * d;  // k, v: [batch, seq_k, kv_heads, d]
  const Matrix K = view(k + kv, s.seq_k, d, s.kv_heads * d).cast<double>();
  const Matrix V = view(v + kv, s.seq_k, d, s.kv_heads * d).cast<double>();
  Matrix dK = Matrix::Zero(s.seq_k, d), dV = Matrix::Zero(s.seq_k, d);
  for (int64_t h = g * group; h < (g + 1) * group; ++h) {
    const int64_t qh = (b * s.seq_q * s.heads + h) * d;  // q, d_o, o: [batch, seq_q, heads, d]
    const Matrix Q = view(q + qh, s.seq_q, d, s.heads * d).cast<double>();
    const Matrix dO = view(d_o + qh, s.seq_q, d, s.heads * d).cast<double>();
    const Mask mask{s.causal, s.window, s.score.alibi_slopes.empty() ? 0 : s.score.alibi_slopes[h], nullptr, offset};

    // The forward: S, P (the forward reference's attention_weights), O and the LSE.
    const Matrix S = scale * Q * K.transpose();
    Matrix P = S;
    attention_weights(P, pos, mask, cap);
    const Matrix Z = logits(S, pos, mask, cap);
    Matrix O = P * V;
    std::vector<double> lse(static_cast<size_t>(s.seq_q));
    for (int64_t i = 0; i < s.seq_q; ++i) {
      const double m = Z.row(i).maxCoeff();
      s.faithful.note_score(static_cast<float>(m));
      lse[static_cast<size_t>(i)] = m == -kInf ? kInf : m + std::log((Z.row(i).array() - m).exp().sum());
    }
    for (int64_t i = 0; i < s.seq_q; ++i) {
      out.o.row((b * s.seq_q + i) * s.heads + h) = O.row(i);
      out.lse[static_cast<size_t>((b * s.heads + h) * s.seq_q + i)] = lse[static_cast<size_t>(i)];
    }
    if (what == Pass::forward) continue;

    // A kernel's view of the forward: the O and LSE the training step stored.
    if (stored.o) O = view(stored.o + qh, s.seq_q, d, s.heads * d).cast<double>();
    if (stored.lse)
      for (int64_t i = 0; i < s.seq_q; ++i) {
        const double l = stored.lse[(b * s.heads + h) * s.seq_q + i];
        P.row(i) = (Z.row(i).array() - l).exp().matrix();  // exp(-inf) = 0: masked keys, blind rows (l = +inf)
      }

    // The backward.
    const Eigen::VectorXd D = (dO.array() * O.array()).rowwise().sum();
    const Matrix dP = dO * V.transpose();
    Matrix dS = (P.array() * (dP.colwise() - D).array()).matrix();
    if (cap > 0) dS.array() *= 1 - (S.array() / cap).tanh().square();
    // The faithful path: P and dS rounded where the tensor-core kernels round the operands of
    // dV = Pᵀ dO and dQ, dK (Faithful::p, the forward's convention for P); D used P unrounded.
    round_all(P, s.faithful.p);
    round_all(dS, s.faithful.p);
    const Matrix dQ = scale * dS * K;
    dK.noalias() += scale * dS.transpose() * Q;
    dV.noalias() += P.transpose() * dO;
    for (int64_t i = 0; i < s.seq_q; ++i) out.dq.row((b * s.seq_q + i) * s.heads + h) = dQ.row(i);
  }
  for (int64_t j = 0; j < s.seq_k; ++j) {
    out.dk.row((b * s.seq_k + j) * s.kv_heads + g) = dK.row(j);
    out.dv.row((b * s.seq_k + j) * s.kv_heads + g) = dV.row(j);
  }
}

}  // namespace

AttentionGrads attention_backward(const AttentionShape& s, const float* q, const float* k, const float* v,
                                  const float* d_o, const StoredForward& stored, const std::vector<int64_t>& groups,
                                  Pass what) {
  validate(s);
  const int64_t d = s.head_dim, q_rows = s.batch * s.seq_q * s.heads, k_rows = s.batch * s.seq_k * s.kv_heads;
  AttentionGrads out{Matrix::Zero(q_rows, d), std::vector<double>(static_cast<size_t>(q_rows), 0.0),
                     Matrix::Zero(q_rows, d), Matrix::Zero(k_rows, d), Matrix::Zero(k_rows, d)};
  std::vector<int64_t> todo = groups;
  if (todo.empty())
    for (int64_t n = 0; n < s.batch * s.kv_heads; ++n) todo.push_back(n);
  for (int64_t n : todo) require(n >= 0 && n < s.batch * s.kv_heads, "attention_backward: no such (batch, kv head) group");
  // Groups write disjoint rows: the result does not depend on the thread count.
  const double work = (what == Pass::forward ? 4.0 : 10.0) * static_cast<double>(s.heads / s.kv_heads * s.seq_q * s.seq_k * d);
  parallel_for(static_cast<int64_t>(todo.size()), work * static_cast<double>(todo.size()), [&](int64_t n) {
    const int64_t group = todo[static_cast<size_t>(n)];
    group_backward(s, q, k, v, d_o, stored, group / s.kv_heads, group % s.kv_heads, what, out);
  });
  return out;
}

}  // namespace attnbench::ref
