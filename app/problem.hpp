// One sweep point of a case as a problem on the device: its tensors (with their
// shapes, for dumps and error coordinates), how inputs are drawn, its reference, its
// variants, its work (FLOPs and bytes) and the stages the harness times. Each op's
// subclass lives in app/ops/<op>.cpp; the runner sees only this interface.
#pragma once
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <utility>
#include <string>
#include <vector>

#include "app/case.hpp"
#include "app/device.hpp"
#include "app/host_memory.hpp"
#include "app/op.hpp"
#include "app/timing.hpp"
#include "app/verify.hpp"
#include "app/work.hpp"
#include "kernels/common/kernels.hpp"
#include "reference/parallel.hpp"
#include "reference/reference.hpp"

namespace attnbench {

struct VariantChoice {
  std::string name, note;
  std::string skip;     // why it cannot run this point; empty = it can
  bool applies = true;  // false: it means nothing for this point, and runs only when named
  bool deterministic = true;  // Variant::deterministic: [verify] repeat's promise
};

// Host arrays of a tensor's size, from the block cache and left uninitialised by
// resize(): the parallel loops that fill them first touch their pages on all cores, where a
// std::vector<float> zeroed gigabytes on one core first.
using HostValues = std::vector<float, HostAllocator<float>>;

// One axis of a tensor. `role` places it in an error's (b, h, i, d) coordinate:
// 'b' batch, 'h' head, 'i' position (plus `offset`), 'd' the element; 0 for none.
struct Dim {
  std::string name;
  int64_t size = 1;
  char role = 0;
  int64_t offset = 0;
};

// A tensor on both sides: host values already rounded to its dtype (what the
// reference reads) and the device buffer in that dtype (what kernels read).
struct Tensor {
  std::string name;
  DType dtype = DType::fp32;
  std::vector<Dim> dims;
  std::string note;  // how to read the layout, e.g. "C = A B^T"
  int64_t count = 0;
  HostValues host;
  DeviceBuffer device;
  std::size_t bytes() const { return static_cast<std::size_t>(count) * dtype_bytes(dtype); }
  std::vector<int64_t> shape() const;
  std::string layout() const;  // "[batch, seq_q, heads, head_dim]" and the note
};

// The element count of a tensor or buffer of these dims: an InputError, thrown before
// anything is allocated, when it overflows or passes kMaxIndex (kernels index with
// 32-bit ints).
int64_t count_elements(const std::string& name, const std::vector<Dim>& dims);

// A kernel the problem ran to build its inputs (a cache written by reshape_and_cache),
// checked like a variant's output; the runner reports it as a row of its own.
struct SetupCheck {
  std::string kernel;
  Comparison cmp;
};

class Problem {
 public:
  explicit Problem(const CasePoint& p) : point_(p) {}
  virtual ~Problem() = default;
  const CasePoint& point() const { return point_; }

  // Every variant of the op, in table order, with why it would be skipped here.
  virtual std::vector<VariantChoice> variants(const DeviceCaps& caps) const = 0;
  // The variants to run when the case names none; empty = all of them.
  virtual std::vector<std::string> default_variants(const DeviceCaps& caps) const;
  virtual std::size_t workspace(const std::string& variant) const = 0;
  virtual void launch(const std::string& variant, const LaunchContext& ctx) = 0;
  // What the harness times; by default the whole launch as one stage.
  virtual std::vector<Stage> stages(const std::string& variant, const LaunchContext& ctx);
  // After a variant's timing: what else the op measures of it, for the row's note (a model's
  // decode step split by kernel kind); "" = nothing.
  virtual std::string timing_note(const std::string& variant, const LaunchContext& ctx) {
    (void)variant, (void)ctx;
    return "";
  }
  // Variant::host_overhead_us at this point's params; 0 when the variant has none.
  virtual double host_overhead_us(const std::string& variant) const {
    (void)variant;
    return 0;
  }
  // Variant::profile_note: what a profiler shows of this variant's lesson; "" = nothing.
  virtual std::string profile_note(const std::string& variant) const {
    (void)variant;
    return "";
  }

  virtual Work work() const = 0;
  virtual ref::Matrix reference(const ref::Rows& rows) const = 0;
  // The dtype-faithful reference of the same rows (reference/common.hpp, Faithful): what an
  // honest kernel in the point's storage dtype computes, its output rounded to the output's
  // dtype. The verdict's bound scales with its error (app/verify.hpp). An op without one
  // (has_faithful() false) is held to its elementwise tolerance().
  virtual bool has_faithful() const { return false; }
  virtual ref::Matrix faithful(const ref::Rows& rows) const {
    (void)rows;
    return {};
  }
  // Where an op's variants round at different places, the path a variant's output follows
  // (mha: `launches` rounds the QKV product and then its sum with the bias, `epilogue` rounds
  // once): each path has its reference and faithful reference, and a variant is checked
  // against its own path's.
  // An ill-conditioned point (logits of hundreds, a softmax that is nearly an argmax) turns one
  // rounding more or less into a different winning key, which a bound scaled from another
  // path's error would call a bug. "" = the op's one path.
  virtual std::string rounding_path(const std::string& variant) const {
    (void)variant;
    return "";
  }
  // reference() along `path` (rounding_path()'s), for an op whose reference stores its
  // activations where the variant does (mha); by default the op's one reference.
  virtual ref::Matrix reference(const ref::Rows& rows, const std::string& path) const {
    (void)path;
    return reference(rows);
  }
  // faithful() along `path`; by default the op's one path.
  virtual ref::Matrix faithful(const ref::Rows& rows, const std::string& path) const {
    (void)path;
    return faithful(rows);
  }
  // The trial's scaled bound (app/verify.hpp) from the reference of `rows` and the faithful
  // one along `path`, which it runs first: faithful() records the largest |row max| of the
  // scores it took softmaxes of, the bound's score floor. (Read as a second argument beside
  // faithful(), the order was the compiler's: GCC read the score first, and the floor was never
  // applied.)
  Bound faithful_bound(const ref::Matrix& ref, const ref::Rows& rows, const BoundRule& rule,
                       const std::string& path = "") const {
    const ref::Matrix f = faithful(rows, path);
    return scaled_bound(ref, f, output_tensor().dtype, rule, faithful_score_ ? faithful_score_->load() : 0.0);
  }
  // Per checked element of the last reference(), a magnitude the relative tolerance applies
  // to beside the reference value's own (the terms an output cancelled from); null: none.
  virtual const ref::Matrix* tolerance_magnitude() const { return nullptr; }
  // Rows verification must always include (e.g. queries that see no key).
  virtual ref::Rows must_check_rows() const { return {}; }
  virtual Tolerance tolerance() const { return default_tolerance(point_.dtype); }

  // Bytes of every tensor and buffer, to refuse a case that cannot fit before allocating.
  uint64_t device_bytes() const;
  void allocate();
  // Draws fresh inputs from `seed` (rounded to their dtypes), uploads them, then lets
  // the op build what it derives from them (prepare).
  void generate(uint64_t seed, const LaunchContext& ctx);
  virtual void poison_output(cudaStream_t stream);
  // What a check reads back of the output a variant left: its NaN/Inf count (taken on the
  // device), `rows` widened to double, and whatever else the op judges on the device's state
  // then (the pipeline's KV cache), so that the reference can be waited for afterwards.
  struct Readback {
    std::vector<double> got;
    int64_t nonfinite = 0;
    std::string also_wrong;  // empty, or what else is wrong
    std::vector<int64_t> ids;  // integers the op reads back beside the output (a model's tokens)
  };
  virtual Readback read_back(const ref::Rows& rows) const;
  // A read-back output against the reference rows.
  // `bound`: the trial's scaled bound (null: the op has no faithful reference).
  virtual Comparison judge(const Readback& b, const ref::Rows& rows, const ref::Matrix& ref, Tolerance tol,
                           const Bound* bound = nullptr) const;
  Comparison check(const ref::Rows& rows, const ref::Matrix& ref, Tolerance tol, const Bound* bound = nullptr) const {
    return judge(read_back(rows), rows, ref, tol, bound);
  }
  // Graph mode's cold launches: copies of every device tensor and buffer of the point
  // (copy 0 is its own), each holding the same bytes. use_copy(i) puts copy i's buffers in
  // place, so that params() (read at every launch) points at them; a graph captured over
  // launches on different copies replays each on memory the L2 has not seen lately. The
  // workspace is not copied: it is the kernel's own scratch, written before it is read.
  // make_copies returns how many copies there are; drop_copies frees all but copy 0 and
  // puts it back in place.
  int make_copies(int copies, cudaStream_t stream);
  void use_copy(int i);
  void drop_copies();
  // What the last generate() ran to build its inputs, checked.
  const std::vector<SetupCheck>& setup_checks() const { return setup_checks_; }

  // The output viewed as rows x cols (its leading dims are the rows), and where an
  // element of that view sits as (b, h, i, d).
  int64_t output_rows() const;
  int64_t output_cols() const;
  Coord coord(int64_t row, int64_t col) const;

  // For --dump: the inputs as last drawn, and the output downloaded and widened to float.
  std::vector<const Tensor*> input_tensors() const;
  // Each input's name and whether generate() draws it (false: the op fills it, keep_input).
  std::vector<std::pair<std::string, bool>> input_names() const;
  // How generate() draws input i under the point's [inputs]: the distribution (the case's
  // word; the op's own draw is its shape, "normal" or "uniform"), the scale and offset it
  // resolves to, and the op's own shape for the tensor; distribution "" when not drawn.
  struct InputDraw {
    std::string distribution, op_shape;
    double scale = 0, offset = 0;
  };
  InputDraw input_draw(size_t i) const;
  const Tensor& output_tensor() const { return output_; }
  // The output widened to float (--dump, [verify] repeat); an op whose output holds integers in
  // its slots (sample's int32 token ids) reads them as such.
  virtual std::vector<float> download_output() const;

 protected:
  // Inputs are drawn N(0, scale^2) when `normal`, else U(-scale, scale).
  Tensor& add_input(const std::string& name, DType dtype, std::vector<Dim> dims, float scale, bool normal,
                    std::string note = "");
  // The output; its first `row_dims` dims make the rows of the verified view.
  Tensor& add_output(const std::string& name, DType dtype, std::vector<Dim> dims, size_t row_dims,
                     std::string note = "");
  // Device memory the op keeps beside its tensors (caches, tables); allocated with them.
  // With `host` set, those bytes are uploaded once at allocation.
  DeviceBuffer& add_buffer(std::size_t bytes, std::vector<uint8_t> host = {});
  // A constant whose values `make` builds only when the point is allocated (a RoPE table): a
  // case's loader builds every point's problem to check its sizes, and must not pay for them.
  template <class Make>
  DeviceBuffer& add_constant(std::size_t bytes, Make make) {
    DeviceBuffer& b = add_buffer(bytes);
    buffers_.back().make = [make] { return bytes_of(make()); };
    return b;
  }
  // add_constant as a callable, for the options that upload their own constants
  // (RopeOptions::upload, ScoreOptions::upload).
  auto constant_adder() {
    return [this](std::size_t bytes, auto make) -> DeviceBuffer& { return add_constant(bytes, make); };
  }
  template <class T>
  DeviceBuffer& add_constant(const std::vector<T>& values) {
    std::vector<uint8_t> bytes = bytes_of(values);
    const std::size_t size = bytes.size();  // before the move: argument order is unspecified
    return add_buffer(size, std::move(bytes));
  }
  const Tensor& input(size_t i) const { return inputs_[i].tensor; }
  // The faithful reference's settings for the point's storage dtype: values kernels store
  // back (RoPE'd q/k) and the softmax weights before P·V (the tensor cores' operand; e4m3 for
  // fp8 inputs) rounded to it. It also tracks the largest score the reference takes a
  // softmax of, for faithful_bound().
  ref::Faithful faithful_of() const;
  // A faithful reference's output as the output tensor stores it (rounded to its dtype).
  ref::Matrix stored(ref::Matrix m) const;
  // An input generate() leaves alone: the op fills its host values and device buffer itself
  // in prepare() (a model's weights read from a checkpoint).
  void keep_input(size_t i) { inputs_[i].drawn = false; }
  const Tensor& output() const { return output_; }
  // Called once the inputs are on the device: e.g. a paged cache written from them.
  virtual void prepare(uint64_t seed, const LaunchContext& ctx) { (void)seed, (void)ctx; }
  // Element ranges [begin, end) of input `index` that hold NaN instead of drawn values, on
  // both sides: e.g. the cache rows no kernel may read. All-ones bytes (NaN in every dtype)
  // are written over the drawn ones on the device before the host reads them back.
  virtual std::vector<std::pair<int64_t, int64_t>> nan_ranges(size_t index) const {
    (void)index;
    return {};
  }
  std::vector<SetupCheck> setup_checks_;

 private:
  struct Input {
    Tensor tensor;
    float scale;
    bool normal;
    bool drawn = true;
  };
  template <class T>
  static std::vector<uint8_t> bytes_of(const std::vector<T>& values) {
    std::vector<uint8_t> out(values.size() * sizeof(T));
    std::copy_n(reinterpret_cast<const uint8_t*>(values.data()), out.size(), out.begin());
    return out;
  }
  struct Buffer {
    DeviceBuffer device;
    std::size_t bytes;
    std::vector<uint8_t> host;
    std::function<std::vector<uint8_t>()> make;  // builds `host` at allocation when set
  };
  CasePoint point_;
  std::deque<Input> inputs_;  // deques keep the references add_* returned valid
  std::deque<Buffer> buffers_;
  Tensor output_;
  size_t row_dims_ = 1;
  mutable DeviceBuffer check_scratch_;  // check()'s NaN count and gathered rows
  mutable std::shared_ptr<std::atomic<float>> faithful_score_;  // the last faithful_of()'s
  std::vector<DeviceBuffer*> device_buffers();  // every tensor's and buffer's, in a fixed order
  std::vector<std::vector<DeviceBuffer>> copies_;  // copies_[i - 1]: copy i, in device_buffers()' order
  int copy_in_place_ = 0;
};

// A problem whose variants come from one kernel table of Variant<Params>: the op
// supplies params(), the table does the rest.
template <class Params>
class TableProblem : public Problem {
 public:
  TableProblem(const CasePoint& p, const std::vector<Variant<Params>>& table) : Problem(p), table_(table) {}
  std::vector<VariantChoice> variants(const DeviceCaps& caps) const override {
    std::vector<VariantChoice> out;
    const Params p = params();
    for (const auto& v : table_)
      out.push_back({v.name, v.note, v.supports(p, caps), !v.applies || v.applies(p), v.deterministic});
    return out;
  }
  std::size_t workspace(const std::string& name) const override {
    const auto* v = find_variant(table_, name);
    return v && v->workspace ? v->workspace(params()) : 0;
  }
  void launch(const std::string& name, const LaunchContext& ctx) override { launch_variant(table_, name, params(), ctx); }
  double host_overhead_us(const std::string& name) const override {
    const auto* v = find_variant(table_, name);
    return v && v->host_overhead_us ? v->host_overhead_us(params()) : 0;
  }
  std::string profile_note(const std::string& name) const override {
    const auto* v = find_variant(table_, name);
    return v && v->profile_note ? v->profile_note : "";
  }

 protected:
  virtual Params params() const = 0;

 private:
  const std::vector<Variant<Params>>& table_;
};

// Names and notes of a kernel table, for the op's registry entry.
template <class Params>
std::vector<VariantInfo> variant_infos(const std::vector<Variant<Params>>& table) {
  std::vector<VariantInfo> out;
  for (const auto& v : table) out.push_back({v.name, v.note});
  return out;
}

// An op whose variants are pairs "a+b" of two kernel tables (the pipeline's prefill+decode,
// mha's projections+attention), every combination in table order, noted with each half's
// role. `why_a(v)` / `why_b(v)` say why a variant of that table cannot run the point ("" =
// it can); a pair that cannot run gives the first half's reason, under its role.
template <class A, class B>
struct PairedTables {
  const std::vector<Variant<A>>& first;
  std::string first_role;
  const std::vector<Variant<B>>& second;
  std::string second_role;

  std::vector<VariantInfo> infos() const {
    std::vector<VariantInfo> out;
    for (const auto& a : first)
      for (const auto& b : second) out.push_back({name(a, b), note(a, b)});
    return out;
  }
  template <class WhyA, class WhyB>
  std::vector<VariantChoice> choices(const WhyA& why_a, const WhyB& why_b) const {
    std::vector<VariantChoice> out;
    for (const auto& a : first) {
      const std::string wa = why_a(a);
      for (const auto& b : second) {
        const std::string wb = wa.empty() ? why_b(b) : "";
        out.push_back({name(a, b), note(a, b),
                       !wa.empty() ? first_role + ": " + wa : !wb.empty() ? second_role + ": " + wb : ""});
      }
    }
    return out;
  }
  // The tables run from the learner's version to the fastest: the last variant of each that
  // can run the point, as {first, second}. Not ranked among them: a plugin's variants (they
  // pair only when named) and an option's unfused baseline (a variant with `applies`, listed
  // after the kernel it unfuses), unless nothing else can run the point.
  template <class WhyA, class WhyB>
  std::pair<std::string, std::string> fastest(const WhyA& why_a, const WhyB& why_b) const {
    return {last_that_runs(first, why_a), last_that_runs(second, why_b)};
  }

 private:
  template <class P, class Why>
  static std::string last_that_runs(const std::vector<Variant<P>>& table, const Why& why) {
    const Variant<P>* v = fastest_variant(table, why);
    return v ? v->name : "";
  }
  static std::string name(const Variant<A>& a, const Variant<B>& b) { return std::string(a.name) + "+" + b.name; }
  std::string note(const Variant<A>& a, const Variant<B>& b) const {
    return first_role + " " + a.name + ", " + second_role + " " + b.name;
  }
};

// A variant of `table` by name; an unknown name is a bug in the caller (the loader
// checked every name the user gave).
template <class Params>
void launch_variant(const std::vector<Variant<Params>>& table, const std::string& name, const Params& p,
                    const LaunchContext& ctx) {
  const auto* v = find_variant(table, name);
  if (!v) throw std::logic_error("no variant named '" + name + "'");
  v->launch(p, ctx);
}

template <class Params>
std::size_t variant_workspace(const std::vector<Variant<Params>>& table, const std::string& name, const Params& p) {
  const auto* v = find_variant(table, name);
  return v && v->workspace ? v->workspace(p) : 0;
}

// A reference computed part by part, for an output that stacks parts (K and V caches,
// decode steps) each of `rows_per_part` rows: part(p, rows within p) gives those rows,
// and the results are put back in the order `rows` asked for them.
template <class Part>
ref::Matrix reference_by_part(const ref::Rows& rows, int64_t rows_per_part, int64_t cols, const Part& part) {
  ref::Matrix out(static_cast<int64_t>(rows.size()), cols);
  std::vector<std::pair<ref::Rows, ref::Rows>> parts;  // (rows within the part, where they go)
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto p = static_cast<size_t>(rows[i] / rows_per_part);
    if (parts.size() <= p) parts.resize(p + 1);
    parts[p].first.push_back(rows[i] % rows_per_part);
    parts[p].second.push_back(static_cast<int64_t>(i));
  }
  for (size_t p = 0; p < parts.size(); ++p) {
    if (parts[p].first.empty()) continue;
    const ref::Matrix m = part(static_cast<int64_t>(p), parts[p].first);
    for (size_t i = 0; i < parts[p].first.size(); ++i) out.row(parts[p].second[i]) = m.row(static_cast<int64_t>(i));
  }
  return out;
}

// Element loops over a whole tensor run on all cores in chunks of this many elements.
constexpr int64_t kChunk = int64_t{1} << 20;

// fn(begin, end) over [0, n) in chunks of kChunk, on all cores when n is large; chunk c
// is [c * kChunk, ...), so per-chunk results can go to slot begin / kChunk.
template <class Fn>
void for_chunks(int64_t n, const Fn& fn) {
  // Several operations an element (a conversion, a compare): parallel from a few million.
  parallel_for((n + kChunk - 1) / kChunk, 8.0 * static_cast<double>(n),
               [&](int64_t c) { fn(c * kChunk, std::min(n, (c + 1) * kChunk)); });
}

// A pair variant "first+second" (the pipeline's prefill+decode, mha's GEMM+attention) as
// its two names; the second is "" without a '+'.
inline std::pair<std::string, std::string> split_pair(const std::string& v) {
  const auto plus = v.find('+');
  return {v.substr(0, plus), plus == std::string::npos ? "" : v.substr(plus + 1)};
}

// What `--dry-run` assumes about the card it has not got: an H100 (sm_90, 132 SMs).
DeviceCaps assumed_caps();

}  // namespace attnbench
