// fp64 CPU reference. The math is in softmax_rows() and attend_head(); the rest maps the requested output rows onto
// independent tasks (rows of one (sequence, kv head), or a tile of C) and runs them, on several threads when large.
//
// Determinism: tasks are cut at fixed sizes from the requested rows alone, each task makes the same Eigen calls
// whichever thread runs it, and tasks write disjoint output rows, so results never depend on the thread count.
// (Eigen's own OpenMP threading is not enabled; every Eigen call here runs on the thread that makes it.)
#include "reference/reference.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <exception>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>

namespace attnbench::ref {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Below this much work (about one unit per flop) starting threads costs more than it saves.
constexpr double kParallelWork = 1e7;

// Fixed task sizes: at most this many output rows per task, and this many columns of C per GEMM task.
constexpr int64_t kRowsPerTask = 256;
constexpr int64_t kColsPerTask = 256;

// Runs body(0), ..., body(n - 1), spread over the cores when `work` is large enough to pay for the threads.
template <class Body>
void parallel_for(int64_t n, double work, const Body& body) {
  const int64_t cores = std::max(1u, std::thread::hardware_concurrency());
  const int64_t threads = work < kParallelWork ? 1 : std::min(n, cores);
  std::atomic<int64_t> next{0};
  std::exception_ptr error;  // an exception escaping a std::thread would terminate the program
  std::mutex error_mutex;
  auto worker = [&] {
    for (int64_t i; (i = next++) < n;) {
      try {
        body(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
        next = n;
      }
    }
  };
  std::vector<std::thread> pool;
  for (int64_t t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
  if (error) std::rethrow_exception(error);
}

void require(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument(what);
}

// count < 0: the total is unknown (softmax and gemm are not told it), so only negative rows can be caught.
void check_rows(const char* op, const Rows& rows, int64_t count) {
  for (int64_t r : rows) {
    if (r < 0 || (count >= 0 && r >= count)) {
      throw std::out_of_range(std::string(op) + ": output row " + std::to_string(r) + " is out of range" +
                              (count >= 0 ? " [0, " + std::to_string(count) + ")" : ""));
    }
  }
}

using FloatMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
// A row-major [rows, cols] view of floats whose rows are `stride` floats apart, e.g. one head of [seq, heads, d].
using FloatView = Eigen::Map<const FloatMatrix, Eigen::Unaligned, Eigen::OuterStride<>>;

FloatView view(const float* p, int64_t rows, int64_t cols, int64_t stride) {
  return FloatView(p, rows, cols, Eigen::OuterStride<>(stride));
}

// Numerically stable softmax of each row (the max is subtracted so exp cannot overflow), in place. A row that is all
// -inf (every key masked) becomes 0 rather than NaN: its max is -inf, and -inf - -inf is NaN.
void softmax_rows(Eigen::Ref<Matrix> s) {
  for (Eigen::Index i = 0; i < s.rows(); ++i) {
    auto row = s.row(i);
    const double max = row.maxCoeff();
    if (max == -kInf) {
      row.setZero();
      continue;
    }
    row = (row.array() - max).exp().matrix();
    row /= row.sum();
  }
}

// Which keys a query at key position p sees, and the bias its scores get.
struct Mask {
  bool causal = false;
  int64_t window = 0;  // 0 = none
  double slope = 0;    // ALiBi; 0 = no bias

  // Causal: no key after p. Window w: |p - j| < w, which with causal is FlashAttention's window (w - 1, 0) and
  // without it the symmetric (w - 1, w - 1).
  bool visible(int64_t p, int64_t j) const { return (!causal || j <= p) && (window == 0 || std::abs(p - j) < window); }
};

// Attention for one head: S = Q Kᵀ·scale + bias, masked entries -inf, P = softmax rows, O = P V.
// q: [n, d], queries at key positions pos[0..n); k, v: [seq_k, d]. Returns O: [n, d].
Matrix attend_head(const Matrix& q, const Matrix& k, const Matrix& v, const std::vector<int64_t>& pos, const Mask& mask,
                   double scale) {
  Matrix s = q * k.transpose() * scale;
  for (Eigen::Index i = 0; i < s.rows(); ++i) {
    for (Eigen::Index j = 0; j < s.cols(); ++j) {
      s(i, j) = mask.visible(pos[i], j) ? s(i, j) - mask.slope * std::abs(pos[i] - j) : -kInf;
    }
  }
  softmax_rows(s);
  return s * v;
}

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
  double scale;
  int64_t offset;  // seq_k - seq_q: query i sits at key position i + offset (aligned bottom-right)
  std::vector<HeadRows> heads = {};
  int64_t rows = 0;
};

// Appends the tasks that compute rows[n] of attention(s, q, k, v) into output row out[n]: rows are grouped by
// (batch, kv head), and a group is split every kRowsPerTask rows.
void plan_attention(const AttentionShape& s, const float* q, const float* k, const float* v, const Rows& rows,
                    const Rows& out, std::vector<KvTask>& tasks) {
  const int64_t d = s.head_dim, group = s.heads / s.kv_heads;
  const double scale = s.scale != 0 ? s.scale : 1 / std::sqrt(static_cast<double>(d));
  std::map<int64_t, size_t> open;  // b * kv_heads + kv head -> that group's task still filling up
  for (size_t n = 0; n < rows.size(); ++n) {
    const int64_t h = rows[n] % s.heads, i = rows[n] / s.heads % s.seq_q, b = rows[n] / s.heads / s.seq_q;
    const int64_t key = b * s.kv_heads + h / group;
    auto it = open.find(key);
    if (it == open.end() || tasks[it->second].rows == kRowsPerTask) {
      const int64_t kv_head = (b * s.seq_k * s.kv_heads + h / group) * d;  // k, v: [batch, seq_k, kv_heads, d]
      tasks.push_back({view(k + kv_head, s.seq_k, d, s.kv_heads * d), view(v + kv_head, s.seq_k, d, s.kv_heads * d),
                       scale, s.seq_k - s.seq_q});
      it = open.insert_or_assign(key, tasks.size() - 1).first;
    }
    KvTask& task = tasks[it->second];
    auto head = std::find_if(task.heads.begin(), task.heads.end(), [&](const HeadRows& r) { return r.head == h; });
    if (head == task.heads.end()) {
      const int64_t q_head = (b * s.seq_q * s.heads + h) * d;  // q: [batch, seq_q, heads, d]
      task.heads.push_back({h, view(q + q_head, s.seq_q, d, s.heads * d),
                            Mask{s.causal, s.window, s.alibi ? alibi_slope(h, s.heads) : 0}});
      head = task.heads.end() - 1;
    }
    head->query.push_back(i);
    head->out.push_back(out[n]);
    ++task.rows;
  }
}

Matrix run_attention(const std::vector<KvTask>& tasks, size_t rows, int64_t head_dim) {
  Matrix o(rows, head_dim);
  double work = 0;
  for (const KvTask& t : tasks) work += 4.0 * t.rows * t.k.rows() * head_dim;
  parallel_for(tasks.size(), work, [&](int64_t n) {
    const KvTask& t = tasks[n];
    const Matrix k = t.k.cast<double>(), v = t.v.cast<double>();
    for (const HeadRows& h : t.heads) {
      std::vector<int64_t> pos(h.query);
      for (int64_t& p : pos) p += t.offset;
      const Matrix oh = attend_head(h.q(h.query, Eigen::all).cast<double>(), k, v, pos, h.mask, t.scale);
      for (size_t r = 0; r < h.out.size(); ++r) o.row(h.out[r]) = oh.row(r);
    }
  });
  return o;
}

void validate(const AttentionShape& s) {
  require(s.batch > 0 && s.heads > 0 && s.kv_heads > 0 && s.seq_q > 0 && s.seq_k > 0 && s.head_dim > 0,
          "attention: batch, heads, kv_heads, seq_q, seq_k and head_dim must be positive");
  require(s.heads % s.kv_heads == 0, "attention: heads (" + std::to_string(s.heads) +
                                         ") must be a multiple of kv_heads (" + std::to_string(s.kv_heads) + ")");
  require(s.window >= 0, "attention: window must be >= 0");
}

void validate(const DecodeShape& s, const char* op) {
  const std::string name(op);
  require(s.batch > 0 && s.heads > 0 && s.kv_heads > 0 && s.head_dim > 0 && s.max_context > 0,
          name + ": batch, heads, kv_heads, head_dim and max_context must be positive");
  require(s.heads % s.kv_heads == 0, name + ": heads (" + std::to_string(s.heads) +
                                         ") must be a multiple of kv_heads (" + std::to_string(s.kv_heads) + ")");
  require(static_cast<int64_t>(s.context.size()) == s.batch,
          name + ": context has " + std::to_string(s.context.size()) + " lengths for batch " + std::to_string(s.batch));
  for (int64_t c : s.context) {
    require(c >= 1 && c <= s.max_context, name + ": context " + std::to_string(c) +
                                              " is outside [1, max_context = " + std::to_string(s.max_context) + "]");
  }
}

}  // namespace

Matrix softmax(const float* x, int64_t cols, const Rows& rows) {
  require(cols > 0, "softmax: cols must be positive");
  check_rows("softmax", rows, -1);
  const int64_t count = rows.empty() ? 0 : *std::max_element(rows.begin(), rows.end()) + 1;
  Matrix out = view(x, count, cols, cols)(rows, Eigen::all).cast<double>();
  const int64_t tasks = (out.rows() + kRowsPerTask - 1) / kRowsPerTask;
  parallel_for(tasks, 10.0 * out.size(), [&](int64_t t) {
    softmax_rows(out.middleRows(t * kRowsPerTask, std::min(kRowsPerTask, out.rows() - t * kRowsPerTask)));
  });
  return out;
}

Matrix gemm(const float* a, const float* b, bool nn, int64_t m, int64_t n, int64_t k, const Rows& rows) {
  require(m > 0 && n > 0 && k > 0, "gemm: m, n and k must be positive");
  check_rows("gemm", rows, -1);
  // Tasks are tiles of C: up to kRowsPerTask requested rows of one batch by kColsPerTask columns.
  struct Tile {
    int64_t batch, col0, cols;
    std::vector<int64_t> row = {}, out = {};  // row within the batch, and the output row it fills
  };
  std::map<int64_t, std::vector<int64_t>> by_batch;  // batch -> indices into rows
  for (size_t i = 0; i < rows.size(); ++i) by_batch[rows[i] / m].push_back(i);
  std::vector<Tile> tiles;
  for (const auto& [batch, indices] : by_batch) {
    for (size_t r0 = 0; r0 < indices.size(); r0 += kRowsPerTask) {
      for (int64_t c0 = 0; c0 < n; c0 += kColsPerTask) {
        Tile& t = tiles.emplace_back(Tile{batch, c0, std::min(kColsPerTask, n - c0)});
        for (size_t i = r0; i < std::min(indices.size(), r0 + kRowsPerTask); ++i) {
          t.row.push_back(rows[indices[i]] % m);
          t.out.push_back(indices[i]);
        }
      }
    }
  }

  Matrix c(rows.size(), n);
  parallel_for(tiles.size(), 2.0 * rows.size() * n * k, [&](int64_t i) {
    const Tile& t = tiles[i];
    const float* bb = b + t.batch * n * k;
    const Matrix a_rows = view(a + t.batch * m * k, m, k, k)(t.row, Eigen::all).cast<double>();  // a: [batch, m, k]
    // nn: C = A·B with b [batch, k, n], so the tile needs columns of B; nt: C = A·Bᵀ with b [batch, n, k], rows of B.
    const Matrix c_tile = nn ? Matrix(a_rows * view(bb + t.col0, k, t.cols, n).cast<double>())
                             : Matrix(a_rows * view(bb + t.col0 * k, t.cols, k, k).cast<double>().transpose());
    for (size_t r = 0; r < t.out.size(); ++r) c.row(t.out[r]).segment(t.col0, t.cols) = c_tile.row(r);
  });
  return c;
}

// For a power-of-two head count these are ALiBi's slopes; other counts use the same formula (not the paper's
// interpolation between powers of two).
double alibi_slope(int64_t h, int64_t heads) { return std::exp2(-8.0 * (h + 1) / heads); }

Matrix attention(const AttentionShape& s, const float* q, const float* k, const float* v, const Rows& rows) {
  validate(s);
  check_rows("attention", rows, s.batch * s.seq_q * s.heads);
  Rows out(rows.size());
  for (size_t n = 0; n < out.size(); ++n) out[n] = n;
  std::vector<KvTask> tasks;
  plan_attention(s, q, k, v, rows, out, tasks);
  return run_attention(tasks, rows.size(), s.head_dim);
}

Matrix decode(const DecodeShape& s, const float* q, const float* k_cache, const float* v_cache, const Rows& rows) {
  validate(s, "decode");
  check_rows("decode", rows, s.batch * s.heads);
  std::vector<Rows> rows_of(s.batch), out_of(s.batch);  // per sequence: its head of each row, and its output row
  for (size_t n = 0; n < rows.size(); ++n) {
    rows_of[rows[n] / s.heads].push_back(rows[n] % s.heads);
    out_of[rows[n] / s.heads].push_back(n);
  }
  // Sequence b is the last query of causal attention over its first context[b] tokens: attention with one query
  // (at key position context[b] - 1) and seq_k = context[b]. Its slice of the cache, [max_context, kv_heads, d],
  // begins with exactly the [seq_k, kv_heads, d] layout that attention reads.
  std::vector<KvTask> tasks;
  for (int64_t b = 0; b < s.batch; ++b) {
    if (rows_of[b].empty()) continue;
    AttentionShape one;
    one.heads = s.heads;
    one.kv_heads = s.kv_heads;
    one.seq_k = s.context[b];
    one.head_dim = s.head_dim;
    one.causal = true;
    one.alibi = s.alibi;
    one.scale = s.scale;
    const int64_t cache_offset = b * s.max_context * s.kv_heads * s.head_dim;
    plan_attention(one, q + b * s.heads * s.head_dim, k_cache + cache_offset, v_cache + cache_offset, rows_of[b],
                   out_of[b], tasks);
  }
  return run_attention(tasks, rows.size(), s.head_dim);
}

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
  const int64_t token = kv_heads * d, sequence = dense.max_context * token;  // floats per token, per sequence
  std::unique_ptr<float[]> k(new float[dense.batch * sequence]), v(new float[dense.batch * sequence]);
  parallel_for(dense.batch, 2.0 * dense.batch * sequence, [&](int64_t b) {
    for (int64_t t = 0; t < dense.context[b]; ++t) {
      const int64_t block = block_tables[b * s.max_blocks_per_seq + t / bs], slot = t % bs;
      for (int64_t h = 0; h < kv_heads; ++h) {
        float* k_row = &k[b * sequence + t * token + h * d];
        float* v_row = &v[b * sequence + t * token + h * d];
        const int64_t head = block * kv_heads + h;
        // K [blocks, kv_heads, d/x, bs, x]: the row is d/x runs of x consecutive elements.
        for (int64_t e = 0; e < d; e += x) {
          std::copy_n(&k_cache[((head * (d / x) + e / x) * bs + slot) * x], x, &k_row[e]);
        }
        // V [blocks, kv_heads, d, bs]: the row's elements are bs apart.
        for (int64_t e = 0; e < d; ++e) v_row[e] = v_cache[(head * d + e) * bs + slot];
      }
    }
    const int64_t used = dense.context[b] * token;
    std::fill(k.get() + b * sequence + used, k.get() + (b + 1) * sequence, std::numeric_limits<float>::quiet_NaN());
    std::fill(v.get() + b * sequence + used, v.get() + (b + 1) * sequence, std::numeric_limits<float>::quiet_NaN());
  });
  return decode(dense, q, k.get(), v.get(), rows);
}

}  // namespace attnbench::ref
