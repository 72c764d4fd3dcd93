// A generation loop: the prompt's K/V written into the cache and attended by a
// prefill variant (time to first token), then `generate` decode steps, each
// appending one token's K/V (cache_append, or the decode kernel itself where the variant
// folds it in) and decoding (time between tokens). Variants are pairs
// "prefill+decode" of the attention and decode ops' variants. The output is every
// decode step's o, [generate, batch, heads, head_dim]; the cache must end up holding
// exactly what was appended. With RoPE, keys are turned as they are stored (cache_append),
// each decode step turns its query, and the prefill attends to the prompt's own K and V
// with both turned in its load path, as serving engines run a prompt: the cache holds
// turned keys, which a prefill that turns its keys cannot read again.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>

#include "app/numeric.hpp"
#include "app/op.hpp"
#include "app/ops/heads.hpp"
#include "app/problem.hpp"
#include "kernels/attention/attention.hpp"
#include "kernels/cache_append/cache_append.hpp"
#include "kernels/decode/decode.hpp"

namespace attnbench {
namespace {

class PipelineProblem : public Problem {
 public:
  explicit PipelineProblem(const CasePoint& p)
      : Problem(p), rope_(p.shape, 0, p.shape.num("max_context")) {
    const Shape& s = p.shape;
    batch_ = s.num("batch");
    heads_ = s.num("heads");
    kv_heads_ = s.num("kv_heads");
    head_dim_ = s.num("head_dim");
    prompt_ = s.num("prompt");
    generate_ = s.num("generate");
    window_ = s.num("window");
    max_context_ = s.num("max_context");
    prefill_ = s.word("prefill");
    decode_ = s.word("decode");
    const int64_t P = prompt_, G = generate_, b = batch_, h = heads_, g = kv_heads_, d = head_dim_;
    add_input("q_prompt", p.dtype, {{"batch", b}, {"prompt", P}, {"heads", h}, {"head_dim", d}}, 1.f, true);
    add_input("k_prompt", p.dtype, {{"batch", b}, {"prompt", P}, {"kv_heads", g}, {"head_dim", d}}, 1.f, true);
    add_input("v_prompt", p.dtype, {{"batch", b}, {"prompt", P}, {"kv_heads", g}, {"head_dim", d}}, 1.f, true);
    add_input("q_new", p.dtype, {{"generate", G}, {"batch", b}, {"heads", h}, {"head_dim", d}}, 1.f, true);
    add_input("k_new", p.dtype, {{"generate", G}, {"batch", b}, {"kv_heads", g}, {"head_dim", d}}, 1.f, true);
    add_input("v_new", p.dtype, {{"generate", G}, {"batch", b}, {"kv_heads", g}, {"head_dim", d}}, 1.f, true);
    // The step shows as i, the token's position.
    add_output("o", p.dtype, {{"generate", G, 'i', P}, {"batch", b, 'b'}, {"heads", h, 'h'}, {"head_dim", d, 'd'}}, 3);
    const std::size_t e = dtype_bytes(p.dtype);
    k_cache_ = &add_buffer(e * cache_elements());
    v_cache_ = &add_buffer(e * cache_elements());
    o_prefill_ = &add_buffer(e * count_elements("o_prefill", {{"batch", b}, {"prompt", P}, {"heads", h}, {"head_dim", d}}));
    // Cache rows each step writes to and reads up to, all steps at once: [generate, batch].
    std::vector<int32_t> positions, contexts;
    for (int64_t t = 0; t < G; ++t)
      for (int64_t i = 0; i < b; ++i) {
        positions.push_back(static_cast<int32_t>(P + t));
        contexts.push_back(static_cast<int32_t>(P + t + 1));
      }
    prompt_positions_ = &add_constant(std::vector<int32_t>(static_cast<size_t>(b), 0));
    step_positions_ = &add_constant(positions);
    step_contexts_ = &add_constant(contexts);
    rope_.upload(constant_adder());
  }

  std::vector<VariantChoice> variants(const DeviceCaps& caps) const override {
    return pairs().choices(prefill_why(caps), decode_why(caps));
  }

  // The last variant of each table that supports the case, unless the case names its half
  // (plus the baseline pair in `run`).
  std::vector<std::string> default_variants(const DeviceCaps& caps) const override {
    const auto [a, d] = pairs().fastest(prefill_why(caps), decode_why(caps));
    return {(prefill_.empty() ? a : prefill_) + "+" + (decode_.empty() ? d : decode_)};
  }

  static PairedTables<AttentionParams, DecodeParams> pairs() {
    return {attention_variants(), "prefill", decode_variants(), "decode"};
  }

  // The prefill's work: the TFLOP/s and GB/s columns describe the time to first token.
  Work work() const override {
    const AttentionMask prefill{prompt_, prompt_, true, window_};
    const double e = dtype_bytes(point().dtype);
    return {4.0 * batch_ * heads_ * head_dim_ * static_cast<double>(prefill.pairs()),
            e * batch_ * prompt_ * head_dim_ * (2.0 * heads_ + 4.0 * kv_heads_), Bandwidth::copy};
  }

  void poison_output(cudaStream_t stream) override {
    Problem::poison_output(stream);
    // A step that reads a cache row nobody wrote reads NaN and fails.
    for (DeviceBuffer* b : {k_cache_, v_cache_, o_prefill_})
      check_cuda(cudaMemsetAsync(b->get(), 0xff, b->bytes(), stream), "poison cache");
  }
  std::size_t workspace(const std::string& v) const override {
    const auto [a, d] = split_pair(v);
    return std::max(variant_workspace(attention_variants(), a, prefill_params()),
                    variant_workspace(decode_variants(), d, decode_params(generate_ - 1)));
  }
  void launch(const std::string& v, const LaunchContext& ctx) override {
    const auto [a, d] = split_pair(v);
    prefill(a, ctx);
    for (int64_t t = 0; t < generate_; ++t) step(d, t, ctx);
  }
  // Steps are timed after a fresh prefill, as a server would run them.
  std::vector<Stage> stages(const std::string& v, const LaunchContext& ctx) override {
    const auto [a, d] = split_pair(v);
    Stage tbt{"TBT", folds_append(d) ? "decode, appending in its kernel" : "cache append + decode", generate_,
              [this, d = d, ctx](int64_t t) { step(d, t, ctx); }};
    // The average step's floor: its K/V rows (its context, or its window), its query, output
    // and new rows, each read or written once.
    double keys = 0;
    for (int64_t t = 0; t < generate_; ++t) keys += static_cast<double>(seen_keys(prompt_ + t + 1));
    const double e = dtype_bytes(point().dtype);
    tbt.bytes = e * batch_ * head_dim_ *
                (2.0 * kv_heads_ * keys / static_cast<double>(generate_) + 2.0 * heads_ + 2.0 * kv_heads_);
    tbt.tokens = static_cast<double>(batch_);
    return {Stage{"TTFT", "prompt's cache writes + prefill", 1, [this, a = a, ctx](int64_t) { prefill(a, ctx); }},
            std::move(tbt)};
  }

  ref::Matrix reference(const ref::Rows& rows) const override { return steps(rows, {}); }
  bool has_faithful() const override { return true; }
  ref::Matrix faithful(const ref::Rows& rows) const override {
    return stored(steps(rows, faithful_of()));
  }
  // Each generated step's decode over the cache as the steps leave it.
  ref::Matrix steps(const ref::Rows& rows, const ref::Faithful& faithful) const {
    const std::vector<float>& k = cache_after_[0];
    const std::vector<float>& v = cache_after_[1];
    const int64_t per_step = batch_ * heads_;
    return reference_by_part(rows, per_step, head_dim_, [&](int64_t t, const ref::Rows& mine) {
      ref::DecodeShape d;
      d.batch = batch_;
      d.heads = heads_;
      d.kv_heads = kv_heads_;
      d.head_dim = head_dim_;
      d.max_context = max_context_;
      d.context.assign(static_cast<size_t>(batch_), prompt_ + t + 1);
      d.window = window_;
      d.rope = rope_.reference();
      d.faithful = faithful;
      return ref::decode(d, input(3).host.data() + t * per_step * head_dim_, k.data(), v.data(), mine);
    });
  }

  Readback read_back(const ref::Rows& rows) const override {
    Readback b = Problem::read_back(rows);
    // The cache must hold exactly the appended values, bit for bit, in every row a step wrote.
    const int64_t written = batch_ * max_context_;  // rows (b, position) below
    const int64_t row = kv_heads_ * head_dim_;
    const std::size_t e = dtype_bytes(point().dtype);
    int64_t wrong = 0, total = 0;
    for (int which = 0; which < 2; ++which) {
      std::vector<uint8_t> got(e * cache_elements());
      (which ? v_cache_ : k_cache_)->download(got.data(), got.size());
      const std::vector<uint8_t> want = encode(point().dtype, cache_after_[which]);
      // A key turned by RoPE is computed (fp32 on the card, fp64 here) before it is rounded
      // to the cache's type, so it may land one unit of the type away; values are copies.
      const bool turned = which == 0 && rope_.on();
      const Tolerance tol = default_tolerance(point().dtype);
      for (int64_t r = 0; r < written; ++r) {
        if (r % max_context_ >= prompt_ + generate_) continue;
        total += row;
        for (int64_t i = 0; i < row; ++i) {
          const std::size_t at = static_cast<std::size_t>((r * row + i) * static_cast<int64_t>(e));
          if (!turned) {
            wrong += std::memcmp(&got[at], &want[at], e) != 0;
          } else {
            const double g = decode_element(point().dtype, got.data(), r * row + i);
            const double w = decode_element(point().dtype, want.data(), r * row + i);
            wrong += !(std::abs(g - w) <= tol.atol + tol.rtol * std::abs(w));
          }
        }
      }
    }
    if (wrong)
      b.also_wrong = "KV cache: " + std::to_string(wrong) + " of " + std::to_string(total) +
                     " elements differ from what was appended";
    return b;
  }

 protected:
  // What the K and V caches must hold after a variant's launch, for the reference and the
  // check of every variant: built once per trial.
  void prepare(uint64_t seed, const LaunchContext& ctx) override {
    (void)seed, (void)ctx;
    cache_after_[0] = full_cache(1, 4);
    cache_after_[1] = full_cache(2, 5);
    if (rope_.on()) turn_keys(cache_after_[0]);
  }

 private:
  // Whether decode variant d stores each step's new rows itself (the same for every step).
  bool folds_append(const std::string& d) const { return decode_folds_append(d, decode_params(0)); }

  // Keys a query at position context - 1 sees: its context, or its window.
  int64_t seen_keys(int64_t context) const { return window_ > 0 ? std::min(context, window_) : context; }

  int64_t cache_elements() const {
    return count_elements("k_cache", {{"batch", batch_}, {"max_context", max_context_}, {"kv_heads", kv_heads_},
                                      {"head_dim", head_dim_}});
  }

  // [batch, max_context, kv_heads, head_dim] as the steps leave it: the prompt's rows,
  // then one new row per step; rows past prompt + generate are 0 (never compared).
  std::vector<float> full_cache(size_t prompt_input, size_t new_input) const {
    const int64_t row = kv_heads_ * head_dim_;
    std::vector<float> c(static_cast<size_t>(cache_elements()), 0.f);
    for (int64_t b = 0; b < batch_; ++b) {
      std::copy_n(input(prompt_input).host.begin() + b * prompt_ * row, prompt_ * row,
                  c.begin() + b * max_context_ * row);
      for (int64_t t = 0; t < generate_; ++t)
        std::copy_n(input(new_input).host.begin() + (t * batch_ + b) * row, row,
                    c.begin() + (b * max_context_ + prompt_ + t) * row);
    }
    return c;
  }

  // The cache's keys as cache_append stores them with RoPE: each row turned at its position,
  // then rounded to the cache's type. Rows never written stay 0.
  void turn_keys(std::vector<float>& k) const {
    const int64_t rows = batch_ * max_context_ * kv_heads_;
    ref::Matrix x = Eigen::Map<Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(
                        k.data(), rows, head_dim_)
                        .cast<double>();
    std::vector<int64_t> pos(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) pos[static_cast<size_t>(r)] = r / kv_heads_ % max_context_;
    ref::detail::apply_rope(x, pos, rope_.reference());
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t d = 0; d < head_dim_; ++d)
        k[static_cast<size_t>(r * head_dim_ + d)] = round_to(point().dtype, static_cast<float>(x(r, d)));
  }

  std::function<std::string(const Variant<AttentionParams>&)> prefill_why(const DeviceCaps& caps) const {
    return [this, &caps](const Variant<AttentionParams>& a) { return a.supports(prefill_params(), caps); };
  }
  std::function<std::string(const Variant<DecodeParams>&)> decode_why(const DeviceCaps& caps) const {
    return [this, &caps](const Variant<DecodeParams>& d) { return d.supports(decode_params(0), caps); };
  }
  AttentionParams prefill_params() const {
    AttentionParams p;
    p.q = input(0).device.get();
    p.k = k_cache_->get();
    p.v = v_cache_->get();
    p.o = o_prefill_->get();
    p.batch = batch_;
    p.heads = heads_;
    p.kv_heads = kv_heads_;
    p.seq_q = p.seq_k = prompt_;
    p.head_dim = head_dim_;
    p.causal = true;
    p.window = window_;
    p.kv_batch_stride = max_context_ * kv_heads_ * head_dim_;  // read the cache in place
    if (rope_.on()) {
      // The prompt's own K and V, turned in the prefill's load (the cache's keys are turned already).
      p.k = input(1).device.get();
      p.v = input(2).device.get();
      p.kv_batch_stride = 0;
      p.rope = rope_.device();
    }
    p.dtype = point().dtype;
    finish_attention_params(p);
    return p;
  }
  // Step t's decode; with `append`, the step's new K/V rows ride along, for a variant that
  // stores them itself (decode_folds_append).
  DecodeParams decode_params(int64_t t, bool append = false) const {
    const std::size_t step_bytes = dtype_bytes(point().dtype) * t * batch_ * heads_ * head_dim_;
    DecodeParams p;
    p.q = static_cast<const char*>(input(3).device.get()) + step_bytes;
    p.k_cache = k_cache_->get();
    p.v_cache = v_cache_->get();
    p.o = static_cast<char*>(output().device.get()) + step_bytes;
    p.context_lens = static_cast<const int32_t*>(step_contexts_->get()) + (step_contexts_->get() ? t * batch_ : 0);
    p.batch = batch_;
    p.heads = heads_;
    p.kv_heads = kv_heads_;
    p.head_dim = head_dim_;
    p.max_context = max_context_;
    p.longest_context = prompt_ + t + 1;
    p.window = window_;
    p.rope = rope_.device();
    p.dtype = point().dtype;
    // Behind the cache append, which allows it: TBT -6% (bench notes, run 138); behind the
    // step before, when the append is folded in, it still hides the launch.
    p.launch_early = true;
    if (append) {
      const std::size_t row_bytes = dtype_bytes(point().dtype) * t * batch_ * kv_heads_ * head_dim_;
      p.k_new = static_cast<const char*>(input(4).device.get()) + row_bytes;
      p.v_new = static_cast<const char*>(input(5).device.get()) + row_bytes;
    }
    finish_decode_params(p);
    return p;
  }
  CacheAppendParams append_params(size_t k_input, size_t v_input, int64_t offset_rows, int64_t tokens,
                                  const void* positions) const {
    const std::size_t off = dtype_bytes(point().dtype) * offset_rows * kv_heads_ * head_dim_;
    CacheAppendParams p{k_cache_->get(), v_cache_->get(),
                        static_cast<const char*>(input(k_input).device.get()) + off,
                        static_cast<const char*>(input(v_input).device.get()) + off,
                        static_cast<const int32_t*>(positions)};
    p.batch = batch_;
    p.tokens = tokens;
    p.kv_heads = kv_heads_;
    p.head_dim = head_dim_;
    p.max_context = max_context_;
    p.rope = rope_.device();
    p.dtype = point().dtype;
    return p;
  }
  void prefill(const std::string& a, const LaunchContext& ctx) {
    cache_append(append_params(1, 2, 0, prompt_, prompt_positions_->get()), ctx);
    launch_variant(attention_variants(), a, prefill_params(), ctx);
  }
  // One decode step: the new K/V rows appended by the decode kernel itself where the variant
  // folds the append in (one launch fewer: TBT -9%, bench notes run 198), else by cache_append
  // first.
  void step(const std::string& d, int64_t t, const LaunchContext& ctx) {
    const bool folds = folds_append(d);
    if (!folds)
      cache_append(
          append_params(4, 5, t * batch_, 1, static_cast<const int32_t*>(step_positions_->get()) + t * batch_), ctx);
    launch_variant(decode_variants(), d, decode_params(t, folds), ctx);
  }

  int64_t batch_, heads_, kv_heads_, head_dim_, prompt_, generate_, max_context_, window_;
  std::string prefill_, decode_;
  std::vector<float> cache_after_[2];  // K, V: [batch, max_context, kv_heads, head_dim]
  RopeOptions rope_;                    // positions [0, max_context)
  DeviceBuffer *k_cache_, *v_cache_, *o_prefill_, *prompt_positions_, *step_positions_, *step_contexts_;
};

}  // namespace

OpSpec pipeline_op() {
  OpSpec op;
  op.name = "pipeline";
  op.summary = "a generation loop: prefill (TTFT), then decode steps (TBT)";
  op.keys = joined_keys({{
      batch_key(),
      heads_key(),
      kv_heads_key(),
      head_dim_key(),
      int_key("prompt", "prompt tokens per sequence, attended by the prefill"),
      int_key("generate", "decode steps, one new token each"),
      derived_int_key("max_context", "the cache's allocated rows per sequence", "prompt + generate"),
      int_key("window", "every query sees its last `window` keys (itself included), in prefill and decode; 0 = all",
              0, 0),
      variant_key("prefill", "the attention variant of the default pair; \"\" = the fastest that runs", "attention"),
      variant_key("decode", "the decode variant of the default pair; \"\" = the fastest that runs", "decode"),
  }, rope_keys()});
  op.finish = [](ShapeCheck& c) {
    finish_heads(c);
    finish_rope(c);
    Shape& s = c.shape;
    const int64_t needed = s.num("prompt") + s.num("generate");
    if (!c.given("max_context")) s.set("max_context", needed);
    if (s.num("max_context") < needed)
      c.fail("max_context", "shape.max_context (" + std::to_string(s.num("max_context")) +
                                ") must be at least prompt + generate (" + std::to_string(needed) + ")");
  };
  // A pipeline runs a pair: "prefill+decode".
  op.variants = [] { return PipelineProblem::pairs().infos(); };
  op.make = [](const CasePoint& p) -> std::unique_ptr<Problem> { return std::make_unique<PipelineProblem>(p); };
  return op;
}

}  // namespace attnbench
