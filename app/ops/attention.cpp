// Prefill attention, O = softmax(Q·Kᵀ·scale + bias + mask)·V, per head, with GQA/MQA
// (query head h reads kv head h / (heads / kv_heads)), causal, window and ALiBi.
#include "app/ops/attention.hpp"

#include <algorithm>

#include "app/op.hpp"
#include "app/problem.hpp"
#include "kernels/attention/attention.hpp"

namespace attnbench {

int64_t AttentionMask::visible_keys(int64_t i) const {
  const int64_t pos = i + seq_k - seq_q;
  int64_t lo = 0, hi = seq_k - 1;
  if (causal) hi = std::min(hi, pos);
  if (window > 0) {
    lo = std::max(lo, pos - window + 1);
    if (!causal) hi = std::min(hi, pos + window - 1);
  }
  return std::max<int64_t>(0, hi - lo + 1);
}

int64_t AttentionMask::pairs() const {
  int64_t n = 0;
  for (int64_t i = 0; i < seq_q; ++i) n += visible_keys(i);
  return n;
}

namespace {

class AttentionProblem : public TableProblem<AttentionParams> {
 public:
  explicit AttentionProblem(const CasePoint& p) : TableProblem(p, attention_variants()) {
    const Shape& s = p.shape;
    batch_ = s.num("batch");
    heads_ = s.num("heads");
    kv_heads_ = s.num("kv_heads");
    head_dim_ = s.num("head_dim");
    mask_ = {s.num("seq_q"), s.num("seq_k"), s.flag("causal"), s.num("window")};
    alibi_ = s.flag("alibi");
    add_input("q", p.dtype, {{"batch", batch_}, {"seq_q", mask_.seq_q}, {"heads", heads_}, {"head_dim", head_dim_}},
              1.f, true);
    for (const char* name : {"k", "v"})
      add_input(name, p.dtype,
                {{"batch", batch_}, {"seq_k", mask_.seq_k}, {"kv_heads", kv_heads_}, {"head_dim", head_dim_}}, 1.f,
                true);
    add_output("o", p.dtype,
               {{"batch", batch_, 'b'}, {"seq_q", mask_.seq_q, 'i'}, {"heads", heads_, 'h'},
                {"head_dim", head_dim_, 'd'}},
               3);
  }
  Work work() const override {
    const double e = dtype_bytes(point().dtype);
    return {4.0 * batch_ * heads_ * head_dim_ * static_cast<double>(mask_.pairs()),
            e * batch_ * head_dim_ * (2.0 * mask_.seq_q * heads_ + 2.0 * mask_.seq_k * kv_heads_), Bandwidth::copy};
  }
  // Rows that see no key must come out 0, not NaN: check the first and the last
  // such query in the first and last batch, for the first and last head.
  ref::Rows must_check_rows() const override {
    ref::Rows rows;
    std::vector<int64_t> blind;
    for (int64_t i = 0; i < mask_.seq_q; ++i)
      if (mask_.visible_keys(i) == 0) blind.push_back(i);
    if (blind.empty()) return rows;
    for (int64_t b : {int64_t{0}, batch_ - 1})
      for (int64_t i : {blind.front(), blind.back()})
        for (int64_t h : {int64_t{0}, heads_ - 1}) rows.push_back((b * mask_.seq_q + i) * heads_ + h);
    return rows;
  }
  ref::Matrix reference(const ref::Rows& rows) const override {
    ref::AttentionShape a;
    a.batch = batch_;
    a.heads = heads_;
    a.kv_heads = kv_heads_;
    a.seq_q = mask_.seq_q;
    a.seq_k = mask_.seq_k;
    a.head_dim = head_dim_;
    a.causal = mask_.causal;
    a.window = mask_.window;
    a.alibi = alibi_;
    return ref::attention(a, input(0).host.data(), input(1).host.data(), input(2).host.data(), rows);
  }

 private:
  AttentionParams params() const override {
    AttentionParams p;
    p.q = input(0).device.get();
    p.k = input(1).device.get();
    p.v = input(2).device.get();
    p.o = output().device.get();
    p.batch = batch_;
    p.heads = heads_;
    p.kv_heads = kv_heads_;
    p.seq_q = mask_.seq_q;
    p.seq_k = mask_.seq_k;
    p.head_dim = head_dim_;
    p.causal = mask_.causal;
    p.window = mask_.window;
    p.alibi = alibi_;
    p.dtype = point().dtype;
    finish_attention_params(p);
    return p;
  }
  int64_t batch_, heads_, kv_heads_, head_dim_;
  AttentionMask mask_;
  bool alibi_;
};

}  // namespace

// A batch's per-sequence lists and grids are sized by it: gridDim.y/z stop at 65535.
KeySpec batch_key() { return int_key("batch", "sequences", std::nullopt, 1, kMaxGridYZ); }
KeySpec heads_key() { return int_key("heads", "query heads"); }
KeySpec kv_heads_key() {
  return derived_int_key("kv_heads", "key/value heads (GQA/MQA); heads must be a multiple", "heads");
}
KeySpec head_dim_key(std::string meaning) { return int_key("head_dim", std::move(meaning)); }
KeySpec alibi_key() { return bool_key("alibi", "add -slope(h)·distance to each score"); }

// Shared with the ops whose [shape] has heads over kv_heads (decode, paged, pipeline).
void finish_heads(ShapeCheck& c) {
  Shape& s = c.shape;
  if (!c.given("kv_heads")) s.set("kv_heads", s.num("heads"));
  if (s.num("heads") % s.num("kv_heads") != 0)
    c.fail("kv_heads", "heads (" + std::to_string(s.num("heads")) + ") must be a multiple of kv_heads (" +
                           std::to_string(s.num("kv_heads")) + ")");
  if (s.num("head_dim") % 8 != 0 || s.num("head_dim") > 256)
    c.fail("head_dim", "shape.head_dim must be a multiple of 8 and at most 256, got " +
                           std::to_string(s.num("head_dim")));
}

OpSpec attention_op() {
  OpSpec op;
  op.name = "attention";
  op.summary = "prefill attention O = softmax(Q·Kᵀ/√d + mask)·V over seq_q queries and seq_k keys";
  op.keys = {
      batch_key(),
      heads_key(),
      kv_heads_key(),
      int_key("seq_q", "queries per sequence"),
      derived_int_key("seq_k", "keys per sequence", "seq_q"),
      head_dim_key(),
      bool_key("causal", "query i sees keys j <= i + seq_k - seq_q (bottom-right)"),
      int_key("window", "each query sees the `window` keys ending at its position; 0 = no window", 0, 0),
      alibi_key(),
  };
  op.finish = [](ShapeCheck& c) {
    finish_heads(c);
    if (!c.given("seq_k")) c.shape.set("seq_k", c.shape.num("seq_q"));
  };
  op.variants = [] { return variant_infos(attention_variants()); };
  op.make = [](const CasePoint& p) -> std::unique_ptr<Problem> { return std::make_unique<AttentionProblem>(p); };
  return op;
}

}  // namespace attnbench
