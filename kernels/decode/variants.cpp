// The decode ladder, baseline first: one new query token per sequence attends to its KV cache
// (DecodeParams: per-sequence context_lens, GQA, ALiBi). Storage fp32/fp16/bf16; scores,
// softmax statistics and accumulators fp32. A decode step moves every cached K/V byte once and
// does ~2·group FLOPs per byte: it is bound by memory bandwidth, so every rung past the
// baseline is about bytes in flight and reading each byte once. One rung per file:
// 1_naive.cu, 2_flash_decode.cu, 3_split_kv.cu.
#include <vector>

#include "kernels/common/rope_first.hpp"
#include "kernels/decode/decode.hpp"
#include "kernels/decode/rungs.hpp"

namespace attnbench {

const std::vector<Variant<DecodeParams>>& decode_variants() {
  using namespace decode_impl;
  static const std::vector<Variant<DecodeParams>> table = with_added_variants<DecodeParams>({
      {"naive", "one block per (sequence, head): fp32 scores to memory, max, sum, then P V", naive, naive_supports,
       naive_workspace},
      {"flash_decode",
       "one pass, online softmax, one block per (sequence, kv head) for its whole GQA group; mma.sync for fp16/bf16",
       flash_decode, fused_supports, nullptr},
      {"split_kv", "Flash-Decoding: flash_decode with the context split to fill the SMs, fp32 partials, combine",
       split_kv, fused_supports, split_workspace},
      {"split_kv_rope_first", "split_kv after a separate RoPE pass over the queries (the unfused baseline)",
       rope_first::launch<DecodeParams, split_kv, split_workspace>, rope_first::supports<DecodeParams, fused_supports>,
       rope_first::workspace<DecodeParams, split_workspace>, rope_first::applies<DecodeParams>},
  });
  return table;
}

bool decode_folds_append(const std::string& variant, const DecodeParams& p) {
  return (variant == "flash_decode" || variant == "split_kv") && decode_impl::fused_appends(p);
}

}  // namespace attnbench
