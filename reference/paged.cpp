#include "reference/paged.hpp"

#include <limits>
#include <memory>
#include <stdexcept>

namespace attnbench::ref {

using namespace detail;

// paged = decode over the dense cache gathered through the block tables.
Matrix paged(const PagedShape& s, const float* q, const float* k_cache, const float* v_cache,
             const int32_t* block_tables, const Rows& rows) {
  DecodeShape dense = s.decode;
  dense.max_context = dense.context.empty() ? 1 : *std::max_element(dense.context.begin(), dense.context.end());
  validate(dense, "paged");
  check_rows("paged", rows, dense.batch * dense.heads);
  const int64_t bs = s.block_size, x = s.x, kv_heads = dense.kv_heads, d = dense.head_dim;
  require(bs > 0 && x > 0 && s.num_blocks > 0 && s.max_blocks_per_seq > 0,
          "paged: block_size, x, num_blocks and max_blocks_per_seq must be positive");
  require(d % x == 0,
          "paged: head_dim (" + std::to_string(d) + ") must be a multiple of x (" + std::to_string(x) + ")");
  for (int64_t b = 0; b < dense.batch; ++b) {
    require(dense.context[b] <= s.max_blocks_per_seq * bs,
            "paged: context " + std::to_string(dense.context[b]) + " needs more than max_blocks_per_seq (" +
                std::to_string(s.max_blocks_per_seq) + ") blocks of " + std::to_string(bs));
    for (int64_t i = 0; i < (dense.context[b] + bs - 1) / bs; ++i) {  // only the blocks in use need be valid
      const int64_t block = block_tables[b * s.max_blocks_per_seq + i];
      if (block < 0 || block >= s.num_blocks) {
        throw std::out_of_range("paged: block_tables[" + std::to_string(b) + "][" + std::to_string(i) +
                                "] = " + std::to_string(block) +
                                " is outside [0, num_blocks = " + std::to_string(s.num_blocks) + ")");
      }
    }
  }

  // Gather into [batch, max_context, kv_heads, d]. Only slots within each context are read (the pool's other slots
  // may be NaN); slots past a context are set to NaN, so decode() reading one would show. Every element is written
  // inside the parallel loop, which also spreads the first touch of these pages over the threads.
  const PagedLayout layout{kv_heads, d, bs, x};
  const int64_t token = kv_heads * d, sequence = dense.max_context * token;  // floats per token, per sequence
  std::unique_ptr<float[]> k(new float[dense.batch * sequence]), v(new float[dense.batch * sequence]);
  parallel_for(dense.batch, 2.0 * dense.batch * sequence, [&](int64_t b) {
    for (int64_t t = 0; t < dense.context[b]; ++t) {
      const int64_t block = block_tables[b * s.max_blocks_per_seq + t / bs], slot = t % bs;
      for (int64_t h = 0; h < kv_heads; ++h) {
        float* k_row = &k[b * sequence + t * token + h * d];
        float* v_row = &v[b * sequence + t * token + h * d];
        // K: the row is d/x runs of x consecutive elements; V: the row's elements are block_size apart.
        for (int64_t e = 0; e < d; e += x) std::copy_n(&k_cache[layout.k(block, h, e, slot)], x, &k_row[e]);
        for (int64_t e = 0; e < d; ++e) v_row[e] = v_cache[layout.v(block, h, e, slot)];
      }
    }
    const int64_t used = dense.context[b] * token;
    std::fill(k.get() + b * sequence + used, k.get() + (b + 1) * sequence, std::numeric_limits<float>::quiet_NaN());
    std::fill(v.get() + b * sequence + used, v.get() + (b + 1) * sequence, std::numeric_limits<float>::quiet_NaN());
  });
  return decode(dense, q, k.get(), v.get(), rows);
}

}  // namespace attnbench::ref
