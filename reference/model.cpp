// GPT-2 in fp64, as the GPU chain computes it: the residual stream in double, every activation the chain stores
// rounded by the run's `store` where it stores it, and the logits left unrounded (the GPU writes them in fp32).
//
// Cost: this runs on every verification of a model as large as GPT-2 124M. The prefill runs every prompt token of
// every sequence through a layer at once, and a decode step runs the batch's new tokens (one per sequence) as one
// stack of rows against each sequence's cache of keys and values; the products are tiles spread over the cores.
// A decode step multiplies a few rows by every weight, so it is bound by reading the weights: they are read where
// they lie, in float, and widened a tile at a time, half the bytes of a copy widened once (a step measured 1.2 to 1.5x
// faster, and no 1 GB copy of a 124M model). `store` is called from every thread.
#include "reference/model.hpp"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#endif

#include <cmath>
#include <limits>
#include <numeric>
#include <string>
#include <utility>

namespace attnbench::ref {

using namespace detail;

namespace {

using Vector = Eigen::RowVectorXd;
using Store = std::function<float(float)>;

constexpr double kLayerNormEps = 1e-5;
// Tiles this narrow keep every core reading weights in a decode step's products of a few rows, where kColsPerTask
// would leave a d x d product to d / 256 tasks.
constexpr int64_t kMinColsPerTask = 32;

// S(v): v as the GPU stores it, rounded to float and then by the run's storage rounding (none: v itself).
struct Storage {
  Store store;
  double operator()(double v) const { return store ? double{store(static_cast<float>(v))} : v; }
};

// GPT-2's GELU, the tanh approximation: 0.5 u (1 + tanh(sqrt(2/π) (u + 0.044715 u³))).
double gelu(double u) {
  static const double k = std::sqrt(2 / std::acos(-1.0));
  return 0.5 * u * (1 + std::tanh(k * (u + 0.044715 * u * u * u)));
}

// body(first, count) for the blocks of kRowsPerTask rows of n rows, spread over the cores.
template <class Body>
void for_row_blocks(int64_t n, double work, const Body& body) {
  parallel_for((n + kRowsPerTask - 1) / kRowsPerTask, work, [&](int64_t task) {
    const int64_t first = task * kRowsPerTask;
    body(first, std::min(kRowsPerTask, n - first));
  });
}

Vector widen(const float* p, int64_t n) { return Eigen::Map<const Eigen::RowVectorXf>(p, n).cast<double>(); }

// At most this many rows (a decode step's batch), linear() widens W in registers (few_rows_linear).
constexpr int64_t kFewRows = 8;

// Row r of a times W's float row wr (k elements) into sums[r][0..3]: W widened to double in registers as it is
// read, four partial sums a row in a fixed order. N rows at compile time keep the sums in registers.
template <int N>
void dot_rows(const float* wr, const double* a, int64_t k, double (*sums)[4]) {
  int64_t i = 0;
#if defined(__AVX2__) && defined(__FMA__)
  __m256d acc[N];
  for (int r = 0; r < N; ++r) acc[r] = _mm256_setzero_pd();
  for (; i + 4 <= k; i += 4) {
    const __m256d wv = _mm256_cvtps_pd(_mm_loadu_ps(wr + i));
    for (int r = 0; r < N; ++r) acc[r] = _mm256_fmadd_pd(wv, _mm256_loadu_pd(a + r * k + i), acc[r]);
  }
  for (int r = 0; r < N; ++r) _mm256_storeu_pd(sums[r], acc[r]);
#else
  for (; i + 4 <= k; i += 4)
    for (int r = 0; r < N; ++r)
      for (int j = 0; j < 4; ++j) sums[r][j] += static_cast<double>(wr[i + j]) * a[r * k + i + j];
#endif
  for (; i < k; ++i)
    for (int r = 0; r < N; ++r) sums[r][0] += static_cast<double>(wr[i]) * a[r * k + i];
}

// epilogue(A Wᵀ, column) for a [n <= kFewRows, in]: each output the dot of a float row of W with a row of a
// (dot_rows). A tile's copy of W to double, made again at every decode step, cost more than the product at
// these few rows.
template <class Epilogue>
Matrix few_rows_linear(const Matrix& a, const FloatView& w, const Epilogue& epilogue) {
  const int64_t n = a.rows(), out = w.rows(), k = a.cols(), per_task = 16;
  using Dot = void (*)(const float*, const double*, int64_t, double(*)[4]);
  static constexpr Dot kDots[kFewRows] = {dot_rows<1>, dot_rows<2>, dot_rows<3>, dot_rows<4>,
                                          dot_rows<5>, dot_rows<6>, dot_rows<7>, dot_rows<8>};
  Matrix c(n, out);
  const double work = 2.0 * n * out * k + kWorkPerByte * sizeof(float) * out * k;  // W streamed once
  parallel_for((out + per_task - 1) / per_task, work, [&](int64_t task) {
    for (int64_t col = task * per_task; col < std::min(out, (task + 1) * per_task); ++col) {
      double sums[kFewRows][4] = {};
      kDots[n - 1](w.data() + col * w.outerStride(), a.data(), k, sums);
      for (int64_t r = 0; r < n; ++r) c(r, col) = epilogue((sums[r][0] + sums[r][1]) + (sums[r][2] + sums[r][3]), col);
    }
  });
  return c;
}

// epilogue(A Wᵀ, column) elementwise: a [n, in], w [out, in] (nn.Linear's layout) -> [n, out]. Each task computes a
// tile of rows by columns, widening its rows of W, and applies the epilogue (bias, GELU, the roundings: scalar calls
// that would cost more than a thread's share of the product if left to one thread) to it.
template <class Epilogue>
Matrix linear(const Matrix& a, const FloatView& w, const Epilogue& epilogue) {
  if (a.rows() <= kFewRows) return few_rows_linear(a, w, epilogue);
  const int64_t n = a.rows(), out = w.rows(), rows = std::min(n, kRowsPerTask);
  const int64_t cols = std::clamp(kColsPerTask * rows / kRowsPerTask, kMinColsPerTask, kColsPerTask);
  const int64_t col_tiles = (out + cols - 1) / cols, tiles = (n + rows - 1) / rows * col_tiles;
  Matrix c(n, out);
  parallel_for(tiles, 2.0 * n * out * a.cols(), [&](int64_t task) {
    const int64_t r0 = task / col_tiles * rows, c0 = task % col_tiles * cols;
    auto tile = c.block(r0, c0, std::min(rows, n - r0), std::min(cols, out - c0));
    tile.noalias() = a.middleRows(r0, tile.rows()) * w.middleRows(c0, tile.cols()).cast<double>().transpose();
    for (Eigen::Index i = 0; i < tile.rows(); ++i)
      for (Eigen::Index j = 0; j < tile.cols(); ++j) tile(i, j) = epilogue(tile(i, j), c0 + j);
  });
  return c;
}

// S(LN(x)) row by row: (x - mean) / sqrt(var + ε) · g + b, var the biased variance (the mean squared deviation).
Matrix layer_norm(const Matrix& x, const Vector& g, const Vector& b, const Storage& S) {
  Matrix h(x.rows(), x.cols());
  for_row_blocks(x.rows(), 20.0 * x.size(), [&](int64_t first, int64_t count) {
    for (int64_t r = first; r < first + count; ++r) {
      const Vector deviation = x.row(r).array() - x.row(r).mean();
      const double var = deviation.squaredNorm() / static_cast<double>(x.cols());
      h.row(r) = (deviation / std::sqrt(var + kLayerNormEps)).cwiseProduct(g) + b;
      h.row(r) = h.row(r).unaryExpr(S);
    }
  });
  return h;
}

// One layer's weights: the matrices as given (float, [out, in]), the vectors widened.
struct Layer {
  FloatView w_qkv, w_o, w_fc, w_proj;
  Vector ln1_g, ln1_b, b_qkv, b_o, ln2_g, ln2_b, b_fc, b_proj;

  Layer(const Gpt2Weights& w, int64_t l, int64_t d)
      : w_qkv(view(w.w_qkv + l * 3 * d * d, 3 * d, d, d)),
        w_o(view(w.w_o + l * d * d, d, d, d)),
        w_fc(view(w.w_fc + l * 4 * d * d, 4 * d, d, d)),
        w_proj(view(w.w_proj + l * 4 * d * d, d, 4 * d, 4 * d)),
        ln1_g(widen(w.ln1_g + l * d, d)),
        ln1_b(widen(w.ln1_b + l * d, d)),
        b_qkv(widen(w.b_qkv + l * 3 * d, 3 * d)),
        b_o(widen(w.b_o + l * d, d)),
        ln2_g(widen(w.ln2_g + l * d, d)),
        ln2_b(widen(w.ln2_b + l * d, d)),
        b_fc(widen(w.b_fc + l * 4 * d, 4 * d)),
        b_proj(widen(w.b_proj + l * d, d)) {}
};

// The network as the steps read it, with the run's storage rounding.
struct Model {
  int64_t d, heads, head_dim;
  FloatView wte;     // [vocab, d]
  const float* wpe;  // [max_positions, d]
  std::vector<Layer> layers;
  Vector lnf_g, lnf_b;
  Storage S;

  Model(const Gpt2Config& c, const Gpt2Weights& w, const Store& store)
      : d(c.d_model),
        heads(c.heads),
        head_dim(c.d_model / c.heads),
        wte(view(w.wte, c.vocab, d, d)),
        wpe(w.wpe),
        lnf_g(widen(w.lnf_g, d)),
        lnf_b(widen(w.lnf_b, d)),
        S{store} {
    for (int64_t l = 0; l < c.layers; ++l) layers.emplace_back(w, l, d);
  }
};

// One sequence's keys and values in one layer, row = position, columns = heads x head_dim (head-major).
struct Cache {
  Matrix k, v;
};

// caches[s · layers + l]: sequence s, layer l, each with room for `positions` positions.
std::vector<Cache> new_caches(const Model& m, int64_t sequences, int64_t positions) {
  std::vector<Cache> caches(static_cast<size_t>(sequences) * m.layers.size());
  for (Cache& cache : caches) cache = Cache{Matrix(positions, m.d), Matrix(positions, m.d)};
  return caches;
}

// The residual stream of n new tokens per sequence: row s · n + i is ids[s · n + i] at position start + i,
// x = wte[id] + wpe[position].
Matrix embed(const Model& m, const std::vector<int64_t>& ids, int64_t n, int64_t start) {
  Matrix x(static_cast<int64_t>(ids.size()), m.d);
  for (int64_t r = 0; r < x.rows(); ++r) {
    x.row(r) = m.wte.row(ids[static_cast<size_t>(r)]).cast<double>() + widen(m.wpe + (start + r % n) * m.d, m.d);
  }
  return x;
}

// Writes the new tokens' keys and values (columns d .. 3d of qkv) into their sequences' caches of layer l.
void append_to_caches(const Model& m, const Matrix& qkv, int64_t n, int64_t start, size_t l,
                      std::vector<Cache>& caches) {
  const int64_t sequences = qkv.rows() / n;
  for (int64_t s = 0; s < sequences; ++s) {
    Cache& cache = caches[s * m.layers.size() + l];
    cache.k.middleRows(start, n) = qkv.block(s * n, m.d, n, m.d);
    cache.v.middleRows(start, n) = qkv.block(s * n, 2 * m.d, n, m.d);
  }
}

// o = S(softmax(q kᵀ / sqrt(head_dim)) v) per head, causal: the new tokens (q, columns 0 .. d of qkv, laid out as
// embed's rows) each see their sequence's cache up to their own position. A task is a block of kRowsPerTask queries
// of one head of one sequence, and reads only the keys its last query sees.
Matrix attend(const Model& m, const Matrix& qkv, int64_t n, int64_t start, size_t l, const std::vector<Cache>& caches) {
  const int64_t sequences = qkv.rows() / n, blocks = (n + kRowsPerTask - 1) / kRowsPerTask, hd = m.head_dim;
  const double scale = 1 / std::sqrt(static_cast<double>(hd));
  Mask causal;
  causal.causal = true;
  Matrix o(qkv.rows(), m.d);
  const double cache_bytes = 2.0 * sequences * (start + n) * m.d * sizeof(double);  // keys and values, read once
  const double work = 4.0 * qkv.rows() * (start + n) * m.d + kWorkPerByte * cache_bytes;
  parallel_for(sequences * m.heads * blocks, work, [&](int64_t task) {
    const int64_t s = task / (m.heads * blocks), h = task / blocks % m.heads, i0 = task % blocks * kRowsPerTask;
    const int64_t rows = std::min(kRowsPerTask, n - i0), keys = start + i0 + rows;
    const Cache& cache = caches[s * m.layers.size() + l];
    Matrix p = qkv.block(s * n + i0, h * hd, rows, hd) * cache.k.block(0, h * hd, keys, hd).transpose() * scale;
    std::vector<int64_t> position(static_cast<size_t>(rows));
    std::iota(position.begin(), position.end(), start + i0);
    attention_weights(p, position, causal, 0);
    o.block(s * n + i0, h * hd, rows, hd) = (p * cache.v.block(0, h * hd, keys, hd)).unaryExpr(m.S);
  });
  return o;
}

// Every layer on x, the residual stream of n new tokens per sequence (embed's rows), in place; their keys and values
// join their sequences' caches first, so that each token attends to itself.
void run_layers(const Model& m, Matrix& x, int64_t n, int64_t start, std::vector<Cache>& caches) {
  const Storage& S = m.S;
  for (size_t l = 0; l < m.layers.size(); ++l) {
    const Layer& L = m.layers[l];
    const Matrix h = layer_norm(x, L.ln1_g, L.ln1_b, S);
    // The product is stored, its bias added and stored again as q, k and v.
    const Matrix qkv = linear(h, L.w_qkv, [&](double v, int64_t c) { return S(S(v) + L.b_qkv[c]); });
    append_to_caches(m, qkv, n, start, l, caches);
    x += linear(attend(m, qkv, n, start, l, caches), L.w_o, [&](double v, int64_t c) { return S(v) + L.b_o[c]; });
    const Matrix h2 = layer_norm(x, L.ln2_g, L.ln2_b, S);
    const Matrix g = linear(h2, L.w_fc, [&](double v, int64_t c) { return S(gelu(S(v) + L.b_fc[c])); });
    x += linear(g, L.w_proj, [&](double v, int64_t c) { return S(v) + L.b_proj[c]; });
  }
}

// S(LN(x; lnf)) · wteᵀ, not rounded: the GPU writes fp32 logits.
Matrix logits(const Model& m, const Matrix& x) {
  return linear(layer_norm(x, m.lnf_g, m.lnf_b, m.S), m.wte, [](double v, int64_t) { return v; });
}

// The greedy token, the largest logit (the lowest id among equals), and its margin over the next largest: 0 on a
// tie, infinite with a vocabulary of one.
std::pair<int64_t, double> greedy(const Eigen::Ref<const Vector>& z) {
  int64_t best = 0;
  double second = -std::numeric_limits<double>::infinity();
  for (Eigen::Index j = 1; j < z.size(); ++j) {
    if (z[j] > z[best]) {
      second = z[best];
      best = j;
    } else {
      second = std::max(second, z[j]);
    }
  }
  return {best, z[best] - second};
}

void validate(const Gpt2Config& c, const Gpt2Weights& w) {
  require(c.layers > 0 && c.d_model > 0 && c.heads > 0 && c.vocab > 0 && c.max_positions > 0,
          "gpt2: layers, d_model, heads, vocab and max_positions must be positive");
  require(c.d_model % c.heads == 0, "gpt2: d_model (" + std::to_string(c.d_model) + ") must be a multiple of heads (" +
                                        std::to_string(c.heads) + ")");
  for (const float* p : {w.wte, w.wpe, w.ln1_g, w.ln1_b, w.w_qkv, w.b_qkv, w.w_o, w.b_o, w.ln2_g, w.ln2_b, w.w_fc,
                         w.b_fc, w.w_proj, w.b_proj, w.lnf_g, w.lnf_b}) {
    require(p != nullptr, "gpt2: every weight must be given");
  }
}

void validate_ids(const Gpt2Config& c, const std::vector<int64_t>& ids) {
  for (int64_t id : ids) {
    require(id >= 0 && id < c.vocab,
            "gpt2: token id " + std::to_string(id) + " is outside the vocabulary [0, " + std::to_string(c.vocab) + ")");
  }
}

}  // namespace

Gpt2Result gpt2_generate(const Gpt2Config& c, const Gpt2Weights& w, const Gpt2Run& run, const Rows& rows) {
  validate(c, w);
  require(run.batch > 0 && run.prompt > 0 && run.generate > 0, "gpt2: batch, prompt and generate must be positive");
  require(static_cast<int64_t>(run.prompt_ids.size()) == run.batch * run.prompt,
          "gpt2: prompt_ids must hold batch x prompt ids");
  validate_ids(c, run.prompt_ids);
  // The last step's input sits at position prompt + generate - 2.
  require(run.prompt + run.generate - 1 <= c.max_positions,
          "gpt2: prompt + generate - 1 (" + std::to_string(run.prompt + run.generate - 1) +
              ") positions exceed max_positions (" + std::to_string(c.max_positions) + ")");
  check_rows("gpt2", rows, run.generate * run.batch);

  const Model m(c, w, run.store);
  std::vector<Cache> caches = new_caches(m, run.batch, run.prompt + run.generate - 1);
  Matrix x = embed(m, run.prompt_ids, run.prompt, 0);
  run_layers(m, x, run.prompt, 0, caches);
  Matrix last(run.batch, m.d);  // each sequence's newest position: only its logits are asked for
  for (int64_t b = 0; b < run.batch; ++b) last.row(b) = x.row(b * run.prompt + run.prompt - 1);

  std::vector<std::vector<size_t>> wanted(static_cast<size_t>(run.generate));  // step -> indices into rows
  for (size_t i = 0; i < rows.size(); ++i) wanted[static_cast<size_t>(rows[i] / run.batch)].push_back(i);
  Gpt2Result result;
  result.logits.resize(static_cast<int64_t>(rows.size()), c.vocab);
  result.tokens.resize(static_cast<size_t>(run.batch * run.generate));
  result.margins.resize(static_cast<size_t>(run.generate * run.batch));
  result.top.resize(static_cast<size_t>(run.generate * run.batch));
  std::vector<int64_t> next(static_cast<size_t>(run.batch));
  for (int64_t t = 0; t < run.generate; ++t) {
    const Matrix z = logits(m, last);
    for (int64_t b = 0; b < run.batch; ++b) {
      const auto [token, margin] = greedy(z.row(b));
      result.tokens[static_cast<size_t>(b * run.generate + t)] = next[static_cast<size_t>(b)] = token;
      result.margins[static_cast<size_t>(t * run.batch + b)] = margin;
      result.top[static_cast<size_t>(t * run.batch + b)] = z(b, token);
    }
    for (size_t i : wanted[static_cast<size_t>(t)])
      result.logits.row(static_cast<int64_t>(i)) = z.row(rows[i] % run.batch);
    if (t + 1 < run.generate) {  // step t + 1 reads step t's tokens at position prompt + t
      last = embed(m, next, 1, run.prompt + t);
      run_layers(m, last, 1, run.prompt + t, caches);
    }
  }
  return result;
}

Matrix gpt2_forward(const Gpt2Config& c, const Gpt2Weights& w, const std::vector<int64_t>& ids, const Store& store) {
  validate(c, w);
  require(!ids.empty() && static_cast<int64_t>(ids.size()) <= c.max_positions,
          "gpt2: a sequence holds 1 to max_positions (" + std::to_string(c.max_positions) + ") ids");
  validate_ids(c, ids);
  const Model m(c, w, store);
  const int64_t n = static_cast<int64_t>(ids.size());
  std::vector<Cache> caches = new_caches(m, 1, n);
  Matrix x = embed(m, ids, n, 0);
  run_layers(m, x, n, 0, caches);
  return logits(m, x);
}

}  // namespace attnbench::ref
