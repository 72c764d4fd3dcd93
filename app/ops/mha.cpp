// mha: multi-head attention with its projections, the layer a model runs. X [batch, seq,
// d_model] goes through one fused QKV GEMM (GQA-shaped when kv_heads < heads) and its bias,
// the attention, then the output projection and its bias. Variants are pairs
// "GEMM+attention" of the gemm and attention ops' variants, verified as one chain against
// the fp64 reference of the whole layer, which stores its activations (QKV, q, k, v, the
// attention's output) in the dtype where the chain does.
//
// Variants are "GEMM+ATTENTION+STEP": the gemm op's variant for both projections, the attention
// op's for the attention, and a step of mha's fusion ladder (kernels/mha/) for what joins them:
// `launches`, the QKV bias and split and the output bias as kernels of their own, or `epilogue`,
// both in the projections' epilogues (GEMM variants that have one). Each value is checked
// against the fp64 layer, whichever step rounded it.
#include <algorithm>
#include <functional>
#include <cmath>

#include "app/numeric.hpp"
#include "app/op.hpp"
#include "app/ops/heads.hpp"
#include "app/problem.hpp"
#include "kernels/attention/attention.hpp"
#include "kernels/gemm/gemm.hpp"
#include "kernels/mha/mha.hpp"

namespace attnbench {
namespace {

class MhaProblem : public Problem {
 public:
  explicit MhaProblem(const CasePoint& p) : Problem(p), scores_(p.shape, p.shape.num("heads")) {
    const Shape& s = p.shape;
    batch_ = s.num("batch");
    seq_ = s.num("seq");
    d_model_ = s.num("d_model");
    heads_ = s.num("heads");
    kv_heads_ = s.num("kv_heads");
    head_dim_ = s.num("head_dim");
    mask_ = {seq_, seq_, causal_of(s), s.num("window"), top_left_of(s)};
    const int64_t tokens = batch_ * seq_, hd = heads_ * head_dim_, width = (heads_ + 2 * kv_heads_) * head_dim_;
    // Weights as nn.Linear keeps them, [out, in]: each projection is X·Wᵀ, the GEMMs' nt
    // layout. U(-a, a) with a = sqrt(3 / in) keeps every projected value O(1) whatever the width.
    add_input("x", p.dtype, {{"batch", batch_}, {"seq", seq_}, {"d_model", d_model_}}, 1.f, true);
    add_input("w_qkv", p.dtype, {{"qkv", width}, {"d_model", d_model_}}, static_cast<float>(std::sqrt(3.0 / d_model_)),
              false, "rows: the query heads, then K's kv heads, then V's");
    add_input("b_qkv", p.dtype, {{"qkv", width}}, 1.f, false);
    add_input("w_o", p.dtype, {{"d_model", d_model_}, {"heads_x_head_dim", hd}}, static_cast<float>(std::sqrt(3.0 / hd)),
              false);
    add_input("b_o", p.dtype, {{"d_model", d_model_}}, 1.f, false);
    add_output("y", p.dtype, {{"batch", batch_, 'b'}, {"seq", seq_, 'i'}, {"d_model", d_model_, 'd'}}, 2);
    const std::size_t e = dtype_bytes(p.dtype);
    // The chain's intermediates: QKV, then q, k, v split from it, then the attention's o.
    const std::size_t qkv = e * count_elements("qkv", {{"tokens", tokens}, {"qkv", width}}),
                      q = e * count_elements("q", {{"tokens", tokens}, {"heads_x_head_dim", hd}}),
                      kv = e * count_elements("k", {{"tokens", tokens}, {"kv_heads_x_head_dim", kv_heads_ * head_dim_}});
    qkv_ = &add_buffer(qkv);
    q_ = &add_buffer(q);
    k_ = &add_buffer(kv);
    v_ = &add_buffer(kv);
    o_ = &add_buffer(q);
    scores_.upload(constant_adder());
    rope_ = RopeOptions(s, 0, seq_);
    rope_.upload(constant_adder());
  }

  static PairedTables<GemmParams, AttentionParams> pairs() {
    return {gemm_variants(), "projections", attention_variants(), "attention"};
  }

  // Every GEMM+ATTENTION pair on each step of the fusion ladder, ladder order within a pair.
  static std::vector<VariantInfo> infos() {
    std::vector<VariantInfo> out;
    for (const VariantInfo& v : pairs().infos())
      for (const MhaStep& step : mha_steps()) out.push_back({v.name + "+" + step.name, v.note + ", " + step.name});
    return out;
  }

  std::vector<VariantChoice> variants(const DeviceCaps& caps) const override {
    std::vector<std::vector<VariantChoice>> by_step;
    for (const MhaStep& step : mha_steps()) by_step.push_back(pairs().choices(gemm_why(caps, step), attention_why(caps)));
    std::vector<VariantChoice> out;
    for (size_t i = 0; i < by_step[0].size(); ++i)
      for (size_t k = 0; k < by_step.size(); ++k) {
        VariantChoice v = by_step[k][i];
        v.name += std::string("+") + mha_steps()[k].name;
        v.note += std::string(", ") + mha_steps()[k].name;
        out.push_back(std::move(v));
      }
    return out;
  }

  // The last GEMM and the last attention variant that support the point launch by launch (with
  // the baseline row in `run`), on the highest step that GEMM takes.
  std::vector<std::string> default_variants(const DeviceCaps& caps) const override {
    const auto [g, a] = pairs().fastest(gemm_why(caps, mha_steps().front()), attention_why(caps));
    std::string best;
    for (const MhaStep& step : mha_steps()) {
      const Variant<GemmParams>* v = find_variant(gemm_variants(), g);
      if (v && gemm_why(caps, step)(*v).empty()) best = step.name;
    }
    return {g + "+" + a + "+" + best};
  }

  // Both projections' and the attention's FLOPs; every tensor read or written once.
  Work work() const override {
    const double tokens = static_cast<double>(batch_ * seq_), hd = static_cast<double>(heads_ * head_dim_),
                 width = static_cast<double>((heads_ + 2 * kv_heads_) * head_dim_), e = dtype_bytes(point().dtype);
    const double flops = 2.0 * tokens * d_model_ * width + 4.0 * batch_ * heads_ * head_dim_ * static_cast<double>(mask_.pairs()) +
                         2.0 * tokens * hd * d_model_;
    const double bytes = e * (2.0 * tokens * d_model_ + width * (d_model_ + 1) + d_model_ * (hd + 1));
    return {flops, bytes, Bandwidth::copy};
  }

  // The references store the activations where the row's step does (its rounding path): the
  // launches step rounds the QKV product and then its sum with the bias, the epilogue step the
  // sum only. At logits of hundreds (cases/mha/distributions) a softmax is nearly an argmax,
  // and one rounding more or less of q or k picks another key: each step is checked against
  // the layer rounded as it rounds.
  std::string rounding_path(const std::string& v) const override { return split_pair(split_pair(v).second).second; }
  ref::Matrix reference(const ref::Rows& rows) const override { return layer(rows, {}, false); }
  ref::Matrix reference(const ref::Rows& rows, const std::string& path) const override {
    return layer(rows, {}, fused(path));
  }
  bool has_faithful() const override { return true; }
  ref::Matrix faithful(const ref::Rows& rows) const override { return stored(layer(rows, faithful_of(), false)); }
  ref::Matrix faithful(const ref::Rows& rows, const std::string& path) const override {
    return stored(layer(rows, faithful_of(), fused(path)));
  }
  static bool fused(const std::string& path) { return path == "epilogue"; }
  // The fp64 reference of the layer (faithful off), or its dtype-faithful form, with the biases
  // joining before or after the projections' rounding; the fp64 one keeps O·Woᵀ for
  // tolerance_magnitude().
  ref::Matrix layer(const ref::Rows& rows, const ref::Faithful& faithful, bool fused_bias) const {
    ref::MhaShape m;
    m.batch = batch_;
    m.seq = seq_;
    m.d_model = d_model_;
    ref::AttentionShape& a = m.attention;
    a.heads = heads_;
    a.kv_heads = kv_heads_;
    a.head_dim = head_dim_;
    mask_.set(a);
    scores_.set_reference(a);
    a.rope = rope_.reference();
    a.faithful = faithful;
    const DType t = point().dtype;
    m.store = [t](float x) { return round_to(t, x); };
    m.fused_bias = fused_bias;
    return ref::mha(m, input(0).host.data(), input(1).host.data(), input(2).host.data(), input(3).host.data(),
                    input(4).host.data(), rows, faithful.on ? nullptr : &product_);
  }
  // y = p + bo, where the chain stores the product p in the dtype before adding the bias: a
  // y that cancels near 0 keeps p's rounding (2^-8 |p| in bf16) and the error the stored
  // activations before it carry into p. So y is held to the tolerance relative to |p| too,
  // as a GEMM's output is to its own magnitude.
  const ref::Matrix* tolerance_magnitude() const override { return &product_; }

  std::size_t workspace(const std::string& v) const override {
    const Row r = row(v);
    return std::max({variant_workspace(gemm_variants(), r.gemm, r.step->qkv_gemm(r.params)),
                     variant_workspace(gemm_variants(), r.gemm, r.step->out_gemm(r.params)),
                     variant_workspace(attention_variants(), r.attention, r.params.attn)});
  }

  void launch(const std::string& v, const LaunchContext& ctx) override {
    const Row r = row(v);
    r.step->launch(r.params, ctx);
  }

  void poison_output(cudaStream_t stream) override {
    Problem::poison_output(stream);
    // A stage that leaves its part unwritten hands NaN to the next, and fails.
    for (DeviceBuffer* b : {qkv_, q_, k_, v_, o_})
      check_cuda(cudaMemsetAsync(b->get(), 0xff, b->bytes(), stream), "poison mha intermediates");
  }

 private:
  // A row's parts: GEMM+ATTENTION+STEP, and the parameters its step launches with.
  struct Row {
    std::string gemm, attention;
    const MhaStep* step;
    MhaParams params;
  };
  Row row(const std::string& v) const {
    const auto [g, rest] = split_pair(v);
    const auto [a, s] = split_pair(rest);
    Row r{g, a, find_step(s), chain()};
    r.params.gemm = find_variant(gemm_variants(), g);
    r.params.attention = find_variant(attention_variants(), a);
    if (!r.step || !r.params.gemm || !r.params.attention) throw std::logic_error("no mha variant named '" + v + "'");
    return r;
  }
  static const MhaStep* find_step(const std::string& name) {
    for (const MhaStep& s : mha_steps())
      if (name == s.name) return &s;
    return nullptr;
  }
  // The layer's tensors (no variants yet).
  MhaParams chain() const {
    MhaParams m;
    m.x = input(0).device.get();
    m.w_qkv = input(1).device.get();
    m.b_qkv = input(2).device.get();
    m.w_o = input(3).device.get();
    m.b_o = input(4).device.get();
    m.qkv = qkv_->get();
    m.q = q_->get();
    m.k = k_->get();
    m.v = v_->get();
    m.y = output().device.get();
    m.attn = attention_params();
    m.tokens = batch_ * seq_;
    m.d_model = d_model_;
    m.dtype = point().dtype;
    return m;
  }
  // Why a GEMM variant cannot run either projection as `step` launches it, or an attention
  // variant the attention.
  std::function<std::string(const Variant<GemmParams>&)> gemm_why(const DeviceCaps& caps, const MhaStep& step) const {
    return [this, &caps, &step](const Variant<GemmParams>& g) {
      const MhaParams m = chain();
      const std::string why = g.supports(step.qkv_gemm(m), caps);
      return why.empty() ? g.supports(step.out_gemm(m), caps) : why;
    };
  }
  std::function<std::string(const Variant<AttentionParams>&)> attention_why(const DeviceCaps& caps) const {
    return [this, &caps](const Variant<AttentionParams>& a) { return a.supports(attention_params(), caps); };
  }
  AttentionParams attention_params() const {
    AttentionParams p;
    p.q = q_->get();
    p.k = k_->get();
    p.v = v_->get();
    p.o = o_->get();
    p.batch = batch_;
    p.heads = heads_;
    p.kv_heads = kv_heads_;
    p.seq_q = p.seq_k = seq_;
    p.head_dim = head_dim_;
    mask_.set(p);
    scores_.set_params(p);
    p.rope = rope_.device();
    p.dtype = point().dtype;
    finish_attention_params(p);
    return p;
  }

  int64_t batch_, seq_, d_model_, heads_, kv_heads_, head_dim_;
  AttentionMask mask_;
  ScoreOptions scores_;
  RopeOptions rope_;
  mutable ref::Matrix product_;  // the last reference()'s O·Woᵀ, for tolerance_magnitude()
  DeviceBuffer *qkv_, *q_, *k_, *v_, *o_;
};

}  // namespace

OpSpec mha_op() {
  OpSpec op;
  op.name = "mha";
  op.summary = "attention with its projections: y = attention(split(x·Wqkvᵀ + b)) · Woᵀ + b";
  op.keys = joined_keys({{
      batch_key(),
      int_key("seq", "tokens per sequence (queries and keys)"),
      int_key("d_model", "the model width: x's and y's last dim"),
      heads_key(),
      kv_heads_key(),
      derived_int_key("head_dim", "elements per head: a multiple of 8, at most 256", "d_model / heads"),
      causal_key(),
      int_key("window", "each query sees the `window` keys ending at its position; 0 = no window", 0, 0),
  }, score_keys(), rope_keys()});
  op.finish = [](ShapeCheck& c) {
    const int64_t d_model = c.shape.num("d_model"), heads = c.shape.num("heads");
    if (!c.given("head_dim")) {
      if (d_model % heads != 0)
        c.fail("heads", "shape.d_model (" + std::to_string(d_model) + ") is not a multiple of heads (" +
                            std::to_string(heads) + "): give head_dim");
      c.shape.set("head_dim", d_model / heads);
    }
    finish_head_keys(c);
  };
  op.variants = [] { return MhaProblem::infos(); };
  op.make = [](const CasePoint& p) -> std::unique_ptr<Problem> { return std::make_unique<MhaProblem>(p); };
  return op;
}

}  // namespace attnbench
