#include "reference/mla.hpp"

#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

namespace attnbench::ref {

using namespace detail;

namespace {

// Rows a task computes at most. Every task widens its sequence's keys to double a block at a time
// for its own rows; 32 rows of 2·(576 + 512) FLOPs a key hide that, and a sequence's rows still
// spread over the cores (a decode of one sequence with 128 heads is 4 tasks).
constexpr int64_t kRowsPerMlaTask = 32;
// Sequences are gathered out of the pool a group at a time, at most this many floats each
// (unless one sequence alone is larger): a 64-sequence batch of 16k-token contexts would be
// 2.4 GB gathered at once.
constexpr int64_t kGatherFloats = int64_t{1} << 27;

void validate(const MlaShape& s) {
  require(s.s_q > 0 && s.heads > 0 && s.latent_dim > 0 && s.rope_dim >= 0,
          "mla: s_q, heads and latent_dim must be positive, rope_dim >= 0");
  require(s.batch() > 0, "mla: context needs one length per sequence, at least one sequence");
  require(s.block_size > 0 && s.num_blocks > 0 && s.max_blocks > 0,
          "mla: block_size, num_blocks and max_blocks must be positive");
  for (int64_t b = 0; b < s.batch(); ++b) {
    require(s.context[b] >= s.s_q, "mla: sequence " + std::to_string(b) + " has " + std::to_string(s.context[b]) +
                                       " tokens, fewer than its s_q = " + std::to_string(s.s_q) +
                                       " query tokens (they are the context's last tokens)");
    require(s.context[b] <= s.max_blocks * s.block_size,
            "mla: context " + std::to_string(s.context[b]) + " needs more than max_blocks (" +
                std::to_string(s.max_blocks) + ") blocks of " + std::to_string(s.block_size));
  }
}

}  // namespace

Matrix mla(const MlaShape& s, const float* q, const float* cache, const int32_t* block_table, const Rows& rows) {
  validate(s);
  const int64_t batch = s.batch(), width = s.width(), per_sequence = s.s_q * s.heads;
  check_rows("mla", rows, batch * per_sequence);
  std::vector<std::vector<size_t>> wanted(static_cast<size_t>(batch));  // each sequence's requested rows (indices n)
  for (size_t n = 0; n < rows.size(); ++n) wanted[static_cast<size_t>(rows[n] / per_sequence)].push_back(n);
  Score score;
  score.scale = s.scale > 0 ? s.scale : 1 / std::sqrt(static_cast<double>(width));

  Matrix o(static_cast<int64_t>(rows.size()), s.latent_dim);
  for (int64_t first = 0; first < batch;) {
    // One group of sequences: each one's context gathered densely, [context, width], through its table row.
    std::vector<std::vector<float>> dense;
    dense.reserve(static_cast<size_t>(batch - first));  // no reallocation: the tasks view these buffers
    std::vector<KvTask> tasks;
    std::vector<size_t> where;  // row i of the group's result is row where[i] of o
    int64_t floats = 0, b = first;
    for (; b < batch && (floats == 0 || floats + s.context[b] * width <= kGatherFloats); ++b) {
      if (wanted[static_cast<size_t>(b)].empty()) continue;
      const int64_t context = s.context[b];
      floats += context * width;
      std::vector<float>& k = dense.emplace_back(static_cast<size_t>(context * width));
      for (int64_t j = 0; j < context; ++j) {
        const int64_t block = block_table[b * s.max_blocks + j / s.block_size];
        if (block < 0 || block >= s.num_blocks)
          throw std::out_of_range("mla: block_table[" + std::to_string(b) + "][" + std::to_string(j / s.block_size) +
                                  "] = " + std::to_string(block) + " is outside [0, num_blocks = " +
                                  std::to_string(s.num_blocks) + ")");
        std::memcpy(&k[static_cast<size_t>(j * width)], cache + (block * s.block_size + j % s.block_size) * width,
                    sizeof(float) * static_cast<size_t>(width));
      }
      // K is the whole row, V its first latent_dim columns; query token t sits at key position
      // context - s_q + t (the s_q new tokens are the context's last).
      for (size_t n : wanted[static_cast<size_t>(b)]) {
        if (tasks.empty() || tasks.back().rows == kRowsPerMlaTask || tasks.back().k.data() != k.data())
          tasks.push_back({view(k.data(), context, width, width), view(k.data(), context, s.latent_dim, width), score,
                           context - s.s_q, Rope{}, false, {}, 0, s.faithful});
        KvTask& task = tasks.back();
        const int64_t h = rows[n] % s.heads, t = rows[n] / s.heads % s.s_q;
        if (task.heads.empty() || task.heads.back().head != h)
          task.heads.push_back({h, view(q + (b * per_sequence + h) * width, s.s_q, width, s.heads * width),
                                Mask{s.causal}});
        task.heads.back().query.push_back(t);
        task.heads.back().out.push_back(static_cast<int64_t>(where.size()));
        where.push_back(n);
        ++task.rows;
      }
    }
    const Matrix part = run_attention(tasks, where.size(), s.latent_dim);
    for (size_t i = 0; i < where.size(); ++i) o.row(static_cast<int64_t>(where[i])) = part.row(static_cast<int64_t>(i));
    first = b;
  }
  return o;
}

double e4m3_value(uint8_t code) {
  const int sign = code >> 7, exponent = (code >> 3) & 15, mantissa = code & 7;
  if (exponent == 15 && mantissa == 7) return std::numeric_limits<double>::quiet_NaN();
  const double magnitude = exponent == 0 ? std::ldexp(mantissa / 8.0, -6) : std::ldexp(1 + mantissa / 8.0, exponent - 7);
  return sign ? -magnitude : magnitude;
}

void mla_fp8_dequantize(const uint8_t* token, int64_t latent_dim, int64_t rope_dim, float* out) {
  require(latent_dim % kMlaFp8Tile == 0, "mla: an fp8 cache's latent_dim must be a multiple of 128");
  const uint8_t* scales = token + latent_dim;
  const uint8_t* rope = scales + 4 * (latent_dim / kMlaFp8Tile);
  for (int64_t tile = 0; tile < latent_dim / kMlaFp8Tile; ++tile) {
    float scale;
    std::memcpy(&scale, scales + 4 * tile, 4);
    for (int64_t i = tile * kMlaFp8Tile; i < (tile + 1) * kMlaFp8Tile; ++i)
      out[i] = static_cast<float>(e4m3_value(token[i]) * scale);
  }
  for (int64_t i = 0; i < rope_dim; ++i) {
    const uint32_t bits = (uint32_t{rope[2 * i + 1]} << 24) | (uint32_t{rope[2 * i]} << 16);  // bf16: fp32's upper half
    std::memcpy(&out[latent_dim + i], &bits, 4);
  }
}

}  // namespace attnbench::ref
