// Host-side storage formats: rounding fp32 values to fp16 / bf16 / fp8 e4m3
// (round to nearest even, as the device's __float2*_rn do) and back. Inputs are
// drawn in fp32 and rounded here, so the reference sees exactly what the GPU sees.
#pragma once
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/common/dtype.hpp"

namespace attnbench {

inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline uint16_t float_to_bf16(float f) {
  uint32_t u = float_bits(f);
  if (std::isnan(f)) return 0x7fc0;
  // Round to nearest even on the 16 bits that are cut off.
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

inline float bf16_to_float(uint16_t h) { return bits_float(static_cast<uint32_t>(h) << 16); }

// On the bits: a normal half's exponent and mantissa are the float's, shifted and
// rebiased (15 -> 127); a subnormal is its mantissa times 2^-24, exactly.
inline float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16, em = h & 0x7fffu;
  if (em < 0x0400u) return bits_float(sign | float_bits(static_cast<float>(em) * 0x1.0p-24f));
  const uint32_t bits = em >= 0x7c00u ? 0x7f800000u | (em & 0x3ffu) << 13  // Inf, NaN keeps its payload
                                      : (em << 13) + (uint32_t{127 - 15} << 23);
  return bits_float(sign | bits);
}

inline uint16_t float_to_half(float f) {
  const uint32_t u = float_bits(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  if (std::isnan(f)) return 0x7e00;
  const float a = std::fabs(f);
  if (a >= 65520.0f) return sign | 0x7c00;  // rounds to infinity
  if (a < std::ldexp(1.0f, -14)) {
    // Subnormal: a multiple of 2^-24; nearbyint rounds half to even.
    const auto m = static_cast<uint16_t>(std::nearbyint(std::ldexp(a, 24)));
    return sign | m;  // m == 0x400 is the smallest normal, which the encoding gives for free
  }
  int e;
  const float fr = std::frexp(a, &e);  // a = fr * 2^e, fr in [0.5, 1)
  auto m = static_cast<uint32_t>(std::nearbyint(std::ldexp(fr, 11)));  // 11 significant bits
  if (m == 2048) {  // rounding carried into the next binade
    m = 1024;
    ++e;
  }
  const uint32_t exp = static_cast<uint32_t>(e - 1 + 15);
  if (exp >= 31) return sign | 0x7c00;
  return sign | static_cast<uint16_t>((exp << 10) | (m & 0x3ffu));
}

// fp8 e4m3 (OCP "fn" variant, as __nv_fp8_e4m3): bias 7, no infinities, max 448,
// NaN = S.1111.111. Out-of-range values saturate to +-448 (as __NV_SATFINITE).
// The 128 non-negative codes in value order (0x7f, NaN, last): decoding looks them up
// (the paged op converts hundreds of millions of cache elements per trial).
inline const std::array<float, 128>& fp8e4m3_values() {
  static const std::array<float, 128> values = [] {
    std::array<float, 128> v{};
    for (uint32_t c = 0; c < 128; ++c) {
      const uint32_t exp = c >> 3, mant = c & 7u;
      v[c] = exp == 15 && mant == 7 ? std::numeric_limits<float>::quiet_NaN()
             : exp == 0             ? std::ldexp(static_cast<float>(mant), -9)
                                    : std::ldexp(static_cast<float>(mant | 8u), static_cast<int>(exp) - 10);
    }
    return v;
  }();
  return values;
}

inline float fp8e4m3_to_float(uint8_t b) {
  const float v = fp8e4m3_values()[b & 0x7fu];
  return b & 0x80u ? -v : v;
}

// Round to nearest, ties to the even code (the even mantissa), as the device converts:
// on the float's bits, without branches that depend on the value's digits.
inline uint8_t float_to_fp8e4m3(float f) {
  const uint8_t sign = std::signbit(f) ? 0x80 : 0;
  if (std::isnan(f)) return 0x7f;
  const float a = std::fabs(f);
  if (a >= 448.0f) return sign | 0x7e;
  if (a < 0x1.0p-6f) {
    // Subnormal codes hold a * 2^9 in [0, 8]; adding and taking away 2^23 rounds that to
    // an integer, ties to even (8 is the smallest normal's code, as it should be).
    const float m = (a * 512.0f + 8388608.0f) - 8388608.0f;
    return sign | static_cast<uint8_t>(m);
  }
  // Normal: keep 3 of the 23 mantissa bits, rounding the other 20 to nearest even; a
  // carry moves into the exponent, which is what the next binade's code needs.
  uint32_t x;
  std::memcpy(&x, &a, 4);
  x += 0x7ffffu + ((x >> 20) & 1u);
  const uint32_t exp = (x >> 23) - 127 + 7, mant = (x >> 20) & 7u;
  return sign | static_cast<uint8_t>((exp << 3) | mant);
}

// The value `x` becomes once stored as `t`.
inline float round_to(DType t, float x) {
  switch (t) {
    case DType::fp32: return x;
    case DType::fp16: return half_to_float(float_to_half(x));
    case DType::bf16: return bf16_to_float(float_to_bf16(x));
    case DType::fp8_e4m3: return fp8e4m3_to_float(float_to_fp8e4m3(x));
  }
  return x;
}

// round_to(t, .) as a plain function, for the dtype-faithful references (ref::Faithful);
// fp32's is the identity on floats (a double passed through it is rounded to fp32).
using RoundFn = float (*)(float);
inline RoundFn rounding_of(DType t) {
  switch (t) {
    case DType::fp32: return [](float x) { return x; };
    case DType::fp16: return [](float x) { return round_to(DType::fp16, x); };
    case DType::bf16: return [](float x) { return round_to(DType::bf16, x); };
    case DType::fp8_e4m3: return [](float x) { return round_to(DType::fp8_e4m3, x); };
  }
  return nullptr;
}

// Packs values (already representable in `t`) into the device's storage bytes.
std::vector<uint8_t> encode(DType t, const std::vector<float>& values);
// values[0, n) in storage type t into out (n * dtype_bytes(t) bytes).
void encode_range(DType t, const float* values, int64_t n, uint8_t* out);

// The dtype a word names ("bf16"); the case loader has already checked the word.
inline DType dtype_from_name(const std::string& name) {
  for (DType t : {DType::fp32, DType::fp16, DType::bf16, DType::fp8_e4m3})
    if (name == dtype_name(t)) return t;
  throw std::logic_error("no dtype named '" + name + "'");
}
// Elements [0, n) of a storage buffer, widened to float (exactly: every dtype fits).
void decode_range(DType t, const uint8_t* bytes, int64_t n, float* out);
// Element i of a storage buffer, widened to double.
double decode_element(DType t, const uint8_t* bytes, int64_t i);

}  // namespace attnbench
