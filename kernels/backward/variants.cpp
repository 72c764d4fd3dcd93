// The attention_backward ladder, baseline first: dQ, dK, dV from Q, K, V, O, dO and the
// forward's LSE; the semantics (bottom-right causal, window, ALiBi, soft-capping, GQA, queries
// that see no key) are BackwardParams' (backward.hpp). One rung per file: 1_naive.cu so far;
// the FA2 (mma.sync, dQ by atomics), deterministic and Hopper rungs of issue 50 come next.
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
  });
  return table;
}

}  // namespace attnbench
