#include "reference/reshape_and_cache.hpp"

#include <map>
#include <stdexcept>
#include <unordered_map>

namespace attnbench::ref {

using namespace detail;

// The requested rows of cache_before, then every token's values written over the slots it owns.
Matrix reshape_and_cache(const ReshapeAndCacheShape& s, PagedCache which, const float* cache_before,
                         const float* values, const int64_t* slot_mapping, const Rows& rows) {
  require(s.tokens > 0 && s.kv_heads > 0 && s.head_dim > 0 && s.block_size > 0 && s.num_blocks > 0 && s.x > 0,
          "reshape_and_cache: tokens, kv_heads, head_dim, block_size, num_blocks and x must be positive");
  require(s.head_dim % s.x == 0, "reshape_and_cache: head_dim (" + std::to_string(s.head_dim) +
                                     ") must be a multiple of x (" + std::to_string(s.x) + ")");
  check_rows("reshape_and_cache", rows, s.num_blocks * s.kv_heads);

  const int64_t width = s.head_dim * s.block_size;  // one (block, kv head) of either layout
  Matrix after = view(cache_before, s.num_blocks * s.kv_heads, width, width)(rows, Eigen::all).cast<double>();
  std::map<int64_t, std::vector<size_t>> wanted;  // cache row -> the output rows that show it
  for (size_t n = 0; n < rows.size(); ++n) wanted[rows[n]].push_back(n);

  const PagedLayout layout{s.kv_heads, s.head_dim, s.block_size, s.x};
  std::unordered_map<int64_t, int64_t> owner;  // slot -> the token written there
  for (int64_t t = 0; t < s.tokens; ++t) {
    const int64_t slot = slot_mapping[t];
    if (slot < 0) continue;
    if (slot >= s.num_blocks * s.block_size) {
      throw std::out_of_range("reshape_and_cache: slot_mapping[" + std::to_string(t) + "] = " + std::to_string(slot) +
                              " is outside [0, num_blocks * block_size = " +
                              std::to_string(s.num_blocks * s.block_size) + ")");
    }
    const auto [first, fresh] = owner.emplace(slot, t);
    require(fresh, "reshape_and_cache: tokens " + std::to_string(first->second) + " and " + std::to_string(t) +
                       " both map to slot " + std::to_string(slot));
    const int64_t block = slot / s.block_size, offset = slot % s.block_size;
    for (int64_t h = 0; h < s.kv_heads; ++h) {
      const auto it = wanted.find(block * s.kv_heads + h);
      if (it == wanted.end()) continue;
      for (int64_t e = 0; e < s.head_dim; ++e) {
        const int64_t at = which == PagedCache::key ? layout.k(block, h, e, offset) : layout.v(block, h, e, offset);
        for (size_t n : it->second) after(n, at % width) = values[(t * s.kv_heads + h) * s.head_dim + e];
      }
    }
  }
  return after;
}

}  // namespace attnbench::ref
