// Host storage formats and the input generator.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "app/numeric.hpp"
#include "kernels/common/random.hpp"

using namespace attnbench;

TEST(Half, KnownEncodings) {
  EXPECT_EQ(float_to_half(1.0f), 0x3c00);
  EXPECT_EQ(float_to_half(-2.0f), 0xc000);
  EXPECT_EQ(float_to_half(65504.0f), 0x7bff);        // largest finite
  EXPECT_EQ(float_to_half(65520.0f), 0x7c00);        // rounds to infinity
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -25)), 0x0000);  // tie rounds to even (zero)
  EXPECT_EQ(float_to_half(1.0f + std::ldexp(1.0f, -11)), 0x3c00);      // tie to even: down
  EXPECT_EQ(float_to_half(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);  // tie to even: up
  EXPECT_TRUE(std::isnan(half_to_float(float_to_half(NAN))));
}

TEST(Half, EveryEncodingRoundTrips) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = half_to_float(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(float_to_half(f), h) << "half 0x" << std::hex << h;
  }
}

TEST(Half, EveryEncodingDecodesAsTheCompilerDoes) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    _Float16 x;
    const auto bits = static_cast<uint16_t>(h);
    std::memcpy(&x, &bits, 2);
    const float want = static_cast<float>(x), got = half_to_float(bits);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << "half 0x" << std::hex << h;
      ASSERT_EQ(std::signbit(got), std::signbit(want)) << "half 0x" << std::hex << h;
    } else {
      ASSERT_EQ(float_bits(got), float_bits(want)) << "half 0x" << std::hex << h;  // -0 included
    }
  }
}

TEST(DecodeRange, EqualsDecodeElementForEveryDtype) {
  std::mt19937 gen(3);
  std::uniform_int_distribution<int> byte(0, 255);
  std::vector<uint8_t> bytes(4 * 4096);
  for (auto& b : bytes) b = static_cast<uint8_t>(byte(gen));
  for (DType t : {DType::fp32, DType::fp16, DType::bf16, DType::fp8_e4m3}) {
    const int64_t n = static_cast<int64_t>(bytes.size() / dtype_bytes(t));
    std::vector<float> out(static_cast<size_t>(n));
    decode_range(t, bytes.data(), n, out.data());
    for (int64_t i = 0; i < n; ++i) {
      const double want = decode_element(t, bytes.data(), i);
      if (std::isnan(want))
        ASSERT_TRUE(std::isnan(out[i])) << dtype_name(t) << " element " << i;
      else
        ASSERT_EQ(out[i], want) << dtype_name(t) << " element " << i;
    }
  }
}

TEST(Half, MatchesTheCompilersConversion) {
  std::mt19937 gen(7);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 1000000; ++i) {
    float f;
    const uint32_t u = bits(gen);
    std::memcpy(&f, &u, 4);
    if (std::isnan(f)) continue;
    const _Float16 h = static_cast<_Float16>(f);
    uint16_t want;
    std::memcpy(&want, &h, 2);
    ASSERT_EQ(float_to_half(f), want) << f;
  }
}

TEST(Bf16, KnownEncodingsAndTies) {
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bf16(-1.5f), 0xbfc0);
  EXPECT_EQ(float_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);      // tie to even: down
  EXPECT_EQ(float_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);  // tie to even: up
  EXPECT_EQ(float_to_bf16(1.0f + 1.1f * std::ldexp(1.0f, -8)), 0x3f81);
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = bf16_to_float(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(float_to_bf16(f), h);
  }
}

TEST(Fp8E4m3, KnownEncodingsSaturationAndRoundTrip) {
  EXPECT_EQ(float_to_fp8e4m3(1.0f), 0x38);
  EXPECT_EQ(float_to_fp8e4m3(448.0f), 0x7e);
  EXPECT_EQ(float_to_fp8e4m3(1000.0f), 0x7e);  // saturates, never NaN
  EXPECT_EQ(float_to_fp8e4m3(-1000.0f), 0xfe);
  EXPECT_EQ(float_to_fp8e4m3(std::ldexp(1.0f, -9)), 0x01);  // smallest subnormal
  EXPECT_EQ(float_to_fp8e4m3(NAN), 0x7f);
  EXPECT_FLOAT_EQ(fp8e4m3_to_float(0x7e), 448.0f);
  for (uint32_t b = 0; b < 256; ++b) {
    const float f = fp8e4m3_to_float(static_cast<uint8_t>(b));
    if (std::isnan(f)) continue;
    ASSERT_EQ(float_to_fp8e4m3(f), b) << b;
  }
}

TEST(RoundTo, IsIdempotentAndEncodeDecodeAgree) {
  const std::vector<float> xs = {0.1f, -3.14159f, 1e-3f, 123.456f};
  for (DType t : {DType::fp32, DType::fp16, DType::bf16, DType::fp8_e4m3}) {
    std::vector<float> r;
    for (float x : xs) r.push_back(round_to(t, x));
    for (size_t i = 0; i < r.size(); ++i) EXPECT_EQ(round_to(t, r[i]), r[i]);
    const auto bytes = encode(t, r);
    ASSERT_EQ(bytes.size(), r.size() * dtype_bytes(t));
    for (size_t i = 0; i < r.size(); ++i) EXPECT_EQ(decode_element(t, bytes.data(), i), r[i]) << dtype_name(t);
  }
}

TEST(Random, DeterministicPerSeedStreamAndIndex) {
  EXPECT_EQ(random_uniform(1, 2, 3), random_uniform(1, 2, 3));
  EXPECT_NE(random_uniform(1, 2, 3), random_uniform(2, 2, 3));
  EXPECT_NE(random_uniform(1, 2, 3), random_uniform(1, 3, 3));
  EXPECT_NE(random_uniform(1, 2, 3), random_uniform(1, 2, 4));
}

TEST(Random, UniformAndNormalMoments) {
  const int n = 200000;
  double su = 0, su2 = 0, sn = 0, sn2 = 0, lo = 1, hi = -1;
  for (int i = 0; i < n; ++i) {
    const double u = random_uniform(9, 0, i), g = random_normal(9, 1, i);
    su += u;
    su2 += u * u;
    sn += g;
    sn2 += g * g;
    lo = std::min(lo, u);
    hi = std::max(hi, u);
  }
  EXPECT_GE(lo, -1.0);
  EXPECT_LT(hi, 1.0);
  EXPECT_NEAR(su / n, 0.0, 0.01);
  EXPECT_NEAR(su2 / n, 1.0 / 3.0, 0.01);
  EXPECT_NEAR(sn / n, 0.0, 0.01);
  EXPECT_NEAR(sn2 / n, 1.0, 0.02);
}

namespace {
// The conversion as the format defines it (frexp / nearbyint), kept here as the check of
// the bit-twiddling one the harness uses.
uint8_t fp8_by_definition(float f) {
  const uint8_t sign = std::signbit(f) ? 0x80 : 0;
  if (std::isnan(f)) return 0x7f;
  const float a = std::fmin(std::fabs(f), 448.0f);
  if (a < std::ldexp(1.0f, -6)) return sign | static_cast<uint8_t>(std::nearbyint(std::ldexp(a, 9)));
  int e;
  const float fr = std::frexp(a, &e);
  auto m = static_cast<uint32_t>(std::nearbyint(std::ldexp(fr, 4)));
  if (m == 16) {
    m = 8;
    ++e;
  }
  return sign | static_cast<uint8_t>(((e - 1 + 7) << 3) | (m & 7u));
}
}  // namespace

// Every value a code holds, every midpoint between neighbours (the ties) and one float
// either side of each, and a million spread bit patterns: the same byte as the definition.
TEST(Numeric, Fp8ConversionMatchesTheDefinition) {
  std::vector<float> probes = {0.0f, -0.0f, 448.0f, 449.0f, 1e30f, -1e30f, INFINITY, -INFINITY, 1e-30f};
  const auto& v = fp8e4m3_values();
  for (int c = 0; c < 0x7e; ++c) {
    const float mid = (v[c] + v[c + 1]) / 2;  // exact: one more bit than e4m3 has
    for (float x : {v[c], mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1000.0f)}) {
      probes.push_back(x);
      probes.push_back(-x);
    }
  }
  for (uint32_t bits = 0; bits < 0xff800000u; bits += 4093u) {
    float f;
    std::memcpy(&f, &bits, 4);
    probes.push_back(f);
  }
  for (float f : probes) ASSERT_EQ(float_to_fp8e4m3(f), fp8_by_definition(f)) << f;
}

