// model: GPT-2's weights and a Hugging Face checkpoint of them (model_checkpoint.hpp).
#include "app/ops/model_checkpoint.hpp"

#include "app/numeric.hpp"

namespace attnbench::model_impl {

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

const char* dim_name(Size z) {
  static constexpr const char* kNames[] = {"one", "d_model", "qkv", "mlp", "vocab", "positions"};
  return kNames[static_cast<int>(z)];
}

int64_t weight_elements(const WeightSpec& w, const ref::Gpt2Config& c) {
  return size_of(w.rows, c) * size_of(w.cols, c);
}

std::vector<int64_t> checkpoint_shape(const WeightSpec& w, const ref::Gpt2Config& c) {
  if (w.cols == Size::one) return {size_of(w.rows, c)};
  if (w.conv1d) return {size_of(w.cols, c), size_of(w.rows, c)};
  return {size_of(w.rows, c), size_of(w.cols, c)};
}

Checkpoint Checkpoint::open(const std::string& path) {
  Checkpoint c{SafeTensors::open(path), ""};
  if (!c.file.find("wte.weight")) {
    if (!c.file.find("transformer.wte.weight"))
      throw InputError(path + ": no tensor wte.weight (nor transformer.wte.weight): not a GPT-2 checkpoint");
    c.prefix = "transformer.";
  }
  return c;
}

std::string Checkpoint::name(const WeightSpec& w, int64_t layer) const {
  return prefix + (w.per_layer ? "h." + std::to_string(layer) + "." : "") + w.hf;
}

int64_t Checkpoint::layers() const {
  int64_t n = 0;
  while (file.find(prefix + "h." + std::to_string(n) + ".ln_1.weight")) ++n;
  return n;
}

void Checkpoint::check(const ref::Gpt2Config& c) const {
  for (const WeightSpec& w : kWeightSpecs)
    for (int64_t l = 0; l < (w.per_layer ? c.layers : 1); ++l) {
      const SafeTensor& t = file.tensor(name(w, l), checkpoint_shape(w, c));
      if (t.dtype != "F32" && t.dtype != "F16" && t.dtype != "BF16")
        throw InputError(file.path() + ": tensor " + t.name + " is " + t.dtype + "; attnbench reads F32, F16 and BF16");
    }
}

void read_weight(const Checkpoint& ck, const ref::Gpt2Config& c, size_t i, Tensor& x) {
  const WeightSpec& w = kWeightSpecs[i];
  x.host.resize(static_cast<size_t>(x.count));
  const int64_t rows = size_of(w.rows, c), cols = size_of(w.cols, c), per = rows * cols;
  for (int64_t l = 0; l < (w.per_layer ? c.layers : 1); ++l) {
    const std::vector<float> v = ck.file.read(ck.file.tensor(ck.name(w, l), checkpoint_shape(w, c)));
    float* into = x.host.data() + l * per;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t k = 0; k < cols; ++k)
        into[r * cols + k] =
            round_to(x.dtype, w.conv1d ? v[static_cast<size_t>(k * rows + r)] : v[static_cast<size_t>(r * cols + k)]);
  }
}

}  // namespace attnbench::model_impl
