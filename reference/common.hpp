// What every op's fp64 reference shares: the Matrix it returns, the Rows it is asked for, and (in detail::) the
// helpers the ops are built from. Inputs are the values the GPU sees (already rounded to the storage type), widened
// exactly to double.
//
// Large outputs are checked on a sample of rows, so every op takes the flat indices of the output rows it must
// produce and returns them in that order, one row per index. Nothing here knows about CUDA.
//
// Determinism: work is cut into tasks of fixed size from the requested rows alone, each task makes the same Eigen
// calls whichever thread runs it, and tasks write disjoint output rows, so results never depend on the thread count.
// (Eigen's own OpenMP threading is not enabled; every Eigen call runs on the thread that makes it.)
#pragma once
#include <Eigen/Dense>
#include <algorithm>
#include <atomic>
#include <memory>
#include <cstdint>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "reference/parallel.hpp"

namespace attnbench::ref {

using Matrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Rows = std::vector<int64_t>;

// Rotary position embedding: the pairs of a row's first rotary_dim elements turned by the angle pos·θ_i,
// θ_i = theta^(-2i / rotary_dim): (x1, x2) -> (x1 cos - x2 sin, x2 cos + x1 sin). neox pairs element i with
// i + rotary_dim / 2 (rotate halves), gptj elements 2i and 2i + 1 (interleaved). Elements from rotary_dim on stay.
struct Rope {
  enum class Style { none, neox, gptj };
  Style style = Style::none;
  double theta = 10000;
  int64_t rotary_dim = 0;  // 0 = head_dim
  bool on() const { return style != Style::none; }
};

// Block-sparse attention's mask of one head: query block b (queries b·block .. b·block + block - 1) sees key block
// c (keys c·block ..) when live[b · key_blocks + c].
struct BlockMask {
  int64_t block = 0, key_blocks = 0;
  std::vector<uint8_t> live;
  bool sees(int64_t query, int64_t key) const { return live[(query / block) * key_blocks + key / block] != 0; }
};

// What a reference computes. Off (the default): the math, in fp64. On: what an honest kernel that keeps its
// inputs in the storage dtype gets, the "dtype-faithful" reference the verdict scales its bound by
// (docs/measuring.md, "The bounds"): fp32 arithmetic throughout (products, sums, exp), values rounded where such a
// kernel must round them, and nowhere else. `in`: a value the kernel stores back in the inputs' dtype (a query or key
// turned by RoPE before the tensor cores read it); `p`: the softmax weights before P·V (the tensor cores' operand;
// fp8 kernels round them to e4m3). The output is returned unrounded: the op rounds it to the output's dtype, after any
// scale it applies (an fp8 descale).
struct Faithful {
  using Round = float (*)(float);
  bool on = false;
  Round in = nullptr, p = nullptr;  // null: not rounded (fp32)
  // Where given, the largest |max score| of any row the reference took a softmax of (the
  // scores after scale, soft-capping and bias): fp32 holds a score to |s| 2^-24, and an online
  // softmax rounds each row's running max again at every rescale, errors the verdict's floor
  // must admit (app/verify.cpp, scaled_bound). Written by several threads: a maximum, lock-free.
  std::shared_ptr<std::atomic<float>> largest_score;
  float round_in(float x) const { return in ? in(x) : x; }
  float round_p(float x) const { return p ? p(x) : x; }
  void note_score(float max) const {
    if (!largest_score || !std::isfinite(max)) return;
    const float a = std::fabs(max);
    float seen = largest_score->load();
    while (a > seen && !largest_score->compare_exchange_weak(seen, a)) {
    }
  }
};

// The score options, as the kernels' ScoreParams (kernels/common/score.hpp) in fp64: a score
// s = scale · q·k becomes softcap · tanh(s / softcap) when softcap > 0, then ALiBi adds
// -alibi_slopes[h] · |p - j| (slope(h) · (j - p) for every key a causal query sees,
// FlashAttention's definition), then the masks.
struct Score {
  std::vector<double> alibi_slopes;  // one per query head; empty = no ALiBi
  double scale = 0;                  // 0 = 1/sqrt(head_dim)
  double softcap = 0;                // 0 = none
  // Attention sinks (gpt-oss), one logit per query head, in score units (empty = none): one more
  // logit in every softmax of that head, without a value (softmax_rows).
  std::vector<double> sinks;
  double sink(int64_t head) const {
    return sinks.empty() ? -std::numeric_limits<double>::infinity() : sinks[static_cast<size_t>(head)];
  }
};

namespace detail {

// Fixed task sizes: at most this many output rows per task, and this many columns of C per GEMM task.
constexpr int64_t kRowsPerTask = 256;
constexpr int64_t kColsPerTask = 256;

// Throws std::invalid_argument(what) unless ok.
void require(bool ok, const std::string& what);

// Throws std::out_of_range for a row outside [0, count). count < 0: the total is unknown (softmax and gemm are not
// told it), so only negative rows can be caught.
void check_rows(const char* op, const Rows& rows, int64_t count);

using FloatMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
// A row-major [rows, cols] view of floats whose rows are `stride` floats apart, e.g. one head of [seq, heads, d].
using FloatView = Eigen::Map<const FloatMatrix, Eigen::Unaligned, Eigen::OuterStride<>>;

inline FloatView view(const float* p, int64_t rows, int64_t cols, int64_t stride) {
  return FloatView(p, rows, cols, Eigen::OuterStride<>(stride));
}

// softmax(s)ᵢⱼ = exp(sᵢⱼ - maxⱼ sᵢⱼ) / Σⱼ exp(sᵢⱼ - maxⱼ sᵢⱼ), in place, row by row. Subtracting the max keeps exp
// from overflowing. A row that is all -inf (every key masked) becomes 0 rather than NaN (-inf - -inf is NaN).
// An attention sink (a finite `sink`) is one more logit in every row's softmax that has no value: it joins the max
// and the denominator, and its own weight is dropped, so a row's weights sum to less than 1.
void softmax_rows(Eigen::Ref<Matrix> s, double sink = -std::numeric_limits<double>::infinity());

// Which keys a query at key position p sees, and the bias its scores get.
struct Mask {
  bool causal = false;
  int64_t window = 0;  // 0 = none
  double slope = 0;    // ALiBi: the bias -slope·|p - j|; 0 = no bias
  // Block-sparse (null = dense): the query at position p is query p - offset of its head's blocks.
  const BlockMask* blocks = nullptr;
  int64_t offset = 0;

  // Causal: no key after p. Window w: |p - j| < w, which with causal is FlashAttention's window (w - 1, 0) and
  // without it the symmetric (w - 1, w - 1). Block-sparse: and only keys of the query's live blocks.
  bool visible(int64_t p, int64_t j) const {
    return (!causal || j <= p) && (window == 0 || std::abs(p - j) < window) && (!blocks || blocks->sees(p - offset, j));
  }
};

// Rotates row r of x by the angles of position pos[r], in place.
void apply_rope(Eigen::Ref<Matrix> x, const std::vector<int64_t>& pos, const Rope& rope);

// Σ x in fp32, one term after another: the largest rounding error an honest kernel's sum has
// (a thread that loops over a row), where Eigen's vectorised sum() would have less.
template <class Array>
float sequential_sum(const Array& x) {
  float s = 0;
  for (Eigen::Index i = 0; i < x.size(); ++i) s += x(i);
  return s;
}

// exp(x - max x) in place, as fast kernels compute it: exp2 of the scores scaled by log2(e) in
// fp32 (each product rounded, so the error grows with |x|, not |x - max|). -inf stays 0.
// Returns max x (-inf when every x is). A finite `sink` (an attention sink's logit) joins the max,
// and its weight exp(sink - max) is what the function returns in *sink_weight.
template <class Array>
float exp2_weights(Array& x, float sink = -std::numeric_limits<float>::infinity(), float* sink_weight = nullptr) {
  constexpr float kLog2e = 1.4426950408889634f;
  const float inf = std::numeric_limits<float>::infinity();
  float max = sink == -inf ? -inf : sink * kLog2e;
  for (Eigen::Index i = 0; i < x.size(); ++i) {
    x(i) = x(i) * kLog2e;
    max = std::max(max, x(i));
  }
  for (Eigen::Index i = 0; i < x.size(); ++i) x(i) = x(i) == -inf ? 0.f : std::exp2(x(i) - max);
  if (sink_weight) *sink_weight = sink == -inf ? 0.f : std::exp2(sink * kLog2e - max);
  return max / kLog2e;
}

// Every element of m through round (a storage dtype's rounding), widened back.
void round_all(Eigen::Ref<Matrix> m, Faithful::Round round);

// ------------------------------------------------------------------------------------------ the dense attention core
// Every attention-like op (attention, GQA/MQA, decode, paged) ends here: it maps its output rows onto KvTasks over a
// dense [seq_k, head_dim] K and V, and run_attention() computes each head's O = attention_weights(Q Kᵀ·scale) V.

// Scores to weights, in place: P = softmax(cap(S) + bias + mask), where cap(s) = softcap·tanh(s / softcap) (none when
// softcap is 0), bias = -slope·|p - j| and mask = -inf where the key is not visible. Row i of s is the query at key
// position pos[i]; column j is key j.
void attention_weights(Eigen::Ref<Matrix> s, const std::vector<int64_t>& pos, const Mask& mask, double softcap,
                       double sink = -std::numeric_limits<double>::infinity());

// Keys widened to double at a time (K and V are kept in float, the storage they were rounded to).
constexpr int64_t kKeysPerBlock = 256;

// The requested rows of one query head within a KvTask.
struct HeadRows {
  int64_t head;  // query head
  FloatView q;   // [seq_q, head_dim]: this head's queries
  Mask mask;
  std::vector<int64_t> query = {}, out = {};  // the query index of each row, and the output row it fills
};

// Rows of the query heads that read one kv head of one sequence: the unit of attention work. Under GQA several query
// heads share the kv head, and widening its K and V to double once for all of them is most of the saving.
struct KvTask {
  FloatView k, v;  // [seq_k, head_dim]
  Score score;     // scale resolved (never 0); no slopes: each head's is in its HeadRows' mask
  int64_t offset;  // query i sits at key position i + offset (seq_k - seq_q bottom-right, 0 top-left)
  // Queries rotated at their positions, and (rotate_keys) key j at position j: a prefill rotates both; decode's
  // cache holds keys rotated when they were stored, so only its query is.
  Rope rope = {};
  bool rotate_keys = true;
  std::vector<HeadRows> heads = {};
  int64_t rows = 0;
  Faithful faithful = {};
};

// Computes every task into its output rows of a [rows, head_dim] result.
Matrix run_attention(const std::vector<KvTask>& tasks, size_t rows, int64_t head_dim);

}  // namespace detail
}  // namespace attnbench::ref
