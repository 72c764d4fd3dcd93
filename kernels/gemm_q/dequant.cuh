// The weight dequantization of gemm_q's fused rungs (2_fused_mma.cu, 3_splitk_gemv.cu), in
// registers: packed int4 / int8 codes to fp16 / bf16 pairs, exactly (the header of
// 2_fused_mma.cu says why each step is exact).
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "kernels/common/storage.cuh"

namespace attnbench::gemm_q_impl {

template <class T>
using T2 = std::conditional_t<std::is_same_v<T, __half>, __half2, __nv_bfloat162>;

template <class T>
__device__ __forceinline__ T2<T> as_t2(uint32_t x) {
  return *reinterpret_cast<const T2<T>*>(&x);
}
template <class T>
__device__ __forceinline__ uint32_t as_u32(T2<T> x) {
  return *reinterpret_cast<const uint32_t*>(&x);
}

// 1024 + code in fp16 (0x6400 = 1024, unit ulp), 128 + code in bf16 (0x4300 = 128): exact for
// an int4 code; the fp16 one holds an int8 code too.
template <class T>
constexpr uint32_t kMagic = std::is_same_v<T, __half> ? 0x64006400u : 0x43004300u;
template <class T>
constexpr float kMagicValue = std::is_same_v<T, __half> ? 1024.f : 128.f;

// A row's dequantization constants for one piece: the scale, and the magic plus the zero, each
// in both halves.
template <class T>
struct Dequant {
  T2<T> scale, bias;
  float scale_f, zero_f;  // bf16 int8's fp32 path
};

// The constants of one (row, group): the scale s and the zero code z.
template <class T>
__device__ __forceinline__ Dequant<T> dequant_of(float s, float z) {
  const T sv = from_float<T>(s), bv = from_float<T>(kMagicValue<T> + z);
  return {T2<T>{sv, sv}, T2<T>{bv, bv}, s, z};
}

// Codes i and i + 4 of an int4 word (k i, i + 4) as two dtype values.
template <class T>
__device__ __forceinline__ uint32_t dequant_int4(uint32_t word, int i, const Dequant<T>& d) {
  const uint32_t x = ((word >> (4 * i)) & 0x000f000fu) | kMagic<T>;
  return as_u32<T>(__hmul2(__hsub2(as_t2<T>(x), d.bias), d.scale));
}

// Bytes `odd` and odd + 2 of an int8 word (k odd, odd + 2) as two dtype values.
template <class T>
__device__ __forceinline__ uint32_t dequant_int8(uint32_t word, int odd, const Dequant<T>& d) {
  if constexpr (std::is_same_v<T, __half>) {
    const uint32_t x = __byte_perm(word, 0x64646464u, odd ? 0x4341 : 0x4240);  // [b, 0x64, b + 2, 0x64]
    return as_u32<T>(__hmul2(__hsub2(as_t2<T>(x), d.bias), d.scale));
  } else {
    const float lo = static_cast<float>((word >> (8 * odd)) & 0xff) - d.zero_f;
    const float hi = static_cast<float>((word >> (8 * odd + 16)) & 0xff) - d.zero_f;
    return pack2<T>(lo * d.scale_f, hi * d.scale_f);  // exact products, one rounding each
  }
}

__device__ __forceinline__ uint32_t word_of(const uint4& v, int q) {
  return q == 0 ? v.x : q == 1 ? v.y : q == 2 ? v.z : v.w;
}

}  // namespace attnbench::gemm_q_impl
