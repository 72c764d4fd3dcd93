// attention_backward (issue 50): prefill attention's backward pass as a training step runs it.
// From Q, K, V and dO (drawn from the seed, as attention draws its inputs) and the forward's O
// and LSE (computed here with the fp64 reference and stored as the forward would hand them
// over: O in the dtype, LSE in fp32), the gradients dQ, dK, dV: one output buffer holding dQ
// [batch, seq_q, heads, head_dim], then dK and dV [batch, seq_k, kv_heads, head_dim]. GQA/MQA
// (dK, dV summed over each group), causal in both alignments, window, ALiBi, soft-capping, the
// scale; no RoPE, sinks or block-sparse masks yet. Semantics: kernels/backward/backward.hpp;
// the reference: reference/attention_backward.hpp.
#include <algorithm>
#include <cmath>
#include <limits>

#include "app/numeric.hpp"
#include "app/op.hpp"
#include "app/ops/heads.hpp"
#include "app/plugin.hpp"
#include "app/problem.hpp"
#include "kernels/backward/backward.hpp"
#include "reference/attention_backward.hpp"

namespace attnbench {

namespace {

class AttentionBackwardProblem : public TableProblem<BackwardParams> {
 public:
  explicit AttentionBackwardProblem(const CasePoint& p)
      : TableProblem(p, backward_variants()), scores_(p.shape, p.shape.num("heads")) {
    const Shape& s = p.shape;
    batch_ = s.num("batch");
    heads_ = s.num("heads");
    kv_heads_ = s.num("kv_heads");
    head_dim_ = s.num("head_dim");
    mask_ = {s.num("seq_q"), s.num("seq_k"), causal_of(s), s.num("window"), top_left_of(s)};
    const std::vector<Dim> q_dims = {
        {"batch", batch_}, {"seq_q", mask_.seq_q}, {"heads", heads_}, {"head_dim", head_dim_}};
    const std::vector<Dim> kv_dims = {
        {"batch", batch_}, {"seq_k", mask_.seq_k}, {"kv_heads", kv_heads_}, {"head_dim", head_dim_}};
    add_input("q", p.dtype, q_dims, 1.f, true);
    add_input("k", p.dtype, kv_dims, 1.f, true);
    add_input("v", p.dtype, kv_dims, 1.f, true);
    add_input("o", p.dtype, q_dims, 1.f, true, "the forward's output: the fp64 reference's, stored in dtype");
    add_input("d_o", p.dtype, q_dims, 1.f, true, "dL/dO");
    add_input("lse", DType::fp32, {{"batch", batch_}, {"heads", heads_}, {"seq_q", mask_.seq_q}}, 1.f, true,
              "the forward's log-sum-exp per query (natural log), fp32; +inf for a query that sees no key");
    keep_input(3);
    keep_input(5);
    q_rows_ = batch_ * mask_.seq_q * heads_;
    k_rows_ = batch_ * mask_.seq_k * kv_heads_;
    add_output("grads", p.dtype, {{"dq|dk|dv rows", q_rows_ + 2 * k_rows_}, {"head_dim", head_dim_, 'd'}}, 1,
               "dQ's rows [batch, seq_q, heads], then dK's and dV's [batch, seq_k, kv_heads]");
    scores_.upload(constant_adder());
  }

  // The backward's five matmuls over the (query, key) pairs the mask leaves: S = Q Kᵀ
  // recomputed, dP = dO Vᵀ, dV = Pᵀ dO, dQ = dS K, dK = dSᵀ Q, 2·head_dim FLOPs a pair each:
  // 10·head_dim a pair, exactly 2.5 times the forward's 4·head_dim (Q Kᵀ and P V), as
  // FlashAttention counts it. Not counted: D = rowsum(dO ∘ O) (2·head_dim a query, under
  // 0.1% at seq_k >= 1024) and the elementwise softmax terms. Bytes: q, k, v, o, d_o and lse
  // read once, dq, dk, dv written once.
  Work work() const override {
    const double e = dtype_bytes(point().dtype), d = static_cast<double>(head_dim_);
    const double pairs = static_cast<double>(batch_) * heads_ * static_cast<double>(mask_.pairs());
    const double q = static_cast<double>(q_rows_) * d, k = static_cast<double>(k_rows_) * d;
    return {10.0 * d * pairs, e * (3 * q + 2 * k) + 4.0 * static_cast<double>(q_rows_) + e * (q + 2 * k),
            Bandwidth::copy};
  }

  // Rows that must be checked: the first and last row of dQ, dK and dV (the sample takes the
  // output's first and last only), and the rows whose gradients must come out exactly 0: the
  // first and last query that sees no key and the first and last key no query sees, in the
  // first and last batch, for the first and last (kv) head.
  ref::Rows must_check_rows() const override {
    ref::Rows rows = {q_rows_ - 1, q_rows_, q_rows_ + k_rows_ - 1, q_rows_ + k_rows_};
    std::vector<int64_t> blind, unseen;
    std::vector<bool> seen(static_cast<size_t>(mask_.seq_k), false);
    for (int64_t i = 0; i < mask_.seq_q; ++i) {
      const auto [lo, hi] = mask_.key_range(i);
      if (lo > hi) blind.push_back(i);
      for (int64_t j = std::max<int64_t>(lo, 0); j <= std::min(hi, mask_.seq_k - 1); ++j)
        seen[static_cast<size_t>(j)] = true;
    }
    for (int64_t j = 0; j < mask_.seq_k; ++j)
      if (!seen[static_cast<size_t>(j)]) unseen.push_back(j);
    for (int64_t b : {int64_t{0}, batch_ - 1}) {
      if (!blind.empty())
        for (int64_t i : {blind.front(), blind.back()})
          for (int64_t h : {int64_t{0}, heads_ - 1}) rows.push_back((b * mask_.seq_q + i) * heads_ + h);
      if (!unseen.empty())
        for (int64_t j : {unseen.front(), unseen.back()})
          for (int64_t g : {int64_t{0}, kv_heads_ - 1})
            for (int64_t part : {q_rows_, q_rows_ + k_rows_}) rows.push_back(part + (b * mask_.seq_k + j) * kv_heads_ + g);
    }
    std::sort(rows.begin(), rows.end());
    rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
    return rows;
  }

  // The fp64 gradients of the rows' (batch, kv head) groups, from the fp64 forward: computed
  // here for the groups the rows fall in (a group needs all of its queries and keys), kept for
  // the next call until prepare() draws new inputs.
  ref::Matrix reference(const ref::Rows& rows) const override {
    const std::vector<int64_t> groups = groups_of(rows);
    if (!std::includes(fp64_groups_.begin(), fp64_groups_.end(), groups.begin(), groups.end())) {
      fp64_ = backward({}, groups);
      fp64_groups_ = groups;
    }
    return pick(fp64_, rows);
  }
  // The dtype-faithful reference: the gradients from the O and LSE as stored (D from the
  // stored O, P = exp(z - stored LSE)), P and dS rounded where the tensor-core rungs round their
  // GEMM operands (the forward's convention: Faithful::p), stored in dtype. Only the (batch, kv
  // head) groups the rows fall in are computed.
  bool has_faithful() const override { return true; }
  ref::Matrix faithful(const ref::Rows& rows) const override {
    const ref::StoredForward forward{input(3).host.data(), input(5).host.data()};
    return stored(pick(backward(forward, groups_of(rows), faithful_of()), rows));
  }

 protected:
  // O and LSE from the fp64 forward of every group, stored as the forward hands them over (O
  // rounded to the dtype, LSE to fp32), on both sides. Only the forward: the gradients of the
  // groups the verdict checks come later (reference()), so that a perf shape pays 2/5 of a full
  // fp64 backward per group once and the backward only where rows are sampled.
  void prepare(uint64_t seed, const LaunchContext& ctx) override {
    (void)seed, (void)ctx;
    const ref::AttentionGrads fwd = backward({}, {}, {}, ref::Pass::forward);
    fp64_ = {};
    fp64_groups_.clear();
    Tensor& o = const_cast<Tensor&>(input(3));
    Tensor& lse = const_cast<Tensor&>(input(5));
    o.host.resize(static_cast<size_t>(o.count));
    for (int64_t n = 0; n < o.count; ++n)
      o.host[static_cast<size_t>(n)] = round_to(o.dtype, static_cast<float>(fwd.o.data()[n]));
    lse.host.resize(static_cast<size_t>(lse.count));
    for (int64_t n = 0; n < lse.count; ++n) lse.host[static_cast<size_t>(n)] = static_cast<float>(fwd.lse[static_cast<size_t>(n)]);
    for (Tensor* t : {&o, &lse}) {
      const std::vector<uint8_t> bytes = encode(t->dtype, std::vector<float>(t->host.begin(), t->host.end()));
      t->device.upload(bytes.data(), bytes.size());
    }
  }

 private:
  ref::AttentionGrads backward(const ref::StoredForward& stored, const std::vector<int64_t>& groups,
                               const ref::Faithful& faithful = {}, ref::Pass what = ref::Pass::backward) const {
    ref::AttentionShape a;
    a.faithful = faithful;
    a.batch = batch_;
    a.heads = heads_;
    a.kv_heads = kv_heads_;
    a.seq_q = mask_.seq_q;
    a.seq_k = mask_.seq_k;
    a.head_dim = head_dim_;
    mask_.set(a);
    scores_.set_reference(a);
    return ref::attention_backward(a, input(0).host.data(), input(1).host.data(), input(2).host.data(),
                                   input(4).host.data(), stored, groups, what);
  }
  // The (batch, kv head) groups the output rows fall in, ascending, each once.
  std::vector<int64_t> groups_of(const ref::Rows& rows) const {
    std::vector<int64_t> groups;
    for (int64_t r : rows) groups.push_back(group_of(r));
    std::sort(groups.begin(), groups.end());
    groups.erase(std::unique(groups.begin(), groups.end()), groups.end());
    return groups;
  }
  // The (batch, kv head) group, b·kv_heads + g, that output row r (of dQ, dK or dV) is in.
  int64_t group_of(int64_t r) const {
    if (r < q_rows_) return r / heads_ / mask_.seq_q * kv_heads_ + r % heads_ / (heads_ / kv_heads_);
    r = (r - q_rows_) % k_rows_;
    return r / kv_heads_ / mask_.seq_k * kv_heads_ + r % kv_heads_;
  }
  ref::Matrix pick(const ref::AttentionGrads& g, const ref::Rows& rows) const {
    ref::Matrix m(static_cast<int64_t>(rows.size()), head_dim_);
    for (size_t n = 0; n < rows.size(); ++n) {
      const int64_t r = rows[n];
      m.row(static_cast<int64_t>(n)) = r < q_rows_                ? g.dq.row(r)
                                       : r < q_rows_ + k_rows_    ? g.dk.row(r - q_rows_)
                                                                  : g.dv.row(r - q_rows_ - k_rows_);
    }
    return m;
  }

  BackwardParams params() const override {
    BackwardParams p;
    p.q = input(0).device.get();
    p.k = input(1).device.get();
    p.v = input(2).device.get();
    p.o = input(3).device.get();
    p.d_o = input(4).device.get();
    p.lse = static_cast<const float*>(input(5).device.get());
    char* out = static_cast<char*>(output().device.get());
    const std::size_t e = dtype_bytes(point().dtype), q_bytes = e * static_cast<std::size_t>(q_rows_ * head_dim_),
                      k_bytes = e * static_cast<std::size_t>(k_rows_ * head_dim_);
    p.dq = out;
    p.dk = out ? out + q_bytes : nullptr;
    p.dv = out ? out + q_bytes + k_bytes : nullptr;
    p.batch = batch_;
    p.heads = heads_;
    p.kv_heads = kv_heads_;
    p.seq_q = mask_.seq_q;
    p.seq_k = mask_.seq_k;
    p.head_dim = head_dim_;
    mask_.set(p);
    scores_.set_params(p);
    p.dtype = point().dtype;
    finish_backward_params(p);
    return p;
  }

  int64_t batch_, heads_, kv_heads_, head_dim_;
  int64_t q_rows_, k_rows_;  // rows of dQ; of dK (and of dV)
  AttentionMask mask_;
  ScoreOptions scores_;
  // The fp64 gradients of fp64_groups_ (ascending) for the inputs of the last prepare().
  mutable ref::AttentionGrads fp64_;
  mutable std::vector<int64_t> fp64_groups_;
};

// What a plugin's variant receives (kernels/plugin/include/attnbench/plugin.h).
attnbench_attention_backward_params attention_backward_abi(const BackwardParams& p) {
  attnbench_attention_backward_params a{};
  a.q = p.q;
  a.k = p.k;
  a.v = p.v;
  a.o = p.o;
  a.d_o = p.d_o;
  a.lse = p.lse;
  a.dq = p.dq;
  a.dk = p.dk;
  a.dv = p.dv;
  a.batch = p.batch;
  a.heads = p.heads;
  a.kv_heads = p.kv_heads;
  a.seq_q = p.seq_q;
  a.seq_k = p.seq_k;
  a.head_dim = p.head_dim;
  a.q_offset = p.q_offset;
  a.window = p.window;
  a.causal = p.causal ? 1 : 0;
  a.score = {p.score.alibi, p.score.alibi_slopes, p.score.scale, p.score.scale_log2, p.score.softcap, p.score.sinks,
             p.score.sink_logits};
  a.dtype = abi_dtype(p.dtype);
  return a;
}

}  // namespace

OpSpec attention_backward_op() {
  OpSpec op;
  op.name = "attention_backward";
  op.summary = "attention's backward pass: dQ, dK, dV from Q, K, V, dO and the forward's O and LSE";
  op.keys = joined_keys({prefill_shape_keys(), score_keys()});
  op.finish = [](ShapeCheck& c) {
    finish_heads(c);
    finish_scores(c);
    if (!c.given("seq_k")) c.shape.set("seq_k", c.shape.num("seq_q"));
    if (c.shape.flag("sinks")) c.fail("sinks", "shape.sinks: attention_backward has no attention sinks yet");
  };
  op.variants = [] { return variant_infos(backward_variants()); };
  op.plugin_op = ATTNBENCH_OP_ATTENTION_BACKWARD;
  op.add_plugin = [](const attnbench_variant& v, const char* file) {
    add_variant(plugin_variant(v, file, attention_backward_abi));
  };
  op.make = [](const CasePoint& p) -> std::unique_ptr<Problem> {
    return std::make_unique<AttentionBackwardProblem>(p);
  };
  return op;
}

}  // namespace attnbench
