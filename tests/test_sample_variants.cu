// Test-only sample variants, linked only into attnbench_testvariants: samplers with one bug
// each, so the GPU tests show the token verdict (compare_integers and the near-tie rule,
// app/ops/sample.cpp) failing them while the ladder's rungs pass the same rows.
//   test_sample_next:   pivot's token + 1: one token off, outside the near-tie window.
//   test_sample_greedy: the argmax, whatever the filters and u: the most likely token only.
#include <cuda_runtime.h>

#include "kernels/common/kernels.hpp"
#include "kernels/sample/rungs.hpp"
#include "kernels/sample/sample.hpp"

namespace attnbench {
namespace {

__global__ void next_token(int32_t* tokens, int64_t batch, int64_t vocab) {
  const int64_t r = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (r < batch) tokens[r] = static_cast<int32_t>((tokens[r] + 1) % vocab);
}

void test_sample_next(const SampleParams& p, const LaunchContext& ctx) {
  sample_impl::pivot(p, ctx);
  next_token<<<static_cast<unsigned>(ceil_div(p.batch, 128)), 128, 0, ctx.stream>>>(p.tokens, p.batch, p.vocab);
  check_launch("test_sample_next");
}

void test_sample_greedy(const SampleParams& p, const LaunchContext& ctx) {
  SampleParams greedy = p;
  greedy.temperature = 0;
  sample_impl::pivot(greedy, ctx);
}

// Any point of given logits (both wrap pivot, which reads them; the LM-head form has none).
std::string any(const SampleParams& p, const DeviceCaps&) { return p.d > 0 ? "needs the logits given" : ""; }

const bool registered = [] {
  add_variant<SampleParams>({"test_sample_next", "TEST ONLY: pivot's token + 1", test_sample_next, any});
  add_variant<SampleParams>(
      {"test_sample_greedy", "TEST ONLY: the argmax whatever the filters", test_sample_greedy, any});
  return true;
}();

}  // namespace
}  // namespace attnbench
