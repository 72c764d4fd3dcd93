// The op registry: the one list of ops. Each entry is defined in app/ops/<op>.cpp;
// adding an op is its own files plus its line here (declaration and place in the list).
#include "app/op.hpp"

namespace attnbench {

OpSpec softmax_op();
OpSpec gemm_op();
OpSpec attention_op();
OpSpec decode_op();
OpSpec paged_op();
OpSpec pipeline_op();
OpSpec cache_append_op();
OpSpec reshape_and_cache_op();
OpSpec mha_op();
OpSpec model_op();
OpSpec ragged_op();
OpSpec attention_backward_op();
OpSpec mla_op();
OpSpec gemm_q_op();
OpSpec sample_op();

const std::vector<OpSpec>& ops() {
  static const std::vector<OpSpec> all = {
      softmax_op(), gemm_op(), attention_op(), decode_op(), paged_op(), pipeline_op(), cache_append_op(),
      reshape_and_cache_op(), mha_op(), model_op(), ragged_op(), attention_backward_op(), mla_op(), gemm_q_op(),
      sample_op(),
  };
  return all;
}

}  // namespace attnbench
