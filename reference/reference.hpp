// fp64 CPU reference for every operation, on Eigen. Inputs are the values the
// GPU sees (already rounded to the storage type), widened exactly to double.
//
// Large outputs are checked on a sample of rows, so every function takes the
// flat indices of the output rows it must produce and returns them in that
// order, one row per index. Nothing here knows about CUDA.
#pragma once
#include <Eigen/Dense>
#include <cstdint>
#include <vector>

namespace attnbench::ref {

using Matrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Rows = std::vector<int64_t>;

// softmax along each row. x: [rows, cols]; returns [rows.size(), cols].
Matrix softmax(const float* x, int64_t cols, const Rows& rows);

// C = A·Bᵀ (nt) or A·B (nn), batched. a: [batch, m, k]; b: nt [batch, n, k],
// nn [batch, k, n]. Output row r is row (r % m) of batch (r / m); returns [rows.size(), n].
Matrix gemm(const float* a, const float* b, bool nn, int64_t m, int64_t n, int64_t k, const Rows& rows);

// Dense attention, O = softmax(Q Kᵀ·scale + bias + mask) V.
struct AttentionShape {
  int64_t batch = 1, heads = 1, kv_heads = 1, seq_q = 1, seq_k = 1, head_dim = 8;
  bool causal = false;  // aligned bottom-right: query i sees keys j <= i + seq_k - seq_q
  int64_t window = 0;   // 0 = none; else |i + seq_k - seq_q - j| < window (and j <= that when causal)
  bool alibi = false;   // bias -slope(h) * |i + seq_k - seq_q - j|
  double scale = 0;     // 0 = 1/sqrt(head_dim)
};

// ALiBi slope of query head h (0-based): 2^(-8 (h + 1) / heads).
double alibi_slope(int64_t h, int64_t heads);

// q: [batch, seq_q, heads, head_dim]; k, v: [batch, seq_k, kv_heads, head_dim].
// Output row r = (b * seq_q + i) * heads + h, as in o [batch, seq_q, heads, head_dim];
// returns [rows.size(), head_dim]. Rows that see no key are 0.
Matrix attention(const AttentionShape& s, const float* q, const float* k, const float* v, const Rows& rows);

// Decode: one new query per sequence over its cache.
struct DecodeShape {
  int64_t batch = 1, heads = 1, kv_heads = 1, head_dim = 8, max_context = 1;
  std::vector<int64_t> context;  // per sequence, 1 <= context[b] <= max_context
  bool alibi = false;
  double scale = 0;
};

// q: [batch, heads, head_dim]; k_cache, v_cache: [batch, max_context, kv_heads, head_dim].
// Output row r = b * heads + h; returns [rows.size(), head_dim]. Equals the last
// query row of causal attention over the sequence's first context[b] tokens.
Matrix decode(const DecodeShape& s, const float* q, const float* k_cache, const float* v_cache, const Rows& rows);

// Paged decode (vLLM layouts), x = 16 bytes / element size of the cache's storage type:
// k_cache [num_blocks, kv_heads, head_dim / x, block_size, x], v_cache [num_blocks, kv_heads,
// head_dim, block_size], block_tables [batch, max_blocks_per_seq]. Values are already
// dequantized (fp8 caches are multiplied by their scale before they reach here).
struct PagedShape {
  DecodeShape decode;  // decode.max_context is ignored
  int64_t block_size = 16, num_blocks = 1, max_blocks_per_seq = 1, x = 8;
};

// Gathers each sequence's blocks into a dense cache, then calls decode().
Matrix paged(const PagedShape& s, const float* q, const float* k_cache, const float* v_cache,
             const int32_t* block_tables, const Rows& rows);

}  // namespace attnbench::ref
