// The ragged ladder, baseline first: a serving engine's mixed batch (ragged.hpp) of chunked
// prefills, speculative verifications and decodes over one paged KV cache in the flash layout.
// q/o fp32, fp16 or bf16; the cache in q's dtype or fp8 e4m3 with per-tensor scales. One rung
// per file: 1_naive.cu, 2_separate.cu (the batch split by kind onto the dense attention and
// decode tables), 3_varlen.cu (the whole batch in one tensor-core launch over the paged cache),
// 4_split_kv.cu (its long contexts split over blocks, and a combine), 5_ws.cu (the Hopper rung:
// wgmma, warp specialization, FlashAttention-3's pipeline), 6_ws_tma.cu (its cache pages copied
// by TMA).
#include <vector>

#include "kernels/ragged/ragged.hpp"
#include "kernels/ragged/rungs.hpp"

namespace attnbench {

const std::vector<Variant<RaggedParams>>& ragged_variants() {
  using namespace ragged_impl;
  static const std::vector<Variant<RaggedParams>> table = with_added_variants<RaggedParams>({
      {"naive",
       "one block per (query token, head), fp32: the keys through the block table twice (max, then exp and P V "
       "in chunks), every option",
       naive, naive_supports, nullptr},
      {"separate",
       "the engine's simple way: the contexts gathered into dense K/V, then one launch of the fastest dense decode "
       "variant for all decodes and one of the fastest dense attention variant per other sequence",
       separate, separate_supports, separate_workspace},
      {"varlen",
       "fp16/bf16: one launch, blocks of 64 (token, GQA head) rows of a sequence by kv head, FA2's mma.sync loop "
       "over 64-key tiles copied by cp.async straight from the paged cache",
       varlen, varlen_supports, nullptr},
      {"split_kv",
       "varlen with each row tile's keys split over blocks (a split length planned from the batch's lengths), "
       "fp32 partials and a combine",
       split_kv, split_kv_supports, split_kv_workspace},
      {"ws",
       "Hopper: split_kv's blocks on FlashAttention-3's machinery (wgmma, a cp.async producer warpgroup and an "
       "mbarrier ring, ping-pong consumers), 128-row by 128-key tiles",
       ws, ws_supports, ws_workspace},
      {"ws_tma",
       "ws with each whole page of the cache copied by one TMA box (a thread a page) in place of cp.async key "
       "row by key row; 16-bit cache, block_size 8-64",
       ws_tma, ws_tma_supports, ws_tma_workspace},
  });
  return table;
}

}  // namespace attnbench
