// Prefill attention, O = softmax(Q·Kᵀ·scale + bias + mask)·V, per head, with GQA/MQA
// (query head h reads kv head h / (heads / kv_heads)), causal, window and ALiBi.
#include "app/ops/heads.hpp"

#include <algorithm>
#include <array>
#include <cmath>

#include "app/op.hpp"
#include "app/plugin.hpp"
#include "app/problem.hpp"
#include "kernels/attention/attention.hpp"
#include "kernels/common/random.hpp"
#include "reference/attention.hpp"

namespace attnbench {

namespace {

class AttentionProblem : public TableProblem<AttentionParams> {
 public:
  explicit AttentionProblem(const CasePoint& p)
      : TableProblem(p, attention_variants()), scores_(p.shape, p.shape.num("heads")) {
    const Shape& s = p.shape;
    batch_ = s.num("batch");
    heads_ = s.num("heads");
    kv_heads_ = s.num("kv_heads");
    head_dim_ = s.num("head_dim");
    mask_ = {s.num("seq_q"), s.num("seq_k"), causal_of(s), s.num("window"), top_left_of(s)};
    add_input("q", p.dtype, {{"batch", batch_}, {"seq_q", mask_.seq_q}, {"heads", heads_}, {"head_dim", head_dim_}},
              1.f, true);
    for (const char* name : {"k", "v"})
      add_input(name, p.dtype,
                {{"batch", batch_}, {"seq_k", mask_.seq_k}, {"kv_heads", kv_heads_}, {"head_dim", head_dim_}}, 1.f,
                true);
    descale_ = {static_cast<float>(s.real("descale_q")), static_cast<float>(s.real("descale_k")),
                static_cast<float>(s.real("descale_v"))};
    add_output(
        "o", attention_out_dtype(p.dtype),
        {{"batch", batch_, 'b'}, {"seq_q", mask_.seq_q, 'i'}, {"heads", heads_, 'h'}, {"head_dim", head_dim_, 'd'}}, 3);
    scores_.upload(constant_adder());
    // RoPE positions: queries at i + offset (negative before the first key, bottom-right with
    // seq_q > seq_k), keys at j.
    const int64_t offset = mask_.position(0), first = std::min<int64_t>(0, offset);
    rope_ = RopeOptions(s, first, std::max(mask_.seq_k, mask_.seq_q + offset) - first);
    rope_.upload(constant_adder());
    sparse_ = block_sparse(s, heads_, mask_.seq_q, mask_.seq_k, offset, p.verify.seed);
    if (sparse_.block > 0) {
      sparse_live_ = &add_constant(sparse_.live);
      sparse_num_ = &add_constant(sparse_.num);
      sparse_idx_ = &add_constant(sparse_.idx);
    }
  }
  // The (query, key) pairs the mask leaves, summed over heads: block-sparse masks differ by head.
  double pairs() const {
    if (sparse_.block == 0) return static_cast<double>(heads_) * static_cast<double>(mask_.pairs());
    const int64_t B = sparse_.block, Q = sparse_.q_blocks, K = sparse_.k_blocks;
    double n = 0;
    for (int64_t h = 0; h < heads_; ++h)
      for (int64_t i = 0; i < mask_.seq_q; ++i) {
        const auto [lo, hi] = mask_.key_range(i);
        const int32_t* idx = &sparse_.idx[static_cast<size_t>((h * Q + i / B) * K)];
        for (int32_t c = 0; c < sparse_.num[static_cast<size_t>(h * Q + i / B)]; ++c)
          n += static_cast<double>(
              std::max<int64_t>(0, std::min(hi, (idx[c] + 1) * B - 1) - std::max(lo, int64_t{idx[c]} * B) + 1));
      }
    return n;
  }
  Work work() const override {
    const double e = dtype_bytes(point().dtype), eo = dtype_bytes(attention_out_dtype(point().dtype));
    return {4.0 * batch_ * head_dim_ * pairs(),
            batch_ * head_dim_ * ((e + eo) * mask_.seq_q * heads_ + 2.0 * e * mask_.seq_k * kv_heads_), Bandwidth::copy};
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
  ref::Matrix reference(const ref::Rows& rows) const override { return attention(rows, {}); }
  bool has_faithful() const override { return true; }
  // fp8 kernels round P to e4m3 before P·V (FlashAttention-3's fp8 path): the storage dtype, as elsewhere.
  ref::Matrix faithful(const ref::Rows& rows) const override {
    return stored(attention(rows, faithful_of()));
  }

 private:
  ref::Matrix attention(const ref::Rows& rows, const ref::Faithful& faithful) const {
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
    a.rope = rope_.reference();
    a.sparse = sparse_.heads;
    // fp8: the values are the codes times the descales. q·k's two fold into the scale, v's
    // scales the output (softmax weights sum to 1).
    if (a.score.scale == 0) a.score.scale = 1.0 / std::sqrt(static_cast<double>(head_dim_));
    a.score.scale *= static_cast<double>(descale_[0]) * descale_[1];
    ref::Matrix m = ref::attention(a, input(0).host.data(), input(1).host.data(), input(2).host.data(), rows);
    if (descale_[2] != 1.f)
      m *= static_cast<double>(descale_[2]);
    return m;
  }

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
    mask_.set(p);
    scores_.set_params(p);
    p.rope = rope_.device();
    if (sparse_.block > 0) {
      p.sparse.block = static_cast<int>(sparse_.block);
      p.sparse.q_blocks = static_cast<int>(sparse_.q_blocks);
      p.sparse.k_blocks = static_cast<int>(sparse_.k_blocks);
      p.sparse.live = static_cast<const uint8_t*>(sparse_live_->get());
      p.sparse.num = static_cast<const int32_t*>(sparse_num_->get());
      p.sparse.idx = static_cast<const int32_t*>(sparse_idx_->get());
    }
    p.dtype = point().dtype;
    p.descale_q = descale_[0];
    p.descale_k = descale_[1];
    p.descale_v = descale_[2];
    finish_attention_params(p);
    return p;
  }
  int64_t batch_, heads_, kv_heads_, head_dim_;
  std::array<float, 3> descale_;  // fp8: q's, k's and v's
  AttentionMask mask_;
  ScoreOptions scores_;
  RopeOptions rope_;                    // positions [min(0, offset), the last query's or key's]
  SparseLayout sparse_;
  DeviceBuffer *sparse_live_ = nullptr, *sparse_num_ = nullptr, *sparse_idx_ = nullptr;  // its masks on the device
};

}  // namespace

KeySpec descale_key(const char* name, const char* tensor) {
  return number_key(name, std::string("fp8_e4m3 inputs: the values of ") + tensor + " are its codes times this", 1.0,
                    1e-30, 1e30);
}

namespace {

// What a plugin's variant receives (kernels/plugin/include/attnbench/plugin.h).
attnbench_attention_params attention_abi(const AttentionParams& p) {
  attnbench_attention_params a{};
  a.q = p.q;
  a.k = p.k;
  a.v = p.v;
  a.o = p.o;
  a.q_batch_stride = p.q_batch_stride;
  a.kv_batch_stride = p.kv_batch_stride;
  a.o_batch_stride = p.o_batch_stride;
  a.batch = p.batch;
  a.heads = p.heads;
  a.kv_heads = p.kv_heads;
  a.seq_q = p.seq_q;
  a.seq_k = p.seq_k;
  a.head_dim = p.head_dim;
  a.q_offset = p.q_offset;
  a.causal = p.causal;
  abi_score_options(a, p);
  a.sparse_block = p.sparse.block;
  a.sparse_q_blocks = p.sparse.q_blocks;
  a.sparse_k_blocks = p.sparse.k_blocks;
  a.sparse_live = p.sparse.live;
  a.sparse_num = p.sparse.num;
  a.sparse_idx = p.sparse.idx;
  return a;
}

}  // namespace

OpSpec attention_op() {
  OpSpec op;
  op.name = "attention";
  op.summary = "prefill attention O = softmax(Q·Kᵀ/√d + mask)·V over seq_q queries and seq_k keys";
  op.keys = joined_keys({prefill_shape_keys(), score_keys(), rope_keys(), {
      sparse_block_key(),
      sparse_local_key(),
      sparse_global_key(),
      sparse_random_key(),
      descale_key("descale_q", "q"),
      descale_key("descale_k", "k"),
      descale_key("descale_v", "v"),
  }});
  op.dtypes = {DType::fp32, DType::fp16, DType::bf16, DType::fp8_e4m3};
  op.finish = [](ShapeCheck& c) {
    finish_head_keys(c);
    if (!c.given("seq_k")) c.shape.set("seq_k", c.shape.num("seq_q"));
    finish_sparse(c);  // after seq_k
    if (c.dtype != DType::fp8_e4m3)
      for (const char* k : {"descale_q", "descale_k", "descale_v"})
        if (c.given(k)) c.fail(k, std::string("shape.") + k + " applies to fp8_e4m3 inputs only");
  };
  op.variants = [] { return variant_infos(attention_variants()); };
  op.plugin_op = ATTNBENCH_OP_ATTENTION;
  op.add_plugin = [](const attnbench_variant& v, const char* file) {
    Variant<AttentionParams> var = plugin_variant(v, file, attention_abi);
    var.supports = [inner = var.supports](const AttentionParams& p, const DeviceCaps& caps) {
      if (p.dtype == DType::fp8_e4m3) return std::string("plugins take fp32, fp16 or bf16 attention (no fp8 in the ABI)");
      return inner(p, caps);
    };
    add_variant(var);
  };
  op.make = [](const CasePoint& p) -> std::unique_ptr<Problem> { return std::make_unique<AttentionProblem>(p); };
  return op;
}

}  // namespace attnbench
