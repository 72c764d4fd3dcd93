#include "app/ops.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <thread>

#include "app/numeric.hpp"
#include "app/random.hpp"
#include "kernels/gemm.hpp"
#include "kernels/registry.hpp"
#include "kernels/softmax.hpp"

namespace attnbench {

// ---------------------------------------------------------------- the base

namespace {

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

void Problem::generate(uint64_t seed) {
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
    const std::vector<uint8_t> bytes = encode(in.tensor.dtype, in.tensor.host);
    in.tensor.device.upload(bytes.data(), bytes.size());
  }
}

void Problem::poison_output(cudaStream_t stream) {
  // All-ones bytes are NaN in fp32, fp16, bf16 and fp8 e4m3 alike.
  check_cuda(cudaMemsetAsync(output_.device.get(), 0xff, output_.bytes(), stream), "poison output");
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

}  // namespace

std::unique_ptr<Problem> make_problem(const CasePoint& point) {
  switch (point.op) {
    case Op::softmax: return std::make_unique<SoftmaxProblem>(point);
    case Op::gemm: return std::make_unique<GemmProblem>(point);
    case Op::attention:
    case Op::decode:
    case Op::paged:
    case Op::pipeline: break;
  }
  return nullptr;  // no kernels for this op yet: the runner reports the point as skipped
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
  return c;
}

}  // namespace attnbench
