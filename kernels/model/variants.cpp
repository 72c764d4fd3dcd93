// The model's decode-step ladder (model.hpp): the chained rungs 1 and 2, whose rows launch the
// DECODE half's attention kernel between their projections, and rung 3, the whole step as one
// kernel (3_persistent.cu) with its own attention.
#include <string>
#include <vector>

#include "kernels/model/model.hpp"
#include "kernels/model/rungs.hpp"

namespace attnbench {

const std::vector<ChainedStep>& chained_steps() {
  static const std::vector<ChainedStep> table = {
      {"launches",
       "the decode step launch by launch: the projections on the gemm key's variant, LayerNorm, bias, GELU, the QKV "
       "split and the logits' argmax kernels of their own",
       [](int64_t, int64_t, DType) { return std::string(); }},
      {"small_linear",
       "the decode step's projections fused with what surrounds them (LayerNorm prologue; QKV split, bias, GELU, "
       "residual add, argmax epilogues): four launches a layer, batch 1-8",
       [](int64_t batch, int64_t d_model, DType dtype) { return small_linear_supports(batch, 4 * d_model, dtype); }},
  };
  return table;
}

const std::vector<Variant<DecodeStepParams>>& decode_step_variants() {
  using namespace model_step_impl;
  static const std::vector<Variant<DecodeStepParams>> table = with_added_variants<DecodeStepParams>({
      {"persistent",
       "the whole decode step as one cooperative kernel: projections, attention over the dense cache, logits and "
       "the greedy token, phases a grid barrier apart, the next phases' weights prefetched into L2",
       persistent, supports, nullptr},
  });
  return table;
}

}  // namespace attnbench
