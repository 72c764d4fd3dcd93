#include "reference/cache_append.hpp"

namespace attnbench::ref {

using namespace detail;

// Each requested cache row is the new row that lands there, or else the row it held before.
Matrix cache_append(const CacheAppendShape& s, const float* cache_before, const float* new_rows, const Rows& rows) {
  require(s.batch > 0 && s.tokens > 0 && s.kv_heads > 0 && s.head_dim > 0 && s.max_context > 0,
          "cache_append: batch, tokens, kv_heads, head_dim and max_context must be positive");
  require(static_cast<int64_t>(s.context.size()) == s.batch, "cache_append: context has " +
                                                                 std::to_string(s.context.size()) +
                                                                 " lengths for batch " + std::to_string(s.batch));
  for (int64_t c : s.context) {
    require(c >= 0 && c + s.tokens <= s.max_context,
            "cache_append: context " + std::to_string(c) + " + tokens " + std::to_string(s.tokens) +
                " is outside [0, max_context = " + std::to_string(s.max_context) + "]");
  }
  check_rows("cache_append", rows, s.batch * s.max_context);

  const int64_t width = s.kv_heads * s.head_dim;  // floats per cache row
  const FloatView before = view(cache_before, s.batch * s.max_context, width, width);
  const FloatView added = view(new_rows, s.batch * s.tokens, width, width);
  Matrix after(rows.size(), width);
  for (size_t n = 0; n < rows.size(); ++n) {
    const int64_t b = rows[n] / s.max_context, p = rows[n] % s.max_context, t = p - s.context[b];
    after.row(n) = (0 <= t && t < s.tokens ? added.row(b * s.tokens + t) : before.row(rows[n])).cast<double>();
    if (s.rope.on() && 0 <= t && t < s.tokens)  // each head of the new row, at position p
      for (int64_t h = 0; h < s.kv_heads; ++h)
        apply_rope(after.block(static_cast<Eigen::Index>(n), h * s.head_dim, 1, s.head_dim), {p}, s.rope);
  }
  return after;
}

}  // namespace attnbench::ref
