// The key library of the ops with query heads over kv heads (attention, decode, paged, mha,
// pipeline, model): their shared keys, the checks that finish a [shape], and the options read
// from it once (RoPE, the score options, block sparsity, the mask).
#include "app/ops/heads.hpp"

#include <algorithm>
#include <array>
#include <cmath>

#include "app/op.hpp"
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

KeySpec causal_key() {
  KeySpec k = choice_key("causal",
                         "query at position p sees keys j <= p; p = i + seq_k - seq_q (bottom_right, true) or i "
                         "(top_left)",
                         {"none", "bottom_right", "top_left"}, "none");
  k.bool_words = {"none", "bottom_right"};
  return k;
}
std::vector<KeySpec> prefill_shape_keys() {
  return {
      batch_key(),
      heads_key(),
      kv_heads_key(),
      int_key("seq_q", "queries per sequence"),
      derived_int_key("seq_k", "keys per sequence", "seq_q"),
      head_dim_key(),
      causal_key(),
      int_key("window", "each query sees the `window` keys ending at its position; 0 = no window", 0, 0),
  };
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

KeySpec sinks_key() {
  return bool_key("sinks",
                  "attention sinks (gpt-oss): one logit per query head, drawn from U[-3, 3), joins every softmax's "
                  "denominator without a value");
}

std::vector<KeySpec> score_keys() {
  return {alibi_key(), alibi_slopes_key(), scale_key(), softcap_key(), sinks_key()};
}

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

// The sinks' draw: a seed of their own, not the point's.
constexpr uint64_t kSinkSeed = 0x51'4e4b'0001ull;

ScoreOptions::ScoreOptions(const Shape& s, int64_t heads) {
  const auto& given = s.reals("alibi_slopes");
  if (!given.empty()) {
    slopes_.assign(given.begin(), given.end());
  } else if (s.flag("alibi")) {
    for (double x : ref::alibi_slopes(heads)) slopes_.push_back(static_cast<float>(x));
  }
  if (s.has("scale")) scale_ = static_cast<float>(s.real("scale"));
  softcap_ = static_cast<float>(s.real("softcap"));
  // The sinks of a point: the same for every seed (a model's learned logits do not change
  // between batches), varied across heads, their range that of typical scores.
  if (s.flag("sinks"))
    for (int64_t h = 0; h < heads; ++h)
      sinks_.push_back(3.f * random_uniform(kSinkSeed, 0, static_cast<uint64_t>(h)));  // U[-3, 3)
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

DecodeHeads::DecodeHeads(const Shape& s, int64_t rope_rows)
    : batch(s.num("batch")),
      heads(s.num("heads")),
      kv_heads(s.num("kv_heads")),
      head_dim(s.num("head_dim")),
      window(s.num("window")),
      context(s.lengths("context")),
      longest(*std::max_element(context.begin(), context.end())),
      scores(s, heads),
      rope(s, 0, rope_rows) {}

ref::DecodeShape DecodeHeads::reference(const ref::Faithful& faithful) const {
  ref::DecodeShape d;
  set_sizes(d);
  d.faithful = faithful;
  d.context = context;
  scores.set_reference(d);
  d.rope = rope.reference();
  return d;
}

void finish_head_keys(ShapeCheck& c) {
  finish_heads(c);
  finish_scores(c);
  finish_rope(c);
}

}  // namespace attnbench
