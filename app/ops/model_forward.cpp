// model: the forward chain (model_problem.hpp). The prefill runs launch by launch over the
// prompt (layers()); a decode step runs the row's rung of the step ladder (kernels/model/):
// launches, the same chain over one token a sequence; small_linear, the fused projections
// (fused_step()); persistent, one kernel. The chained rungs launch the row's DECODE attention
// between their projections, over the dense cache or the paged one (a paged row stages each
// step's keys and values and writes them into their slots). A step is captured as a CUDA graph
// and replayed (decode_step()).
#include <nvtx3/nvToolsExt.h>

#include <algorithm>
#include <functional>
#include <random>
#include <string>

#include "app/ops/heads.hpp"
#include "app/ops/model_problem.hpp"
#include "kernels/reshape_and_cache/reshape_and_cache.hpp"

namespace attnbench::model_impl {

DecodeHalf decode_half(const std::string& decode) {
  const auto [first, second] = split_pair(decode);
  return second.empty() ? DecodeHalf{"", first} : DecodeHalf{first, second};
}

bool is_paged(const std::string& decode) {
  return find_variant(paged_variants(), decode_half(decode).attention) != nullptr;
}

bool is_whole_step(const std::string& decode) {
  return find_variant(decode_step_variants(), decode_half(decode).step) != nullptr;
}

bool is_small_linear(const std::string& decode) { return decode_half(decode).step == "small_linear"; }

bool names_paged_pair(const std::vector<std::string>& kernels) {
  if (kernels.empty()) return true;
  for (const std::string& k : kernels)
    if (is_paged(split_pair(k).second)) return true;
  return false;
}

template <class Launch>
void ModelProblem::as(Kind k, cudaStream_t s, const Launch& launch) {
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

ModelProblem::~ModelProblem() {
  for (auto& [key, exec] : graphs_) cudaGraphExecDestroy(exec);
}

std::size_t ModelProblem::workspace(const std::string& v) const {
  const auto [a, d] = split_pair(v);
  const std::string dec = decode_half(d).attention;
  std::size_t most = std::max(variant_workspace(attention_variants(), a, prefill_params(0)),
                              is_paged(d) ? variant_workspace(paged_variants(), dec, paged_params(0))
                                          : variant_workspace(decode_variants(), dec, decode_params(0)));
  for (int64_t rows : {batch_ * prompt_, batch_})
    for (const GemmParams& g : gemms(rows, 0)) most = std::max(most, variant_workspace(gemm_variants(), gemm_, g));
  return most;
}

void ModelProblem::launch(const std::string& v, const LaunchContext& ctx) {
  const auto [a, d] = split_pair(v);
  prefill(a, d, ctx);
  for (int64_t t = 1; t < generate_; ++t) decode_step(d, ctx);
}

// Device pointers of weight i, layer l.
const void* ModelProblem::weight(size_t i, int64_t l) const {
  const WeightSpec& w = kWeightSpecs[i];
  return static_cast<const char*>(input(i).device.get()) +
         dtype_bytes(point().dtype) * static_cast<std::size_t>(l * weight_elements(w, c_));
}

void* ModelProblem::cache(DeviceBuffer* b, int64_t l) const {
  return static_cast<char*>(b->get()) +
         dtype_bytes(point().dtype) * static_cast<std::size_t>(l * batch_ * max_context_ * c_.d_model);
}

Sequences ModelProblem::sequences() const {
  Sequences q{static_cast<int32_t*>(tokens_->get()), positions(), contexts()};
  q.batch = batch_;
  q.vocab = c_.vocab;
  q.token_stride = max_context_;
  q.prompt = prompt_;
  q.generate = generate_;
  return q;
}

// A layer's four projections over `rows` tokens: QKV, the output, the MLP's two.
std::vector<GemmParams> ModelProblem::gemms(int64_t rows, int64_t l) const {
  const int64_t d = c_.d_model;
  const DType t = point().dtype;
  return {{h_->get(), weight(w_qkv, l), qkv_->get(), 1, rows, 3 * d, d, GemmLayout::nt, t},
          {o_->get(), weight(w_o, l), y_->get(), 1, rows, d, d, GemmLayout::nt, t},
          {h_->get(), weight(w_fc, l), f_->get(), 1, rows, 4 * d, d, GemmLayout::nt, t},
          {f_->get(), weight(w_proj, l), y_->get(), 1, rows, d, 4 * d, GemmLayout::nt, t}};
}

std::string ModelProblem::gemm_why(const DeviceCaps& caps) const {
  const auto* g = find_variant(gemm_variants(), gemm_);
  if (!g) return "no such GEMM variant";
  for (int64_t rows : {batch_ * prompt_, batch_})
    for (const GemmParams& p : gemms(rows, 0))
      if (std::string why = g->supports(p, caps); !why.empty()) return why;
  return "";
}

std::function<std::string(const Variant<AttentionParams>&)> ModelProblem::prefill_why(const DeviceCaps& caps) const {
  return [this, &caps](const Variant<AttentionParams>& a) { return a.supports(prefill_params(0), caps); };
}

std::function<std::string(const Variant<DecodeParams>&)> ModelProblem::decode_why(const DeviceCaps& caps) const {
  return [this, &caps](const Variant<DecodeParams>& d) { return d.supports(decode_params(0), caps); };
}

std::function<std::string(const Variant<DecodeStepParams>&)> ModelProblem::step_why(const DeviceCaps& caps) const {
  return [this, &caps](const Variant<DecodeStepParams>& d) { return d.supports(step_params(), caps); };
}

// Why a chained step cannot run this point's batch, width and dtype.
std::function<std::string(const ChainedStep&)> ModelProblem::chained_why() const {
  return [this](const ChainedStep& s) { return s.supports(batch_, c_.d_model, point().dtype); };
}

std::function<std::string(const Variant<PagedParams>&)> ModelProblem::paged_why(const DeviceCaps& caps) const {
  return [this, &caps](const Variant<PagedParams>& d) {
    return paged_k_ ? d.supports(paged_params(0), caps) : std::string("the case names no paged pair");
  };
}

// The paged cache: per layer vLLM's k [blocks, heads, head_dim / x, block, x] and v [blocks,
// heads, head_dim, block]. Each sequence owns the blocks its whole generation needs, scattered
// over a pool with a spare block a sequence (a fixed shuffle); slots no token owns hold NaN
// (poison_output), so a kernel that reads one fails. The prompt's keys and values go in from
// the dense cache the prefill reads; each step's new ones from a staging row.
void ModelProblem::add_paged_cache() {
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

void* ModelProblem::paged(DeviceBuffer* b, int64_t l) const {
  return static_cast<char*>(b->get()) +
         dtype_bytes(point().dtype) * static_cast<std::size_t>(l * num_blocks_ * kPagedBlock * c_.d_model);
}

PagedParams ModelProblem::paged_params(int64_t l) const {
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
void ModelProblem::write_pages(const void* k, const void* v, const int64_t* slots, int64_t tokens, int64_t l,
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
void ModelProblem::step_attention(const std::string& d, int64_t l, const LaunchContext& ctx) {
  const std::string dec = decode_half(d).attention;
  if (!is_paged(d)) {
    as(kAttention, ctx.stream, [&] { launch_variant(decode_variants(), dec, decode_params(l), ctx); });
    return;
  }
  write_pages(staged_k_->get(), staged_v_->get(), static_cast<const int64_t*>(step_slots_->get()), batch_, l, ctx);
  as(kAttention, ctx.stream, [&] { launch_variant(paged_variants(), dec, paged_params(l), ctx); });
}

AttentionParams ModelProblem::prefill_params(int64_t l) const {
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

DecodeParams ModelProblem::decode_params(int64_t l) const {
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
DecodeStepParams ModelProblem::step_params() const {
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
void ModelProblem::layers(int64_t n, const int32_t* starts, const std::function<void(int64_t)>& attend,
                          const LaunchContext& ctx) {
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
      residual_layernorm({static_cast<float*>(x_->get()), l ? y_->get() : nullptr, l ? weight(b_proj, l - 1) : nullptr,
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
      residual_layernorm({static_cast<float*>(x_->get()), y_->get(), weight(b_o, l), weight(ln2_g, l), weight(ln2_b, l),
                          h_->get(), rows, d, 1e-5f, t},
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
void ModelProblem::prefill(const std::string& a, const std::string& dec, const LaunchContext& ctx) {
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

// One decode step's launches, by the row's rung: persistent's one kernel, small_linear's fused
// projections (fused_step), or launches, the layers over one token a sequence. A paged row's
// slots for the step are computed first, on the device.
void ModelProblem::step_launches(const std::string& d, const LaunchContext& ctx) {
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
    layers(
        1, positions(), [&](int64_t l) { step_attention(d, l, ctx); }, ctx);
  }
}

// A decode step on the fused small-batch projections: four a layer, with the LayerNorms in
// their prologues and the QKV split, the residual adds, bias and GELU in their epilogues;
// the logits keep their argmax as they are written.
void ModelProblem::fused_step(const std::string& dec, const LaunchContext& ctx) {
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
void ModelProblem::decode_step(const std::string& d, const LaunchContext& ctx) {
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

}  // namespace attnbench::model_impl
