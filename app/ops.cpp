#include "app/ops.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <cmath>
#include <thread>

#include "app/numeric.hpp"
#include "app/random.hpp"
#include "kernels/attention/attention.hpp"
#include "kernels/cache_append/cache_append.hpp"
#include "kernels/decode/decode.hpp"
#include "kernels/gemm/gemm.hpp"
#include "kernels/paged/paged.hpp"
#include "kernels/registry.hpp"
#include "kernels/reshape_and_cache/reshape_and_cache.hpp"
#include "kernels/softmax/softmax.hpp"

namespace attnbench {

// ---------------------------------------------------------------- the base

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Runs fn(begin, end) over [0, n) in chunks on all cores when n is large.
template <class Fn>
void parallel_for(int64_t n, Fn fn) {
  const int64_t threads = std::min<int64_t>(std::max(1u, std::thread::hardware_concurrency()), n / (1 << 20) + 1);
  if (threads <= 1) return fn(int64_t{0}, n);
  std::vector<std::thread> pool;
  for (int64_t t = 0; t < threads; ++t) pool.emplace_back(fn, n * t / threads, n * (t + 1) / threads);
  for (auto& th : pool) th.join();
}

}  // namespace

uint64_t Problem::device_bytes() const {
  uint64_t total = output_.bytes();
  for (const auto& in : inputs_) total += in.tensor.bytes();
  return total;
}

Tensor& Problem::add_input(const std::string& name, DType dtype, int64_t count, float scale, bool normal) {
  inputs_.push_back({Tensor{name, dtype, count, {}, {}}, scale, normal});
  return inputs_.back().tensor;
}

Tensor& Problem::add_output(const std::string& name, DType dtype, int64_t count) {
  output_ = Tensor{name, dtype, count, {}, {}};
  return output_;
}

void Problem::allocate() {
  for (auto& in : inputs_) in.tensor.device = DeviceBuffer(in.tensor.bytes());
  output_.device = DeviceBuffer(output_.bytes());
}

void Problem::generate(uint64_t seed, const LaunchContext& ctx) {
  for (size_t t = 0; t < inputs_.size(); ++t) {
    Input& in = inputs_[t];
    in.tensor.host.resize(static_cast<size_t>(in.tensor.count));
    float* values = in.tensor.host.data();
    parallel_for(in.tensor.count, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        const float r = in.normal ? random_normal(seed, t, static_cast<uint64_t>(i))
                                  : random_uniform(seed, t, static_cast<uint64_t>(i));
        values[i] = round_to(in.tensor.dtype, in.scale * r);
      }
    });
    shape_input(t, in.tensor.host);
    const std::vector<uint8_t> bytes = encode(in.tensor.dtype, in.tensor.host);
    in.tensor.device.upload(bytes.data(), bytes.size());
  }
  after_inputs(seed, ctx);
}

void Problem::poison_output(cudaStream_t stream) {
  // All-ones bytes are NaN in fp32, fp16, bf16 and fp8 e4m3 alike.
  check_cuda(cudaMemsetAsync(output_.device.get(), 0xff, output_.bytes(), stream), "poison output");
}

std::vector<const Tensor*> Problem::input_tensors() const {
  std::vector<const Tensor*> out;
  for (const auto& in : inputs_) out.push_back(&in.tensor);
  return out;
}

std::vector<float> Problem::download_output() const {
  std::vector<uint8_t> bytes(output_.bytes());
  output_.device.download(bytes.data(), bytes.size());
  std::vector<float> out(static_cast<size_t>(output_.count));
  for (int64_t i = 0; i < output_.count; ++i)
    out[static_cast<size_t>(i)] = static_cast<float>(decode_element(output_.dtype, bytes.data(), i));
  return out;
}

Comparison Problem::check(const ref::Rows& rows, const ref::Matrix& ref, Tolerance tol) const {
  std::vector<uint8_t> bytes(output_.bytes());
  output_.device.download(bytes.data(), bytes.size());
  const DType t = output_.dtype;
  std::vector<int64_t> nonfinite(std::thread::hardware_concurrency() + 1, 0);
  std::atomic<int> slot{0};
  parallel_for(output_.count, [&](int64_t lo, int64_t hi) {
    int64_t bad = 0;
    for (int64_t i = lo; i < hi; ++i) bad += !std::isfinite(decode_element(t, bytes.data(), i));
    nonfinite[static_cast<size_t>(slot++)] = bad;
  });
  const int64_t cols = output_cols();
  std::vector<double> got(rows.size() * static_cast<size_t>(cols));
  for (size_t r = 0; r < rows.size(); ++r)
    for (int64_t j = 0; j < cols; ++j) got[r * cols + j] = decode_element(t, bytes.data(), rows[r] * cols + j);
  Comparison c = compare(ref, got, rows, tol);
  c.rows_total = output_rows();
  for (int64_t n : nonfinite) c.nonfinite += n;
  return c;
}

namespace {

template <class Params>
std::vector<VariantChoice> choices(const std::vector<Variant<Params>>& table, const Params& p, const DeviceCaps& caps) {
  std::vector<VariantChoice> out;
  for (const auto& v : table) out.push_back({v.name, v.note, v.supports(p, caps)});
  return out;
}

template <class Params>
void launch_variant(const std::vector<Variant<Params>>& table, const std::string& name, const Params& p,
                    const LaunchContext& ctx) {
  const auto* v = find_variant(table, name);
  if (!v) throw InputError("no variant named '" + name + "'");
  v->launch(p, ctx);
}

template <class Params>
std::size_t variant_workspace(const std::vector<Variant<Params>>& table, const std::string& name, const Params& p) {
  const auto* v = find_variant(table, name);
  return v && v->workspace ? v->workspace(p) : 0;
}

// ---------------------------------------------------------------- softmax

class SoftmaxProblem : public Problem {
 public:
  explicit SoftmaxProblem(const CasePoint& p) : Problem(p), rows_(p.shape.rows), cols_(p.shape.cols) {
    // Spread wide enough that exp() spans many orders of magnitude in a row.
    add_input("x", p.dtype, rows_ * cols_, 8.f, false);
    add_output("y", p.dtype, rows_ * cols_);
  }
  std::vector<VariantChoice> variants(const DeviceCaps& caps) const override {
    return choices(softmax_variants(), params(), caps);
  }
  Work work() const override {
    return {0, 2.0 * rows_ * cols_ * dtype_bytes(point().dtype), Bandwidth::copy};
  }
  std::size_t workspace(const std::string& v) const override { return variant_workspace(softmax_variants(), v, params()); }
  void launch(const std::string& v, const LaunchContext& ctx) override { launch_variant(softmax_variants(), v, params(), ctx); }
  int64_t output_rows() const override { return rows_; }
  int64_t output_cols() const override { return cols_; }
  Coord coord(int64_t row, int64_t col) const override { return {0, 0, row, col}; }
  ref::Matrix reference(const ref::Rows& rows) const override {
    return ref::softmax(input(0).host.data(), cols_, rows);
  }

 private:
  SoftmaxParams params() const {
    return {input(0).device.get(), output().device.get(), rows_, cols_, point().dtype};
  }
  int64_t rows_, cols_;
};

// ---------------------------------------------------------------- gemm

class GemmProblem : public Problem {
 public:
  explicit GemmProblem(const CasePoint& p) : Problem(p), s_(p.shape) {
    // B is scaled by sqrt(3/k) so each output is O(1) whatever k is, and the
    // tolerances, set for O(1) values, mean the same at every size.
    add_input("a", p.dtype, s_.batch * s_.m * s_.k, 1.f, false);
    add_input("b", p.dtype, s_.batch * s_.k * s_.n, static_cast<float>(std::sqrt(3.0 / s_.k)), false);
    add_output("c", p.dtype, s_.batch * s_.m * s_.n);
  }
  std::vector<VariantChoice> variants(const DeviceCaps& caps) const override {
    return choices(gemm_variants(), params(), caps);
  }
  Work work() const override {
    const double e = dtype_bytes(point().dtype);
    return {2.0 * s_.batch * s_.m * s_.n * s_.k, e * s_.batch * (s_.m * s_.k + s_.k * s_.n + s_.m * s_.n),
            Bandwidth::copy};
  }
  std::size_t workspace(const std::string& v) const override { return variant_workspace(gemm_variants(), v, params()); }
  void launch(const std::string& v, const LaunchContext& ctx) override { launch_variant(gemm_variants(), v, params(), ctx); }
  int64_t output_rows() const override { return s_.batch * s_.m; }
  int64_t output_cols() const override { return s_.n; }
  Coord coord(int64_t row, int64_t col) const override { return {row / s_.m, 0, row % s_.m, col}; }
  ref::Matrix reference(const ref::Rows& rows) const override {
    return ref::gemm(input(0).host.data(), input(1).host.data(), s_.layout == GemmLayout::nn, s_.m, s_.n, s_.k, rows);
  }

 private:
  GemmParams params() const {
    return {input(0).device.get(), input(1).device.get(), output().device.get(), s_.batch, s_.m, s_.n, s_.k,
            s_.layout, point().dtype};
  }
  Shape s_;
};

// ---------------------------------------------------------------- attention

class AttentionProblem : public Problem {
 public:
  explicit AttentionProblem(const CasePoint& p) : Problem(p), s_(p.shape) {
    add_input("q", p.dtype, s_.batch * s_.seq_q * s_.heads * s_.head_dim, 1.f, true);
    add_input("k", p.dtype, s_.batch * s_.seq_k * s_.kv_heads * s_.head_dim, 1.f, true);
    add_input("v", p.dtype, s_.batch * s_.seq_k * s_.kv_heads * s_.head_dim, 1.f, true);
    add_output("o", p.dtype, s_.batch * s_.seq_q * s_.heads * s_.head_dim);
  }
  std::vector<VariantChoice> variants(const DeviceCaps& caps) const override {
    return choices(attention_variants(), params(), caps);
  }
  Work work() const override {
    const double e = dtype_bytes(point().dtype);
    return {4.0 * s_.batch * s_.heads * s_.head_dim * static_cast<double>(attention_pairs(s_)),
            e * s_.batch * s_.head_dim * (2.0 * s_.seq_q * s_.heads + 2.0 * s_.seq_k * s_.kv_heads), Bandwidth::copy};
  }
  std::size_t workspace(const std::string& v) const override {
    return variant_workspace(attention_variants(), v, params());
  }
  void launch(const std::string& v, const LaunchContext& ctx) override {
    launch_variant(attention_variants(), v, params(), ctx);
  }
  // o [batch, seq_q, heads, head_dim]: row r = (b * seq_q + i) * heads + h.
  int64_t output_rows() const override { return s_.batch * s_.seq_q * s_.heads; }
  int64_t output_cols() const override { return s_.head_dim; }
  Coord coord(int64_t row, int64_t col) const override {
    return {row / (s_.seq_q * s_.heads), row % s_.heads, row / s_.heads % s_.seq_q, col};
  }
  // Rows that see no key must come out 0, not NaN: check the first and the last
  // such query in the first and last batch, for the first and last head.
  ref::Rows must_check_rows() const override {
    ref::Rows rows;
    std::vector<int64_t> blind;
    for (int64_t i = 0; i < s_.seq_q; ++i)
      if (visible_keys(s_, i) == 0) blind.push_back(i);
    if (blind.empty()) return rows;
    for (int64_t b : {int64_t{0}, s_.batch - 1})
      for (int64_t i : {blind.front(), blind.back()})
        for (int64_t h : {int64_t{0}, s_.heads - 1}) rows.push_back((b * s_.seq_q + i) * s_.heads + h);
    return rows;
  }
  ref::Matrix reference(const ref::Rows& rows) const override {
    ref::AttentionShape a;
    a.batch = s_.batch;
    a.heads = s_.heads;
    a.kv_heads = s_.kv_heads;
    a.seq_q = s_.seq_q;
    a.seq_k = s_.seq_k;
    a.head_dim = s_.head_dim;
    a.causal = s_.causal;
    a.window = s_.window;
    a.alibi = s_.alibi;
    return ref::attention(a, input(0).host.data(), input(1).host.data(), input(2).host.data(), rows);
  }

 private:
  AttentionParams params() const {
    AttentionParams p;
    p.q = input(0).device.get();
    p.k = input(1).device.get();
    p.v = input(2).device.get();
    p.o = output().device.get();
    p.batch = s_.batch;
    p.heads = s_.heads;
    p.kv_heads = s_.kv_heads;
    p.seq_q = s_.seq_q;
    p.seq_k = s_.seq_k;
    p.head_dim = s_.head_dim;
    p.causal = s_.causal;
    p.window = s_.window;
    p.alibi = s_.alibi;
    p.dtype = point().dtype;
    finish_attention_params(p);
    return p;
  }
  Shape s_;
};

// ---------------------------------------------------------------- decode

class DecodeProblem : public Problem {
 public:
  explicit DecodeProblem(const CasePoint& p) : Problem(p), s_(p.shape) {
    const int64_t cache = s_.batch * s_.max_context * s_.kv_heads * s_.head_dim;
    add_input("q", p.dtype, s_.batch * s_.heads * s_.head_dim, 1.f, true);
    add_input("k_cache", p.dtype, cache, 1.f, true);
    add_input("v_cache", p.dtype, cache, 1.f, true);
    add_output("o", p.dtype, s_.batch * s_.heads * s_.head_dim);
    context_.assign(s_.context.begin(), s_.context.end());
  }
  std::vector<VariantChoice> variants(const DeviceCaps& caps) const override {
    return choices(decode_variants(), params(), caps);
  }
  // The bytes a decode step must move: each sequence's K and V rows up to its context,
  // q and o. The cache's unused tail is not counted: nothing should read it.
  Work work() const override {
    int64_t rows = 0;
    for (int64_t c : s_.context) rows += c;
    const double e = dtype_bytes(point().dtype);
    return {4.0 * s_.heads * static_cast<double>(rows) * s_.head_dim,
            e * (2.0 * rows * s_.kv_heads * s_.head_dim + 2.0 * s_.batch * s_.heads * s_.head_dim), Bandwidth::read};
  }
  uint64_t device_bytes() const override { return Problem::device_bytes() + 4 * context_.size(); }
  void allocate() override {
    Problem::allocate();
    context_lens_ = DeviceBuffer(4 * context_.size());
    context_lens_.upload(context_.data(), 4 * context_.size());
  }
  std::size_t workspace(const std::string& v) const override { return variant_workspace(decode_variants(), v, params()); }
  void launch(const std::string& v, const LaunchContext& ctx) override { launch_variant(decode_variants(), v, params(), ctx); }
  int64_t output_rows() const override { return s_.batch * s_.heads; }
  int64_t output_cols() const override { return s_.head_dim; }
  Coord coord(int64_t row, int64_t col) const override { return {row / s_.heads, row % s_.heads, 0, col}; }
  ref::Matrix reference(const ref::Rows& rows) const override {
    return ref::decode(ref_shape(), input(0).host.data(), input(1).host.data(), input(2).host.data(), rows);
  }
  // Cache rows past each sequence's context hold NaN: a kernel that reads one fails.
  void shape_input(size_t index, std::vector<float>& values) const override {
    if (index == 0) return;
    const int64_t row = s_.kv_heads * s_.head_dim;
    for (int64_t b = 0; b < s_.batch; ++b)
      std::fill(values.begin() + (b * s_.max_context + s_.context[b]) * row,
                values.begin() + (b + 1) * s_.max_context * row, NAN);
  }

 private:
  ref::DecodeShape ref_shape() const {
    ref::DecodeShape d;
    d.batch = s_.batch;
    d.heads = s_.heads;
    d.kv_heads = s_.kv_heads;
    d.head_dim = s_.head_dim;
    d.max_context = s_.max_context;
    d.context = s_.context;
    d.alibi = s_.alibi;
    return d;
  }
  DecodeParams params() const {
    DecodeParams p;
    p.q = input(0).device.get();
    p.k_cache = input(1).device.get();
    p.v_cache = input(2).device.get();
    p.o = output().device.get();
    p.context_lens = static_cast<const int32_t*>(context_lens_.get());
    p.batch = s_.batch;
    p.heads = s_.heads;
    p.kv_heads = s_.kv_heads;
    p.head_dim = s_.head_dim;
    p.max_context = s_.max_context;
    p.longest_context = *std::max_element(s_.context.begin(), s_.context.end());
    p.alibi = s_.alibi;
    p.dtype = point().dtype;
    finish_decode_params(p);
    return p;
  }
  Shape s_;
  std::vector<int32_t> context_;
  DeviceBuffer context_lens_;
};

// ---------------------------------------------------------------- pipeline

// A generation loop: the prompt's K/V written into the cache and attended by a
// prefill variant (time to first token), then `generate` decode steps, each
// appending one token's K/V and decoding (time between tokens). Variants are pairs
// "prefill+decode". The output is every decode step's o, [generate, batch, heads,
// head_dim]; the cache must end up holding exactly what was appended.
class PipelineProblem : public Problem {
 public:
  explicit PipelineProblem(const CasePoint& p) : Problem(p), s_(p.shape) {
    const int64_t P = s_.prompt, G = s_.generate, b = s_.batch, h = s_.heads, g = s_.kv_heads, d = s_.head_dim;
    add_input("q_prompt", p.dtype, b * P * h * d, 1.f, true);
    add_input("k_prompt", p.dtype, b * P * g * d, 1.f, true);
    add_input("v_prompt", p.dtype, b * P * g * d, 1.f, true);
    add_input("q_new", p.dtype, G * b * h * d, 1.f, true);
    add_input("k_new", p.dtype, G * b * g * d, 1.f, true);
    add_input("v_new", p.dtype, G * b * g * d, 1.f, true);
    add_output("o", p.dtype, G * b * h * d);
  }

  std::vector<VariantChoice> variants(const DeviceCaps& caps) const override {
    std::vector<VariantChoice> out;
    const AttentionParams ap = prefill_params();
    const DecodeParams dp = decode_params(0);
    for (const auto& a : attention_variants()) {
      const std::string why_a = a.supports(ap, caps);
      for (const auto& d : decode_variants()) {
        const std::string why_d = d.supports(dp, caps);
        std::string skip = !why_a.empty() ? "prefill: " + why_a : !why_d.empty() ? "decode: " + why_d : "";
        out.push_back({std::string(a.name) + "+" + d.name, "prefill " + std::string(a.name) + ", decode " + d.name,
                       skip});
      }
    }
    return out;
  }

  // The prefill's work: the TFLOP/s and GB/s columns describe the time to first token.
  Work work() const override {
    Shape prefill = s_;
    prefill.seq_q = prefill.seq_k = s_.prompt;
    prefill.causal = true;
    const double e = dtype_bytes(point().dtype);
    return {4.0 * s_.batch * s_.heads * s_.head_dim * static_cast<double>(attention_pairs(prefill)),
            e * s_.batch * s_.prompt * s_.head_dim * (2.0 * s_.heads + 4.0 * s_.kv_heads), Bandwidth::copy};
  }
  uint64_t device_bytes() const override {
    const uint64_t e = dtype_bytes(point().dtype);
    return Problem::device_bytes() + e * (2 * cache_elements() + s_.batch * s_.prompt * s_.heads * s_.head_dim) +
           4 * (s_.batch + 2 * s_.generate * s_.batch);
  }
  void allocate() override {
    Problem::allocate();
    const std::size_t e = dtype_bytes(point().dtype);
    k_cache_ = DeviceBuffer(e * cache_elements());
    v_cache_ = DeviceBuffer(e * cache_elements());
    o_prefill_ = DeviceBuffer(e * s_.batch * s_.prompt * s_.heads * s_.head_dim);
    // Cache rows each step writes to and reads up to, all steps at once: [generate, batch].
    std::vector<int32_t> zeros(s_.batch, 0), positions, contexts;
    for (int64_t t = 0; t < s_.generate; ++t)
      for (int64_t b = 0; b < s_.batch; ++b) {
        positions.push_back(static_cast<int32_t>(s_.prompt + t));
        contexts.push_back(static_cast<int32_t>(s_.prompt + t + 1));
      }
    prompt_positions_ = DeviceBuffer(4 * zeros.size());
    prompt_positions_.upload(zeros.data(), 4 * zeros.size());
    step_positions_ = DeviceBuffer(4 * positions.size());
    step_positions_.upload(positions.data(), 4 * positions.size());
    step_contexts_ = DeviceBuffer(4 * contexts.size());
    step_contexts_.upload(contexts.data(), 4 * contexts.size());
  }
  void poison_output(cudaStream_t stream) override {
    Problem::poison_output(stream);
    // A step that reads a cache row nobody wrote reads NaN and fails.
    for (DeviceBuffer* b : {&k_cache_, &v_cache_, &o_prefill_})
      check_cuda(cudaMemsetAsync(b->get(), 0xff, b->bytes(), stream), "poison cache");
  }
  std::size_t workspace(const std::string& v) const override {
    const auto [a, d] = split(v);
    return std::max(variant_workspace(attention_variants(), a, prefill_params()),
                    variant_workspace(decode_variants(), d, decode_params(s_.generate - 1)));
  }
  void launch(const std::string& v, const LaunchContext& ctx) override {
    const auto [a, d] = split(v);
    prefill(a, ctx);
    for (int64_t t = 0; t < s_.generate; ++t) step(d, t, ctx);
  }

  std::vector<std::string> default_variants(const DeviceCaps& caps) const override {
    // Tables run from the learner's version to the fastest, so the default pair is the
    // last variant of each that supports the case (plus the baseline pair in `run`).
    std::string a = s_.prefill, d = s_.decode;
    if (a.empty())
      for (const auto& x : attention_variants())
        if (x.supports(prefill_params(), caps).empty()) a = x.name;
    if (d.empty())
      for (const auto& x : decode_variants())
        if (x.supports(decode_params(0), caps).empty()) d = x.name;
    return {a + "+" + d};
  }

  std::optional<PipelineTiming> time_steps(const std::string& v, Gpu& gpu, const BenchSpec& spec,
                                           const LaunchContext& ctx, const std::vector<std::string>& nvtx) override {
    const auto [a, d] = split(v);
    SampleTimer timer(gpu, spec.mode == TimingMode::cold);
    std::vector<std::string> prefill_ranges = nvtx, step_ranges = nvtx;
    prefill_ranges.push_back("prefill");
    step_ranges.push_back("step");
    PipelineTiming t;
    t.ttft.mode = spec.mode;
    StoppingRule rule;
    rule.min_time_ms = spec.min_time_ms;
    rule.max_noise = spec.max_noise;
    rule.max_time_ms = spec.max_time_ms;
    launch(v, ctx);  // warm-up: every kernel loaded, cuBLAS heuristics settled
    gpu.synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    auto elapsed = [&] {
      return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    };
    do t.ttft.samples.push_back(timer.time([&] { prefill(a, ctx); }, prefill_ranges));
    while (!rule.done(t.ttft.samples, elapsed()));
    t.ttft.elapsed_ms = elapsed();
    t.ttft.ms = summarize(t.ttft.samples);
    t.ttft.clock = timer.take_clock();  // the row's MHz: the prefill's
    // Steps after a fresh prefill, as a server would run them; several passes for the
    // percentiles, each step flushed from L2 in cold mode (weights would evict the cache).
    std::vector<double> steps;
    for (int pass = 0; pass < 3; ++pass) {
      prefill(a, ctx);
      for (int64_t s = 0; s < s_.generate; ++s) steps.push_back(timer.time([&] { step(d, s, ctx); }, step_ranges));
    }
    t.ttft.hold_timeouts = timer.take_hold_timeouts();
    t.tbt = summarize(steps);
    std::sort(steps.begin(), steps.end());
    t.tbt_p99 = quantile(steps, 0.99);
    t.steps = static_cast<int64_t>(steps.size());
    return t;
  }

  int64_t output_rows() const override { return s_.generate * s_.batch * s_.heads; }
  int64_t output_cols() const override { return s_.head_dim; }
  // Row r = (step * batch + b) * heads + h; the step shows as i, the token's position.
  Coord coord(int64_t row, int64_t col) const override {
    const int64_t step = row / (s_.batch * s_.heads);
    return {row / s_.heads % s_.batch, row % s_.heads, s_.prompt + step, col};
  }

  ref::Matrix reference(const ref::Rows& rows) const override {
    const std::vector<float> k = full_cache(1, 4), v = full_cache(2, 5);
    const int64_t per_step = s_.batch * s_.heads, hd = s_.head_dim;
    ref::Matrix out(static_cast<int64_t>(rows.size()), hd);
    for (int64_t t = 0; t < s_.generate; ++t) {
      ref::Rows mine, where;
      for (size_t i = 0; i < rows.size(); ++i)
        if (rows[i] / per_step == t) {
          mine.push_back(rows[i] % per_step);
          where.push_back(static_cast<int64_t>(i));
        }
      if (mine.empty()) continue;
      ref::DecodeShape d;
      d.batch = s_.batch;
      d.heads = s_.heads;
      d.kv_heads = s_.kv_heads;
      d.head_dim = hd;
      d.max_context = s_.max_context;
      d.context.assign(static_cast<size_t>(s_.batch), s_.prompt + t + 1);
      const ref::Matrix m = ref::decode(d, input(3).host.data() + t * per_step * hd, k.data(), v.data(), mine);
      for (size_t i = 0; i < mine.size(); ++i) out.row(where[i]) = m.row(static_cast<int64_t>(i));
    }
    return out;
  }

  Comparison check(const ref::Rows& rows, const ref::Matrix& ref, Tolerance tol) const override {
    Comparison c = Problem::check(rows, ref, tol);
    // The cache must hold exactly the appended values, bit for bit, in every row a step wrote.
    const int64_t written = s_.batch * s_.max_context;  // rows (b, position) below
    const int64_t row = s_.kv_heads * s_.head_dim;
    const std::size_t e = dtype_bytes(point().dtype);
    int64_t wrong = 0, total = 0;
    for (int which = 0; which < 2; ++which) {
      std::vector<uint8_t> got(e * cache_elements());
      (which ? v_cache_ : k_cache_).download(got.data(), got.size());
      const std::vector<uint8_t> want = encode(point().dtype, full_cache(1 + which, 4 + which));
      for (int64_t r = 0; r < written; ++r) {
        if (r % s_.max_context >= s_.prompt + s_.generate) continue;
        total += row;
        for (int64_t i = 0; i < row * static_cast<int64_t>(e); i += static_cast<int64_t>(e))
          wrong += std::memcmp(&got[r * row * e + i], &want[r * row * e + i], e) != 0;
      }
    }
    if (wrong) c.also_wrong = "KV cache: " + std::to_string(wrong) + " of " + std::to_string(total) +
                              " elements differ from what was appended";
    return c;
  }

 private:
  static std::pair<std::string, std::string> split(const std::string& v) {
    const auto plus = v.find('+');
    return {v.substr(0, plus), plus == std::string::npos ? "" : v.substr(plus + 1)};
  }
  int64_t cache_elements() const { return s_.batch * s_.max_context * s_.kv_heads * s_.head_dim; }

  // [batch, max_context, kv_heads, head_dim] as the steps leave it: the prompt's rows,
  // then one new row per step; rows past prompt + generate are 0 (never compared).
  std::vector<float> full_cache(size_t prompt_input, size_t new_input) const {
    const int64_t row = s_.kv_heads * s_.head_dim;
    std::vector<float> c(static_cast<size_t>(cache_elements()), 0.f);
    for (int64_t b = 0; b < s_.batch; ++b) {
      std::copy_n(input(prompt_input).host.begin() + b * s_.prompt * row, s_.prompt * row,
                  c.begin() + b * s_.max_context * row);
      for (int64_t t = 0; t < s_.generate; ++t)
        std::copy_n(input(new_input).host.begin() + (t * s_.batch + b) * row, row,
                    c.begin() + (b * s_.max_context + s_.prompt + t) * row);
    }
    return c;
  }

  AttentionParams prefill_params() const {
    AttentionParams p;
    p.q = input(0).device.get();
    p.k = k_cache_.get();
    p.v = v_cache_.get();
    p.o = o_prefill_.get();
    p.batch = s_.batch;
    p.heads = s_.heads;
    p.kv_heads = s_.kv_heads;
    p.seq_q = p.seq_k = s_.prompt;
    p.head_dim = s_.head_dim;
    p.causal = true;
    p.kv_batch_stride = s_.max_context * s_.kv_heads * s_.head_dim;  // read the cache in place
    p.dtype = point().dtype;
    finish_attention_params(p);
    return p;
  }
  DecodeParams decode_params(int64_t t) const {
    DecodeParams p;
    p.q = static_cast<const char*>(input(3).device.get()) + dtype_bytes(point().dtype) * t * s_.batch * s_.heads * s_.head_dim;
    p.k_cache = k_cache_.get();
    p.v_cache = v_cache_.get();
    p.o = static_cast<char*>(output().device.get()) + dtype_bytes(point().dtype) * t * s_.batch * s_.heads * s_.head_dim;
    p.context_lens = static_cast<const int32_t*>(step_contexts_.get()) + (step_contexts_.get() ? t * s_.batch : 0);
    p.batch = s_.batch;
    p.heads = s_.heads;
    p.kv_heads = s_.kv_heads;
    p.head_dim = s_.head_dim;
    p.max_context = s_.max_context;
    p.longest_context = s_.prompt + t + 1;
    p.dtype = point().dtype;
    finish_decode_params(p);
    return p;
  }
  CacheAppendParams append_params(size_t k_input, size_t v_input, int64_t offset_rows, int64_t tokens,
                                  const void* positions) const {
    const std::size_t off = dtype_bytes(point().dtype) * offset_rows * s_.kv_heads * s_.head_dim;
    CacheAppendParams p{k_cache_.get(),
                        v_cache_.get(),
                        static_cast<const char*>(input(k_input).device.get()) + off,
                        static_cast<const char*>(input(v_input).device.get()) + off,
                        static_cast<const int32_t*>(positions)};
    p.batch = s_.batch;
    p.tokens = tokens;
    p.kv_heads = s_.kv_heads;
    p.head_dim = s_.head_dim;
    p.max_context = s_.max_context;
    p.dtype = point().dtype;
    return p;
  }
  void prefill(const std::string& a, const LaunchContext& ctx) {
    cache_append(append_params(1, 2, 0, s_.prompt, prompt_positions_.get()), ctx);
    launch_variant(attention_variants(), a, prefill_params(), ctx);
  }
  void step(const std::string& d, int64_t t, const LaunchContext& ctx) {
    cache_append(append_params(4, 5, t * s_.batch, 1, static_cast<const int32_t*>(step_positions_.get()) + t * s_.batch),
                 ctx);
    launch_variant(decode_variants(), d, decode_params(t), ctx);
  }

  Shape s_;
  DeviceBuffer k_cache_, v_cache_, o_prefill_, prompt_positions_, step_positions_, step_contexts_;
};

// ---------------------------------------------------------------- paged

// Decode over a paged KV cache. Each trial draws the tokens' K/V, a random block
// table over a pool larger than needed, and writes the cache with reshape_and_cache
// (quantising to fp8 when asked); the cache is then checked bit for bit against the
// host's layout, and every slot no sequence owns holds NaN.
class PagedProblem : public Problem {
 public:
  explicit PagedProblem(const CasePoint& p) : Problem(p), s_(p.shape) {
    for (int64_t c : s_.context) {
      offsets_.push_back(tokens_);
      tokens_ += c;
      max_blocks_ = std::max(max_blocks_, ceil_div(c, s_.block_size));
    }
    add_input("q", p.dtype, s_.batch * s_.heads * s_.head_dim, 1.f, true);
    add_input("k", p.dtype, tokens_ * s_.kv_heads * s_.head_dim, 1.f, true);
    add_input("v", p.dtype, tokens_ * s_.kv_heads * s_.head_dim, 1.f, true);
    add_output("o", p.dtype, s_.batch * s_.heads * s_.head_dim);
  }
  std::vector<VariantChoice> variants(const DeviceCaps& caps) const override {
    return choices(paged_variants(), params(), caps);
  }
  Work work() const override {
    const double kv = dtype_bytes(s_.kv_dtype), e = dtype_bytes(point().dtype);
    return {4.0 * s_.heads * static_cast<double>(tokens_) * s_.head_dim,
            kv * 2.0 * tokens_ * s_.kv_heads * s_.head_dim + e * 2.0 * s_.batch * s_.heads * s_.head_dim +
                4.0 * s_.batch * max_blocks_,
            Bandwidth::read};
  }
  uint64_t device_bytes() const override {
    return Problem::device_bytes() + 2 * cache_elements() * dtype_bytes(s_.kv_dtype) + 4 * s_.batch * max_blocks_ +
           4 * s_.batch + 8 * tokens_;
  }
  void allocate() override {
    Problem::allocate();
    const std::size_t kv = dtype_bytes(s_.kv_dtype);
    k_cache_ = DeviceBuffer(kv * cache_elements());
    v_cache_ = DeviceBuffer(kv * cache_elements());
    tables_ = DeviceBuffer(4 * s_.batch * max_blocks_);
    context_lens_ = DeviceBuffer(4 * s_.batch);
    slots_ = DeviceBuffer(8 * tokens_);
    std::vector<int32_t> lens(s_.context.begin(), s_.context.end());
    context_lens_.upload(lens.data(), 4 * lens.size());
  }
  std::size_t workspace(const std::string& v) const override { return variant_workspace(paged_variants(), v, params()); }
  void launch(const std::string& v, const LaunchContext& ctx) override { launch_variant(paged_variants(), v, params(), ctx); }
  int64_t output_rows() const override { return s_.batch * s_.heads; }
  int64_t output_cols() const override { return s_.head_dim; }
  Coord coord(int64_t row, int64_t col) const override { return {row / s_.heads, row % s_.heads, 0, col}; }

  void after_inputs(uint64_t seed, const LaunchContext& ctx) override {
    // The pool in a seeded random order: sequence b takes the next ceil(context / block)
    // blocks. Table entries past a sequence's last block point at a spare (NaN) block.
    std::vector<int32_t> pool(static_cast<size_t>(s_.num_blocks));
    for (int64_t i = 0; i < s_.num_blocks; ++i) pool[i] = static_cast<int32_t>(i);
    for (int64_t i = s_.num_blocks - 1; i > 0; --i)
      std::swap(pool[i], pool[random_bits(seed, 0x9a6ed, static_cast<uint64_t>(i)) % static_cast<uint64_t>(i + 1)]);
    int64_t next = 0;
    for (int64_t b = 0; b < s_.batch; ++b) next += ceil_div(s_.context[b], s_.block_size);
    const int32_t spare = pool[static_cast<size_t>(std::min(next, s_.num_blocks - 1))];
    table_.assign(static_cast<size_t>(s_.batch * max_blocks_), spare);
    next = 0;
    for (int64_t b = 0; b < s_.batch; ++b)
      for (int64_t j = 0; j < ceil_div(s_.context[b], s_.block_size); ++j) table_[b * max_blocks_ + j] = pool[next++];
    std::vector<int64_t> slots(static_cast<size_t>(tokens_));
    for (int64_t b = 0; b < s_.batch; ++b)
      for (int64_t t = 0; t < s_.context[b]; ++t)
        slots[offsets_[b] + t] = int64_t{table_[b * max_blocks_ + t / s_.block_size]} * s_.block_size + t % s_.block_size;
    tables_.upload(table_.data(), 4 * table_.size());
    slots_.upload(slots.data(), 8 * slots.size());

    // An fp8 cache stores value / scale, the scale putting the largest value at 448.
    k_scale_ = v_scale_ = 1.f;
    if (s_.kv_dtype == DType::fp8_e4m3) {
      k_scale_ = amax(input(1).host) / 448.f;
      v_scale_ = amax(input(2).host) / 448.f;
    }
    const std::vector<float> codes_k = to_paged(input(1).host, slots, k_scale_, true);
    const std::vector<float> codes_v = to_paged(input(2).host, slots, v_scale_, false);
    host_k_ = dequantised(codes_k, k_scale_);
    host_v_ = dequantised(codes_v, v_scale_);

    // NaN everywhere, then the tokens into their slots.
    for (DeviceBuffer* c : {&k_cache_, &v_cache_})
      check_cuda(cudaMemsetAsync(c->get(), 0xff, c->bytes(), ctx.stream), "poison paged cache");
    ReshapeAndCacheParams w{input(1).device.get(), input(2).device.get(), k_cache_.get(), v_cache_.get(),
                            static_cast<const int64_t*>(slots_.get())};
    w.tokens = tokens_;
    w.kv_heads = s_.kv_heads;
    w.head_dim = s_.head_dim;
    w.block_size = s_.block_size;
    w.dtype = point().dtype;
    w.kv_dtype = s_.kv_dtype;
    w.k_scale = k_scale_;
    w.v_scale = v_scale_;
    reshape_and_cache(w, ctx);
    check_cuda(cudaStreamSynchronize(ctx.stream), "reshape_and_cache");

    // The device's bytes against the host's layout, owned slots only (both NaN elsewhere).
    int64_t wrong = 0;
    for (int which = 0; which < 2; ++which) {
      const std::vector<float>& want = which ? codes_v : codes_k;
      std::vector<uint8_t> got(dtype_bytes(s_.kv_dtype) * static_cast<size_t>(cache_elements()));
      (which ? v_cache_ : k_cache_).download(got.data(), got.size());
      const std::vector<uint8_t> enc = encode(s_.kv_dtype, want);
      const std::size_t e = dtype_bytes(s_.kv_dtype);
      for (int64_t i = 0; i < cache_elements(); ++i)
        if (!std::isnan(want[i]) && std::memcmp(&got[i * e], &enc[i * e], e) != 0) ++wrong;
    }
    cache_wrong_ = wrong ? "reshape_and_cache: " + std::to_string(wrong) + " of " +
                               std::to_string(2 * tokens_ * s_.kv_heads * s_.head_dim) + " cache elements wrong"
                         : "";
  }

  ref::Matrix reference(const ref::Rows& rows) const override {
    ref::PagedShape p;
    p.decode.batch = s_.batch;
    p.decode.heads = s_.heads;
    p.decode.kv_heads = s_.kv_heads;
    p.decode.head_dim = s_.head_dim;
    p.decode.context = s_.context;
    p.decode.alibi = s_.alibi;
    p.block_size = s_.block_size;
    p.num_blocks = s_.num_blocks;
    p.max_blocks_per_seq = max_blocks_;
    p.x = paged_x(s_.kv_dtype);
    return ref::paged(p, input(0).host.data(), host_k_.data(), host_v_.data(), table_.data(), rows);
  }
  Comparison check(const ref::Rows& rows, const ref::Matrix& ref, Tolerance tol) const override {
    Comparison c = Problem::check(rows, ref, tol);
    c.also_wrong = cache_wrong_;
    return c;
  }

 private:
  int64_t cache_elements() const { return s_.num_blocks * s_.kv_heads * s_.head_dim * s_.block_size; }
  static float amax(const std::vector<float>& v) {
    float m = 0;
    for (float x : v) m = std::max(m, std::fabs(x));
    return m > 0 ? m : 1.f;
  }
  // The cache as the device stores it (fp8 codes, or values rounded to the cache's
  // dtype) in vLLM's layout, NaN in every slot no token owns.
  // k: [blocks, kv_heads, head_dim / x, block_size, x]; v: [blocks, kv_heads, head_dim, block_size].
  std::vector<float> to_paged(const std::vector<float>& tok, const std::vector<int64_t>& slots, float scale,
                              bool key) const {
    const int64_t x = paged_x(s_.kv_dtype), bs = s_.block_size, g = s_.kv_heads, d = s_.head_dim;
    std::vector<float> c(static_cast<size_t>(cache_elements()), NAN);
    for (int64_t i = 0; i < tokens_; ++i) {
      const int64_t blk = slots[i] / bs, off = slots[i] % bs;
      for (int64_t h = 0; h < g; ++h)
        for (int64_t j = 0; j < d; ++j) {
          const float v = tok[(i * g + h) * d + j];
          const float q = s_.kv_dtype == DType::fp8_e4m3 ? round_to(DType::fp8_e4m3, v / scale)
                                                          : round_to(s_.kv_dtype, v);
          const int64_t at = key ? (((blk * g + h) * (d / x) + j / x) * bs + off) * x + j % x
                                 : ((blk * g + h) * d + j) * bs + off;
          c[at] = q;
        }
    }
    return c;
  }
  // What the reference reads: the stored codes times the scale (the scale is 1 unless fp8).
  static std::vector<float> dequantised(std::vector<float> codes, float scale) {
    if (scale != 1.f)
      for (float& c : codes) c *= scale;
    return codes;
  }
  PagedParams params() const {
    PagedParams p;
    p.q = input(0).device.get();
    p.k_cache = k_cache_.get();
    p.v_cache = v_cache_.get();
    p.o = output().device.get();
    p.block_tables = static_cast<const int32_t*>(tables_.get());
    p.context_lens = static_cast<const int32_t*>(context_lens_.get());
    p.batch = s_.batch;
    p.heads = s_.heads;
    p.kv_heads = s_.kv_heads;
    p.head_dim = s_.head_dim;
    p.block_size = s_.block_size;
    p.num_blocks = s_.num_blocks;
    p.max_blocks_per_seq = max_blocks_;
    p.longest_context = *std::max_element(s_.context.begin(), s_.context.end());
    p.partition_size = s_.partition_size;
    p.alibi = s_.alibi;
    p.dtype = point().dtype;
    p.kv_dtype = s_.kv_dtype;
    p.k_scale = k_scale_;
    p.v_scale = v_scale_;
    finish_paged_params(p);
    return p;
  }

  Shape s_;
  int64_t tokens_ = 0, max_blocks_ = 0;
  std::vector<int64_t> offsets_;  // first token of each sequence in k, v
  std::vector<int32_t> table_;
  std::vector<float> host_k_, host_v_;
  float k_scale_ = 1, v_scale_ = 1;
  std::string cache_wrong_;
  DeviceBuffer k_cache_, v_cache_, tables_, context_lens_, slots_;
};

}  // namespace

int64_t visible_keys(const Shape& s, int64_t i) {
  const int64_t pos = i + s.seq_k - s.seq_q;  // bottom-right alignment
  int64_t lo = 0, hi = s.seq_k - 1;
  if (s.causal) hi = std::min(hi, pos);
  if (s.window > 0) {
    lo = std::max(lo, pos - s.window + 1);
    if (!s.causal) hi = std::min(hi, pos + s.window - 1);
  }
  return std::max<int64_t>(0, hi - lo + 1);
}

int64_t attention_pairs(const Shape& s) {
  int64_t pairs = 0;
  for (int64_t i = 0; i < s.seq_q; ++i) pairs += visible_keys(s, i);
  return pairs;
}

std::unique_ptr<Problem> make_problem(const CasePoint& point) {
  switch (point.op) {
    case Op::softmax: return std::make_unique<SoftmaxProblem>(point);
    case Op::gemm: return std::make_unique<GemmProblem>(point);
    case Op::attention: return std::make_unique<AttentionProblem>(point);
    case Op::decode: return std::make_unique<DecodeProblem>(point);
    case Op::pipeline: return std::make_unique<PipelineProblem>(point);
    case Op::paged: return std::make_unique<PagedProblem>(point);
  }
  return nullptr;
}

DeviceCaps assumed_caps() {
  DeviceCaps c;
  c.sm_count = 132;
  c.cc_major = 9;
  c.cc_minor = 0;
  c.smem_per_block_optin = 227 * 1024;
  c.l2_bytes = 50u << 20;
  c.total_memory = std::size_t{80} << 30;
  return c;
}

KernelCatalog kernel_catalog() {
  KernelCatalog c;
  for (Op op : {Op::softmax, Op::gemm, Op::attention, Op::decode, Op::paged, Op::pipeline}) c.variants[op] = {};
  for (const FamilyInfo& f : kernel_families()) {
    for (Op op : {Op::softmax, Op::gemm, Op::attention, Op::decode, Op::paged, Op::pipeline}) {
      if (f.op != op_name(op)) continue;
      for (const auto& v : f.variants) c.variants[op].push_back(v.name);
      if (!f.variants.empty()) c.baseline[op] = f.variants.front().name;
    }
  }
  // A pipeline runs a pair: "prefill+decode".
  for (const auto& a : c.variants[Op::attention])
    for (const auto& d : c.variants[Op::decode]) c.variants[Op::pipeline].push_back(a + "+" + d);
  if (!c.variants[Op::pipeline].empty()) c.baseline[Op::pipeline] = c.variants[Op::pipeline].front();
  return c;
}

}  // namespace attnbench
