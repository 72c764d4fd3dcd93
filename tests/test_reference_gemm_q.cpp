// The gemm_q op (issue 52) on the CPU: the packed layout (codes into bytes and back, known bytes
// with their nibble order), the fp64 reference against the formula written out in loops, the
// faithful reference, and the op's keys, one-line refusals, work, tensors, must-check rows and
// what its variants say about the shipped points. Nothing here needs a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "app/case.hpp"
#include "app/numeric.hpp"
#include "app/op.hpp"
#include "app/problem.hpp"
#include "kernels/gemm_q/gemm_q.hpp"
#include "kernels/gemm_q/rungs.hpp"
#include "reference/gemm_q.hpp"
#include "tests/case_text.hpp"

namespace attnbench {
namespace {

using ref::Matrix;
using ref::QuantWeights;
using ref::Rows;

std::vector<int> random_codes(size_t count, int bits, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> code(0, (1 << bits) - 1);
  std::vector<int> out(count);
  for (int& c : out) c = code(gen);
  return out;
}

TEST(GemmQLayout, PackThenUnpackGivesTheCodesBack) {
  for (int bits : {4, 8}) {
    const int64_t rows = 5, k = 24;
    const std::vector<int> codes = random_codes(rows * k, bits, 7u + bits);
    const std::vector<uint8_t> packed = ref::pack_codes(codes, rows, k, bits);
    ASSERT_EQ(packed.size(), static_cast<size_t>(rows * k * bits / 8));
    for (int64_t j = 0; j < rows; ++j)
      for (int64_t kk = 0; kk < k; ++kk)
        EXPECT_EQ(ref::unpack_code(packed.data() + j * k * bits / 8, bits, kk), codes[j * k + kk])
            << bits << " bits, row " << j << ", k " << kk;
  }
  EXPECT_THROW(ref::pack_codes({16}, 1, 1, 4), std::invalid_argument);
  EXPECT_THROW(ref::pack_codes({1, 2, 3}, 1, 3, 4), std::invalid_argument);
}

// int4: the even k in the low nibble, so the little-endian 32-bit word 0x76543210 holds codes 0..7
// for k 0..7 (GPTQ's order within a word); int8: a byte a code.
TEST(GemmQLayout, KnownBytesDequantize) {
  const uint8_t word[4] = {0x10, 0x32, 0x54, 0x76};
  for (int kk = 0; kk < 8; ++kk) EXPECT_EQ(ref::unpack_code(word, 4, kk), kk);
  const uint8_t nibbles[2] = {0x21, 0xf0};
  EXPECT_EQ(ref::unpack_code(nibbles, 4, 0), 1);
  EXPECT_EQ(ref::unpack_code(nibbles, 4, 1), 2);
  EXPECT_EQ(ref::unpack_code(nibbles, 4, 2), 0);
  EXPECT_EQ(ref::unpack_code(nibbles, 4, 3), 15);
  EXPECT_EQ(ref::unpack_code(nibbles, 8, 1), 0xf0);
  // W [2, 8] int4, group 4: scales per (row, group), zero the midpoint 8 or the given codes.
  const uint8_t codes[8] = {0x10, 0x32, 0x54, 0x76, 0xff, 0x00, 0x8f, 0x08};
  const float scales[4] = {0.5f, 2.f, 0.25f, -1.f};
  QuantWeights w;
  w.codes = codes;
  w.scales = scales;
  w.bits = 4;
  w.n = 2;
  w.k = 8;
  w.group = 4;
  EXPECT_DOUBLE_EQ(w.value(0, 0), (0 - 8) * 0.5);
  EXPECT_DOUBLE_EQ(w.value(0, 3), (3 - 8) * 0.5);
  EXPECT_DOUBLE_EQ(w.value(0, 4), (4 - 8) * 2.0);
  EXPECT_DOUBLE_EQ(w.value(1, 0), (15 - 8) * 0.25);
  EXPECT_DOUBLE_EQ(w.value(1, 2), (0 - 8) * 0.25);
  EXPECT_DOUBLE_EQ(w.value(1, 4), (15 - 8) * -1.0);
  EXPECT_DOUBLE_EQ(w.value(1, 5), (8 - 8) * -1.0);
  EXPECT_DOUBLE_EQ(w.value(1, 6), (8 - 8) * -1.0);
  EXPECT_DOUBLE_EQ(w.value(1, 7), (0 - 8) * -1.0);
  const uint8_t zeros[4] = {1, 2, 3, 15};
  w.zeros = zeros;
  EXPECT_DOUBLE_EQ(w.value(0, 1), (1 - 1) * 0.5);
  EXPECT_DOUBLE_EQ(w.value(0, 7), (7 - 2) * 2.0);
  EXPECT_DOUBLE_EQ(w.value(1, 0), (15 - 3) * 0.25);
  EXPECT_DOUBLE_EQ(w.value(1, 4), (15 - 15) * -1.0);
  // int8: the zero defaults to 128.
  w.bits = 8;
  w.zeros = nullptr;
  w.k = 4;
  w.n = 2;
  w.group = 2;
  EXPECT_DOUBLE_EQ(w.value(0, 0), (0x10 - 128) * 0.5);
  EXPECT_DOUBLE_EQ(w.value(1, 3), (0x08 - 128) * -1.0);  // row 1 starts at byte 4, k 3 in its group 1
}

struct Tiny {
  int64_t m, n, k, group;
  int bits;
  bool with_zeros;
  std::vector<float> a, scales;
  std::vector<int> codes;
  std::vector<uint8_t> packed, zeros;
  QuantWeights w() const {
    QuantWeights q;
    q.codes = packed.data();
    q.scales = scales.data();
    q.zeros = with_zeros ? zeros.data() : nullptr;
    q.bits = bits;
    q.n = n;
    q.k = k;
    q.group = group;
    return q;
  }
};

Tiny tiny(int64_t m, int64_t n, int64_t k, int64_t group, int bits, bool with_zeros, unsigned seed) {
  Tiny t{m, n, k, group, bits, with_zeros, {}, {}, {}, {}, {}};
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f), s(0.01f, 0.1f);
  for (int64_t i = 0; i < m * k; ++i) t.a.push_back(u(gen));
  for (int64_t i = 0; i < n * (k / group); ++i) t.scales.push_back(s(gen));
  t.codes = random_codes(n * k, bits, seed + 1);
  t.packed = ref::pack_codes(t.codes, n, k, bits);
  for (int c : random_codes(n * (k / group), bits, seed + 2)) t.zeros.push_back(static_cast<uint8_t>(c));
  return t;
}

// C[i, j] = Σ A[i, kk] · (code[j, kk] - zero) · scale, in long double, straight from the codes.
long double direct(const Tiny& t, int64_t i, int64_t j) {
  long double sum = 0;
  for (int64_t kk = 0; kk < t.k; ++kk) {
    const int64_t g = j * (t.k / t.group) + kk / t.group;
    const int zero = t.with_zeros ? t.zeros[g] : 1 << (t.bits - 1);
    sum += static_cast<long double>(t.a[i * t.k + kk]) * (t.codes[j * t.k + kk] - zero) * t.scales[g];
  }
  return sum;
}

TEST(GemmQReference, MatchesTheFormulaWrittenOut) {
  for (int bits : {4, 8})
    for (bool with_zeros : {false, true})
      for (int64_t group : {8, 48}) {
        const Tiny t = tiny(5, 300, 48, group, bits, with_zeros, 11u * bits + group);  // two column tiles of C
        const Rows rows = {4, 0, 2};
        const Matrix c = ref::gemm_q(t.a.data(), t.w(), t.m, rows);
        ASSERT_EQ(c.rows(), 3);
        ASSERT_EQ(c.cols(), 300);
        for (size_t r = 0; r < rows.size(); ++r)
          for (int64_t j = 0; j < t.n; ++j)
            EXPECT_NEAR(c(r, j), static_cast<double>(direct(t, rows[r], j)), 1e-12)
                << bits << " bits, zeros " << with_zeros << ", group " << group << ", row " << rows[r] << ", col " << j;
      }
}

TEST(GemmQReference, FaithfulIsNearButNotTheMath) {
  const Tiny t = tiny(4, 40, 256, 128, 4, true, 5);
  const Rows rows = {0, 1, 2, 3};
  const Matrix exact = ref::gemm_q(t.a.data(), t.w(), t.m, rows);
  ref::Faithful f;
  f.on = true;
  f.in = f.p = rounding_of(DType::fp16);
  const Matrix faithful = ref::gemm_q(t.a.data(), t.w(), t.m, rows, f);
  const double err = (faithful - exact).cwiseAbs().maxCoeff(), scale = exact.cwiseAbs().maxCoeff();
  EXPECT_GT(err, 0);
  EXPECT_LT(err, 1e-2 * scale);
}

TEST(GemmQReference, RefusesWhatIsNotAProblem) {
  Tiny t = tiny(2, 3, 16, 8, 4, false, 3);
  QuantWeights w = t.w();
  w.group = 5;
  EXPECT_THROW(ref::gemm_q(t.a.data(), w, 2, {0}), std::invalid_argument);
  w = t.w();
  w.bits = 3;
  EXPECT_THROW(ref::gemm_q(t.a.data(), w, 2, {0}), std::invalid_argument);
  EXPECT_THROW(ref::gemm_q(t.a.data(), t.w(), 2, {2}), std::out_of_range);
}

// The op (app/ops/gemm_q.cpp)

using case_text::error_of;
using case_text::expect_has;
using case_text::parse;

const std::string kHead = "op = \"gemm_q\"\ndtype = \"fp16\"\n[shape]\n";

CasePoint point(const std::string& shape, const std::vector<std::string>& sets = {}) {
  return parse(kHead + shape, sets).points.at(0);
}

std::string skip_of(const CasePoint& p, const std::string& variant) {
  for (const VariantChoice& v : make_problem(p)->variants(assumed_caps()))
    if (v.name == variant) return v.skip;
  return "no row";
}

TEST(GemmQOp, KeysAndDefaults) {
  const Shape s = point("m = 4\nn = 64\nk = 256\n").shape;
  EXPECT_EQ(s.word("weights"), "int4");
  EXPECT_EQ(s.num("group"), 128);
  EXPECT_FALSE(s.flag("zeros"));
  const OpSpec& op = op_spec("gemm_q");
  EXPECT_EQ(op.baseline(), "dequant_cublas");
  EXPECT_EQ(op.variant_names(), (std::vector<std::string>{"dequant_cublas", "fused_mma", "splitk_gemv", "stream_gemv", "dense_cublas"}));
}

TEST(GemmQOp, RefusesBadShapesInOneLine) {
  expect_has(error_of(kHead + "m = 4\nn = 64\nk = 100\ngroup = 0\n"),
             {"cases/t.toml:6:", "shape.k (100) must be a multiple of 8"});
  expect_has(error_of(kHead + "m = 4\nn = 64\nk = 192\n"),
             {"cases/t.toml:", "shape.group (128) must divide k (192); 0 = per channel"});
  expect_has(error_of(kHead + "m = 4\nn = 64\nk = 256\ngroup = 96\n"), {"shape.group (96) must divide k (256)"});
  expect_has(error_of(kHead + "m = 4\nn = 64\nk = 256\ngroup = -1\n"), {"shape.group must be at least 0, got -1"});
  expect_has(error_of(kHead + "m = 4\nn = 64\nk = 256\nweights = \"int3\"\n"), {"shape.weights", "int3"});
  expect_has(error_of(kHead + "m = 4\nn = 64\nk = 256\n", {"dtype=fp32"}), {"fp32"});
  expect_has(error_of(kHead + "m = 0\nn = 64\nk = 256\n"), {"shape.m must be at least 1, got 0"});
  expect_has(error_of(kHead + "m = 4\nn = 64\nk = 256\nbits = 4\n"), {"unknown key shape.bits"});
}

// FLOPs 2·m·n·k; bytes: the packed codes, scales (2 bytes) and zeros (1 byte) per (row, group),
// A and C once.
TEST(GemmQOp, WorkIsTheWeightStreamPlusActivations) {
  Work w = make_problem(point("m = 16\nn = 4096\nk = 4096\n"))->work();
  EXPECT_DOUBLE_EQ(w.flops, 2.0 * 16 * 4096 * 4096);
  EXPECT_DOUBLE_EQ(w.bytes, 4096.0 * 4096 / 2 + 4096.0 * 32 * 2 + 2.0 * (16 * 4096 + 16 * 4096));
  EXPECT_EQ(w.bandwidth, Bandwidth::read);
  w = make_problem(point("m = 1\nn = 14336\nk = 4096\nweights = \"int8\"\nzeros = true\ngroup = 0\n"))->work();
  EXPECT_DOUBLE_EQ(w.flops, 2.0 * 14336 * 4096);
  EXPECT_DOUBLE_EQ(w.bytes, 14336.0 * 4096 + 14336.0 * (2 + 1) + 2.0 * (4096 + 14336));
  w = make_problem(point("m = 3\nn = 40\nk = 256\nzeros = true\n"))->work();
  EXPECT_DOUBLE_EQ(w.bytes, 40.0 * 128 + 40.0 * 2 * 3 + 2.0 * (3 * 256 + 3 * 40));
}

TEST(GemmQOp, TensorsLayoutAndRows) {
  const auto problem = make_problem(point("m = 40\nn = 72\nk = 256\n"));
  EXPECT_EQ(problem->output_tensor().layout().rfind("[m, n]", 0), 0u);
  EXPECT_EQ(problem->output_rows(), 40);
  EXPECT_EQ(problem->output_cols(), 72);
  const auto inputs = problem->input_names();
  ASSERT_EQ(inputs.size(), 2u);
  EXPECT_EQ(inputs[0], (std::pair<std::string, bool>{"a", true}));
  EXPECT_EQ(inputs[1], (std::pair<std::string, bool>{"scales", false}));
  EXPECT_EQ(problem->input_tensors()[1]->shape(), (std::vector<int64_t>{72, 2}));
  EXPECT_TRUE(problem->has_faithful());
  EXPECT_EQ(problem->must_check_rows(), (Rows{7, 8, 15, 16, 31, 32}));
  EXPECT_EQ(make_problem(point("m = 9\nn = 72\nk = 256\n"))->must_check_rows(), (Rows{7, 8}));
  // Per channel: one scale a row.
  EXPECT_EQ(make_problem(point("m = 2\nn = 72\nk = 264\ngroup = 0\n"))->input_tensors()[1]->shape(),
            (std::vector<int64_t>{72, 1}));
  expect_has(error_of(kHead + "m = 4\nn = 64\nk = 256\n[inputs.scales]\nscale = 2\n"), {"scales"});
}

TEST(GemmQOp, WhatTheRungsTake) {
  GemmQParams p;
  p.m = 3;
  p.n = 37;
  p.k = 256;
  p.group = 128;
  p.bits = 4;
  p.dtype = DType::bf16;
  const DeviceCaps caps = assumed_caps();
  EXPECT_EQ(gemm_q_impl::dequant_cublas_supports(p, caps), "");
  EXPECT_EQ(gemm_q_impl::fused_mma_supports(p, caps), "");
  EXPECT_EQ(gemm_q_impl::dense_cublas_supports(p, caps), "");
  EXPECT_EQ(gemm_q_impl::dequant_cublas_workspace(p), 37u * 256 * 2);
  GemmQParams q = p;
  q.k = 264;
  q.group = 264;
  EXPECT_EQ(gemm_q_impl::dequant_cublas_supports(q, caps), "");
  EXPECT_EQ(gemm_q_impl::fused_mma_supports(q, caps),
            "k and group must be multiples of 32 (a lane's 16 bytes of codes, one group)");
  q.bits = 8;
  q.k = 272;
  q.group = 272;
  EXPECT_EQ(gemm_q_impl::fused_mma_supports(q, caps), "");  // int8: pieces of 16
  q = p;
  q.dtype = DType::fp32;
  EXPECT_EQ(gemm_q_impl::dequant_cublas_supports(q, caps), "fp16/bf16 activations only");
  q = p;
  q.group = 96;
  EXPECT_EQ(gemm_q_impl::fused_mma_supports(q, caps), "group must divide k");
  DeviceCaps ampere = caps;
  ampere.cc_major = 7;
  ampere.cc_minor = 5;
  EXPECT_EQ(gemm_q_impl::fused_mma_supports(p, ampere), "needs sm_80 (mma.sync on fp16/bf16)");
  // The dry run's rows: every rung on a point the fused rung takes, its reason where not.
  EXPECT_EQ(skip_of(point("m = 3\nn = 37\nk = 256\nzeros = true\n"), "fused_mma"), "");
  EXPECT_EQ(skip_of(point("m = 3\nn = 37\nk = 40\ngroup = 8\n"), "fused_mma"),
            "k and group must be multiples of 32 (a lane's 16 bytes of codes, one group)");
  EXPECT_EQ(skip_of(point("m = 3\nn = 37\nk = 40\ngroup = 8\n"), "dequant_cublas"), "");
}

// Every shipped gemm_q case builds, and the fused rung runs each of its points.
TEST(GemmQOp, EveryShippedPointRunsOnTheFusedRung) {
  int points = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(std::string(ATTNBENCH_SOURCE_DIR) + "/cases")) {
    if (entry.path().extension() != ".toml") continue;
    const std::string name = entry.path().filename().string();
    if (name.rfind("gemm_q", 0) != 0 && entry.path().parent_path().filename() != "gemm_q") continue;
    for (const CasePoint& c : load_case(entry.path().string(), {}).points) {
      EXPECT_EQ(skip_of(c, "dequant_cublas"), "") << entry.path() << " " << c.label;
      EXPECT_EQ(skip_of(c, "fused_mma"), "") << entry.path() << " " << c.label;
      ++points;
    }
  }
  EXPECT_GE(points, 32);
}

}  // namespace
}  // namespace attnbench
