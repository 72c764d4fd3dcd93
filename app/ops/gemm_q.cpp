// gemm_q (issue 52): weight-only quantized GEMM, C [m, n] = A [m, k] · dequant(W)ᵀ with W [n, k]
// stored as int4 or int8 codes, per-group scales and optional zero points in the layout of
// kernels/gemm_q/gemm_q.hpp (docs/cases.md, op gemm_q), the activations and C in fp16/bf16.
//
// Tensors: a [m, k] drawn as the gemm op draws A (U(-1, 1)); scales [n, k / group] in the dtype,
// an input the op fills itself; the packed codes and the zero codes are byte buffers. Each trial
// draws, on the host from the seed: the codes uniform over their range (the packed bytes are
// uniform random bytes), the zeros uniform over the range too, and the scales s0 · U[0.5, 1.5)
// with s0 = sqrt(3 / k) · 2 / 2^bits, so that a weight's spread is about gemm's B's and C is O(1)
// at every k. The reference dequantizes those exact codes and scales in fp64. The problem also
// uploads W dequantized and rounded to the dtype (untimed) for the dense_cublas measuring stick.
#include <cmath>
#include <cstring>

#include "app/numeric.hpp"
#include "app/op.hpp"
#include "app/problem.hpp"
#include "kernels/common/random.hpp"
#include "kernels/gemm_q/gemm_q.hpp"
#include "reference/gemm_q.hpp"

namespace attnbench {
namespace {

// Random streams of the host's draws (the device draws input t on stream t).
constexpr uint64_t kCodesStream = 1001, kZerosStream = 1002, kScalesStream = 1003;

class GemmQProblem : public TableProblem<GemmQParams> {
 public:
  explicit GemmQProblem(const CasePoint& p)
      : TableProblem(p, gemm_q_variants()),
        m_(p.shape.num("m")),
        n_(p.shape.num("n")),
        k_(p.shape.num("k")),
        group_(p.shape.num("group") == 0 ? k_ : p.shape.num("group")),
        bits_(p.shape.word("weights") == "int8" ? 8 : 4),
        zeros_(p.shape.flag("zeros")) {
    add_input("a", p.dtype, {{"m", m_}, {"k", k_}}, 1.f, false, "the activations");
    add_input("scales", p.dtype, {{"n", n_}, {"groups", groups()}}, 1.f, false,
              "W[j, kk] = (code - zero) · scales[j, kk / group]; drawn by the op");
    keep_input(1);
    add_output("c", p.dtype, {{"m", m_, 'i'}, {"n", n_, 'd'}}, 1, "C = A dequant(W)^T");
    count_elements("w", {{"n", n_}, {"k", k_}});  // W's elements index with 32-bit ints
    codes_ = &add_buffer(static_cast<size_t>(n_ * row_bytes()));
    if (zeros_) zero_codes_ = &add_buffer(static_cast<size_t>(n_ * groups()));
    dense_ = &add_buffer(static_cast<size_t>(n_ * k_) * dtype_bytes(p.dtype));
  }

  // FLOPs 2·m·n·k; bytes the floor issue 52 measures against: the packed codes, the scales and
  // zeros, A read once and C written once (not dense_cublas's dequantized copy).
  Work work() const override {
    const double e = dtype_bytes(point().dtype), nd = static_cast<double>(n_);
    const double weights = nd * static_cast<double>(row_bytes()) + nd * groups() * (e + (zeros_ ? 1 : 0));
    return {2.0 * m_ * n_ * k_, weights + e * static_cast<double>(m_ * k_ + m_ * n_), Bandwidth::read};
  }

  // The rows either side of the fused rung's 8-, 16- and 32-token tile edges.
  ref::Rows must_check_rows() const override {
    ref::Rows rows;
    for (int64_t r : {7, 8, 15, 16, 31, 32})
      if (r < m_) rows.push_back(r);
    return rows;
  }

  ref::Matrix reference(const ref::Rows& rows) const override {
    return ref::gemm_q(input(0).host.data(), weights(), m_, rows);
  }
  bool has_faithful() const override { return true; }
  // Each weight dequantized and rounded to the dtype (what the rungs hand the tensor cores),
  // fp32 sums, C rounded to the dtype.
  ref::Matrix faithful(const ref::Rows& rows) const override {
    return stored(ref::gemm_q(input(0).host.data(), weights(), m_, rows, faithful_of()));
  }

 protected:
  void prepare(uint64_t seed, const LaunchContext&) override {
    const DType dtype = point().dtype;
    codes_host_.resize(static_cast<size_t>(n_ * row_bytes()));
    const int64_t words = ceil_div(static_cast<int64_t>(codes_host_.size()), 8);
    parallel_for(words, 4.0 * static_cast<double>(words), [&](int64_t i) {
      const uint64_t bits = random_bits(seed, kCodesStream, static_cast<uint64_t>(i));
      const size_t at = static_cast<size_t>(i) * 8, count = std::min<size_t>(8, codes_host_.size() - at);
      std::memcpy(codes_host_.data() + at, &bits, count);
    });
    codes_->upload(codes_host_.data(), codes_host_.size());
    const int64_t scale_count = n_ * groups();
    if (zeros_) {
      zeros_host_.resize(static_cast<size_t>(scale_count));
      for (int64_t i = 0; i < scale_count; ++i)
        zeros_host_[static_cast<size_t>(i)] =
            static_cast<uint8_t>(random_bits(seed, kZerosStream, static_cast<uint64_t>(i)) & ((1u << bits_) - 1));
      zero_codes_->upload(zeros_host_.data(), zeros_host_.size());
    }
    Tensor& scales = const_cast<Tensor&>(input(1));
    scales.host.resize(static_cast<size_t>(scale_count));
    const double s0 = std::sqrt(3.0 / static_cast<double>(k_)) * 2.0 / (1 << bits_);
    for (int64_t i = 0; i < scale_count; ++i) {
      const double u = 0.5 * (random_uniform(seed, kScalesStream, static_cast<uint64_t>(i)) + 1.0);  // [0, 1)
      scales.host[static_cast<size_t>(i)] = round_to(dtype, static_cast<float>(s0 * (0.5 + u)));
    }
    const std::vector<uint8_t> scale_bytes = encode(dtype, std::vector<float>(scales.host.begin(), scales.host.end()));
    scales.device.upload(scale_bytes.data(), scale_bytes.size());
    // W dequantized and rounded to the dtype, for dense_cublas.
    const ref::QuantWeights w = weights();
    const size_t e = dtype_bytes(dtype);
    std::vector<uint8_t> dense(static_cast<size_t>(n_ * k_) * e);
    parallel_for(n_, 2.0 * static_cast<double>(n_ * k_), [&](int64_t j) {
      std::vector<float> row(static_cast<size_t>(k_));
      for (int64_t kk = 0; kk < k_; ++kk) row[static_cast<size_t>(kk)] = static_cast<float>(w.value(j, kk));
      encode_range(dtype, row.data(), k_, dense.data() + static_cast<size_t>(j * k_) * e);
    });
    dense_->upload(dense.data(), dense.size());
  }

 private:
  int64_t groups() const { return k_ / group_; }
  int64_t row_bytes() const { return k_ * bits_ / 8; }
  ref::QuantWeights weights() const {
    ref::QuantWeights w;
    w.codes = codes_host_.data();
    w.scales = input(1).host.data();
    w.zeros = zeros_ ? zeros_host_.data() : nullptr;
    w.bits = bits_;
    w.n = n_;
    w.k = k_;
    w.group = group_;
    return w;
  }

  GemmQParams params() const override {
    GemmQParams q;
    q.a = input(0).device.get();
    q.w = static_cast<const uint8_t*>(codes_->get());
    q.scales = input(1).device.get();
    q.zeros = zeros_ ? static_cast<const uint8_t*>(zero_codes_->get()) : nullptr;
    q.w_dense = dense_->get();
    q.c = output().device.get();
    q.m = m_;
    q.n = n_;
    q.k = k_;
    q.group = group_;
    q.bits = bits_;
    q.dtype = point().dtype;
    return q;
  }

  int64_t m_, n_, k_, group_;
  int bits_;
  bool zeros_;
  std::vector<uint8_t> codes_host_, zeros_host_;  // the trial's packed codes and zero codes
  DeviceBuffer *codes_, *zero_codes_ = nullptr, *dense_;
};

void finish_gemm_q(ShapeCheck& c) {
  const Shape& s = c.shape;
  const int64_t k = s.num("k"), group = s.num("group");
  if (k % 8 != 0)
    c.fail("k", "shape.k (" + std::to_string(k) + ") must be a multiple of 8: whole 32-bit words of codes a row");
  if (group != 0 && k % group != 0)
    c.fail("group", "shape.group (" + std::to_string(group) + ") must divide k (" + std::to_string(k) +
                        "); 0 = per channel");
}

}  // namespace

OpSpec gemm_q_op() {
  OpSpec op;
  op.name = "gemm_q";
  op.summary = "weight-only quantized GEMM: C = A·dequant(W)ᵀ, W int4/int8 codes with per-group scales and zeros";
  op.keys = {
      int_key("m", "rows of A and C: the tokens"),
      int_key("n", "columns of C: the output channels, rows of W"),
      int_key("k", "the reduced dimension (input channels); a multiple of 8"),
      choice_key("weights", "the codes: int4 (two a byte, the even k in the low nibble) or int8 (one a byte)",
                 {"int4", "int8"}, "int4"),
      int_key("group", "k's per scale (and zero) along a row of W; divides k; 0 = per channel (one group of k)", 128,
              0),
      bool_key("zeros", "a zero code per group (uint8 [n, k / group]); false: the midpoint 8 (int4) or 128 (int8)"),
  };
  op.finish = finish_gemm_q;
  op.dtypes = {DType::fp16, DType::bf16};
  op.variants = [] { return variant_infos(gemm_q_variants()); };
  op.make = [](const CasePoint& p) -> std::unique_ptr<Problem> { return std::make_unique<GemmQProblem>(p); };
  return op;
}

}  // namespace attnbench
