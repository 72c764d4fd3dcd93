// The attention_backward ladder, baseline first: dQ, dK, dV from Q, K, V, O, dO and the
// forward's LSE; the semantics (bottom-right causal, window, ALiBi, soft-capping, GQA, queries
// that see no key) are BackwardParams' (backward.hpp). One rung per file: 1_naive.cu, then
// FlashAttention-2's algorithm on mma.sync with dQ by atomics (2_flash_mma.cu) and in a fixed
// order (3_flash_mma_det.cu), and FlashAttention-3's on Hopper's wgmma (4_flash_wgmma.cu) and in
// a fixed order (5_flash_wgmma_det.cu).
#include <string>
#include <vector>

#include "kernels/backward/backward.hpp"
#include "kernels/backward/rungs.hpp"

namespace attnbench {

const std::vector<Variant<BackwardParams>>& backward_variants() {
  using namespace backward_impl;
  static const std::vector<Variant<BackwardParams>> table = with_added_variants<BackwardParams>({
      {"naive",
       "three kernels, a warp per row, no atomics (deterministic): D = rowsum(dO∘O); dQ per query row over its "
       "keys; dK, dV per key row over its group's queries; S and dP recomputed in each, fp32",
       naive, naive_supports, naive_workspace},
      {"flash_mma",
       "FlashAttention-2's backward, mma.sync: a block keeps Bc keys' dK, dV in registers and streams the query "
       "tiles; S, dP once a pair; dQ by fp32 atomics (nondeterministic order)",
       flash_mma, flash_mma_supports, flash_mma_workspace, {}, nullptr, /*deterministic=*/false},
      {"flash_mma_det",
       "flash_mma with dQ added in key-block order (a turn counter per dQ tile, plain adds in turn): bitwise "
       "reproducible",
       flash_mma_det, flash_mma_supports, flash_mma_det_workspace},
      {"flash_wgmma",
       "FlashAttention-3's backward on Hopper's wgmma (sm_90a), d64/d128: two warpgroups of 64 keys each, "
       "S, dP, dV, dK and dQ as warpgroup products from swizzled tiles; dQ by fp32 atomics (nondeterministic order)",
       flash_wgmma, flash_wgmma_supports, flash_wgmma_workspace, {}, nullptr, /*deterministic=*/false},
      {"flash_wgmma_det",
       "flash_wgmma with dQ added in key-block order: the consumers hand each tile's dQ through shared memory to "
       "two writer threads (one a buffer), which add it by bulk reductions in its turn (flash_mma_det's turns): "
       "bitwise reproducible",
       flash_wgmma_det, flash_wgmma_det_supports, flash_wgmma_det_workspace},
  });
  return table;
}

}  // namespace attnbench
