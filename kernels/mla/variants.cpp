// The mla ladder, baseline first: multi-head latent attention decode (mla.hpp) over a paged latent
// cache, q/o fp32, fp16 or bf16, the cache in q's dtype or FlashMLA's fp8 layout. One rung per
// file: 1_naive.cu, 2_split_kv.cu (each latent row read once for all heads and query tokens of
// its sequence, on tensor cores, the context split over the SMs, fp32 partials and the shared
// combine: the memory-bound regime, heads · s_q <= 64 in one group; verified and timed on an
// H100, run 274), 3_split_kv_reg.cu (rung 2's blocks with S split over k, Q and P in registers,
// one barrier a tile, fp8 dequantised in registers, 32-row groups; verified and timed on an
// H100, run 277: 81.6% of the read bandwidth in bf16, its fp8 cache still slower than bf16).
// Issue 49 names the rung still to come: a Hopper rung (wgmma for the 576-wide QK and the
// 512-wide PV of each tile, the paged blocks loaded by TMA or cp.async, warp specialized) for
// the compute-bound shapes (heads · s_q >= 128).
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
  });
  return table;
}

}  // namespace attnbench
