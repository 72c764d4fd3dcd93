// The paged ladder, baseline first: decode attention (one new query token per sequence) over a
// KV cache kept in fixed-size blocks of a shared pool and found through per-sequence block
// tables, in vLLM's layouts (paged.hpp): k_cache [blocks, kv_heads, head_dim / x, block_size,
// x], so that 16 bytes are x consecutive dims of one key; v_cache [blocks, kv_heads, head_dim,
// block_size], so that 16 bytes are consecutive tokens of one dim. q/o fp32, fp16 or bf16; the
// cache in q's dtype or fp8 e4m3 (value / scale; k_scale and v_scale are folded into the score
// scale and the output). Scores, softmax statistics and accumulators are fp32. Like dense
// decode, a step moves every cached byte once for ~2·group FLOPs per byte: memory bound, so
// what separates the rungs is how many times each byte is read and how many bytes are in
// flight. One rung per file: 1_v1.cu, 2_v2.cu, 3_paged_flash.cu.
#include <vector>

#include "kernels/common/rope_first.hpp"
#include "kernels/paged/paged.hpp"
#include "kernels/paged/rungs.hpp"

namespace attnbench {

const std::vector<Variant<PagedParams>>& paged_variants() {
  using namespace paged_impl;
  static const std::vector<Variant<PagedParams>> table = with_added_variants<PagedParams>({
      {"v1",
       "vLLM PagedAttention v1: one block per (sequence, head), whole context, logits in shared memory; RoPE: a "
       "pass first, as vLLM's rotary kernel",
       rope_first::launch<PagedParams, v1, nullptr>, rope_first::passthrough_supports<PagedParams, v1_supports>,
       rope_first::workspace<PagedParams, nullptr>},
      {"v2", "vLLM PagedAttention v2: v1 over partition_size-token partitions, fp32 partials, reduce kernel",
       rope_first::launch<PagedParams, v2, v2_workspace>, rope_first::passthrough_supports<PagedParams, v2_supports>,
       rope_first::workspace<PagedParams, v2_workspace>},
      {"paged_flash",
       "one block per (sequence, kv head, split) for its whole GQA group, online softmax, mma.sync for 16-bit q, "
       "block table in shared memory, combine",
       paged_flash, paged_flash_supports, paged_flash_workspace},
      {"paged_flash_rope_first", "paged_flash after a separate RoPE pass over the queries (the unfused baseline)",
       rope_first::launch<PagedParams, paged_flash, paged_flash_workspace>,
       rope_first::supports<PagedParams, paged_flash_supports>,
       rope_first::workspace<PagedParams, paged_flash_workspace>, rope_first::applies<PagedParams>},
  });
  return table;
}

}  // namespace attnbench
