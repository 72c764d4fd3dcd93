// The cache_append ladder: one rung, 1_vec_copy.cu, so far.
#include <string>
#include <vector>

#include "kernels/cache_append/cache_append.hpp"
#include "kernels/cache_append/rungs.hpp"

namespace attnbench {
namespace cache_append_impl {

namespace {

// What vec_copy can write: any storage type, any shape; rows past max_context are skipped.
std::string supports(const CacheAppendParams& p, const DeviceCaps&) {
  if (p.batch < 1 || p.tokens < 0 || p.kv_heads < 1 || p.head_dim < 1 || p.max_context < 1)
    return "batch, kv_heads, head_dim and max_context must be >= 1, tokens >= 0";
  return {};
}

}  // namespace
}  // namespace cache_append_impl

const std::vector<Variant<CacheAppendParams>>& cache_append_variants() {
  using namespace cache_append_impl;
  static const std::vector<Variant<CacheAppendParams>> table = with_added_variants<CacheAppendParams>({
      {"vec_copy", "new K/V rows to positions[b] + t, 16-byte copies, K and V in one launch",
       vec_copy, supports, nullptr},
  });
  return table;
}

void cache_append(const CacheAppendParams& p, const LaunchContext& ctx) { cache_append_variants().front().launch(p, ctx); }

}  // namespace attnbench
