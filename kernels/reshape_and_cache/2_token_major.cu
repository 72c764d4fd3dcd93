// reshape_and_cache rung 2, token_major: the same work as scatter with the threads in another
// order (scatter.cuh): consecutive threads take consecutive tokens' same chunk. Tokens that
// fill a block in order (a prompt's) then have a warp store 32 neighbouring 16-byte K chunks
// and, for each dim, 32 neighbouring V elements, where scatter's warp spreads both over
// 32 rows; the loads are the strided ones instead, and a load reads only what it uses.
#include "kernels/reshape_and_cache/scatter.cuh"

namespace attnbench::reshape_and_cache_impl {

void token_major(const ReshapeAndCacheParams& p, const LaunchContext& ctx) {
  launch_scatter<true>(p, ctx, "reshape_and_cache/token_major");
}

}  // namespace attnbench::reshape_and_cache_impl
