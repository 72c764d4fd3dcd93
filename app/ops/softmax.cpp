// softmax along each row of x [rows, cols]: y = exp(x - max) / sum(exp(x - max)).
// Bandwidth-bound: every element is read once and written once.
#include "app/op.hpp"
#include "app/plugin.hpp"
#include "app/problem.hpp"
#include "kernels/softmax/softmax.hpp"

namespace attnbench {
namespace {

class SoftmaxProblem : public TableProblem<SoftmaxParams> {
 public:
  explicit SoftmaxProblem(const CasePoint& p)
      : TableProblem(p, softmax_variants()), rows_(p.shape.num("rows")), cols_(p.shape.num("cols")) {
    // Spread wide enough that exp() spans many orders of magnitude in a row.
    add_input("x", p.dtype, {{"rows", rows_}, {"cols", cols_, 'd'}}, 8.f, false);
    add_output("y", p.dtype, {{"rows", rows_, 'i'}, {"cols", cols_, 'd'}}, 1);
  }
  Work work() const override { return {0, 2.0 * rows_ * cols_ * dtype_bytes(point().dtype), Bandwidth::copy}; }
  ref::Matrix reference(const ref::Rows& rows) const override {
    return ref::softmax(input(0).host.data(), cols_, rows);
  }
  bool has_faithful() const override { return true; }
  ref::Matrix faithful(const ref::Rows& rows) const override {
    return stored(ref::softmax(input(0).host.data(), cols_, rows, faithful_of()));
  }

 private:
  SoftmaxParams params() const override {
    return {input(0).device.get(), output().device.get(), rows_, cols_, point().dtype};
  }
  int64_t rows_, cols_;
};

// What a plugin's variant receives (kernels/plugin/include/attnbench/plugin.h).
attnbench_softmax_params softmax_abi(const SoftmaxParams& p) {
  attnbench_softmax_params a{};
  a.x = p.x;
  a.y = p.y;
  a.rows = p.rows;
  a.cols = p.cols;
  a.dtype = abi_dtype(p.dtype);
  return a;
}

}  // namespace

OpSpec softmax_op() {
  OpSpec op;
  op.name = "softmax";
  op.summary = "row-wise softmax of x [rows, cols]";
  op.keys = {
      int_key("rows", "rows of x; each is normalised on its own"),
      int_key("cols", "elements per row"),
  };
  op.variants = [] { return variant_infos(softmax_variants()); };
  op.plugin_op = ATTNBENCH_OP_SOFTMAX;
  op.add_plugin = [](const attnbench_variant& v, const char* file) { add_variant(plugin_variant(v, file, softmax_abi)); };
  op.make = [](const CasePoint& p) -> std::unique_ptr<Problem> { return std::make_unique<SoftmaxProblem>(p); };
  return op;
}

}  // namespace attnbench
