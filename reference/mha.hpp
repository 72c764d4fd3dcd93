// fp64 reference of multi-head attention with its projections (mha).
#pragma once
#include <functional>

#include "reference/attention.hpp"

namespace attnbench::ref {

// attention holds heads, kv_heads, head_dim and the score options; its batch, seq_q and
// seq_k are set per sequence here.
struct MhaShape {
  int64_t batch = 1, seq = 1, d_model = 8;
  AttentionShape attention;
  // The storage type the layer keeps its activations in, as a rounding: the QKV product, q,
  // k and v after their bias, and the attention's output are each rounded by it where the
  // chain stores them, so that the check measures the kernels' own error and not the
  // roundings the layer is defined with. Null: float.
  std::function<float(float)> store;
  // Where the biases join (the variant's rounding path): false, after the product was stored
  // (mha's launches: QKV stored, then q, k, v = store(QKV + b); y = store(p) + bo); true, in the
  // projections' epilogues before their one rounding (q, k, v = store(product + b); y = p + bo).
  bool fused_bias = false;
};

// For every token: [q | k | v] = x Wqkvᵀ + bqkv, split by columns into the query heads, then
// the kv heads of K and of V; O = attention(q, k, v) over the token's sequence; y = O Woᵀ + bo;
// with s.store's roundings where the chain stores an activation.
// x [batch, seq, d_model]; w_qkv [(heads + 2 kv_heads) · head_dim, d_model], b_qkv its rows;
// w_o [d_model, heads · head_dim], b_o [d_model]. Row r is token r = b · seq + t; returns
// [rows.size(), d_model].
// `product`, when given, receives O Woᵀ of the same rows (y before its bias).
Matrix mha(const MhaShape& s, const float* x, const float* w_qkv, const float* b_qkv, const float* w_o,
           const float* b_o, const Rows& rows, Matrix* product = nullptr);

}  // namespace attnbench::ref
