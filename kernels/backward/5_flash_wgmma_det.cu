// attention_backward rung 5, flash_wgmma_det: rung 4 with dQ summed in a fixed order, so that
// dQ, dK and dV are bitwise reproducible: rung 3's technique (flash.cuh) on rung 4's kernel
// (flash_wgmma.cuh, DETERMINISTIC).
// Over rung 4: the key blocks that see a query tile add their partial dQ one after another,
// lowest key block first: the block waits until the tile's counter says it is its turn, adds by
// rung 4's float4 atomics, fences, and passes the turn on with a release; the next block
// acquires it before it adds, so each element's adds land in key-block order (at d64, where both
// warpgroups add to every element, warpgroup 0 before warpgroup 1). dK and dV
// already had one writer and one order. Both block orders of the 1-D grid start a row's key
// blocks in increasing order, so a block only ever waits for blocks already running or done.
// The cost is the wait and the fence on each tile's path (rung 3 over rung 2: 0.38-0.57x with a
// load-add-store in place of the ordered atomics, run 276); the issue's target is >= 0.8x the
// fastest nondeterministic rung, this one's own rung 4. Not yet run on a GPU.
#include "kernels/backward/flash_wgmma.cuh"
#include "kernels/backward/rungs.hpp"

namespace attnbench::backward_impl {

void flash_wgmma_det(const BackwardParams& p, const LaunchContext& ctx) {
  run<true>(p, ctx, "attention_backward/flash_wgmma_det");
}
std::size_t flash_wgmma_det_workspace(const BackwardParams& p) { return flash::workspace_of(p, true).total(); }

}  // namespace attnbench::backward_impl
