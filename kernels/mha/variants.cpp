// mha's fusion ladder (mha.hpp), from the layer launch by launch to the projections' epilogues.
#include <vector>

#include "kernels/mha/mha.hpp"
#include "kernels/mha/rungs.hpp"

namespace attnbench {

const std::vector<MhaStep>& mha_steps() {
  using namespace mha_impl;
  static const std::vector<MhaStep> table = {
      {"launches", "the QKV bias and split and the output bias as kernels of their own: five launches", launches,
       launches_qkv, launches_out},
      {"epilogue",
       "the biases and the QKV split in the projections' epilogues: three launches, QKV never stored (GEMM variants "
       "with an epilogue: naive, wgmma_ws)",
       epilogue, epilogue_qkv, epilogue_out},
  };
  return table;
}

}  // namespace attnbench
