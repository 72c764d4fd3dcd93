// One sweep point of a case as a problem on the device: its tensors, how inputs
// are drawn, its reference, its variants and its work (FLOPs and bytes). One
// subclass per op in ops.cpp; the runner sees only this interface.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <deque>
#include <vector>

#include "app/case.hpp"
#include "app/device.hpp"
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

class Problem {
 public:
  explicit Problem(const CasePoint& p) : point_(p) {}
  virtual ~Problem() = default;
  const CasePoint& point() const { return point_; }

  // Every variant of the family, in table order, with why it would be skipped here.
  virtual std::vector<VariantChoice> variants(const DeviceCaps& caps) const = 0;
  virtual Work work() const = 0;
  // Bytes of all tensors, to refuse a case that cannot fit before allocating.
  uint64_t device_bytes() const;
  virtual std::size_t workspace(const std::string& variant) const = 0;

  void allocate();
  // Draws fresh inputs from `seed` (rounded to their dtypes) and uploads them.
  void generate(uint64_t seed);
  virtual void launch(const std::string& variant, const LaunchContext& ctx) = 0;

  // The output viewed as rows x cols, and where an element sits as (b, h, i, d).
  virtual int64_t output_rows() const = 0;
  virtual int64_t output_cols() const = 0;
  virtual Coord coord(int64_t row, int64_t col) const = 0;
  virtual ref::Rows must_check_rows() const { return {}; }
  virtual ref::Matrix reference(const ref::Rows& rows) const = 0;

  void poison_output(cudaStream_t stream);
  // Downloads the output: all of it for the NaN scan, `rows` widened to double.
  Comparison check(const ref::Rows& rows, const ref::Matrix& ref, Tolerance tol) const;

 protected:
  // Subclasses list their tensors in the constructor; the last one added with
  // add_output() is what verification reads.
  Tensor& add_input(const std::string& name, DType dtype, int64_t count, float scale, bool normal);
  Tensor& add_output(const std::string& name, DType dtype, int64_t count);
  const Tensor& input(size_t i) const { return inputs_[i].tensor; }
  const Tensor& output() const { return output_; }

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

// Variant names and baselines of every op, from the kernel tables, for the case loader.
KernelCatalog kernel_catalog();

}  // namespace attnbench
