// sample family: one token per row of logits [batch, vocab] by temperature, min-p, top-k and
// top-p, drawn by inverse CDF over the kept tokens in vocabulary order with the row's Philox
// uniform (kernels/common/philox.hpp). The rules, exactly: docs/cases.md, "op sample", and
// reference/sample.hpp, which the kernels match token for token.
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/common/kernels.hpp"

namespace attnbench {

struct SampleParams {
  const void* logits;  // [batch, vocab], dtype, row-major
  int32_t* tokens;     // [batch]: the drawn token ids
  int64_t batch = 0, vocab = 0;
  DType dtype = DType::fp32;
  float temperature = 1;  // 0: greedy (argmax, the lowest index of equal maxima); filters ignored
  int64_t top_k = 0;      // 0 (or >= vocab): off
  float top_p = 1;        // 1: off
  float min_p = 0;        // 0: off
  uint64_t seed = 0;      // row r draws sample_uniform(seed, r)
  // The LM-head form (d > 0): the logits are hidden · lm_headᵀ, never given (logits is null);
  // rungs 4 and 5 take it, rungs 1-3 the given logits (d == 0).
  const void* hidden = nullptr;   // [batch, d], dtype (fp16/bf16)
  const void* lm_head = nullptr;  // [vocab, d], dtype, row-major: the LM head as a checkpoint stores it
  int64_t d = 0;                  // the hidden width; 0: the logits are given
};

// The block size every rung's per-row kernel runs with: the tolerance's sum depth contract
// (reference/sample.hpp, sample_sum_depth) counts a thread's run as vocab / 1024 elements.
constexpr int kSampleThreads = 1024;

const std::vector<Variant<SampleParams>>& sample_variants();

}  // namespace attnbench
