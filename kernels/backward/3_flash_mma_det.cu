// attention_backward rung 3, flash_mma_det: rung 2 with dQ summed in a fixed order, so that dQ,
// dK and dV are bitwise reproducible (what a training run that must replay exactly asks for;
// FlashAttention-3's `deterministic` flag does the same with a semaphore per dQ tile).
// Over rung 2: the key blocks that see a query tile add their partial dQ one after another,
// lowest key block first: each waits until the tile's counter says it is its turn, adds with
// plain loads and stores (no atomics), and passes the turn on (flash.cuh, DETERMINISTIC). dK and
// dV already had one writer and one order. The cost is the wait: a block that reaches a tile
// before its predecessor has added stalls; the issue's target is >= 0.8x the fastest
// nondeterministic rung.
// Verified on an H100 (runs 273-276): bit for bit alike over 20-50 repeats, memcheck and
// racecheck clean. Timed (run 276): 0.38-0.57x rung 2 across the perf shapes (10.04 ms at b4 h16
// s4096 d128 non-causal): the load-add-store and the fence on each tile's turn path; rung 5
// orders rung 4's atomics by the turn instead. Under a causal mask or a window the turns now
// run from the last key block down (tiles.hpp's descending_turns says why): run 282 (H100),
// causal b4 h16 s4096 d128 5.1915 ms, 0.68x rung 2 (was 9.34 ms); verified, 20 repeats bit for
// bit, racecheck clean.
#include "kernels/backward/flash.cuh"

namespace attnbench::backward_impl {

void flash_mma_det(const BackwardParams& p, const LaunchContext& ctx) {
  flash::run<true>(p, ctx, "attention_backward/flash_mma_det");
}
std::size_t flash_mma_det_workspace(const BackwardParams& p) { return flash::workspace_of(p, true).total(); }

}  // namespace attnbench::backward_impl
