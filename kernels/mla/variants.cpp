// The mla ladder, baseline first: multi-head latent attention decode (mla.hpp) over a paged latent
// cache, q/o fp32, fp16 or bf16, the cache in q's dtype or FlashMLA's fp8 layout. One rung per
// file: 1_naive.cu, 2_split_kv.cu (each latent row read once for all heads and query tokens of
// its sequence, on tensor cores, the context split over the SMs, fp32 partials and the shared
// combine: the memory-bound regime, heads · s_q <= 64 in one group; verified and timed on an
// H100, run 274), 3_split_kv_reg.cu (rung 2's blocks with S split over k, Q and P in registers,
// one barrier a tile, fp8 dequantised in registers, 32-row groups; verified and timed on an
// H100, run 277: 81.6% of the read bandwidth in bf16, its fp8 cache still slower than bf16).
// 4_split_kv_wgmma.cu: the Hopper rung issue 49 names for the compute-bound shapes (wgmma for the
// 576-wide QK and the 512-wide PV of each 64-key tile, 64-row groups; verified and timed on an
// H100, run 294: 257.5 TFLOP/s at b64 h128 s1 ctx4096, 1.69x rung 2).
#include <vector>

#include "kernels/mla/mla.hpp"
#include "kernels/mla/rungs.hpp"

namespace attnbench {

const std::vector<Variant<MlaParams>>& mla_variants() {
  using namespace mla_impl;
  static const std::vector<Variant<MlaParams>> table = with_added_variants<MlaParams>({
      {"naive",
       "one block per (sequence, query token, head), fp32, exact expf: the keys through the block table twice (max, "
       "then exp and P V in chunks); every head reads the whole latent cache again",
       naive, naive_supports, nullptr},
      {"split_kv",
       "a block per (sequence, up to 64 query rows, split): each 32-key tile of the latent cache bulk-copied once (TMA, "
       "3 stages) for all heads and query tokens, S = QK^T and O += PV on mma.sync, fp8 dequantised in shared memory, "
       "splits planned from the host's context lengths to fill the SMs, the shared combine; fp16/bf16, 512 + 64 only",
       split_kv, split_kv_supports, split_kv_workspace},
      {"split_kv_reg",
       "a block per (sequence, up to 32 query rows, split): each 32-key tile of the latent cache bulk-copied once (TMA, "
       "3 stages) for all heads and query tokens, S = QK^T split over k across 4 warps (Q in registers, one barrier a "
       "tile), P in registers, O += PV on mma.sync, fp8 dequantised in registers, splits planned from the host's "
       "context lengths to fill the SMs, the shared combine; fp16/bf16, 512 + 64 only",
       split_kv_reg, split_kv_reg_supports, split_kv_reg_workspace},
      {"split_kv_wgmma",
       "a block per (sequence, 64 query rows, split), two warpgroups: Q once and 64-key tiles (two stages, cp.async "
       "through the block table) in shared memory, S = QK^T on wgmma (each warpgroup 32 keys over all 576 dims, the "
       "row maxima shared), P through shared memory, O += PV on wgmma (each warpgroup 256 of the 512 dims), the shared "
       "combine: the compute-bound shapes (heads · s_q a multiple of 64); fp16/bf16 caches, 512 + 64 only",
       split_kv_wgmma, split_kv_wgmma_supports, split_kv_wgmma_workspace},
  });
  return table;
}

}  // namespace attnbench
