// model: GPT-2's sizes and weights, and reading them from a Hugging Face checkpoint. The weights
// are the model's inputs, one a WeightSpec (per layer ones stacked over the layers), in W's order;
// kWeightSpecs says how each is named, shaped and drawn without a checkpoint. The op
// (app/ops/model.cpp) reads a checkpoint's sizes in its finish and its weights in prepare.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "app/problem.hpp"
#include "app/safetensors.hpp"
#include "app/shape.hpp"
#include "reference/model.hpp"

namespace attnbench::model_impl {

struct Preset {
  const char* name;
  int64_t layers, d_model, heads;
};
// OpenAI's four sizes; all share GPT-2's vocabulary and 1024 positions.
inline constexpr Preset kPresets[] = {
    {"gpt2", 12, 768, 12}, {"gpt2-medium", 24, 1024, 16}, {"gpt2-large", 36, 1280, 20}, {"gpt2-xl", 48, 1600, 25}};
inline constexpr int64_t kGpt2Vocab = 50257, kGpt2Positions = 1024;

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
inline constexpr WeightSpec kWeightSpecs[kWeights] = {
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

// The model's sizes, from a point's shape (after finish).
ref::Gpt2Config config_of(const Shape& s);

// A Size in elements.
int64_t size_of(Size z, const ref::Gpt2Config& c);

// The dim names of a tensor's axes, in Size's order.
const char* dim_name(Size z);

// One layer's (or the model's) elements of a weight.
int64_t weight_elements(const WeightSpec& w, const ref::Gpt2Config& c);

// The shape a checkpoint holds the weight in.
std::vector<int64_t> checkpoint_shape(const WeightSpec& w, const ref::Gpt2Config& c);

// A Hugging Face GPT-2 checkpoint: GPT2Model's names, or GPT2LMHeadModel's under "transformer.".
struct Checkpoint {
  SafeTensors file;
  std::string prefix;

  static Checkpoint open(const std::string& path);
  // A weight's name there, layer `layer`'s for a per-layer weight.
  std::string name(const WeightSpec& w, int64_t layer) const;
  // Layers: the h.<i> blocks there are, counted up from 0.
  int64_t layers() const;
  // Every weight of the config there, with its shape and a dtype attnbench reads.
  void check(const ref::Gpt2Config& c) const;
};

// The checkpoint's weight i into the host copy of the input x: Conv1D weights transposed to
// [out, in], each layer's stacked, rounded to x's dtype.
void read_weight(const Checkpoint& ck, const ref::Gpt2Config& c, size_t i, Tensor& x);

}  // namespace attnbench::model_impl
