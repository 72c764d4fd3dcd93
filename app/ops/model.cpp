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
// step as one kernel with its own attention. The prefill always runs launch by launch. The output is every step's logits, [generate, batch, vocab] fp32,
// checked against the fp64 model, together with the greedy tokens (judge()). Sequences
// advance on the device (kernels/model), so a decode step is the same launches at every
// position: it is captured once as a CUDA graph and replayed, which keeps about a hundred
// launches' overhead out of the time between tokens.
#include "kernels/model/model.hpp"

#include <nvtx3/nvToolsExt.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <random>

#include "app/numeric.hpp"
#include "app/op.hpp"
#include "app/ops/attention.hpp"
#include "app/problem.hpp"
#include "app/report.hpp"
#include "app/safetensors.hpp"
#include "app/tokenizer.hpp"
#include "kernels/attention/attention.hpp"
#include "kernels/decode/decode.hpp"
#include "kernels/gemm/gemm.hpp"
#include "kernels/paged/paged.hpp"
#include "kernels/reshape_and_cache/reshape_and_cache.hpp"
#include "reference/model.hpp"

namespace attnbench {
namespace {

// ---------------------------------------------------------------------------
// GPT-2's sizes and weights

struct Preset {
  const char* name;
  int64_t layers, d_model, heads;
};
// OpenAI's four sizes; all share GPT-2's vocabulary and 1024 positions.
constexpr Preset kPresets[] = {
    {"gpt2", 12, 768, 12}, {"gpt2-medium", 24, 1024, 16}, {"gpt2-large", 36, 1280, 20}, {"gpt2-xl", 48, 1600, 25}};
constexpr int64_t kGpt2Vocab = 50257, kGpt2Positions = 1024;
// Tokens a block of the paged cache holds (vLLM's default).
constexpr int64_t kPagedBlock = 16;

// A row is PREFILL+DECODE+STEP, STEP a chained rung of the decode step's ladder (launches,
// small_linear) and DECODE the attention variant it launches, or PREFILL+persistent, the whole
// step in one kernel. Its decode half ("DECODE+STEP" or "persistent") as those two names,
// the attention "" for a whole step.
struct DecodeHalf {
  std::string attention, step;
};
DecodeHalf decode_half(const std::string& decode) {
  const auto [first, second] = split_pair(decode);
  return second.empty() ? DecodeHalf{"", first} : DecodeHalf{first, second};
}

// Whether a row's decode half attends with a paged variant (the row then runs over the paged cache).
bool is_paged(const std::string& decode) {
  return find_variant(paged_variants(), decode_half(decode).attention) != nullptr;
}

// Whether a row's decode half is a whole step in one kernel (its own projections and attention).
bool is_whole_step(const std::string& decode) {
  return find_variant(decode_step_variants(), decode_half(decode).step) != nullptr;
}

// Whether a row's decode step runs on small_linear's fused projections.
bool is_small_linear(const std::string& decode) { return decode_half(decode).step == "small_linear"; }

// Whether a paged row may run: the case names one, or names none (then -k may).
bool names_paged_pair(const std::vector<std::string>& kernels) {
  if (kernels.empty()) return true;
  for (const std::string& k : kernels)
    if (is_paged(split_pair(k).second)) return true;
  return false;
}

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

// A weight's rows or columns, in units of the config.
enum class Size { one, d, d3, d4, vocab, positions };
// How a weight is drawn without a checkpoint: GPT-2's initialisation (N(0, 0.02); positions
// N(0, 0.01); the projections into the residual stream scaled by 1/sqrt(2 layers)), except
// that biases and LayerNorm's shifts are drawn N(0, 0.02) and gains 1 + N(0, 0.02) instead
// of 0 and 1, so that the check sees every one of them used.
enum class Init { weight, position, residual, bias, gain };

struct WeightSpec {
  const char* name;  // the input's name
  const char* hf;    // Hugging Face's name (after "h.<layer>." for a layer's)
  bool per_layer;
  Size rows, cols;  // ours: [rows, cols], or [rows] when cols is one
  bool conv1d;      // the checkpoint holds it as [in, out] = [cols, rows] (GPT-2's Conv1D)
  Init init;
};

// In the order of the inputs, and of ref::Gpt2Weights.
enum W {
  wte,
  wpe,
  ln1_g,
  ln1_b,
  w_qkv,
  b_qkv,
  w_o,
  b_o,
  ln2_g,
  ln2_b,
  w_fc,
  b_fc,
  w_proj,
  b_proj,
  lnf_g,
  lnf_b,
  kWeights
};
constexpr WeightSpec kWeightSpecs[kWeights] = {
    {"wte", "wte.weight", false, Size::vocab, Size::d, false, Init::weight},
    {"wpe", "wpe.weight", false, Size::positions, Size::d, false, Init::position},
    {"ln1_g", "ln_1.weight", true, Size::d, Size::one, false, Init::gain},
    {"ln1_b", "ln_1.bias", true, Size::d, Size::one, false, Init::bias},
    {"w_qkv", "attn.c_attn.weight", true, Size::d3, Size::d, true, Init::weight},
    {"b_qkv", "attn.c_attn.bias", true, Size::d3, Size::one, false, Init::bias},
    {"w_o", "attn.c_proj.weight", true, Size::d, Size::d, true, Init::residual},
    {"b_o", "attn.c_proj.bias", true, Size::d, Size::one, false, Init::bias},
    {"ln2_g", "ln_2.weight", true, Size::d, Size::one, false, Init::gain},
    {"ln2_b", "ln_2.bias", true, Size::d, Size::one, false, Init::bias},
    {"w_fc", "mlp.c_fc.weight", true, Size::d4, Size::d, true, Init::weight},
    {"b_fc", "mlp.c_fc.bias", true, Size::d4, Size::one, false, Init::bias},
    {"w_proj", "mlp.c_proj.weight", true, Size::d, Size::d4, true, Init::residual},
    {"b_proj", "mlp.c_proj.bias", true, Size::d, Size::one, false, Init::bias},
    {"lnf_g", "ln_f.weight", false, Size::d, Size::one, false, Init::gain},
    {"lnf_b", "ln_f.bias", false, Size::d, Size::one, false, Init::bias},
};

ref::Gpt2Config config_of(const Shape& s) {
  return {s.num("layers"), s.num("d_model"), s.num("heads"), s.num("vocab"), s.num("max_positions")};
}

int64_t size_of(Size z, const ref::Gpt2Config& c) {
  switch (z) {
    case Size::one:
      return 1;
    case Size::d:
      return c.d_model;
    case Size::d3:
      return 3 * c.d_model;
    case Size::d4:
      return 4 * c.d_model;
    case Size::vocab:
      return c.vocab;
    case Size::positions:
      return c.max_positions;
  }
  return 1;
}

// The dim names of a tensor's axes, in Size's order.
const char* dim_name(Size z) {
  static constexpr const char* kNames[] = {"one", "d_model", "qkv", "mlp", "vocab", "positions"};
  return kNames[static_cast<int>(z)];
}

// One layer's (or the model's) elements of a weight.
int64_t weight_elements(const WeightSpec& w, const ref::Gpt2Config& c) {
  return size_of(w.rows, c) * size_of(w.cols, c);
}

// The shape a checkpoint holds the weight in.
std::vector<int64_t> checkpoint_shape(const WeightSpec& w, const ref::Gpt2Config& c) {
  if (w.cols == Size::one) return {size_of(w.rows, c)};
  if (w.conv1d) return {size_of(w.cols, c), size_of(w.rows, c)};
  return {size_of(w.rows, c), size_of(w.cols, c)};
}

// A Hugging Face GPT-2 checkpoint: GPT2Model's names, or GPT2LMHeadModel's under "transformer.".
struct Checkpoint {
  SafeTensors file;
  std::string prefix;

  static Checkpoint open(const std::string& path) {
    Checkpoint c{SafeTensors::open(path), ""};
    if (!c.file.find("wte.weight")) {
      if (!c.file.find("transformer.wte.weight"))
        throw InputError(path + ": no tensor wte.weight (nor transformer.wte.weight): not a GPT-2 checkpoint");
      c.prefix = "transformer.";
    }
    return c;
  }
  std::string name(const WeightSpec& w, int64_t layer) const {
    return prefix + (w.per_layer ? "h." + std::to_string(layer) + "." : "") + w.hf;
  }
  // Layers: the h.<i> blocks there are, counted up from 0.
  int64_t layers() const {
    int64_t n = 0;
    while (file.find(prefix + "h." + std::to_string(n) + ".ln_1.weight")) ++n;
    return n;
  }
  // Every weight of the config there, with its shape and a dtype attnbench reads.
  void check(const ref::Gpt2Config& c) const {
    for (const WeightSpec& w : kWeightSpecs)
      for (int64_t l = 0; l < (w.per_layer ? c.layers : 1); ++l) {
        const SafeTensor& t = file.tensor(name(w, l), checkpoint_shape(w, c));
        if (t.dtype != "F32" && t.dtype != "F16" && t.dtype != "BF16")
          throw InputError(file.path() + ": tensor " + t.name + " is " + t.dtype +
                           "; attnbench reads F32, F16 and BF16");
      }
  }
};

// ---------------------------------------------------------------------------
// The problem

class ModelProblem : public Problem {
 public:
  explicit ModelProblem(const CasePoint& p) : Problem(p), c_(config_of(p.shape)) {
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

  ~ModelProblem() override {
    for (auto& [key, exec] : graphs_) cudaGraphExecDestroy(exec);
  }

  static PairedTables<AttentionParams, DecodeParams> pairs() {
    return {attention_variants(), "prefill", decode_variants(), "decode"};
  }
  static PairedTables<AttentionParams, PagedParams> paged_pairs() {
    return {attention_variants(), "prefill", paged_variants(), "paged decode"};
  }
  static PairedTables<AttentionParams, DecodeStepParams> step_pairs() {
    return {attention_variants(), "prefill", decode_step_variants(), "decode step"};
  }
  static std::vector<VariantInfo> infos() {
    const auto none = [](const ChainedStep&) { return std::string(); };
    std::vector<VariantInfo> out = with_steps(pairs().infos(), none);
    for (VariantInfo& v : with_steps(paged_pairs().infos(), none)) out.push_back(std::move(v));
    for (VariantInfo& v : step_pairs().infos()) out.push_back(std::move(v));
    return out;
  }

  std::vector<VariantChoice> variants(const DeviceCaps& caps) const override {
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
  std::vector<std::string> default_variants(const DeviceCaps& caps) const override {
    const auto [a, d] = pairs().fastest(prefill_why(caps), decode_why(caps));
    std::string step;
    for (const ChainedStep& s : chained_steps())
      if (chained_why()(s).empty()) step = s.name;
    return {a + "+" + d + "+" + step};
  }

  // The prefill's: the row's TFLOP/s and GB/s describe the time to first token.
  Work work() const override {
    const double tokens = static_cast<double>(batch_ * prompt_), d = static_cast<double>(c_.d_model);
    const AttentionMask causal{prompt_, prompt_, true, 0};
    const double flops = c_.layers * (24.0 * tokens * d * d + 4.0 * batch_ * d * static_cast<double>(causal.pairs())) +
                         2.0 * batch_ * c_.vocab * d;
    return {flops, weight_bytes() + 2.0 * c_.layers * tokens * d * dtype_bytes(point().dtype), Bandwidth::read};
  }

  std::size_t workspace(const std::string& v) const override {
    const auto [a, d] = split_pair(v);
    const std::string dec = decode_half(d).attention;
    std::size_t most = std::max(variant_workspace(attention_variants(), a, prefill_params(0)),
                                is_paged(d) ? variant_workspace(paged_variants(), dec, paged_params(0))
                                            : variant_workspace(decode_variants(), dec, decode_params(0)));
    for (int64_t rows : {batch_ * prompt_, batch_})
      for (const GemmParams& g : gemms(rows, 0)) most = std::max(most, variant_workspace(gemm_variants(), gemm_, g));
    return most;
  }

  void launch(const std::string& v, const LaunchContext& ctx) override {
    const auto [a, d] = split_pair(v);
    prefill(a, d, ctx);
    for (int64_t t = 1; t < generate_; ++t) decode_step(d, ctx);
  }

  std::vector<Stage> stages(const std::string& v, const LaunchContext& ctx) override {
    const auto [a, d] = split_pair(v);
    std::vector<Stage> out = {Stage{"TTFT", "prefill of the prompt, its logits and the first token", 1,
                                    [this, a = a, d = d, ctx](int64_t) { prefill(a, d, ctx); }}};
    if (generate_ > 1) {
      Stage step{"TBT",
                 std::string("one token through every layer, its logits and the greedy token") +
                     (is_whole_step(d)      ? ", as one kernel (" + d + ")"
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
  std::string timing_note(const std::string& v, const LaunchContext& ctx) override {
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
             fmt_fixed(1e3 * ms[k] / static_cast<double>(steps), 1) + " us (" + fmt_fixed(100 * ms[k] / total, 0) +
             "%)";
    return out;
  }

  ref::Matrix reference(const ref::Rows& rows) const override {
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
  Tolerance tolerance() const override {
    Tolerance t = default_tolerance(point().dtype);
    t.rtol *= std::sqrt(static_cast<double>(c_.layers));
    return t;
  }

  void poison_output(cudaStream_t stream) override {
    Problem::poison_output(stream);
    // A step that reads a cache row or an activation nobody wrote reads NaN and fails.
    for (DeviceBuffer* b : {x_, h_, qkv_, q_, o_, y_, f_, k_cache_, v_cache_, logits_, paged_k_, paged_v_, staged_k_,
                            staged_v_})
      if (b) check_cuda(cudaMemsetAsync(b->get(), 0xff, b->bytes(), stream), "poison the model's activations");
  }

  Readback read_back(const ref::Rows& rows) const override {
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
  Comparison judge(const Readback& b, const ref::Rows& rows, const ref::Matrix& ref, Tolerance tol,
                   const Bound* bound) const override {
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

 protected:
  void prepare(uint64_t seed, const LaunchContext& ctx) override {
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

 private:
  // Bytes of every weight in the storage type.
  double weight_bytes() const {
    double n = 0;
    for (size_t i = 0; i < kWeights; ++i) n += static_cast<double>(input(i).count);
    return n * dtype_bytes(point().dtype);
  }

  // Input i's values plus `by`, rounded again to the storage type, on both sides.
  void shift_input(size_t i, float by) {
    Tensor& x = const_cast<Tensor&>(input(i));
    for (float& v : x.host) v = round_to(x.dtype, v + by);
    upload_host(x);
  }
  static void upload_host(Tensor& x) {
    const std::vector<uint8_t> bytes = encode(x.dtype, std::vector<float>(x.host.begin(), x.host.end()));
    x.device.upload(bytes.data(), bytes.size());
  }

  // The checkpoint's weights into the inputs: Conv1D weights transposed to [out, in], each
  // layer's stacked, rounded to the storage type.
  void load_checkpoint() {
    const Checkpoint ck = Checkpoint::open(weights_path_);
    ck.check(c_);
    for (size_t i = 0; i < kWeights; ++i) {
      const WeightSpec& w = kWeightSpecs[i];
      Tensor& x = const_cast<Tensor&>(input(i));
      x.host.resize(static_cast<size_t>(x.count));
      const int64_t rows = size_of(w.rows, c_), cols = size_of(w.cols, c_), per = rows * cols;
      for (int64_t l = 0; l < (w.per_layer ? c_.layers : 1); ++l) {
        const std::vector<float> v = ck.file.read(ck.file.tensor(ck.name(w, l), checkpoint_shape(w, c_)));
        float* into = x.host.data() + l * per;
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t k = 0; k < cols; ++k)
            into[r * cols + k] = round_to(
                x.dtype, w.conv1d ? v[static_cast<size_t>(k * rows + r)] : v[static_cast<size_t>(r * cols + k)]);
      }
      upload_host(x);
    }
  }

  // Sequence 0's generated tokens as text, quoted on one line: newlines and quotes escaped,
  // other control bytes shown as '?', at most 200 bytes.
  std::string quoted_text(const std::vector<int64_t>& ids) const {
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

  // Device pointers of weight i, layer l.
  const void* weight(size_t i, int64_t l = 0) const {
    const WeightSpec& w = kWeightSpecs[i];
    return static_cast<const char*>(input(i).device.get()) +
           dtype_bytes(point().dtype) * static_cast<std::size_t>(l * weight_elements(w, c_));
  }
  void* cache(DeviceBuffer* b, int64_t l) const {
    return static_cast<char*>(b->get()) +
           dtype_bytes(point().dtype) * static_cast<std::size_t>(l * batch_ * max_context_ * c_.d_model);
  }
  int32_t* positions() const { return static_cast<int32_t*>(state_->get()); }
  Sequences sequences() const {
    Sequences q{static_cast<int32_t*>(tokens_->get()), positions(), contexts()};
    q.batch = batch_;
    q.vocab = c_.vocab;
    q.token_stride = max_context_;
    q.prompt = prompt_;
    q.generate = generate_;
    return q;
  }
  int32_t* contexts() const { return static_cast<int32_t*>(state_->get()) + batch_; }

  // A layer's four projections over `rows` tokens: QKV, the output, the MLP's two.
  std::vector<GemmParams> gemms(int64_t rows, int64_t l) const {
    const int64_t d = c_.d_model;
    const DType t = point().dtype;
    return {{h_->get(), weight(w_qkv, l), qkv_->get(), 1, rows, 3 * d, d, GemmLayout::nt, t},
            {o_->get(), weight(w_o, l), y_->get(), 1, rows, d, d, GemmLayout::nt, t},
            {h_->get(), weight(w_fc, l), f_->get(), 1, rows, 4 * d, d, GemmLayout::nt, t},
            {f_->get(), weight(w_proj, l), y_->get(), 1, rows, d, 4 * d, GemmLayout::nt, t}};
  }

  std::string gemm_why(const DeviceCaps& caps) const {
    const auto* g = find_variant(gemm_variants(), gemm_);
    if (!g) return "no such GEMM variant";
    for (int64_t rows : {batch_ * prompt_, batch_})
      for (const GemmParams& p : gemms(rows, 0))
        if (std::string why = g->supports(p, caps); !why.empty()) return why;
    return "";
  }
  std::function<std::string(const Variant<AttentionParams>&)> prefill_why(const DeviceCaps& caps) const {
    return [this, &caps](const Variant<AttentionParams>& a) { return a.supports(prefill_params(0), caps); };
  }
  std::function<std::string(const Variant<DecodeParams>&)> decode_why(const DeviceCaps& caps) const {
    return [this, &caps](const Variant<DecodeParams>& d) { return d.supports(decode_params(0), caps); };
  }
  std::function<std::string(const Variant<DecodeStepParams>&)> step_why(const DeviceCaps& caps) const {
    return [this, &caps](const Variant<DecodeStepParams>& d) { return d.supports(step_params(), caps); };
  }
  // Why a chained step cannot run this point's batch, width and dtype.
  std::function<std::string(const ChainedStep&)> chained_why() const {
    return [this](const ChainedStep& s) { return s.supports(batch_, c_.d_model, point().dtype); };
  }
  std::function<std::string(const Variant<PagedParams>&)> paged_why(const DeviceCaps& caps) const {
    return [this, &caps](const Variant<PagedParams>& d) {
      return paged_k_ ? d.supports(paged_params(0), caps) : std::string("the case names no paged pair");
    };
  }

  // The paged cache: per layer vLLM's k [blocks, heads, head_dim / x, block, x] and v [blocks,
  // heads, head_dim, block]. Each sequence owns the blocks its whole generation needs, scattered
  // over a pool with a spare block a sequence (a fixed shuffle); slots no token owns hold NaN
  // (poison_output), so a kernel that reads one fails. The prompt's keys and values go in from
  // the dense cache the prefill reads; each step's new ones from a staging row.
  void add_paged_cache() {
    const std::size_t e = dtype_bytes(point().dtype);
    const int64_t d = c_.d_model;
    blocks_per_seq_ = ceil_div(max_context_, kPagedBlock);
    num_blocks_ = (blocks_per_seq_ + 1) * batch_;
    const int64_t pool = count_elements(
        "paged k_cache", {{"layers", c_.layers}, {"blocks", num_blocks_}, {"block_size", kPagedBlock}, {"d_model", d}});
    paged_k_ = &add_buffer(e * pool);
    paged_v_ = &add_buffer(e * pool);
    staged_k_ = &add_buffer(e * batch_ * d);
    staged_v_ = &add_buffer(e * batch_ * d);
    step_slots_ = &add_buffer(8 * static_cast<std::size_t>(batch_));
    std::vector<int32_t> order(static_cast<size_t>(num_blocks_));
    for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
    std::shuffle(order.begin(), order.end(), std::mt19937_64(0x9a9ed));
    std::vector<int32_t> tables(order.begin(), order.begin() + batch_ * blocks_per_seq_);
    std::vector<int64_t> prompt_slots(static_cast<size_t>(batch_ * max_context_), -1);
    for (int64_t b = 0; b < batch_; ++b)
      for (int64_t t = 0; t < prompt_; ++t)
        prompt_slots[static_cast<size_t>(b * max_context_ + t)] =
            tables[static_cast<size_t>(b * blocks_per_seq_ + t / kPagedBlock)] * kPagedBlock + t % kPagedBlock;
    block_tables_ = &add_constant(tables);
    prompt_slots_ = &add_constant(prompt_slots);
    zeros_ = &add_constant(std::vector<int32_t>(static_cast<size_t>(batch_), 0));
  }
  // Every sequence at row 0: where a staged step's k and v rows go.
  const int32_t* zeros() const { return static_cast<const int32_t*>(zeros_->get()); }
  void* paged(DeviceBuffer* b, int64_t l) const {
    return static_cast<char*>(b->get()) + dtype_bytes(point().dtype) * static_cast<std::size_t>(
                                                                           l * num_blocks_ * kPagedBlock * c_.d_model);
  }
  PagedParams paged_params(int64_t l) const {
    PagedParams p;
    p.q = q_->get();
    p.k_cache = paged_k_ ? paged(paged_k_, l) : nullptr;
    p.v_cache = paged_v_ ? paged(paged_v_, l) : nullptr;
    p.o = o_->get();
    p.block_tables = block_tables_ ? static_cast<const int32_t*>(block_tables_->get()) : nullptr;
    p.context_lens = contexts();
    p.batch = batch_;
    p.heads = p.kv_heads = c_.heads;
    p.head_dim = c_.d_model / c_.heads;
    p.block_size = kPagedBlock;
    p.num_blocks = num_blocks_;
    p.max_blocks_per_seq = blocks_per_seq_;
    p.longest_context = max_context_;  // as decode_params: every step is the same launches
    p.dtype = p.kv_dtype = point().dtype;
    finish_paged_params(p);
    return p;
  }
  // Tokens' keys and values, rows [tokens, d_model] of k and v, into layer l's paged cache at
  // `slots` (a negative slot skips its row).
  void write_pages(const void* k, const void* v, const int64_t* slots, int64_t tokens, int64_t l,
                   const LaunchContext& ctx) {
    ReshapeAndCacheParams p{k, v, paged(paged_k_, l), paged(paged_v_, l), slots};
    p.tokens = tokens;
    p.kv_heads = c_.heads;
    p.head_dim = c_.d_model / c_.heads;
    p.block_size = kPagedBlock;
    p.dtype = p.kv_dtype = point().dtype;
    // token_major: a prompt fills its blocks in order, which that rung writes in whole sectors.
    as(kOther, ctx.stream, [&] { launch_variant(reshape_and_cache_variants(), "token_major", p, ctx); });
  }
  // A decode step's attention of layer l: over the dense cache, or (a paged pair) the step's
  // staged keys and values written into their slots, then over the paged cache.
  void step_attention(const std::string& d, int64_t l, const LaunchContext& ctx) {
    const std::string dec = decode_half(d).attention;
    if (!is_paged(d)) {
      as(kAttention, ctx.stream, [&] { launch_variant(decode_variants(), dec, decode_params(l), ctx); });
      return;
    }
    write_pages(staged_k_->get(), staged_v_->get(), static_cast<const int64_t*>(step_slots_->get()), batch_, l, ctx);
    as(kAttention, ctx.stream, [&] { launch_variant(paged_variants(), dec, paged_params(l), ctx); });
  }

  AttentionParams prefill_params(int64_t l) const {
    AttentionParams p;
    p.q = q_->get();
    p.k = cache(k_cache_, l);
    p.v = cache(v_cache_, l);
    p.o = o_->get();
    p.batch = batch_;
    p.heads = p.kv_heads = c_.heads;
    p.seq_q = p.seq_k = prompt_;
    p.head_dim = c_.d_model / c_.heads;
    p.causal = true;
    p.kv_batch_stride = max_context_ * c_.d_model;  // the prompt's keys, read in the cache
    p.dtype = point().dtype;
    finish_attention_params(p);
    return p;
  }
  DecodeParams decode_params(int64_t l) const {
    DecodeParams p;
    p.q = q_->get();
    p.k_cache = cache(k_cache_, l);
    p.v_cache = cache(v_cache_, l);
    p.o = o_->get();
    p.context_lens = contexts();
    p.batch = batch_;
    p.heads = p.kv_heads = c_.heads;
    p.head_dim = c_.d_model / c_.heads;
    p.max_context = max_context_;
    // The contexts are on the device and every step is the same launches: split counts are
    // planned for the longest context any step has.
    p.longest_context = max_context_;
    p.dtype = point().dtype;
    finish_decode_params(p);
    return p;
  }

  // A decode step in one kernel: the weights as the inputs stack them, the step's buffers.
  DecodeStepParams step_params() const {
    DecodeStepParams p;
    const void** slots[kWeights] = {&p.wte,   &p.wpe,   &p.ln1_g, &p.ln1_b, &p.w_qkv,  &p.b_qkv,  &p.w_o,   &p.b_o,
                                    &p.ln2_g, &p.ln2_b, &p.w_fc,  &p.b_fc,  &p.w_proj, &p.b_proj, &p.lnf_g, &p.lnf_b};
    for (size_t i = 0; i < kWeights; ++i) *slots[i] = weight(i);
    p.x = static_cast<float*>(x_->get());
    p.q = q_->get();
    p.o = o_->get();
    p.f = f_->get();
    p.k_cache = k_cache_->get();
    p.v_cache = v_cache_->get();
    p.logits = static_cast<float*>(output().device.get());
    p.best = static_cast<unsigned long long*>(best_->get());
    p.seq = sequences();
    p.layers = c_.layers;
    p.d_model = c_.d_model;
    p.heads = c_.heads;
    p.max_context = max_context_;
    p.dtype = point().dtype;
    return p;
  }

  // The layers over n tokens a sequence: n = prompt_ from the first position (prefill), or
  // n = 1 at each sequence's position on the device (a decode step). `attend` runs layer l's
  // attention from q_ and the caches into o_.
  void layers(int64_t n, const int32_t* starts, const std::function<void(int64_t)>& attend, const LaunchContext& ctx) {
    const cudaStream_t s = ctx.stream;
    const int64_t rows = batch_ * n, d = c_.d_model;
    const DType t = point().dtype;
    as(kOther, s, [&] {
      embed({static_cast<float*>(x_->get()), weight(wte), weight(wpe), static_cast<const int32_t*>(tokens_->get()),
             starts, batch_, n, d, max_context_, t},
            s);
    });
    for (int64_t l = 0; l < c_.layers; ++l) {
      const std::vector<GemmParams> g = gemms(rows, l);
      // The residual add of the layer before's MLP, then this layer's first LayerNorm.
      as(kOther, s, [&] {
        residual_layernorm(
            {static_cast<float*>(x_->get()), l ? y_->get() : nullptr, l ? weight(b_proj, l - 1) : nullptr,
             weight(ln1_g, l), weight(ln1_b, l), h_->get(), rows, d, 1e-5f, t},
            s);
      });
      as(kGemm, s, [&] { launch_variant(gemm_variants(), gemm_, g[0], ctx); });
      // k and v into the dense cache at each sequence's positions, or (staged_) into the rows
      // that a paged step writes into its slots.
      QkvToCache split{qkv_->get(), weight(b_qkv, l), q_->get(), cache(k_cache_, l), cache(v_cache_, l), starts};
      if (staged_) {
        split.k_cache = staged_k_->get();
        split.v_cache = staged_v_->get();
        split.starts = nullptr;
      }
      split.batch = batch_;
      split.n = n;
      split.heads = c_.heads;
      split.head_dim = d / c_.heads;
      split.max_context = staged_ ? n : max_context_;
      split.dtype = t;
      as(kOther, s, [&] { qkv_to_cache(split, s); });
      attend(l);
      as(kGemm, s, [&] { launch_variant(gemm_variants(), gemm_, g[1], ctx); });
      as(kOther, s, [&] {
        residual_layernorm({static_cast<float*>(x_->get()), y_->get(), weight(b_o, l), weight(ln2_g, l),
                            weight(ln2_b, l), h_->get(), rows, d, 1e-5f, t},
                           s);
      });
      as(kGemm, s, [&] { launch_variant(gemm_variants(), gemm_, g[2], ctx); });
      as(kOther, s, [&] { bias_gelu(f_->get(), weight(b_fc, l), rows, 4 * d, t, s); });
      as(kGemm, s, [&] { launch_variant(gemm_variants(), gemm_, g[3], ctx); });
    }
    as(kOther, s, [&] {
      residual_layernorm({static_cast<float*>(x_->get()), y_->get(), weight(b_proj, c_.layers - 1), weight(lnf_g),
                          weight(lnf_b), h_->get(), rows, d, 1e-5f, t},
                         s);
    });
    // Each sequence's last token's logits, then its greedy token.
    const std::size_t last = dtype_bytes(t) * static_cast<std::size_t>((n - 1) * d);
    as(kGemm, s, [&] {
      logits_gemm(static_cast<const char*>(h_->get()) + last, n * d, weight(wte), static_cast<float*>(logits_->get()),
                  batch_, c_.vocab, d, t, ctx);
    });
    const GreedyStep g{static_cast<const float*>(logits_->get()), static_cast<float*>(output().device.get()),
                       sequences()};
    as(kOther, s, [&] { greedy_step(g, s); });
  }

  // The prompt through every layer; with a paged decode (`dec`), each layer's keys and values
  // also go into the paged cache before its attention.
  void prefill(const std::string& a, const std::string& dec, const LaunchContext& ctx) {
    check_cuda(cudaMemcpyAsync(tokens_->get(), tokens0_->get(), tokens_->bytes(), cudaMemcpyDeviceToDevice, ctx.stream),
               "model: the prompt's tokens");
    check_cuda(cudaMemcpyAsync(state_->get(), state0_->get(), state_->bytes(), cudaMemcpyDeviceToDevice, ctx.stream),
               "model: the positions");
    check_cuda(cudaMemsetAsync(best_->get(), 0, best_->bytes(), ctx.stream), "model: the fused steps' argmax");
    const bool paged = is_paged(dec);
    layers(
        prompt_, nullptr,
        [&](int64_t l) {
          if (paged)
            write_pages(cache(k_cache_, l), cache(v_cache_, l), static_cast<const int64_t*>(prompt_slots_->get()),
                        batch_ * max_context_, l, ctx);
          as(kAttention, ctx.stream, [&] { launch_variant(attention_variants(), a, prefill_params(l), ctx); });
        },
        ctx);
  }

  void step_launches(const std::string& d, const LaunchContext& ctx) {
    struct Unstage {
      bool& staged;
      ~Unstage() { staged = false; }  // also when a launch throws: the next prefill writes the dense cache
    } unstage{staged_};
    staged_ = is_paged(d);
    if (staged_)
      as(kOther, ctx.stream, [&] {
        paged_slots({positions(), static_cast<const int32_t*>(block_tables_->get()),
                     static_cast<int64_t*>(step_slots_->get()), batch_, blocks_per_seq_, kPagedBlock},
                    ctx.stream);
      });
    if (is_whole_step(d)) {
      as(kOther, ctx.stream, [&] { launch_variant(decode_step_variants(), d, step_params(), ctx); });
    } else if (is_small_linear(d)) {
      fused_step(d, ctx);
    } else {
      layers(1, positions(), [&](int64_t l) { step_attention(d, l, ctx); }, ctx);
    }
  }

  // A decode step on the fused small-batch projections: four a layer, with the LayerNorms in
  // their prologues and the QKV split, the residual adds, bias and GELU in their epilogues;
  // the logits keep their argmax as they are written.
  void fused_step(const std::string& dec, const LaunchContext& ctx) {
    const cudaStream_t s = ctx.stream;
    const int64_t d = c_.d_model;
    const DType t = point().dtype;
    float* x = static_cast<float*>(x_->get());
    as(kOther, s, [&] {
      embed({x, weight(wte), weight(wpe), static_cast<const int32_t*>(tokens_->get()), positions(), batch_, 1, d,
             max_context_, t},
            s);
    });
    const auto linear = [&](SmallLinear p) {
      p.m = batch_;
      p.dtype = t;
      as(kGemm, s, [&] { small_linear(p, ctx); });
    };
    const auto normed = [&](const void* gamma, const void* beta, const void* w, const void* bias, int64_t n) {
      return normed_linear(SmallLinear{}, x, gamma, beta, w, bias, n, d);
    };
    const auto into_residual = [&](const void* rows, size_t w, size_t b, int64_t l, int64_t k) {
      return residual_linear(SmallLinear{}, rows, weight(w, l), weight(b, l), k, x, d);
    };
    for (int64_t l = 0; l < c_.layers; ++l) {
      SmallLinear qkv = normed(weight(ln1_g, l), weight(ln1_b, l), weight(w_qkv, l), weight(b_qkv, l), 3 * d);
      qkv.out = SmallLinear::Out::qkv_to_cache;
      qkv.q = q_->get();
      qkv.k_cache = staged_ ? staged_k_->get() : cache(k_cache_, l);
      qkv.v_cache = staged_ ? staged_v_->get() : cache(v_cache_, l);
      qkv.positions = staged_ ? zeros() : positions();
      qkv.max_context = staged_ ? 1 : max_context_;
      linear(qkv);
      step_attention(dec, l, ctx);
      linear(into_residual(o_->get(), w_o, b_o, l, d));
      SmallLinear fc = normed(weight(ln2_g, l), weight(ln2_b, l), weight(w_fc, l), weight(b_fc, l), 4 * d);
      fc.out = SmallLinear::Out::bias_gelu;
      fc.out_rows = f_->get();
      linear(fc);
      linear(into_residual(f_->get(), w_proj, b_proj, l, 4 * d));
    }
    SmallLinear head = normed(weight(lnf_g), weight(lnf_b), weight(wte), nullptr, c_.vocab);
    head.out = SmallLinear::Out::logits;
    head.logits = static_cast<float*>(output().device.get());
    head.best = static_cast<unsigned long long*>(best_->get());
    head.positions = positions();
    head.prompt = prompt_;
    head.generate = generate_;
    linear(head);
    const GreedyFinish g{static_cast<unsigned long long*>(best_->get()), sequences()};
    as(kOther, s, [&] { greedy_finish(g, s); });
  }

  // One decode step: replayed from its graph, captured on first use, unless graphs are off or
  // the stream is being captured already (the harness's footprint capture sees the launches).
  void decode_step(const std::string& d, const LaunchContext& ctx) {
    cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    check_cuda(cudaStreamIsCapturing(ctx.stream, &capturing), "model: stream capture status");
    if (!graphs_on_ || capturing != cudaStreamCaptureStatusNone) return step_launches(d, ctx);
    // Buffers move only between copies of the point; the key holds what the graph baked in.
    const std::string key = d + "@" + std::to_string(reinterpret_cast<uintptr_t>(ctx.workspace)) + "@" +
                            std::to_string(reinterpret_cast<uintptr_t>(x_->get())) + "@" +
                            std::to_string(reinterpret_cast<uintptr_t>(ctx.stream));
    cudaGraphExec_t& exec = graphs_[key];
    if (!exec) {
      cudaGraph_t graph = nullptr;
      check_cuda(cudaStreamBeginCapture(ctx.stream, cudaStreamCaptureModeThreadLocal), "model: capture a decode step");
      try {
        step_launches(d, ctx);
      } catch (...) {
        cudaStreamEndCapture(ctx.stream, &graph);
        if (graph) cudaGraphDestroy(graph);
        throw;
      }
      check_cuda(cudaStreamEndCapture(ctx.stream, &graph), "model: capture a decode step");
      const cudaError_t made = cudaGraphInstantiate(&exec, graph, 0);
      cudaGraphDestroy(graph);
      check_cuda(made, "model: instantiate the decode step's graph");
    }
    check_cuda(cudaGraphLaunch(exec, ctx.stream), "model: replay a decode step");
  }

  // The kernel kinds a step's time is split into, each launch group in an NVTX range of its
  // kind's name (Nsight Systems shows the split too); with a breakdown under way, CUDA events
  // around each group.
  enum Kind { kGemm, kAttention, kOther, kKinds };
  static constexpr const char* kKindNames[kKinds] = {"GEMMs", "attention", "the rest"};
  struct Span {
    Kind kind;
    cudaEvent_t start, stop;
  };
  template <class Launch>
  void as(Kind k, cudaStream_t s, const Launch& launch) {
    nvtxRangePushA(kKindNames[k]);
    Span span{k, nullptr, nullptr};
    if (breakdown_) {
      check_cuda(cudaEventCreate(&span.start), "model: breakdown event");
      check_cuda(cudaEventCreate(&span.stop), "model: breakdown event");
      check_cuda(cudaEventRecord(span.start, s), "model: breakdown event");
    }
    launch();
    if (breakdown_) {
      check_cuda(cudaEventRecord(span.stop, s), "model: breakdown event");
      breakdown_->push_back(span);
    }
    nvtxRangePop();
  }

  ref::Gpt2Config c_;
  int64_t batch_, prompt_, generate_, max_context_;
  std::vector<Span>* breakdown_ = nullptr;  // while timing_note() splits a step
  std::string gemm_, weights_path_;
  bool graphs_on_ = true, weights_loaded_ = false;
  bool staged_ = false;  // while a paged pair's decode step is launched: k and v go to staged_k_, staged_v_
  std::vector<int64_t> given_prompt_, prompt_ids_;
  std::shared_ptr<Gpt2Vocab> vocab_;
  mutable std::vector<int64_t> ref_tokens_;            // the last reference()'s, [batch, generate]
  mutable std::vector<double> ref_margins_, ref_top_;  // [generate, batch]
  DeviceBuffer *x_, *h_, *qkv_, *q_, *o_, *y_, *f_, *k_cache_, *v_cache_, *logits_, *tokens_, *tokens0_, *state_,
      *state0_, *best_;
  // The paged cache (add_paged_cache), null when the case names no paged pair.
  DeviceBuffer *paged_k_ = nullptr, *paged_v_ = nullptr, *staged_k_ = nullptr, *staged_v_ = nullptr,
               *step_slots_ = nullptr, *block_tables_ = nullptr, *prompt_slots_ = nullptr, *zeros_ = nullptr;
  int64_t blocks_per_seq_ = 0, num_blocks_ = 0;
  std::map<std::string, cudaGraphExec_t> graphs_;
};

// ---------------------------------------------------------------------------
// The registry entry

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
