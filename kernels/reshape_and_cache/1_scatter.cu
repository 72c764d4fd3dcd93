// reshape_and_cache rung 1, scatter: vLLM's kernel, slot by slot (scatter.cuh): consecutive
// threads take one token's consecutive 16-byte chunks, so a warp's K stores land block_size
// chunks apart and its V stores one element per dim row.
// The paged op writes its caches with it before timing the attention.
#include "kernels/reshape_and_cache/scatter.cuh"

namespace attnbench::reshape_and_cache_impl {

void scatter(const ReshapeAndCacheParams& p, const LaunchContext& ctx) {
  launch_scatter<false>(p, ctx, "paged/reshape_and_cache");
}

}  // namespace attnbench::reshape_and_cache_impl
