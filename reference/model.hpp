// fp64 reference of GPT-2 (model op): the whole network, prefill then greedy decode with a KV cache.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "reference/common.hpp"

namespace attnbench::ref {

struct Gpt2Config {
  int64_t layers = 1, d_model = 8, heads = 1, vocab = 16, max_positions = 16;
};

// The weights as the GPU sees them (already rounded to the storage type), float, projection
// weights as nn.Linear keeps them, [out, in] (a checkpoint's Conv1D [in, out] is transposed
// by the loader before it gets here). Per-layer tensors are stacked: layer l starts at l * (one layer's size).
struct Gpt2Weights {
  const float* wte;     // [vocab, d]   token embedding; also the logits' weights (tied)
  const float* wpe;     // [max_positions, d]
  const float* ln1_g;   // [layers, d]
  const float* ln1_b;   // [layers, d]
  const float* w_qkv;   // [layers, 3d, d]  rows: q's d (heads x head_dim, head-major), then k's d, then v's d
  const float* b_qkv;   // [layers, 3d]
  const float* w_o;     // [layers, d, d]
  const float* b_o;     // [layers, d]
  const float* ln2_g;   // [layers, d]
  const float* ln2_b;   // [layers, d]
  const float* w_fc;    // [layers, 4d, d]
  const float* b_fc;    // [layers, 4d]
  const float* w_proj;  // [layers, d, 4d]
  const float* b_proj;  // [layers, d]
  const float* lnf_g;   // [d]
  const float* lnf_b;   // [d]
};

struct Gpt2Run {
  int64_t batch = 1, prompt = 1, generate = 1;  // generate >= 1 new tokens per sequence
  std::vector<int64_t> prompt_ids;              // [batch, prompt], each in [0, vocab)
  std::function<float(float)> store;            // rounding where the GPU stores an activation; null = none
};

struct Gpt2Result {
  Matrix logits;  // the requested rows, in the order asked: row r = step * batch + b, [rows.size(), vocab]
  std::vector<int64_t> tokens;  // [batch, generate]: the greedy token of each step
  std::vector<double> margins;  // [generate, batch]: top-1 minus top-2 logit at that step (0 for a tie)
  std::vector<double> top;      // [generate, batch]: the top-1 logit (a near-tie's tolerance is relative to it)
};

// Runs the model on every sequence: step 0 is the prefill of the prompt (its last position's logits),
// step t >= 1 feeds the token of step t - 1 at position prompt + t - 1 and attends over the
// cache of all earlier positions. Each step's token is the argmax of its logits (lowest id on a tie).
// rows: output rows to return (row = step * batch + b, 0 <= row < generate * batch).
// run.store is called from several threads at once.
Gpt2Result gpt2_generate(const Gpt2Config& c, const Gpt2Weights& w, const Gpt2Run& run, const Rows& rows);

// Every position's logits of one sequence `ids` (no cache): [ids.size(), vocab]. The same math
// and the same roundings as gpt2_generate; the tests check generation's cache against it.
Matrix gpt2_forward(const Gpt2Config& c, const Gpt2Weights& w, const std::vector<int64_t>& ids,
                    const std::function<float(float)>& store);

}  // namespace attnbench::ref
