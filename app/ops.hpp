// One sweep point of a case as a problem on the device: its tensors, how inputs
// are drawn, its reference, its variants and its work (FLOPs and bytes). One
// subclass per op in ops.cpp; the runner sees only this interface.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <deque>
#include <vector>

#include "app/case.hpp"
#include "app/device.hpp"
#include "app/timing.hpp"
#include "app/verify.hpp"
#include "reference/reference.hpp"

namespace attnbench {

struct VariantChoice {
  std::string name, note;
  std::string skip;  // why it cannot run this point; empty = it can
};

enum class Bandwidth { copy, read };  // which measured bandwidth bounds the op

struct Work {
  double flops = 0;  // useful floating-point operations (masked pairs not counted)
  double bytes = 0;  // fewest bytes moved: each tensor read once, written once, at its dtype
  Bandwidth bandwidth = Bandwidth::copy;
};

// A tensor on both sides: host values already rounded to its dtype (what the
// reference reads) and the device buffer in that dtype (what kernels read).
struct Tensor {
  std::string name;
  DType dtype = DType::fp32;
  int64_t count = 0;
  std::vector<float> host;
  DeviceBuffer device;
  std::size_t bytes() const { return static_cast<std::size_t>(count) * dtype_bytes(dtype); }
};

// A generation loop's times (op pipeline): time to first token, then per token.
struct PipelineTiming {
  Timing ttft;  // cache writes of the prompt + prefill attention, per repetition
  Summary tbt;  // one decode step each: cache append + decode
  double tbt_p99 = 0;
  int64_t steps = 0;  // decode steps timed
};

class Problem {
 public:
  explicit Problem(const CasePoint& p) : point_(p) {}
  virtual ~Problem() = default;
  const CasePoint& point() const { return point_; }

  // Every variant of the family, in table order, with why it would be skipped here.
  virtual std::vector<VariantChoice> variants(const DeviceCaps& caps) const = 0;
  virtual Work work() const = 0;
  // Bytes of all tensors, to refuse a case that cannot fit before allocating.
  virtual uint64_t device_bytes() const;
  virtual std::size_t workspace(const std::string& variant) const = 0;

  virtual void allocate();
  // Draws fresh inputs from `seed` (rounded to their dtypes), uploads them, then lets
  // the op build what it derives from them (after_inputs).
  void generate(uint64_t seed, const LaunchContext& ctx);
  virtual void launch(const std::string& variant, const LaunchContext& ctx) = 0;

  // The output viewed as rows x cols, and where an element sits as (b, h, i, d).
  virtual int64_t output_rows() const = 0;
  virtual int64_t output_cols() const = 0;
  virtual Coord coord(int64_t row, int64_t col) const = 0;
  virtual ref::Rows must_check_rows() const { return {}; }
  virtual ref::Matrix reference(const ref::Rows& rows) const = 0;

  virtual void poison_output(cudaStream_t stream);
  // For --dump: the inputs as last drawn (host values, already rounded to their
  // dtypes), and the output downloaded and widened (exactly) to float.
  std::vector<const Tensor*> input_tensors() const;
  const Tensor& output_tensor() const { return output_; }
  std::vector<float> download_output() const;
  // Downloads the output: all of it for the NaN scan, `rows` widened to double.
  virtual Comparison check(const ref::Rows& rows, const ref::Matrix& ref, Tolerance tol) const;

  // The variants to run on this device when the case names none; empty = all of them.
  virtual std::vector<std::string> default_variants(const DeviceCaps& caps) const {
    (void)caps;
    return {};
  }
  // Ops that are a sequence of launches (pipeline) time themselves; others return nothing
  // and the runner times launch(). `nvtx_ranges` name the variant, as time_launch's do.
  virtual std::optional<PipelineTiming> time_steps(const std::string& variant, Gpu& gpu, const BenchSpec& spec,
                                                   const LaunchContext& ctx,
                                                   const std::vector<std::string>& nvtx_ranges) {
    (void)variant, (void)gpu, (void)spec, (void)ctx, (void)nvtx_ranges;
    return std::nullopt;
  }

 protected:
  // Subclasses list their tensors in the constructor; the last one added with
  // add_output() is what verification reads.
  Tensor& add_input(const std::string& name, DType dtype, int64_t count, float scale, bool normal);
  Tensor& add_output(const std::string& name, DType dtype, int64_t count);
  const Tensor& input(size_t i) const { return inputs_[i].tensor; }
  const Tensor& output() const { return output_; }
  // Called once the inputs are on the device: e.g. a paged cache written from them.
  virtual void after_inputs(uint64_t seed, const LaunchContext& ctx) {
    (void)seed;
    (void)ctx;
  }
  // Called on each input's drawn values before upload: e.g. NaN in the cache rows no
  // kernel may read.
  virtual void shape_input(size_t index, std::vector<float>& values) const {
    (void)index;
    (void)values;
  }

 private:
  struct Input {
    Tensor tensor;
    float scale;
    bool normal;  // N(0, scale^2) when true, else U(-scale, scale)
  };
  CasePoint point_;
  std::deque<Input> inputs_;  // a deque keeps the references add_input returned valid
  Tensor output_;
};

std::unique_ptr<Problem> make_problem(const CasePoint& point);

// Attention's useful work: the keys query i sees (causal bottom-right, window), and
// the (query, key) pairs of one head, so TFLOP/s counts only unmasked pairs.
int64_t visible_keys(const Shape& s, int64_t i);
int64_t attention_pairs(const Shape& s);

// What `--dry-run` assumes about the card it has not got: an H100 (sm_90, 132 SMs).
DeviceCaps assumed_caps();

// Variant names and baselines of every op, from the kernel tables, for the case loader.
KernelCatalog kernel_catalog();

}  // namespace attnbench
