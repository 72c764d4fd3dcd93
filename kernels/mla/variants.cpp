// The mla ladder, baseline first: multi-head latent attention decode (mla.hpp) over a paged latent
// cache, q/o fp32, fp16 or bf16, the cache in q's dtype or FlashMLA's fp8 layout. One rung per
// file: 1_naive.cu. Issue 49 names the rungs still to come, each a file and a line here after
// naive: a split-KV kernel that reads each latent block once for all heads of its sequence (the
// latent is shared, so the head loop belongs inside the block), fp32 partials and a combine; and
// a Hopper rung (wgmma for the 576-wide QK and the 512-wide PV of each tile, the paged blocks
// loaded by TMA or cp.async, warp specialized) for the compute-bound shapes (heads · s_q >= 128).
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
  });
  return table;
}

}  // namespace attnbench
