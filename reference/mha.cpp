#include "reference/mha.hpp"

#include <map>

namespace attnbench::ref {

using namespace detail;

Matrix mha(const MhaShape& s, const float* x, const float* w_qkv, const float* b_qkv, const float* w_o,
           const float* b_o, const Rows& rows, Matrix* product) {
  const AttentionShape& a = s.attention;
  const int64_t hd = a.heads * a.head_dim, kvd = a.kv_heads * a.head_dim, width = hd + 2 * kvd;
  require(s.batch > 0 && s.seq > 0 && s.d_model > 0, "mha: batch, seq and d_model must be positive");
  require(a.heads > 0 && a.kv_heads > 0 && a.heads % a.kv_heads == 0, "mha: heads must be a multiple of kv_heads");
  check_rows("mha", rows, s.batch * s.seq);
  const Matrix wqkv = view(w_qkv, width, s.d_model, s.d_model).cast<double>();
  const Matrix wo = view(w_o, s.d_model, hd, hd).cast<double>();
  // The faithful reference (a.faithful on): both projections' products summed in fp32.
  const bool fp32 = a.faithful.on;
  const auto product_of = [fp32](const Matrix& lhs, const Matrix& rhs_t) -> Matrix {
    if (!fp32) return lhs * rhs_t.transpose();
    return (lhs.cast<float>() * rhs_t.cast<float>().transpose()).cast<double>();
  };
  const Eigen::Map<const Eigen::VectorXf> bqkv(b_qkv, width), bo(b_o, s.d_model);
  // An activation as the chain stores it (s.store's rounding), widened back.
  const auto store = [&s](double x) { return double{s.store(static_cast<float>(x))}; };

  std::map<int64_t, std::vector<size_t>> by_sequence;  // batch -> the requested rows in it
  for (size_t n = 0; n < rows.size(); ++n) by_sequence[rows[n] / s.seq].push_back(n);
  Matrix y(static_cast<int64_t>(rows.size()), s.d_model);
  if (product) product->resize(static_cast<int64_t>(rows.size()), s.d_model);
  for (const auto& [b, mine] : by_sequence) {
    // The projection of every token of the sequence (the keys and values of all of them are
    // needed), a block of tokens per task.
    Matrix qkv(s.seq, width);
    constexpr int64_t kTokens = 64;
    parallel_for((s.seq + kTokens - 1) / kTokens, 2.0 * s.seq * width * s.d_model, [&](int64_t task) {
      const int64_t t0 = task * kTokens, n = std::min(kTokens, s.seq - t0);
      const Matrix xt = view(x + (b * s.seq + t0) * s.d_model, n, s.d_model, s.d_model).cast<double>();
      qkv.middleRows(t0, n) = product_of(xt, wqkv);
    });
    // q, k, v as the split stores them: the product stored, its bias added and stored again, or
    // with fused_bias the sum stored once (without a storage type, rounded once to float: 2^-24,
    // far inside every tolerance).
    std::vector<float> q(static_cast<size_t>(s.seq * hd)), k(static_cast<size_t>(s.seq * kvd)),
        v(static_cast<size_t>(s.seq * kvd));
    for (int64_t t = 0; t < s.seq; ++t)
      for (int64_t c = 0; c < width; ++c) {
        const float value = !s.store       ? static_cast<float>(qkv(t, c) + bqkv[c])
                            : s.fused_bias ? s.store(static_cast<float>(qkv(t, c) + bqkv[c]))
                                           : s.store(s.store(static_cast<float>(qkv(t, c))) + bqkv[c]);
        if (c < hd)
          q[static_cast<size_t>(t * hd + c)] = value;
        else if (c < hd + kvd)
          k[static_cast<size_t>(t * kvd + c - hd)] = value;
        else
          v[static_cast<size_t>(t * kvd + c - hd - kvd)] = value;
      }
    AttentionShape one = a;
    one.batch = 1;
    one.seq_q = one.seq_k = s.seq;
    Rows heads_rows;  // every head of each requested token: attention's row t · heads + h
    for (size_t n : mine)
      for (int64_t h = 0; h < a.heads; ++h) heads_rows.push_back((rows[n] % s.seq) * a.heads + h);
    const Matrix o = attention(one, q.data(), k.data(), v.data(), heads_rows);  // [tokens · heads, head_dim]
    for (size_t i = 0; i < mine.size(); ++i) {
      Eigen::RowVectorXd concat(hd);  // the token's heads side by side: [heads · head_dim], as stored
      for (int64_t h = 0; h < a.heads; ++h)
        concat.segment(h * a.head_dim, a.head_dim) = o.row(static_cast<int64_t>(i) * a.heads + h);
      if (s.store) concat = concat.unaryExpr(store);
      Eigen::RowVectorXd p = product_of(concat, wo);
      // The chain stores the product before adding the bias: the faithful reference rounds it
      // there (not with fused_bias: the epilogue adds the bias to the fp32 product).
      if (fp32 && s.store && !s.fused_bias) p = p.unaryExpr(store);
      y.row(static_cast<int64_t>(mine[i])) = p + bo.cast<double>().transpose();
      if (product) product->row(static_cast<int64_t>(mine[i])) = p;
    }
  }
  return y;
}

}  // namespace attnbench::ref
