// model: GPT-2 end to end on attnbench's kernels. Token and position embeddings, `layers`
// blocks of (LayerNorm, fused QKV projection, attention, output projection, residual,
// LayerNorm, MLP with tanh-GELU, residual), a final LayerNorm and logits tied to the token
// embedding; the prompt is prefilled (time to first token), then each decode step feeds the
// last greedy token through the network against the KV cache (time between tokens).
//
// Variants are "PREFILL+DECODE+STEP": the attention op's variant for the prefill, the decode or
// paged op's for a decode step's attention (a paged one keeps the KV cache in vLLM's paged
// layout, written by reshape_and_cache as serving engines do), and the rung of the decode
// step's ladder (kernels/model/): `launches`, every projection on the GEMM variant named by
// the `gemm` key (cuBLAS by default) and a kernel for each LayerNorm, bias, GELU and split, or
// `small_linear`, the projections fused with them (batch 1-8); or "PREFILL+persistent", the
// step as one kernel with its own attention. The prefill always runs launch by launch. The
// output is every step's logits, [generate, batch, vocab] fp32, checked against the fp64
// model, together with the greedy tokens (judge()). Sequences advance on the device
// (kernels/model), so a decode step is the same launches at every position: it is captured
// once as a CUDA graph and replayed, which keeps about a hundred launches' overhead out of the
// time between tokens.
//
// This file is the op: its keys and rows, the reference and the judge. The forward chain is
// model_forward.cpp, GPT-2's weights and checkpoints model_checkpoint.cpp (model_problem.hpp
// declares the problem they share).
#include <algorithm>
#include <cmath>
#include <optional>
#include <random>
#include <type_traits>

#include "app/numeric.hpp"
#include "app/op.hpp"
#include "app/ops/heads.hpp"
#include "app/ops/model_problem.hpp"
#include "app/report.hpp"
#include "app/tokenizer.hpp"

namespace attnbench {
namespace model_impl {

// Each row of `pairs` (PREFILL+DECODE, from PairedTables) as one row a chained step:
// PREFILL+DECODE+STEP, ladder order, its note naming the step; `why(step)` says why a step
// cannot run the point ("" = it can), for a row that could otherwise.
template <class Row, class Why>
std::vector<Row> with_steps(const std::vector<Row>& pairs, const Why& why) {
  std::vector<Row> out;
  for (const Row& r : pairs)
    for (const ChainedStep& step : chained_steps()) {
      Row v = r;
      v.name += std::string("+") + step.name;
      v.note += std::string(", decode step ") + step.name;
      if constexpr (std::is_same_v<Row, VariantChoice>)
        if (v.skip.empty()) {
          const std::string w = why(step);
          if (!w.empty()) v.skip = std::string("decode step: ") + w;
        }
      out.push_back(std::move(v));
    }
  return out;
}

ModelProblem::ModelProblem(const CasePoint& p) : Problem(p), c_(config_of(p.shape)) {
  const Shape& s = p.shape;
  batch_ = s.num("batch");
  prompt_ = s.num("prompt_len");
  generate_ = s.num("generate");
  max_context_ = prompt_ + generate_;
  gemm_ = s.word("gemm");
  graphs_on_ = s.flag("graph");
  weights_path_ = s.word("weights");
  given_prompt_ = s.lengths("prompt");
  const DType t = p.dtype;
  const double residual = 0.02 / std::sqrt(2.0 * static_cast<double>(c_.layers));
  for (const WeightSpec& w : kWeightSpecs) {
    std::vector<Dim> dims;
    if (w.per_layer) dims.push_back({"layers", c_.layers});
    dims.push_back({dim_name(w.rows), size_of(w.rows, c_)});
    if (w.cols != Size::one) dims.push_back({dim_name(w.cols), size_of(w.cols, c_)});
    const float scale = w.init == Init::position   ? 0.01f
                        : w.init == Init::residual ? static_cast<float>(residual)
                                                   : 0.02f;
    add_input(w.name, t, std::move(dims), scale, true,
              w.conv1d ? "[out, in]: the checkpoint's Conv1D weight transposed" : "");
  }
  if (!weights_path_.empty())
    for (size_t i = 0; i < kWeights; ++i) keep_input(i);
  // Every step's logits; a row's position is that of the token whose logits they are.
  add_output("logits", DType::fp32,
             {{"step", generate_, 'i', prompt_ - 1}, {"batch", batch_, 'b'}, {"vocab", c_.vocab, 'd'}}, 2);

  const std::size_t e = dtype_bytes(t);
  const int64_t tokens = batch_ * prompt_, d = c_.d_model;  // the prefill's rows: the most any launch has
  x_ = &add_buffer(4 * static_cast<std::size_t>(count_elements("x", {{"tokens", tokens}, {"d_model", d}})));
  h_ = &add_buffer(e * count_elements("h", {{"tokens", tokens}, {"d_model", d}}));
  qkv_ = &add_buffer(e * count_elements("qkv", {{"tokens", tokens}, {"qkv", 3 * d}}));
  q_ = &add_buffer(e * tokens * d);
  o_ = &add_buffer(e * tokens * d);
  y_ = &add_buffer(e * tokens * d);
  f_ = &add_buffer(e * count_elements("mlp", {{"tokens", tokens}, {"mlp", 4 * d}}));
  const int64_t cache = count_elements(
      "k_cache", {{"layers", c_.layers}, {"batch", batch_}, {"max_context", max_context_}, {"d_model", d}});
  k_cache_ = &add_buffer(e * cache);
  v_cache_ = &add_buffer(e * cache);
  if (names_paged_pair(p.kernels)) add_paged_cache();
  logits_ =
      &add_buffer(4 * static_cast<std::size_t>(count_elements("logits", {{"batch", batch_}, {"vocab", c_.vocab}})));
  tokens_ = &add_buffer(4 * static_cast<std::size_t>(batch_ * max_context_));
  tokens0_ = &add_buffer(4 * static_cast<std::size_t>(batch_ * max_context_));
  // positions then contexts, [2, batch]; state0_ holds the prefill's: the prompt's last
  // position, and the prompt as every sequence's keys.
  state_ = &add_buffer(8 * static_cast<std::size_t>(batch_));
  std::vector<int32_t> state0(static_cast<size_t>(2 * batch_), static_cast<int32_t>(prompt_ - 1));
  std::fill(state0.begin() + batch_, state0.end(), static_cast<int32_t>(prompt_));
  state0_ = &add_constant(state0);
  best_ = &add_buffer(8 * static_cast<std::size_t>(batch_));
}

PairedTables<AttentionParams, DecodeParams> ModelProblem::pairs() {
  return {attention_variants(), "prefill", decode_variants(), "decode"};
}

PairedTables<AttentionParams, PagedParams> ModelProblem::paged_pairs() {
  return {attention_variants(), "prefill", paged_variants(), "paged decode"};
}

PairedTables<AttentionParams, DecodeStepParams> ModelProblem::step_pairs() {
  return {attention_variants(), "prefill", decode_step_variants(), "decode step"};
}

std::vector<VariantInfo> ModelProblem::infos() {
  const auto none = [](const ChainedStep&) { return std::string(); };
  std::vector<VariantInfo> out = with_steps(pairs().infos(), none);
  for (VariantInfo& v : with_steps(paged_pairs().infos(), none)) out.push_back(std::move(v));
  for (VariantInfo& v : step_pairs().infos()) out.push_back(std::move(v));
  return out;
}

std::vector<VariantChoice> ModelProblem::variants(const DeviceCaps& caps) const {
  std::vector<VariantChoice> out = with_steps(pairs().choices(prefill_why(caps), decode_why(caps)), chained_why());
  for (VariantChoice& v : with_steps(paged_pairs().choices(prefill_why(caps), paged_why(caps)), chained_why()))
    out.push_back(std::move(v));
  for (VariantChoice& v : step_pairs().choices(prefill_why(caps), step_why(caps))) out.push_back(std::move(v));
  const std::string why = gemm_why(caps);
  if (!why.empty())
    for (VariantChoice& v : out) v.skip = "gemm " + gemm_ + ": " + why;
  return out;
}

// The fastest prefill and decode attention on the highest chained step that runs the point
// (small_linear to batch 8, else launches); persistent only when named.
std::vector<std::string> ModelProblem::default_variants(const DeviceCaps& caps) const {
  const auto [a, d] = pairs().fastest(prefill_why(caps), decode_why(caps));
  std::string step;
  for (const ChainedStep& s : chained_steps())
    if (chained_why()(s).empty()) step = s.name;
  return {a + "+" + d + "+" + step};
}

// The prefill's: the row's TFLOP/s and GB/s describe the time to first token.
Work ModelProblem::work() const {
  const double tokens = static_cast<double>(batch_ * prompt_), d = static_cast<double>(c_.d_model);
  const AttentionMask causal{prompt_, prompt_, true, 0};
  const double flops = c_.layers * (24.0 * tokens * d * d + 4.0 * batch_ * d * static_cast<double>(causal.pairs())) +
                       2.0 * batch_ * c_.vocab * d;
  return {flops, weight_bytes() + 2.0 * c_.layers * tokens * d * dtype_bytes(point().dtype), Bandwidth::read};
}

std::vector<Stage> ModelProblem::stages(const std::string& v, const LaunchContext& ctx) {
  const auto [a, d] = split_pair(v);
  std::vector<Stage> out = {Stage{"TTFT", "prefill of the prompt, its logits and the first token", 1,
                                  [this, a = a, d = d, ctx](int64_t) { prefill(a, d, ctx); }}};
  if (generate_ > 1) {
    Stage step{"TBT",
               std::string("one token through every layer, its logits and the greedy token") +
                   (is_whole_step(d)     ? ", as one kernel (" + d + ")"
                    : is_small_linear(d) ? std::string(", on the fused projections (small_linear)")
                                         : std::string(", launch by launch")) +
                   (graphs_on_ ? " (a CUDA graph)" : ""),
               generate_ - 1, [this, d = d, ctx](int64_t) { decode_step(d, ctx); }};
    // Every weight once (the position embedding's one row) and the KV cache of the average step.
    const double e = dtype_bytes(point().dtype), mean_context = prompt_ + generate_ / 2.0;
    step.tokens = static_cast<double>(batch_);
    step.bytes = weight_bytes() - e * (c_.max_positions - 1) * c_.d_model +
                 2.0 * e * c_.layers * batch_ * mean_context * c_.d_model;
    out.push_back(std::move(step));
  }
  return out;
}

// The decode step split by kernel kind: a fresh prefill, then up to 8 steps launched one by
// one with events around each launch group. Events and launches add their own gaps, so the
// parts sum to more than the graph's TBT: the shares are what this says.
std::string ModelProblem::timing_note(const std::string& v, const LaunchContext& ctx) {
  if (generate_ < 2) return "";
  const auto [a, d] = split_pair(v);
  if (is_whole_step(d)) return "";  // one kernel a step: nothing to split
  prefill(a, d, ctx);
  std::vector<Span> spans;
  breakdown_ = &spans;
  const int64_t steps = std::min<int64_t>(8, generate_ - 1);
  try {
    for (int64_t t = 0; t < steps; ++t) step_launches(d, ctx);
    check_cuda(cudaStreamSynchronize(ctx.stream), "model: step breakdown");
  } catch (...) {
    breakdown_ = nullptr;
    throw;
  }
  breakdown_ = nullptr;
  double ms[kKinds] = {}, total = 0;
  for (const Span& s : spans) {
    float e = 0;
    check_cuda(cudaEventElapsedTime(&e, s.start, s.stop), "model: step breakdown");
    ms[s.kind] += e;
    total += e;
    cudaEventDestroy(s.start);
    cudaEventDestroy(s.stop);
  }
  std::string out = "decode step by kernel kind (" + std::to_string(spans.size() / static_cast<size_t>(steps)) +
                    " launch groups a step, one by one):";
  for (int k = 0; k < kKinds; ++k)
    out += std::string(k ? "," : "") + " " + kKindNames[k] + " " +
           fmt_fixed(1e3 * ms[k] / static_cast<double>(steps), 1) + " us (" + fmt_fixed(100 * ms[k] / total, 0) + "%)";
  return out;
}

ref::Matrix ModelProblem::reference(const ref::Rows& rows) const {
  ref::Gpt2Weights w;
  const float** slots[kWeights] = {&w.wte,   &w.wpe,   &w.ln1_g, &w.ln1_b, &w.w_qkv,  &w.b_qkv,  &w.w_o,   &w.b_o,
                                   &w.ln2_g, &w.ln2_b, &w.w_fc,  &w.b_fc,  &w.w_proj, &w.b_proj, &w.lnf_g, &w.lnf_b};
  for (size_t i = 0; i < kWeights; ++i) *slots[i] = input(i).host.data();
  ref::Gpt2Run run;
  run.batch = batch_;
  run.prompt = prompt_;
  run.generate = generate_;
  run.prompt_ids = prompt_ids_;
  const DType t = point().dtype;
  run.store = [t](float x) { return round_to(t, x); };
  ref::Gpt2Result r = ref::gpt2_generate(c_, w, run, rows);
  ref_tokens_ = std::move(r.tokens);
  ref_margins_ = std::move(r.margins);
  ref_top_ = std::move(r.top);
  return std::move(r.logits);
}

// A logit is the final hidden state's dot with a token's embedding, so an error in that state
// (one rounding of an activation differing, anywhere upstream) moves the whole row at the
// scale of its RMS, not of each logit: judge() applies rtol to max(|ref|, the row's RMS).
// Each layer adds its roundings to the residual stream: the errors add up over the layers
// as a random walk, so rtol grows as sqrt(layers). In bf16 most of it comes from the
// attention: a random model's attention is near uniform, so its output averages many values
// and is small beside them, and the kernels' bf16 probabilities (2^-9 each) weigh on it.
Tolerance ModelProblem::tolerance() const {
  Tolerance t = default_tolerance(point().dtype);
  t.rtol *= std::sqrt(static_cast<double>(c_.layers));
  return t;
}

void ModelProblem::poison_output(cudaStream_t stream) {
  Problem::poison_output(stream);
  // A step that reads a cache row or an activation nobody wrote reads NaN and fails.
  for (DeviceBuffer* b :
       {x_, h_, qkv_, q_, o_, y_, f_, k_cache_, v_cache_, logits_, paged_k_, paged_v_, staged_k_, staged_v_})
    if (b) check_cuda(cudaMemsetAsync(b->get(), 0xff, b->bytes(), stream), "poison the model's activations");
}

ModelProblem::Readback ModelProblem::read_back(const ref::Rows& rows) const {
  Readback b = Problem::read_back(rows);
  std::vector<int32_t> all(static_cast<size_t>(batch_ * max_context_));
  tokens_->download(all.data(), all.size() * 4);
  for (int64_t s = 0; s < batch_; ++s)
    for (int64_t t = 0; t < generate_; ++t) b.ids.push_back(all[static_cast<size_t>(s * max_context_ + prompt_ + t)]);
  return b;
}

// The logits are compared up to each sequence's first greedy token that differs from the
// reference's: from there on the two runs feed different tokens, and nothing is comparable.
// A difference where the reference's top two logits are within the tolerance of each other
// is a near-tie that rounding decides, noted; one past that is a wrong token.
Comparison ModelProblem::judge(const Readback& b, const ref::Rows& rows, const ref::Matrix& ref, Tolerance tol,
                               const Bound* bound) const {
  (void)bound;  // the model has no faithful reference: its tolerance decides
  std::vector<int64_t> first(static_cast<size_t>(batch_), generate_);
  for (int64_t s = 0; s < batch_; ++s)
    for (int64_t t = 0; t < generate_; ++t)
      if (b.ids[static_cast<size_t>(s * generate_ + t)] != ref_tokens_[static_cast<size_t>(s * generate_ + t)]) {
        first[static_cast<size_t>(s)] = t;
        break;
      }
  ref::Rows kept_rows;
  std::vector<int64_t> kept;
  for (size_t i = 0; i < rows.size(); ++i)
    if (rows[i] / batch_ <= first[static_cast<size_t>(rows[i] % batch_)]) kept.push_back(static_cast<int64_t>(i));
  ref::Matrix want(static_cast<int64_t>(kept.size()), ref.cols());
  std::vector<double> got(kept.size() * static_cast<size_t>(ref.cols()));
  for (size_t k = 0; k < kept.size(); ++k) {
    want.row(static_cast<int64_t>(k)) = ref.row(kept[k]);
    kept_rows.push_back(rows[static_cast<size_t>(kept[k])]);
    std::copy_n(b.got.begin() + kept[k] * ref.cols(), ref.cols(), got.begin() + static_cast<int64_t>(k) * ref.cols());
  }
  ref::Matrix rms(want.rows(), want.cols());
  for (int64_t r = 0; r < want.rows(); ++r)
    rms.row(r).setConstant(std::sqrt(want.row(r).squaredNorm() / static_cast<double>(want.cols())));
  Comparison c = compare(want, got, kept_rows, tol, &rms);
  c.rows_total = output_rows();
  c.nonfinite = b.nonfinite;
  c.also_wrong = b.also_wrong;

  std::string near, wrong;
  int64_t agree = 0;
  for (int64_t s = 0; s < batch_; ++s) {
    const int64_t t = first[static_cast<size_t>(s)];
    agree += t;
    if (t == generate_) continue;
    const auto at = static_cast<size_t>(t * batch_ + s);
    const double margin = ref_margins_[at], allowed = 2 * (tol.atol + tol.rtol * std::abs(ref_top_[at]));
    std::string& into = margin <= allowed ? near : wrong;
    into += (into.empty() ? "" : ", ") + std::string("sequence ") + std::to_string(s) + " at step " +
            std::to_string(t) + " (reference top-2 margin " + fmt_sci(margin) + ")";
  }
  c.note = "greedy tokens: " + std::to_string(agree) + " of " + std::to_string(batch_ * generate_) +
           " match the fp64 model's";
  if (!near.empty()) c.note += "; near-ties decided by rounding: " + near;
  if (!wrong.empty()) {
    const std::string what =
        "greedy token differs from the fp64 model's where its top two logits are more than "
        "twice the tolerance apart: " +
        wrong;
    c.also_wrong = c.also_wrong.empty() ? what : c.also_wrong + "; " + what;
  }
  if (vocab_) c.note += "; text of sequence 0: " + quoted_text(b.ids);
  return c;
}

void ModelProblem::prepare(uint64_t seed, const LaunchContext& ctx) {
  (void)ctx;
  if (!weights_path_.empty()) {
    if (!weights_loaded_) load_checkpoint();
    weights_loaded_ = true;
  } else {
    // GPT-2's gains are 1 + N(0, 0.02): the drawn part, plus one.
    for (size_t i : {ln1_g, ln2_g, lnf_g}) shift_input(i, 1.f);
  }
  prompt_ids_.clear();
  std::mt19937_64 rng(seed * 0x9e3779b97f4a7c15ull + 0x5eed);
  std::uniform_int_distribution<int64_t> id(0, c_.vocab - 1);
  for (int64_t s = 0; s < batch_; ++s)
    for (int64_t t = 0; t < prompt_; ++t)
      prompt_ids_.push_back(given_prompt_.empty() ? id(rng) : given_prompt_[static_cast<size_t>(t)]);
  std::vector<int32_t> tokens0(static_cast<size_t>(batch_ * max_context_), 0);
  for (int64_t s = 0; s < batch_; ++s)
    for (int64_t t = 0; t < prompt_; ++t)
      tokens0[static_cast<size_t>(s * max_context_ + t)] =
          static_cast<int32_t>(prompt_ids_[static_cast<size_t>(s * prompt_ + t)]);
  tokens0_->upload(tokens0.data(), tokens0.size() * 4);
  if (!point().shape.word("tokenizer_vocab").empty() && !vocab_)
    vocab_ = std::make_shared<Gpt2Vocab>(Gpt2Vocab::load(point().shape.word("tokenizer_vocab")));
}

// Bytes of every weight in the storage type.
double ModelProblem::weight_bytes() const {
  double n = 0;
  for (size_t i = 0; i < kWeights; ++i) n += static_cast<double>(input(i).count);
  return n * dtype_bytes(point().dtype);
}

// Input i's values plus `by`, rounded again to the storage type, on both sides.
void ModelProblem::shift_input(size_t i, float by) {
  Tensor& x = const_cast<Tensor&>(input(i));
  for (float& v : x.host) v = round_to(x.dtype, v + by);
  upload_host(x);
}

// Sequence 0's generated tokens as text, quoted on one line: newlines and quotes escaped,
// other control bytes shown as '?', at most 200 bytes.
std::string ModelProblem::quoted_text(const std::vector<int64_t>& ids) const {
  const std::vector<int64_t> mine(ids.begin(), ids.begin() + generate_);
  for (int64_t id : mine)
    if (id < 0 || id >= vocab_->size()) return "(a token outside the tokenizer's vocabulary)";
  const std::string text = vocab_->decode(mine);
  std::string out = "\"";
  for (unsigned char ch : text.substr(0, 200))
    out += ch == '\n'  ? std::string("\\n")
           : ch == '"' ? std::string("\\\"")
           : ch < 0x20 ? std::string("?")
                       : std::string(1, static_cast<char>(ch));
  return out + (text.size() > 200 ? "...\"" : "\"");
}

// GPT-2's weights as the inputs hold them, on both sides.
void ModelProblem::upload_host(Tensor& x) {
  const std::vector<uint8_t> bytes = encode(x.dtype, std::vector<float>(x.host.begin(), x.host.end()));
  x.device.upload(bytes.data(), bytes.size());
}

// The checkpoint's weights into the inputs (model_checkpoint.cpp reads them).
void ModelProblem::load_checkpoint() {
  const Checkpoint ck = Checkpoint::open(weights_path_);
  ck.check(c_);
  for (size_t i = 0; i < kWeights; ++i) {
    Tensor& x = const_cast<Tensor&>(input(i));
    read_weight(ck, c_, i, x);
    upload_host(x);
  }
}

}  // namespace model_impl

namespace {

using namespace model_impl;

void finish_model(ShapeCheck& c) {
  Shape& s = c.shape;
  const std::string preset = s.word("preset");
  for (const Preset& p : kPresets)
    if (preset == p.name) {
      for (const auto& [key, v] : {std::pair<const char*, int64_t>{"layers", p.layers},
                                   {"d_model", p.d_model},
                                   {"heads", p.heads},
                                   {"vocab", kGpt2Vocab},
                                   {"max_positions", kGpt2Positions}})
        if (!c.given(key)) s.set(key, v);
    }
  const std::string path = s.word("weights");
  std::optional<Checkpoint> ck;
  if (!path.empty()) {
    try {
      ck = Checkpoint::open(path);
    } catch (const InputError& e) {
      c.fail("weights", e.what());
    }
    // What the checkpoint's shapes say, where neither the case nor a preset did.
    const SafeTensor& wte_t = *ck->file.find(ck->prefix + "wte.weight");
    const SafeTensor* wpe_t = ck->file.find(ck->prefix + "wpe.weight");
    if (wte_t.shape.size() == 2) {
      if (!s.has("vocab")) s.set("vocab", wte_t.shape[0]);
      if (!s.has("d_model")) s.set("d_model", wte_t.shape[1]);
    }
    if (wpe_t && wpe_t->shape.size() == 2 && !s.has("max_positions")) s.set("max_positions", wpe_t->shape[0]);
    if (!s.has("layers") && ck->layers() > 0) s.set("layers", ck->layers());
  }
  for (const char* key : {"layers", "d_model", "heads", "vocab", "max_positions"})
    if (!s.has(key))
      c.fail(key, std::string("shape.") + key + " is needed: give it, a preset" +
                      (std::string(key) == "heads" ? "" : ", or weights to read it from"));
  const int64_t d = s.num("d_model"), heads = s.num("heads");
  if (d % heads != 0 || (d / heads) % 8 != 0 || d / heads > 256)
    c.fail("heads", "shape.d_model (" + std::to_string(d) + ") / heads (" + std::to_string(heads) +
                        ") must be a whole head_dim, a multiple of 8 and at most 256");

  // The prompt: ids given, text encoded, or prompt_len random ids.
  const std::string text = s.word("prompt_text");
  if (!text.empty()) {
    if (!s.lengths("prompt").empty()) c.fail("prompt_text", "give prompt or prompt_text, not both");
    const std::string vocab = s.word("tokenizer_vocab"), merges = s.word("tokenizer_merges");
    if (vocab.empty() || merges.empty())
      c.fail("prompt_text", "prompt_text needs tokenizer_vocab and tokenizer_merges to encode it");
    try {
      const std::vector<int64_t> ids = Gpt2Tokenizer::load(vocab, merges).encode(text);
      if (ids.empty()) c.fail("prompt_text", "prompt_text is empty");
      s.set("prompt", ids);
    } catch (const InputError& e) {
      c.fail("tokenizer_merges", e.what());
    }
  } else if (!s.word("tokenizer_vocab").empty()) {
    try {
      (void)Gpt2Vocab::load(s.word("tokenizer_vocab"));
    } catch (const InputError& e) {
      c.fail("tokenizer_vocab", e.what());
    }
  }
  const std::vector<int64_t>& ids = s.lengths("prompt");
  if (!ids.empty()) {
    if (c.given("prompt_len") && s.num("prompt_len") != static_cast<int64_t>(ids.size()))
      c.fail("prompt_len", "shape.prompt_len (" + std::to_string(s.num("prompt_len")) + ") is not the prompt's " +
                               std::to_string(ids.size()) + " tokens");
    s.set("prompt_len", static_cast<int64_t>(ids.size()));
    for (int64_t id : ids)
      if (id >= s.num("vocab"))
        c.fail(
            c.given("prompt") ? "prompt" : "prompt_text",
            "prompt token " + std::to_string(id) + " is outside the vocabulary of " + std::to_string(s.num("vocab")));
  }
  const int64_t last = s.num("prompt_len") + s.num("generate") - 1;
  if (last > s.num("max_positions"))
    c.fail("generate", "prompt_len + generate - 1 (" + std::to_string(last) + ") passes max_positions (" +
                           std::to_string(s.num("max_positions")) + "): the position embedding has no row for it");
  if (ck) {
    try {
      ck->check(config_of(s));
    } catch (const InputError& e) {
      c.fail("weights", e.what());
    }
  }
}

}  // namespace

OpSpec model_op() {
  OpSpec op;
  op.name = "model";
  op.summary = "GPT-2 end to end: prefill (TTFT), then greedy decode with a KV cache (TBT)";
  std::vector<std::string> presets = {"custom"};
  for (const Preset& p : kPresets) presets.push_back(p.name);
  KeySpec gemm = variant_key(
      "gemm", "the GEMM variant of the prefill's projections, and of the decode step's on rung launches", "gemm");
  gemm.fallback = std::string("cublas");
  op.keys = {
      choice_key("preset", "GPT-2's sizes (124M, 355M, 774M, 1.5B); keys given override it", presets, "custom"),
      derived_int_key("layers", "transformer blocks", "the preset's, or the weights'", 1, 256),
      derived_int_key("d_model", "the model width", "the preset's, or the weights'", 8, 16384),
      derived_int_key("heads", "attention heads; d_model / heads is the head_dim", "the preset's", 1, 256),
      derived_int_key("vocab", "tokens in the vocabulary", "the preset's, or the weights'"),
      derived_int_key("max_positions", "rows of the position embedding", "the preset's, or the weights'"),
      batch_key(),
      integers_key("prompt", "the prompt's token ids, the same for every sequence; [] = prompt_len random ids", 0),
      derived_int_key("prompt_len", "prompt tokens a sequence (random ids from the seed without prompt)",
                      "the prompt's length, else 16"),
      int_key("generate", "new tokens a sequence: the prefill's, then one a decode step", 16),
      gemm,
      bool_key("graph", "replay each decode step from a CUDA graph (launch overhead out of TBT)", true),
      bool_key("fused",
               "retired (issue 51): the decode step is the kernel name's last part, PREFILL+DECODE+small_linear "
               "(was fused = true) or PREFILL+DECODE+launches (fused = false); a case that gives it is refused",
               true),
      path_key("weights", "a Hugging Face GPT-2 checkpoint (model.safetensors); \"\" = random weights"),
      path_key("tokenizer_vocab", "GPT-2's vocab.json: the generated text is shown"),
      path_key("tokenizer_merges", "GPT-2's merges.txt: with tokenizer_vocab, prompt_text is encoded"),
      text_key("prompt_text", "the prompt as text (needs tokenizer_vocab and tokenizer_merges)"),
  };
  op.finish = [](ShapeCheck& c) {
    // The key hid the decode step's middle rung behind the pair's name; a case that still gives
    // it learns the names that replaced it rather than running rows it did not mean.
    if (c.given("fused"))
      c.fail("fused",
             "fused is retired: name the decode step in the kernel's name instead, PREFILL+DECODE+small_linear for "
             "fused = true (batch 1-8) or PREFILL+DECODE+launches for fused = false, e.g. "
             "kernels = [\"flash_mma+split_kv+small_linear\", \"flash_mma+split_kv+launches\"]");
    if (!c.given("prompt_len") && c.shape.lengths("prompt").empty() && c.shape.word("prompt_text").empty())
      c.shape.set("prompt_len", int64_t{16});
    finish_model(c);
  };
  op.variants = [] { return ModelProblem::infos(); };
  op.make = [](const CasePoint& p) -> std::unique_ptr<Problem> { return std::make_unique<ModelProblem>(p); };
  return op;
}

}  // namespace attnbench
