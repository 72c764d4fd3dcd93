// The model's decode steps that are one kernel (a pair's decode half, beside the decode and
// paged ops' variants, which the model chains with its own projections): step_persistent.cu.
#include <string>
#include <vector>

#include "kernels/model/model.hpp"
#include "kernels/model/rungs.hpp"

namespace attnbench {

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
