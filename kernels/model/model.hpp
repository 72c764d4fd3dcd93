// model family: the GPT-2 pieces around the GEMMs and the attention kernels (app/ops/model.cpp
// chains them). The residual stream x is fp32 [tokens, d_model]; what a GEMM reads (LayerNorm's
// output, GELU's) is stored in the point's dtype. Sequences and positions live on the device, so
// that one decode step is the same launches at every position and can be replayed as a graph.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/common/epilogue.hpp"
#include "kernels/common/kernels.hpp"

namespace attnbench {

// x [batch, n, d] = wte[tokens[b, s + t]] + wpe[s + t], with s = starts[b] (starts null: s = 0).
struct EmbedParams {
  float* x;
  const void* wte;        // [vocab, d], dtype
  const void* wpe;        // [max_positions, d], dtype
  const int32_t* tokens;  // [batch, token_stride]
  const int32_t* starts;  // [batch] or null
  int64_t batch = 1, n = 1, d = 1, token_stride = 1;
  DType dtype = DType::fp32;
};
void embed(const EmbedParams& p, cudaStream_t stream);

// Per row: x += delta + delta_bias when delta is not null (the residual add of the projection
// before), then h = (x - mean) / sqrt(var + eps) * gamma + beta, var the biased variance.
struct LayerNormParams {
  float* x;                // [rows, d]
  const void* delta;       // [rows, d], dtype; null: no residual add
  const void* delta_bias;  // [d], dtype (with delta)
  const void* gamma;       // [d], dtype
  const void* beta;        // [d], dtype
  void* h;                 // [rows, d], dtype
  int64_t rows = 1, d = 1;
  float eps = 1e-5f;
  DType dtype = DType::fp32;
};
void residual_layernorm(const LayerNormParams& p, cudaStream_t stream);

// A decode step's slots in a paged cache (vLLM's slot = block · block_size + offset): sequence
// b's new token, at position positions[b], goes to slot block_tables[b][pos / block_size] ·
// block_size + pos % block_size.
struct PagedSlots {
  const int32_t* positions;     // [batch]
  const int32_t* block_tables;  // [batch, max_blocks]
  int64_t* slots;               // [batch]
  int64_t batch = 1, max_blocks = 1, block_size = 16;
};
void paged_slots(const PagedSlots& p, cudaStream_t stream);

// logits [batch, vocab] fp32 = h · wteᵀ, h's rows `h_stride` elements apart (a prefill reads
// each sequence's last position). cuBLAS with fp32 output: stored in bf16, logits a few units
// apart would tie and the greedy token would hang on the rounding.
void logits_gemm(const void* h, int64_t h_stride, const void* wte, float* logits, int64_t batch, int64_t vocab,
                 int64_t d, DType dtype, const LaunchContext& ctx);

// The greedy step of every sequence b: with p = positions[b] (the position just run) and
// step = p - (prompt - 1), copies logits[b] to out[step, b], writes the argmax (the lowest id
// on a tie) to tokens[b, p + 1], then advances positions[b] to p + 1 and contexts[b] to p + 2
// (the next step's input position and its keys).
// Where each sequence stands, on the device: its tokens [batch, token_stride] (the prompt, then
// one a step), the position just run and its context (keys); and the sizes that place a step.
struct Sequences {
  int32_t* tokens;
  int32_t* positions;  // [batch]
  int32_t* contexts;   // [batch]
  int64_t batch = 1, vocab = 1, token_stride = 1, prompt = 1, generate = 1;
};
struct GreedyStep {
  const float* logits;  // [batch, vocab]
  float* out;           // [generate, batch, vocab]
  Sequences seq;
};
void greedy_step(const GreedyStep& p, cudaStream_t stream);

// A decode step's projection y = in · Wᵀ at m <= kSmallLinearRows rows (kernels/model/2_small_linear.cu),
// with its surroundings fused: the input is m stored rows (a), or the fp32 residual stream x
// normalised by a LayerNorm prologue; the epilogue splits QKV plus its bias into q and the
// caches' rows positions[r], adds the product and its bias to the residual stream, applies
// bias and GELU, or writes fp32 logits to out[step, r] (step = positions[r] - (prompt - 1)) and
// keeps each row's greedy token in `best` for greedy_finish.
constexpr int64_t kSmallLinearRows = 8;
struct SmallLinear {
  enum class In { rows, layernorm };
  enum class Out { qkv_to_cache, residual, bias_gelu, logits };
  In in = In::rows;
  Out out = Out::residual;
  const void* a = nullptr;   // In::rows: [m, k], dtype
  const float* x = nullptr;  // In::layernorm: [m, k]
  const void *gamma = nullptr, *beta = nullptr;
  float eps = 1e-5f;
  const void* w = nullptr;     // [n, k], dtype
  const void* bias = nullptr;  // [n], dtype (not read by Out::logits)
  int64_t m = 1, n = 1, k = 1;
  void* out_rows = nullptr;                                   // Out::bias_gelu: [m, n], dtype
  float* residual = nullptr;                                  // Out::residual: x [m, n]
  void *q = nullptr, *k_cache = nullptr, *v_cache = nullptr;  // Out::qkv_to_cache (n = 3 · heads · head_dim)
  const int32_t* positions = nullptr;                         // [m]: qkv_to_cache and logits
  int64_t max_context = 1;
  float* logits = nullptr;             // Out::logits: [generate, m, n]
  unsigned long long* best = nullptr;  // Out::logits: [m], 0 before the step
  int64_t prompt = 1, generate = 1;
  DType dtype = DType::fp32;
};
// The two kinds of projection a decode step makes, on `p`'s rows, dtype and eps: one of the
// fp32 residual stream x ([m, d]) through a LayerNorm (gamma, beta) into n columns, and one
// of m stored rows ([m, k]) whose product and bias are added to the residual stream ([m, d]).
ATTNBENCH_HOST_DEVICE inline SmallLinear normed_linear(SmallLinear p, const float* x, const void* gamma,
                                                       const void* beta, const void* w, const void* bias, int64_t n,
                                                       int64_t d) {
  p.in = SmallLinear::In::layernorm;
  p.x = x;
  p.gamma = gamma;
  p.beta = beta;
  p.w = w;
  p.bias = bias;
  p.n = n;
  p.k = d;
  return p;
}
ATTNBENCH_HOST_DEVICE inline SmallLinear residual_linear(SmallLinear p, const void* rows, const void* w,
                                                         const void* bias, int64_t k, float* x, int64_t d) {
  p.a = rows;
  p.w = w;
  p.bias = bias;
  p.n = d;
  p.k = k;
  p.residual = x;
  return p;
}

// Why small_linear cannot take m rows of k elements ("" = it can).
std::string small_linear_supports(int64_t m, int64_t k, DType dtype);
void small_linear(const SmallLinear& p, const LaunchContext& ctx);

// After small_linear's logits: each sequence's greedy token from `best` (then cleared), written
// and advanced as greedy_step does.
struct GreedyFinish {
  unsigned long long* best;
  Sequences seq;
};
void greedy_finish(const GreedyFinish& p, cudaStream_t stream);

// A whole decode step as one launch (kernels/model/3_persistent.cu): the embedding, every
// layer's projections (small_linear's work) and its attention over the dense cache, the
// logits and the greedy token, in phases a grid-wide barrier apart. The weights are the
// model's inputs, each stacked over the layers ([layers, ...]) where it is per layer.
struct DecodeStepParams {
  const void *wte, *wpe;                          // [vocab, d], [max_positions, d]
  const void *ln1_g, *ln1_b, *w_qkv, *b_qkv;      // [layers, d] twice, [layers, 3d, d], [layers, 3d]
  const void *w_o, *b_o, *ln2_g, *ln2_b;          // [layers, d, d], [layers, d] three times
  const void *w_fc, *b_fc, *w_proj, *b_proj;      // [layers, 4d, d], [layers, 4d], [layers, d, 4d], [layers, d]
  const void *lnf_g, *lnf_b;                      // [d] each
  float* x;                                       // [batch, d]: the residual stream
  void *q, *o, *f;                                // [batch, d], [batch, d], [batch, 4d], dtype
  void *k_cache, *v_cache;                        // [layers, batch, max_context, d], dtype
  float* logits;                                  // [generate, batch, vocab]
  unsigned long long* best;                       // [batch], 0 before the step (small_linear's argmax keys)
  Sequences seq;                                  // tokens, positions, contexts on the device
  int64_t layers = 1, d_model = 64, heads = 1, max_context = 1;
  float eps = 1e-5f;
  DType dtype = DType::fp32;
};
const std::vector<Variant<DecodeStepParams>>& decode_step_variants();

// The decode step's ladder, a model row's last name: rung 1 `launches` (1_launches.cu), rung 2
// `small_linear` (2_small_linear.cu), rung 3 `persistent` (3_persistent.cu). The first two are
// chains of launches around the row's DECODE attention kernel (a decode or paged variant),
// composed by the op (app/ops/model_forward.cpp): rows PREFILL+DECODE+STEP. The last is one
// kernel with its own attention, decode_step_variants(): rows PREFILL+persistent.
struct ChainedStep {
  const char* name;
  const char* note;  // one line for `attnbench list`
  // Why the step cannot run a model of this batch and width in this dtype ("" = it can).
  std::string (*supports)(int64_t batch, int64_t d_model, DType dtype);
};
const std::vector<ChainedStep>& chained_steps();

}  // namespace attnbench
