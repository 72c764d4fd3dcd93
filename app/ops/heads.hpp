// The key library of the ops with query heads over kv heads (attention, decode, paged, mha,
// pipeline, model, cache_append, reshape_and_cache): the keys they share, defined once; the
// checks that finish their [shape]; and the options read from it once for the kernels and the
// reference alike (RoPE, the score options, block sparsity, which keys a query sees).
#pragma once
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "app/device.hpp"
#include "app/op.hpp"
#include "kernels/common/rope.hpp"
#include "kernels/common/score.hpp"
#include "reference/decode.hpp"

namespace attnbench {

// The keys every op with query heads over kv heads shares, defined once: the op's
// table lists them in its own order.
KeySpec batch_key();
KeySpec heads_key();
KeySpec kv_heads_key();  // defaults to heads (finish_heads)
KeySpec head_dim_key(std::string meaning = "elements per head: a multiple of 8, at most 256");
KeySpec alibi_key();
KeySpec alibi_slopes_key();
KeySpec scale_key();
KeySpec softcap_key();
KeySpec sinks_key();
// causal = false | true | "bottom_right" | "top_left"; true means bottom_right. Read it with
// causal_of / top_left_of.
KeySpec causal_key();
// decode, paged, pipeline: the query sees its last `window` keys, itself included; 0 = all.
KeySpec decode_window_key();
// Keys a query at the end of `context` tokens sees with `window` (0 = all of them).
inline int64_t seen_keys(int64_t context, int64_t window) { return window > 0 && window < context ? window : context; }
// RoPE: rope = "none" | "neox" | "gptj", rope_theta, rotary_dim (defaults to head_dim).
KeySpec rope_key();
KeySpec rope_theta_key();
KeySpec rotary_dim_key();
// The score keys (alibi, alibi_slopes, scale, softcap, sinks) and the RoPE keys (rope,
// rope_theta, rotary_dim), in that order, as every op with them lists them; and an op's key groups as
// one list.
std::vector<KeySpec> score_keys();
std::vector<KeySpec> rope_keys();
// A prefill's shape, as attention and attention_backward list it: batch, heads, kv_heads, seq_q,
// seq_k (defaults to seq_q), head_dim, causal, window.
std::vector<KeySpec> prefill_shape_keys();
std::vector<KeySpec> joined_keys(std::initializer_list<std::vector<KeySpec>> groups);
bool causal_of(const Shape& s);
bool top_left_of(const Shape& s);

// kv_heads defaults to heads and must divide it; head_dim is a multiple of 8, at most
// 256. Every op with heads over kv heads finishes its [shape] with this.
void finish_heads(ShapeCheck& check);
// alibi_slopes: one per query head, and it turns ALiBi on (alibi = false beside it is a
// contradiction). For the ops with the score keys, after finish_heads.
void finish_scores(ShapeCheck& check);
// rotary_dim defaults to head_dim; it must be even and at most head_dim. After finish_heads.
void finish_rope(ShapeCheck& check);
// The three above in order: the [shape] of an op with the heads, score and RoPE keys.
void finish_head_keys(ShapeCheck& check);

// What the RoPE keys ask of one point: the reference's Rope, and the (cos, sin) table the
// kernels read (fp64 angles, stored in fp32) for the positions [first, first + rows) the
// op's kernels look up.
class RopeOptions {
 public:
  RopeOptions() = default;  // off
  RopeOptions(const Shape& s, int64_t first, int64_t rows);
  bool on() const { return rope_.on(); }
  const ref::Rope& reference() const { return rope_; }
  std::vector<float> table() const;  // [rows][rotary_dim / 2][cos, sin]
  std::size_t table_bytes() const { return sizeof(float) * static_cast<std::size_t>(rows_ * (rope_.rotary_dim / 2) * 2); }
  // Adds the table to the problem's constants when on: `add` is Problem::constant_adder().
  template <class Add>
  void upload(Add add) {
    if (on()) table_ = &add(table_bytes(), [rope = *this] { return rope.table(); });
  }
  // The kernels' view of the uploaded table (or of `table`); none when off.
  RopeTable device() const { return device(table_ ? table_->get() : nullptr); }
  RopeTable device(const void* table) const;

 private:
  ref::Rope rope_;
  int64_t first_ = 0, rows_ = 0;
  DeviceBuffer* table_ = nullptr;  // upload()'s copy on the device
};

// What the score keys (alibi, alibi_slopes, scale, softcap, sinks) ask of one point, read once and
// given to the kernels' params (ScoreParams, kernels/common/score.hpp, which the plugin ABI
// copies as attnbench_score) and the fp64 reference (ref::Score) alike: the reference sees
// the slopes and the scale as the device holds them (fp32). A new score option is a key in
// score_keys(), a field here read in the constructor, and one line in each of params() and
// reference().
class ScoreOptions {
 public:
  ScoreOptions(const Shape& s, int64_t heads);
  // Adds the ALiBi slopes to the problem's constants: `add` is Problem::constant_adder().
  template <class Add>
  void upload(Add add) {
    if (alibi()) device_slopes_ = &add(sizeof(float) * slopes_.size(), [s = slopes_] { return s; });
    if (!sinks_.empty()) device_sinks_ = &add(sizeof(float) * sinks_.size(), [s = sinks_] { return s; });
  }
  bool alibi() const { return !slopes_.empty(); }
  // The kernels' (finish_*_params fills the scale when 0), with upload()'s device copies (null
  // before allocation: the flags say what is on).
  ScoreParams params() const {
    ScoreParams p;
    p.alibi = alibi();
    p.alibi_slopes = device_slopes_ ? static_cast<const float*>(device_slopes_->get()) : nullptr;
    p.scale = scale_;
    p.softcap = softcap_;
    p.sinks = !sinks_.empty();
    p.sink_logits = device_sinks_ ? static_cast<const float*>(device_sinks_->get()) : nullptr;
    return p;
  }
  ref::Score reference() const {
    return {{slopes_.begin(), slopes_.end()}, scale_, softcap_, {sinks_.begin(), sinks_.end()}};
  }
  // The score of AttentionParams, DecodeParams or PagedParams, and of ref::AttentionShape or
  // ref::DecodeShape.
  template <class Params>
  void set_params(Params& p) const {
    p.score = params();
  }
  template <class RefShape>
  void set_reference(RefShape& s) const {
    s.score = reference();
  }

 private:
  std::vector<float> slopes_;
  float scale_ = 0, softcap_ = 0;
  std::vector<float> sinks_;
  DeviceBuffer *device_slopes_ = nullptr, *device_sinks_ = nullptr;  // upload()'s copies
};

// What the one-query-per-sequence ops (decode, paged) read of a point alike: the heads, each
// sequence's context and the window, and the score and RoPE options (RoPE positions
// [0, rope_rows)), given to their kernels' params and their reference in one place each.
struct DecodeHeads {
  DecodeHeads(const Shape& s, int64_t rope_rows);
  int64_t batch, heads, kv_heads, head_dim, window;
  std::vector<int64_t> context;  // per sequence
  int64_t longest;               // the longest context
  ScoreOptions scores;
  RopeOptions rope;
  template <class Add>
  void upload(Add add) {
    scores.upload(add);
    rope.upload(add);
  }
  // The reference's shape, but for where the cache keeps each sequence (max_context, first).
  ref::DecodeShape reference(const ref::Faithful& faithful) const;
  // The fields of DecodeParams or PagedParams these give (batch .. window, score, rope).
  template <class Params>
  void set_params(Params& p) const {
    set_sizes(p);
    p.longest_context = longest;
    scores.set_params(p);
    p.rope = rope.device();
  }

 private:
  // The fields the kernels' params and the reference's shape name alike.
  template <class T>
  void set_sizes(T& t) const {
    t.batch = batch;
    t.heads = heads;
    t.kv_heads = kv_heads;
    t.head_dim = head_dim;
    t.window = window;
  }
};

// Block-sparse: sparse_block (0 = dense, 64 or 128), sparse_local, sparse_global, sparse_random.
KeySpec sparse_block_key();
KeySpec sparse_local_key();
KeySpec sparse_global_key();
KeySpec sparse_random_key();
void finish_sparse(ShapeCheck& check);

// The block masks the sparse keys make, built once for the reference and the kernels alike.
// Query block b (queries b·block ..) sees key block c when c is within sparse_local blocks of
// b's diagonal block (the key block of the position of b's first query), when c or b is
// among the first sparse_global blocks, or when c is one of b's sparse_random blocks (drawn
// per head and query block from `seed`, without repeats).
struct SparseLayout {
  int64_t block = 0, q_blocks = 0, k_blocks = 0;
  std::vector<ref::BlockMask> heads;  // per query head
  std::vector<int32_t> num, idx;      // [heads][q_blocks], [heads][q_blocks][k_blocks] (live blocks first, ascending)
  std::vector<uint8_t> live;          // [heads][q_blocks][k_blocks]
  int64_t live_blocks() const;
};
SparseLayout block_sparse(const Shape& s, int64_t heads, int64_t seq_q, int64_t seq_k, int64_t offset, uint64_t seed);

// Query i sits at position i + seq_k - seq_q (bottom-right alignment: the last query
// sees the last key), or at i (top_left). Causal: it sees keys up to its position; a
// window of w keeps the w keys ending at its position (and, without causal, the w - 1
// after it too).
struct AttentionMask {
  int64_t seq_q = 1, seq_k = 1;
  bool causal = false;
  int64_t window = 0;  // 0 = none
  bool top_left = false;

  int64_t position(int64_t i) const { return top_left ? i : i + seq_k - seq_q; }
  // The keys [first, last] query i sees (none when first > last).
  std::pair<int64_t, int64_t> key_range(int64_t i) const;
  int64_t visible_keys(int64_t i) const;
  int64_t pairs() const;  // the (query, key) pairs of one head that are not masked
  // The mask's fields of AttentionParams or ref::AttentionShape.
  template <class T>
  void set(T& s) const {
    s.causal = causal;
    s.top_left = top_left;
    s.window = window;
  }
};

}  // namespace attnbench
