// The batch a serving engine runs in one launch, written as vLLM's attention benchmarks write it
// (benchmarks/attention_benchmarks, "batch specs"): for the ragged-batch op of issue 48, whose
// sequences each bring query_len new tokens at the end of context_len keys.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace attnbench {

struct BatchSequence {
  int64_t query_len = 1, context_len = 1;  // 1 <= query_len <= context_len
  bool operator==(const BatchSequence& o) const { return query_len == o.query_len && context_len == o.context_len; }
};

// Segments joined by '_', each an optional count (default 1) and then one of
//   q<Q>[s<S>]    Q new tokens over S keys; S defaults to Q (a fresh prefill)
//   s<S>          a decode: 1 new token over S keys
//   spec<N>s<S>   a speculative verification: N new tokens over S keys
// where a number followed by k is times 1024. "2q2k_32q1s1k" is 2 prefills of 2048 tokens and
// 32 decodes over 1024 keys; "q64s8k" a chunk of 64 tokens appended to a context of 8192.
// Throws std::invalid_argument saying where the text stops making sense.
std::vector<BatchSequence> parse_batch_mix(const std::string& text);

}  // namespace attnbench
