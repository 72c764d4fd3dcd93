// GEMM C = A·Bᵀ (layout nt) or C = A·B (nn), batched: 2·m·n·k FLOPs per batch; with `bias`,
// C = A·Bᵀ + bias, the bias added before the one rounding (the fused epilogue mha's `epilogue`
// step uses, checked here on its own).
#include <cmath>

#include "app/op.hpp"
#include "app/plugin.hpp"
#include "app/problem.hpp"
#include "kernels/gemm/gemm.hpp"

namespace attnbench {
namespace {

class GemmProblem : public TableProblem<GemmParams> {
 public:
  explicit GemmProblem(const CasePoint& p)
      : TableProblem(p, gemm_variants()),
        nn_(p.shape.word("layout") == "nn"),
        batch_(p.shape.num("batch")),
        m_(p.shape.num("m")),
        n_(p.shape.num("n")),
        k_(p.shape.num("k")),
        bias_(p.shape.flag("bias")) {
    // B is scaled by sqrt(3/k) so each output is O(1) whatever k is, and the
    // tolerances, set for O(1) values, mean the same at every size.
    add_input("a", p.dtype, {{"batch", batch_}, {"m", m_}, {"k", k_}}, 1.f, false);
    if (nn_)
      add_input("b", p.dtype, {{"batch", batch_}, {"k", k_}, {"n", n_}}, static_cast<float>(std::sqrt(3.0 / k_)),
                false, "C = A B");
    else
      add_input("b", p.dtype, {{"batch", batch_}, {"n", n_}, {"k", k_}}, static_cast<float>(std::sqrt(3.0 / k_)),
                false, "C = A B^T");
    if (bias_) add_input("bias", p.dtype, {{"n", n_}}, 1.f, false, "added to every row of C");
    add_output("c", p.dtype, {{"batch", batch_, 'b'}, {"m", m_, 'i'}, {"n", n_, 'd'}}, 2);
  }
  Work work() const override {
    const double e = dtype_bytes(point().dtype);
    return {2.0 * batch_ * m_ * n_ * k_, e * (batch_ * (m_ * k_ + k_ * n_ + m_ * n_) + (bias_ ? n_ : 0)),
            Bandwidth::copy};
  }
  ref::Matrix reference(const ref::Rows& rows) const override {
    return with_bias(ref::gemm(input(0).host.data(), input(1).host.data(), nn_, m_, n_, k_, rows));
  }
  bool has_faithful() const override { return true; }
  ref::Matrix faithful(const ref::Rows& rows) const override {
    return stored(with_bias(ref::gemm(input(0).host.data(), input(1).host.data(), nn_, m_, n_, k_, rows,
                                      faithful_of())));
  }

 private:
  GemmParams params() const override {
    return {input(0).device.get(),
            input(1).device.get(),
            output().device.get(),
            batch_,
            m_,
            n_,
            k_,
            nn_ ? GemmLayout::nn : GemmLayout::nt,
            point().dtype,
            bias_,
            bias_ ? input(2).device.get() : nullptr};
  }
  // Every row of c plus the bias (a no-op without one).
  ref::Matrix with_bias(ref::Matrix c) const {
    if (bias_)
      for (int64_t r = 0; r < c.rows(); ++r)
        for (int64_t j = 0; j < n_; ++j) c(r, j) += input(2).host[static_cast<size_t>(j)];
    return c;
  }
  bool nn_;
  int64_t batch_, m_, n_, k_;
  bool bias_;
};

// What a plugin's variant receives (kernels/plugin/include/attnbench/plugin.h).
attnbench_gemm_params gemm_abi(const GemmParams& p) {
  attnbench_gemm_params a{};
  a.a = p.a;
  a.b = p.b;
  a.c = p.c;
  a.batch = p.batch;
  a.m = p.m;
  a.n = p.n;
  a.k = p.k;
  a.layout = p.layout == GemmLayout::nn ? 1 : 0;
  a.dtype = abi_dtype(p.dtype);
  return a;
}

}  // namespace

OpSpec gemm_op() {
  OpSpec op;
  op.name = "gemm";
  op.summary = "C = A·Bᵀ (nt) or A·B (nn), batched";
  op.keys = {
      choice_key("layout", "nt: C = A·Bᵀ with B [n, k]; nn: C = A·B with B [k, n]", {"nt", "nn"}, "nt"),
      int_key("batch", "independent products", 1),
      int_key("m", "rows of A and C"),
      int_key("n", "columns of C"),
      int_key("k", "the reduced dimension"),
      bool_key("bias", "C = A·Bᵀ + bias [n], the bias added in the epilogue before the rounding (naive, wgmma_ws)"),
  };
  op.variants = [] { return variant_infos(gemm_variants()); };
  op.plugin_op = ATTNBENCH_OP_GEMM;
  op.add_plugin = [](const attnbench_variant& v, const char* file) {
    Variant<GemmParams> pv = plugin_variant(v, file, gemm_abi);
    pv.supports = [inner = pv.supports](const GemmParams& p, const DeviceCaps& caps) {
      return has_epilogue(p) ? std::string("the plugin ABI's GEMM has no epilogue (bias, column split)") : inner(p, caps);
    };
    add_variant(pv);
  };
  op.make = [](const CasePoint& p) -> std::unique_ptr<Problem> { return std::make_unique<GemmProblem>(p); };
  return op;
}

}  // namespace attnbench
