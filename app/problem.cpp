#include "app/problem.hpp"

#include <algorithm>
#include <cmath>

#include "app/checked.hpp"
#include "app/numeric.hpp"
#include "kernels/harness/inputs.hpp"
#include "kernels/harness/scan.hpp"
#include "app/op.hpp"
#include "reference/parallel.hpp"

namespace attnbench {

std::vector<int64_t> Tensor::shape() const {
  std::vector<int64_t> s;
  for (const Dim& d : dims) s.push_back(d.size);
  return s;
}

std::string Tensor::layout() const {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + dims[i].name;
  return s + "]" + (note.empty() ? "" : " (" + note + ")");
}

int64_t count_elements(const std::string& name, const std::vector<Dim>& dims) {
  const auto shape = [&](size_t upto) {
    std::string s;
    for (size_t i = 0; i < upto; ++i) s += (i ? " x " : "") + dims[i].name + " " + std::to_string(dims[i].size);
    return s;
  };
  int64_t n = 1;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i].size < 0) throw std::logic_error("tensor " + name + ": negative dim " + dims[i].name);
    if (__builtin_mul_overflow(n, dims[i].size, &n)) overflow("tensor " + name + " (" + shape(i + 1) + ")");
  }
  if (n > kMaxIndex)
    throw InputError("tensor " + name + " (" + shape(dims.size()) + ") would hold " + std::to_string(n) +
                     " elements; kernels index with 32-bit ints, so at most " + std::to_string(kMaxIndex));
  return n;
}

std::vector<std::string> Problem::default_variants(const DeviceCaps& caps) const {
  (void)caps;
  return {};
}

std::vector<Stage> Problem::stages(const std::string& variant, const LaunchContext& ctx) {
  return {Stage{"", "", 1, [this, variant, ctx](int64_t) { launch(variant, ctx); }}};
}

uint64_t Problem::device_bytes() const {
  uint64_t total = output_.bytes();
  for (const auto& in : inputs_) total = checked_add(total, uint64_t{in.tensor.bytes()}, "the point's device bytes");
  for (const auto& b : buffers_) total = checked_add(total, uint64_t{b.bytes}, "the point's device bytes");
  return total;
}

Tensor& Problem::add_input(const std::string& name, DType dtype, std::vector<Dim> dims, float scale, bool normal,
                           std::string note) {
  const int64_t count = count_elements(name, dims);
  inputs_.push_back({Tensor{name, dtype, std::move(dims), std::move(note), count, {}, {}}, scale, normal});
  return inputs_.back().tensor;
}

Tensor& Problem::add_output(const std::string& name, DType dtype, std::vector<Dim> dims, size_t row_dims,
                            std::string note) {
  const int64_t count = count_elements(name, dims);
  row_dims_ = row_dims;
  output_ = Tensor{name, dtype, std::move(dims), std::move(note), count, {}, {}};
  return output_;
}

DeviceBuffer& Problem::add_buffer(std::size_t bytes, std::vector<uint8_t> host) {
  // Each element of a buffer is at most 8 bytes: the same 32-bit index rule as a tensor's.
  if (bytes > static_cast<std::size_t>(kMaxIndex) * 8)
    throw InputError("a buffer of " + std::to_string(bytes) + " bytes is past what 32-bit indices reach");
  buffers_.push_back({DeviceBuffer(), bytes, std::move(host)});
  return buffers_.back().device;
}

void Problem::allocate() {
  for (auto& in : inputs_) in.tensor.device = DeviceBuffer(in.tensor.bytes());
  output_.device = DeviceBuffer(output_.bytes());
  for (auto& b : buffers_) {
    b.device = DeviceBuffer(b.bytes);
    if (b.make) b.host = b.make();
    if (!b.host.empty()) b.device.upload(b.host.data(), b.host.size());
  }
}

namespace {

// A case's [inputs] entry for one tensor, resolved against the op's own draw of it (its
// scale, normal or uniform): docs/cases.md.
FillSpec fill_spec(const InputSpec& spec, float op_scale, bool op_normal, const std::vector<Dim>& dims) {
  FillSpec f;
  const FillKind own = op_normal ? FillKind::normal : FillKind::uniform;
  const double scale = spec.scale ? *spec.scale : spec.distribution == Distribution::large ? 16.0 * op_scale : op_scale;
  f.scale = static_cast<float>(scale);
  f.offset = static_cast<float>(spec.offset);
  switch (spec.distribution) {
    case Distribution::op: case Distribution::large: f.kind = own; break;
    case Distribution::outliers: f.kind = own, f.outliers = true; break;
    case Distribution::normal: f.kind = FillKind::normal; break;
    case Distribution::uniform: f.kind = FillKind::uniform; break;
    case Distribution::pareto: f.kind = FillKind::pareto; break;
    case Distribution::constant: f.kind = FillKind::constant; break;
  }
  f.row = dims.empty() ? 1 : std::max<int64_t>(1, dims.back().size);
  return f;
}

}  // namespace

std::vector<std::pair<std::string, bool>> Problem::input_names() const {
  std::vector<std::pair<std::string, bool>> out;
  for (const auto& in : inputs_) out.emplace_back(in.tensor.name, in.drawn);
  return out;
}

// Declared in app/op.hpp; here, where a Problem is a complete type.
std::unique_ptr<Problem> make_problem(const CasePoint& point) { return op_spec(point.op).make(point); }

std::vector<std::pair<std::string, bool>> point_inputs(const CasePoint& point) {
  return make_problem(point)->input_names();
}

Problem::InputDraw Problem::input_draw(size_t i) const {
  const Input& in = inputs_.at(i);
  InputDraw d;
  d.op_shape = in.normal ? "normal" : "uniform";
  if (!in.drawn) return d;
  const InputSpec& spec = point_.inputs.of(in.tensor.name);
  const FillSpec f = fill_spec(spec, in.scale, in.normal, in.tensor.dims);
  d.distribution = spec.distribution == Distribution::op ? d.op_shape : distribution_name(spec.distribution);
  d.scale = f.scale;
  d.offset = f.offset;
  return d;
}

void Problem::generate(uint64_t seed, const LaunchContext& ctx) {
  for (size_t t = 0; t < inputs_.size(); ++t) {
    Input& in = inputs_[t];
    Tensor& x = in.tensor;
    if (!in.drawn) continue;
    // Drawn on the device in the storage type, then read back exactly: the host's
    // values are what the kernels read, whatever the device's rounding was.
    const InputSpec& spec = point_.inputs.of(x.name);
    if (spec.is_default())
      launch_fill_random(x.device.get(), x.count, x.dtype, seed, t, in.scale, in.normal, ctx.stream);
    else
      launch_fill_distribution(x.device.get(), x.count, x.dtype, seed, t, fill_spec(spec, in.scale, in.normal, x.dims),
                               ctx.stream);
    const std::size_t e = dtype_bytes(x.dtype);
    for (const auto& [begin, end] : nan_ranges(t))
      check_cuda(cudaMemsetAsync(static_cast<uint8_t*>(x.device.get()) + begin * e, 0xff, (end - begin) * e, ctx.stream),
                 "NaN into an input");
    check_cuda(cudaStreamSynchronize(ctx.stream), "draw inputs");
    const auto bytes = host_bytes(x.bytes());
    x.device.download(bytes.get(), x.bytes());
    x.host.resize(static_cast<size_t>(x.count));
    for_chunks(x.count, [&](int64_t lo, int64_t hi) { decode_range(x.dtype, &bytes[lo * e], hi - lo, &x.host[lo]); });
  }
  setup_checks_.clear();
  prepare(seed, ctx);
}

std::vector<DeviceBuffer*> Problem::device_buffers() {
  std::vector<DeviceBuffer*> out;
  for (auto& in : inputs_) out.push_back(&in.tensor.device);
  out.push_back(&output_.device);
  for (auto& b : buffers_) out.push_back(&b.device);
  return out;
}

int Problem::make_copies(int copies, cudaStream_t stream) {
  drop_copies();
  const std::vector<DeviceBuffer*> own = device_buffers();
  for (int i = 1; i < copies; ++i) {
    std::vector<DeviceBuffer> copy;
    for (const DeviceBuffer* b : own) {
      copy.emplace_back(b->bytes());
      check_cuda(cudaMemcpyAsync(copy.back().get(), b->get(), b->bytes(), cudaMemcpyDeviceToDevice, stream),
                 "copy the point's tensors");
    }
    copies_.push_back(std::move(copy));
  }
  check_cuda(cudaStreamSynchronize(stream), "copy the point's tensors");
  return static_cast<int>(copies_.size()) + 1;
}

void Problem::use_copy(int i) {
  if (i == copy_in_place_) return;
  const std::vector<DeviceBuffer*> own = device_buffers();
  // Swapping copy c in and out again is its own inverse: first put copy 0 back, then take copy i.
  for (int c : {copy_in_place_, i})
    if (c > 0)
      for (size_t k = 0; k < own.size(); ++k) std::swap(*own[k], copies_[static_cast<size_t>(c - 1)][k]);
  copy_in_place_ = i;
}

void Problem::drop_copies() {
  use_copy(0);
  copies_.clear();
}

void Problem::poison_output(cudaStream_t stream) {
  // All-ones bytes are NaN in fp32, fp16, bf16 and fp8 e4m3 alike.
  check_cuda(cudaMemsetAsync(output_.device.get(), 0xff, output_.bytes(), stream), "poison output");
}

int64_t Problem::output_rows() const {
  int64_t n = 1;
  for (size_t i = 0; i < row_dims_ && i < output_.dims.size(); ++i) n *= output_.dims[i].size;
  return n;
}

int64_t Problem::output_cols() const { return output_rows() ? output_.count / output_rows() : 0; }

Coord Problem::coord(int64_t row, int64_t col) const {
  Coord c;
  int64_t flat = row * output_cols() + col;
  for (size_t k = output_.dims.size(); k-- > 0;) {
    const Dim& d = output_.dims[k];
    const int64_t at = flat % d.size;
    flat /= d.size;
    switch (d.role) {
      case 'b': c.b = at; break;
      case 'h': c.h = at; break;
      case 'i': c.i = at + d.offset; break;
      case 'd': c.d = at; break;
      default: break;
    }
  }
  return c;
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

Problem::Readback Problem::read_back(const ref::Rows& rows) const {
  const DType t = output_.dtype;
  const int64_t cols = output_cols();
  const std::size_t row_bytes = static_cast<std::size_t>(cols) * dtype_bytes(t);
  // The scratch: the NaN counter, then a chunk of row indices and the rows gathered for
  // them. A chunk is at most kGatherBytes of rows (at least one row).
  constexpr std::size_t kGatherBytes = std::size_t{64} << 20;
  const std::size_t per_chunk =
      std::max<std::size_t>(1, std::min(rows.size(), kGatherBytes / std::max<std::size_t>(1, row_bytes)));
  const std::size_t index_at = 8, rows_at = index_at + 8 * per_chunk;
  const std::size_t need = rows_at + per_chunk * row_bytes;
  if (check_scratch_.bytes() < need) check_scratch_ = DeviceBuffer(need);
  auto* base = static_cast<uint8_t*>(check_scratch_.get());
  const cudaStream_t s = cudaStreamLegacy;  // ordered with upload() and download()

  check_cuda(cudaMemsetAsync(base, 0, 8, s), "check: clear the NaN count");
  launch_count_nonfinite(output_.device.get(), output_.count, t, reinterpret_cast<unsigned long long*>(base), s);
  unsigned long long nonfinite = 0;
  check_cuda(cudaMemcpy(&nonfinite, base, 8, cudaMemcpyDeviceToHost), "check: read the NaN count");

  Readback b;
  b.nonfinite = static_cast<int64_t>(nonfinite);
  std::vector<double>& got = b.got;
  got.resize(rows.size() * static_cast<size_t>(cols));
  const auto chunk = host_bytes(per_chunk * row_bytes);
  for (std::size_t first = 0; first < rows.size(); first += per_chunk) {
    const std::size_t n = std::min(per_chunk, rows.size() - first);
    check_cuda(cudaMemcpy(base + index_at, rows.data() + first, 8 * n, cudaMemcpyHostToDevice), "check: row indices");
    launch_gather_rows(output_.device.get(), static_cast<int64_t>(row_bytes),
                       reinterpret_cast<const int64_t*>(base + index_at), static_cast<int64_t>(n), base + rows_at, s);
    check_cuda(cudaMemcpy(chunk.get(), base + rows_at, n * row_bytes, cudaMemcpyDeviceToHost), "check: rows");
    double* out = got.data() + first * static_cast<size_t>(cols);
    const int64_t elements = static_cast<int64_t>(n) * cols;
    for_chunks(elements, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) out[i] = decode_element(t, chunk.get(), i);
    });
  }
  return b;
}

Comparison Problem::judge(const Readback& b, const ref::Rows& rows, const ref::Matrix& ref, Tolerance tol,
                          const Bound* bound) const {
  Comparison c = compare(ref, b.got, rows, tol, tolerance_magnitude());
  c.rows_total = output_rows();
  c.nonfinite = b.nonfinite;
  c.also_wrong = b.also_wrong;
  if (bound) apply_bound(c, *bound);
  return c;
}

ref::Faithful Problem::faithful_of() const {
  ref::Faithful f;
  f.on = true;
  f.in = f.p = rounding_of(point_.dtype);
  f.largest_score = faithful_score_ = std::make_shared<std::atomic<float>>(0.f);
  return f;
}

ref::Matrix Problem::stored(ref::Matrix m) const {
  ref::detail::round_all(m, rounding_of(output_.dtype));
  return m;
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

}  // namespace attnbench
