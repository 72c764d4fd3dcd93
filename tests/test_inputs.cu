// The harness's input draws (kernels/harness/inputs.cu): the [inputs] distributions of
// docs/cases.md, element by element, against what they promise. GPU test: exits 3 (skipped)
// without a device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "app/numeric.hpp"
#include "kernels/harness/inputs.hpp"

namespace attnbench {
namespace {

constexpr uint64_t kSeed = 11, kStream = 3;

// `count` values drawn on the device in `t`, decoded on the host; spec null: the op's own
// draw (launch_fill_random) with `scale` and `normal`.
std::vector<double> draw(DType t, int64_t count, const FillSpec* spec, float scale = 1, bool normal = true) {
  const std::size_t bytes = static_cast<std::size_t>(count) * dtype_bytes(t);
  void* buf = nullptr;
  EXPECT_EQ(cudaMalloc(&buf, bytes), cudaSuccess);
  if (spec)
    launch_fill_distribution(buf, count, t, kSeed, kStream, *spec, nullptr);
  else
    launch_fill_random(buf, count, t, kSeed, kStream, scale, normal, nullptr);
  std::vector<uint8_t> host(bytes);
  EXPECT_EQ(cudaMemcpy(host.data(), buf, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
  cudaFree(buf);
  std::vector<double> out(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) out[static_cast<size_t>(i)] = decode_element(t, host.data(), i);
  return out;
}

const DType kTypes[] = {DType::fp32, DType::fp16, DType::bf16, DType::fp8_e4m3};

TEST(Inputs, NormalAndUniformAtTheOpsScaleAreTheOpsOwnDraw) {
  for (DType t : kTypes)
    for (bool normal : {true, false}) {
      FillSpec s;
      s.kind = normal ? FillKind::normal : FillKind::uniform;
      s.scale = normal ? 1.f : 8.f;
      const auto own = draw(t, 100000, nullptr, s.scale, normal), same = draw(t, 100000, &s);
      for (size_t i = 0; i < own.size(); ++i)
        if (own[i] != 0) ASSERT_EQ(own[i], same[i]) << dtype_name(t) << " element " << i;  // zeros may differ in sign
    }
}

TEST(Inputs, ConstantRowsAndScaleZero) {
  FillSpec s;
  s.kind = FillKind::constant;
  s.scale = 2;
  s.offset = 1;
  s.row = 37;
  const auto x = draw(DType::fp32, 37 * 100, &s);
  double lo = 1e9, hi = -1e9;
  for (int r = 0; r < 100; ++r) {
    for (int j = 1; j < 37; ++j) ASSERT_EQ(x[r * 37 + j], x[r * 37]) << "row " << r;
    lo = std::min(lo, x[r * 37]), hi = std::max(hi, x[r * 37]);
  }
  EXPECT_GE(lo, -1.0);
  EXPECT_LE(hi, 3.0);
  EXPECT_LT(lo, 0.0);  // the rows differ, across [offset - s, offset + s]
  EXPECT_GT(hi, 2.0);
  s.scale = 0;
  s.offset = 0.5f;
  for (DType t : kTypes)
    for (double v : draw(t, 5000, &s)) ASSERT_EQ(v, 0.5) << dtype_name(t);
}

TEST(Inputs, OutliersAreOneIn1024TimesAHundred) {
  FillSpec s;
  s.kind = FillKind::uniform;
  s.scale = 1;
  s.outliers = true;
  const int64_t n = 1 << 22;
  const auto x = draw(DType::fp32, n, &s);
  FillSpec plain = s;
  plain.outliers = false;
  const auto y = draw(DType::fp32, n, &plain);
  int64_t hits = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (x[i] == y[i]) continue;
    ++hits;
    ASSERT_FLOAT_EQ(static_cast<float>(x[i]), static_cast<float>(y[i]) * 100.f) << "element " << i;
  }
  EXPECT_NEAR(static_cast<double>(hits) / n, 1.0 / 1024, 0.1 / 1024);  // 4096 expected, sd 64
}

TEST(Inputs, ParetoTailAndSigns) {
  FillSpec s;
  s.kind = FillKind::pareto;
  s.scale = 1;
  const int64_t n = 1 << 22;
  const auto x = draw(DType::fp32, n, &s);
  int64_t past1 = 0, negative = 0;
  for (double v : x) past1 += std::fabs(v) > 1, negative += v < 0;
  EXPECT_NEAR(static_cast<double>(past1) / n, 1.0 / 8, 0.005);  // P(u^(-1/3) - 1 > 1) = P(u < 1/8)
  EXPECT_NEAR(static_cast<double>(negative) / n, 0.5, 0.005);
}

TEST(Inputs, OverflowSaturatesToTheLargestFiniteValue) {
  FillSpec s;
  s.kind = FillKind::uniform;
  s.scale = 3e38f;
  s.offset = 3e38f;  // up to 6e38: past fp32's range too
  const struct {
    DType t;
    double top;
  } cases[] = {{DType::fp32, 3.4028234663852886e38}, {DType::fp16, 65504}, {DType::bf16, 3.3895313892515355e38},
               {DType::fp8_e4m3, 448}};
  for (const auto& c : cases) {
    const auto x = draw(c.t, 10000, &s);
    double hi = 0;
    for (double v : x) {
      ASSERT_TRUE(std::isfinite(v)) << dtype_name(c.t);
      hi = std::max(hi, v);
    }
    EXPECT_EQ(hi, c.top) << dtype_name(c.t);
  }
}

}  // namespace
}  // namespace attnbench

// main: tests/gpu_test_main.cpp (exit 3, skipped, without a GPU).
