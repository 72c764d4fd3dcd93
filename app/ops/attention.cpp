// Prefill attention, O = softmax(Q·Kᵀ·scale + bias + mask)·V, per head, with GQA/MQA
// (query head h reads kv head h / (heads / kv_heads)), causal, window and ALiBi.
#include "app/ops/attention.hpp"

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

std::pair<int64_t, int64_t> AttentionMask::key_range(int64_t i) const {
  const int64_t pos = position(i);
  int64_t lo = 0, hi = seq_k - 1;
  if (causal) hi = std::min(hi, pos);
  if (window > 0) {
    lo = std::max(lo, pos - window + 1);
    if (!causal) hi = std::min(hi, pos + window - 1);
  }
  return {lo, hi};
}

int64_t AttentionMask::visible_keys(int64_t i) const {
  const auto [lo, hi] = key_range(i);
  return std::max<int64_t>(0, hi - lo + 1);
}

int64_t SparseLayout::live_blocks() const {
  int64_t n = 0;
  for (int32_t c : num) n += c;
  return n;
}

SparseLayout block_sparse(const Shape& s, int64_t heads, int64_t seq_q, int64_t seq_k, int64_t offset, uint64_t seed) {
  SparseLayout l;
  l.block = s.num("sparse_block");
  if (l.block == 0) return l;
  const int64_t B = l.block, local = s.num("sparse_local"), global = s.num("sparse_global");
  const int64_t random = s.num("sparse_random");
  l.q_blocks = ceil_div(seq_q, B);
  l.k_blocks = ceil_div(seq_k, B);
  const int64_t Q = l.q_blocks, K = l.k_blocks;
  l.live.assign(static_cast<size_t>(heads * Q * K), 0);
  l.num.assign(static_cast<size_t>(heads * Q), 0);
  l.idx.assign(static_cast<size_t>(heads * Q * K), -1);
  std::vector<int64_t> order(static_cast<size_t>(K));
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t b = 0; b < Q; ++b) {
      uint8_t* live = &l.live[static_cast<size_t>((h * Q + b) * K)];
      // The diagonal: the key block of the block's first query's position (floor division).
      const int64_t pos = b * B + offset, diag = pos >= 0 ? pos / B : -((-pos + B - 1) / B);
      for (int64_t c = 0; c < K; ++c) live[c] = std::abs(c - diag) <= local || c < global || b < global ? 1 : 0;
      // sparse_random distinct blocks: the first draws of a Fisher-Yates shuffle.
      for (int64_t c = 0; c < K; ++c) order[static_cast<size_t>(c)] = c;
      for (int64_t n = 0; n < std::min(random, K); ++n) {
        const uint64_t r =
            random_bits(seed, 0x5ba75e00000000ull + static_cast<uint64_t>(h * Q + b), static_cast<uint64_t>(n));
        const int64_t pick = n + static_cast<int64_t>(r % static_cast<uint64_t>(K - n));
        std::swap(order[static_cast<size_t>(n)], order[static_cast<size_t>(pick)]);
        live[order[static_cast<size_t>(n)]] = 1;
      }
      int32_t* idx = &l.idx[static_cast<size_t>((h * Q + b) * K)];
      int32_t& count = l.num[static_cast<size_t>(h * Q + b)];
      for (int64_t c = 0; c < K; ++c)
        if (live[c]) idx[count++] = static_cast<int32_t>(c);
    }
    l.heads.push_back({B, K, std::vector<uint8_t>(l.live.begin() + h * Q * K, l.live.begin() + (h + 1) * Q * K)});
  }
  return l;
}

int64_t AttentionMask::pairs() const {
  int64_t n = 0;
  for (int64_t i = 0; i < seq_q; ++i) n += visible_keys(i);
  return n;
}

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
    if (scores_.alibi()) slopes_ = &add_constant(scores_.slopes());
    // RoPE positions: queries at i + offset (negative before the first key, bottom-right with
    // seq_q > seq_k), keys at j.
    const int64_t offset = mask_.position(0), first = std::min<int64_t>(0, offset);
    rope_ = RopeOptions(s, first, std::max(mask_.seq_k, mask_.seq_q + offset) - first);
    if (rope_.on()) rope_table_ = &add_constant(rope_.table_bytes(), [rope = rope_] { return rope.table(); });
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
    if (a.scale == 0) a.scale = 1.0 / std::sqrt(static_cast<double>(head_dim_));
    a.scale *= static_cast<double>(descale_[0]) * descale_[1];
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
    scores_.set_params(p, slopes_ ? slopes_->get() : nullptr);
    p.rope = rope_.device(rope_table_ ? rope_table_->get() : nullptr);
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
  DeviceBuffer* slopes_ = nullptr;      // the ALiBi slopes on the device
  RopeOptions rope_;                    // positions [min(0, offset), the last query's or key's]
  DeviceBuffer* rope_table_ = nullptr;  // the RoPE table on the device
  SparseLayout sparse_;
  DeviceBuffer *sparse_live_ = nullptr, *sparse_num_ = nullptr, *sparse_idx_ = nullptr;  // its masks on the device
};

}  // namespace

// A batch's per-sequence lists and grids are sized by it: gridDim.y/z stop at 65535.
KeySpec batch_key() { return int_key("batch", "sequences", std::nullopt, 1, kMaxGridYZ); }
// Beyond any model by far, and gridDim.y of the prefill kernels; per-head host tables (ALiBi
// slopes, block-sparse masks) stay small.
KeySpec heads_key() { return int_key("heads", "query heads", std::nullopt, 1, kMaxGridYZ); }
KeySpec kv_heads_key() {
  return derived_int_key("kv_heads", "key/value heads (GQA/MQA); heads must be a multiple", "heads");
}
KeySpec head_dim_key(std::string meaning) { return int_key("head_dim", std::move(meaning)); }
KeySpec alibi_key() {
  return bool_key("alibi", "ALiBi: add -slope(h)·|query position - key position| to each score, standard slopes");
}
KeySpec alibi_slopes_key() {
  return numbers_key("alibi_slopes", "ALiBi with these slopes, one per query head (turns alibi on)", 0, 1e4);
}
KeySpec scale_key() {
  return number_key("scale", "the softmax scale: scores are scale·q·k", std::nullopt, 1e-30, 1e30, "1/sqrt(head_dim)");
}
KeySpec softcap_key() {
  return number_key("softcap", "soft-capping: scores s become softcap·tanh(s/softcap) before masks; 0 = off", 0.0, 0,
                    1e30);
}

KeySpec descale_key(const char* name, const char* tensor) {
  return number_key(name, std::string("fp8_e4m3 inputs: the values of ") + tensor + " are its codes times this", 1.0,
                    1e-30, 1e30);
}

KeySpec causal_key() {
  KeySpec k = choice_key("causal",
                         "query at position p sees keys j <= p; p = i + seq_k - seq_q (bottom_right, true) or i "
                         "(top_left)",
                         {"none", "bottom_right", "top_left"}, "none");
  k.bool_words = {"none", "bottom_right"};
  return k;
}
KeySpec decode_window_key() {
  return int_key("window", "the query sees its last `window` keys (itself included); 0 = every key", 0, 0);
}

KeySpec rope_key() {
  return choice_key("rope", "rotary position embedding of q and k: neox rotates halves, gptj interleaved pairs",
                    {"none", "neox", "gptj"}, "none");
}
KeySpec rope_theta_key() {
  return number_key("rope_theta", "RoPE base: pair i turns by position·rope_theta^(-2i/rotary_dim)", 10000.0, 1.0,
                    1e30);
}
KeySpec rotary_dim_key() {
  return derived_int_key("rotary_dim", "the leading elements of a head that RoPE turns (partial rotary below head_dim)",
                         "head_dim", 2, 256);
}

std::vector<KeySpec> score_keys() { return {alibi_key(), alibi_slopes_key(), scale_key(), softcap_key()}; }

std::vector<KeySpec> rope_keys() { return {rope_key(), rope_theta_key(), rotary_dim_key()}; }

std::vector<KeySpec> joined_keys(std::initializer_list<std::vector<KeySpec>> groups) {
  std::vector<KeySpec> keys;
  for (const auto& g : groups) keys.insert(keys.end(), g.begin(), g.end());
  return keys;
}

void finish_rope(ShapeCheck& c) {
  Shape& s = c.shape;
  if (!c.given("rotary_dim")) s.set("rotary_dim", s.num("head_dim"));
  const int64_t r = s.num("rotary_dim");
  if (r % 2 != 0 || r > s.num("head_dim"))
    c.fail("rotary_dim", "shape.rotary_dim must be even and at most head_dim (" + std::to_string(s.num("head_dim")) +
                             "), got " + std::to_string(r));
  if (s.word("rope") == "none" && (c.given("rotary_dim") || c.given("rope_theta")))
    c.fail(c.given("rotary_dim") ? "rotary_dim" : "rope_theta",
           "shape.rotary_dim and shape.rope_theta need shape.rope = \"neox\" or \"gptj\"");
}

RopeOptions::RopeOptions(const Shape& s, int64_t first, int64_t rows) : first_(first), rows_(rows) {
  const std::string& style = s.word("rope");
  rope_.style = style == "neox"   ? ref::Rope::Style::neox
                : style == "gptj" ? ref::Rope::Style::gptj
                                  : ref::Rope::Style::none;
  rope_.theta = s.real("rope_theta");
  rope_.rotary_dim = s.num("rotary_dim");
}

// The same angles as the reference (ref::detail::apply_rope), rounded once to fp32.
std::vector<float> RopeOptions::table() const {
  const int64_t half = rope_.rotary_dim / 2;
  std::vector<float> t(static_cast<size_t>(2 * rows_ * half));
  for (int64_t i = 0; i < half; ++i) {
    const double freq = std::pow(rope_.theta, -2.0 * static_cast<double>(i) / static_cast<double>(rope_.rotary_dim));
    for (int64_t r = 0; r < rows_; ++r) {
      const double angle = static_cast<double>(first_ + r) * freq;
      t[static_cast<size_t>(2 * (r * half + i))] = static_cast<float>(std::cos(angle));
      t[static_cast<size_t>(2 * (r * half + i) + 1)] = static_cast<float>(std::sin(angle));
    }
  }
  return t;
}

RopeTable RopeOptions::device(const void* table) const {
  RopeTable t;
  if (!on()) return t;
  t.style = rope_.style == ref::Rope::Style::neox ? RopeTable::neox : RopeTable::gptj;
  t.rotary_dim = static_cast<int>(rope_.rotary_dim);
  t.first = static_cast<int>(first_);
  t.rows = static_cast<int>(rows_);
  t.cos_sin = static_cast<const float2*>(table);
  return t;
}

KeySpec sparse_block_key() {
  return int_key("sparse_block",
                 "block-sparse attention in blocks of this many queries and keys (64 or 128); 0 = dense (the other "
                 "sparse keys then have no effect)",
                 0, 0, 128);
}
KeySpec sparse_local_key() {
  return int_key("sparse_local", "block-sparse: key blocks live on each side of a query block's diagonal block", 0, 0);
}
KeySpec sparse_global_key() {
  return int_key("sparse_global",
                 "block-sparse: the first key blocks, seen by every query block, and the first query "
                 "blocks, which see every key block",
                 0, 0);
}
KeySpec sparse_random_key() {
  return int_key("sparse_random", "block-sparse: random key blocks per query block and head, drawn from verify.seed", 0,
                 0);
}

void finish_sparse(ShapeCheck& c) {
  const int64_t block = c.shape.num("sparse_block");
  if (block != 0 && block != 64 && block != 128)
    c.fail("sparse_block", "shape.sparse_block must be 0 (dense), 64 or 128, got " + std::to_string(block));
  // With sparse_block = 0 the other sparse keys have no effect, so that one case can sweep
  // sparse_block over [0, 128] and time the dense kernel beside the sparse one.
  if (block == 0) return;
  const int64_t entries =
      c.shape.num("heads") * ceil_div(c.shape.num("seq_q"), block) * ceil_div(c.shape.num("seq_k"), block);
  if (entries > (int64_t{1} << 26))
    c.fail("sparse_block", "the block masks would have " + std::to_string(entries) +
                               " (head, query block, key block) entries, more than 2^26: use larger blocks or "
                               "shorter sequences");
}

bool causal_of(const Shape& s) { return s.word("causal") != "none"; }
bool top_left_of(const Shape& s) { return s.word("causal") == "top_left"; }

void finish_scores(ShapeCheck& c) {
  const auto& slopes = c.shape.reals("alibi_slopes");
  if (slopes.empty()) return;
  const int64_t heads = c.shape.num("heads");
  if (static_cast<int64_t>(slopes.size()) != heads)
    c.fail("alibi_slopes", "shape.alibi_slopes has " + std::to_string(slopes.size()) + " slopes for " +
                               std::to_string(heads) + " query heads (one per query head)");
  if (c.given("alibi") && !c.shape.flag("alibi"))
    c.fail("alibi", "shape.alibi = false contradicts shape.alibi_slopes (slopes turn ALiBi on)");
  c.shape.set("alibi", true);
}

ScoreOptions::ScoreOptions(const Shape& s, int64_t heads) {
  const auto& given = s.reals("alibi_slopes");
  if (!given.empty()) {
    slopes_.assign(given.begin(), given.end());
  } else if (s.flag("alibi")) {
    for (double x : ref::alibi_slopes(heads)) slopes_.push_back(static_cast<float>(x));
  }
  if (s.has("scale")) scale_ = static_cast<float>(s.real("scale"));
  softcap_ = static_cast<float>(s.real("softcap"));
}

// Shared with the ops whose [shape] has heads over kv_heads (decode, paged, pipeline).
void finish_heads(ShapeCheck& c) {
  Shape& s = c.shape;
  if (!c.given("kv_heads")) s.set("kv_heads", s.num("heads"));
  if (s.num("heads") % s.num("kv_heads") != 0)
    c.fail("kv_heads", "heads (" + std::to_string(s.num("heads")) + ") must be a multiple of kv_heads (" +
                           std::to_string(s.num("kv_heads")) + ")");
  if (s.num("head_dim") % 8 != 0 || s.num("head_dim") > 256)
    c.fail("head_dim",
           "shape.head_dim must be a multiple of 8 and at most 256, got " + std::to_string(s.num("head_dim")));
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
  op.keys = joined_keys({{
      batch_key(),
      heads_key(),
      kv_heads_key(),
      int_key("seq_q", "queries per sequence"),
      derived_int_key("seq_k", "keys per sequence", "seq_q"),
      head_dim_key(),
      causal_key(),
      int_key("window", "each query sees the `window` keys ending at its position; 0 = no window", 0, 0),
  }, score_keys(), rope_keys(), {
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
    finish_heads(c);
    finish_scores(c);
    finish_rope(c);
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
