// Storage types on the device: the C++ type of each DType, conversions to and from fp32,
// and the packing of 16-bit pairs, 16-byte vectors and fp8 words that loads and stores go
// through. Every kernel computes in fp32 whatever it stores.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "kernels/common/dtype.hpp"

namespace attnbench {

// C++ storage type of each DType.
template <DType T> struct Storage;
template <> struct Storage<DType::fp32> { using type = float; };
template <> struct Storage<DType::fp16> { using type = __half; };
template <> struct Storage<DType::bf16> { using type = __nv_bfloat16; };

// An fp8 e4m3 cache element (one byte): paged caches store value / scale in it.
using Fp8 = __nv_fp8_e4m3;
template <class C>
constexpr bool kIsFp8 = std::is_same_v<C, Fp8>;

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_float(Fp8 x) { return static_cast<float>(x); }

template <class T> __device__ __forceinline__ T from_float(float x);
template <> __device__ __forceinline__ float from_float<float>(float x) { return x; }
template <> __device__ __forceinline__ __half from_float<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

// Raw bits of a 16-bit value, and back.
template <class T>
__device__ __forceinline__ T from_bits(uint32_t b);
template <>
__device__ __forceinline__ __half from_bits<__half>(uint32_t b) {
  return __ushort_as_half(static_cast<unsigned short>(b));
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_bits<__nv_bfloat16>(uint32_t b) {
  return __ushort_as_bfloat16(static_cast<unsigned short>(b));
}
__device__ __forceinline__ uint32_t to_bits(__half h) { return __half_as_ushort(h); }
__device__ __forceinline__ uint32_t to_bits(__nv_bfloat16 h) { return __bfloat16_as_ushort(h); }

// Four floats as one register of e4m3 codes (round to nearest, saturating), x0 in the
// lowest byte: the lowest k of an 8-bit wgmma fragment register.
// The e4m3 conversions are sm_89's: every fp8 path's supports() refuses older cards, and an
// sm_80 build (README: -DCMAKE_CUDA_ARCHITECTURES=80) compiles them as a trap.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 890
#define ATTNBENCH_NO_E4M3 1
#endif
__device__ __forceinline__ uint32_t pack4_e4m3(float x0, float x1, float x2, float x3) {
#ifdef ATTNBENCH_NO_E4M3
  (void)x0, (void)x1, (void)x2, (void)x3;
  __trap();
  return 0;
#else
  uint16_t lo, hi;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\n" : "=h"(lo) : "f"(x1), "f"(x0));  // first operand: upper byte
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\n" : "=h"(hi) : "f"(x3), "f"(x2));
  return uint32_t{lo} | (uint32_t{hi} << 16);
#endif
}

// Two floats as one register of 16-bit values (__half or __nv_bfloat16), `lo` in the low
// half: the lower k or column of an mma fragment, the lower index in memory.
template <class T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  if constexpr (std::is_same_v<T, __half>) {
    const __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&h);
  } else {
    const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&h);
  }
}

// Four e4m3 bytes -> two f16x2 words (bytes 0, 1 and bytes 2, 3; the lower byte in the lower
// half). Exact: every e4m3 value, subnormals included, is an fp16 value.
__device__ __forceinline__ void e4m3x4_to_f16x4(uint32_t w, uint32_t& lo, uint32_t& hi) {
#ifdef ATTNBENCH_NO_E4M3
  (void)w;
  __trap();
  lo = hi = 0;
#else
  asm("{\n .reg .b16 a, b;\n mov.b32 {a, b}, %2;\n cvt.rn.f16x2.e4m3x2 %0, a;\n cvt.rn.f16x2.e4m3x2 %1, b;\n}\n"
      : "=r"(lo), "=r"(hi)
      : "r"(w));
#endif
}

// kWords 32-bit words of elements C (fp32, fp16, bf16 or fp8) -> floats (4 / sizeof(C) per
// word), in order. bf16 -> fp32 is a shift or a mask.
template <class C, int kWords>
__device__ __forceinline__ void to_floats(const uint32_t* w, float* f) {
#pragma unroll
  for (int i = 0; i < kWords; ++i) {
    if constexpr (std::is_same_v<C, float>) {
      f[i] = __uint_as_float(w[i]);
    } else if constexpr (std::is_same_v<C, __nv_bfloat16>) {
      f[2 * i] = __uint_as_float(w[i] << 16);
      f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
    } else if constexpr (std::is_same_v<C, __half>) {
      const float2 h = __half22float2(*reinterpret_cast<const __half2*>(&w[i]));
      f[2 * i] = h.x;
      f[2 * i + 1] = h.y;
    } else {
      uint32_t lo, hi;
      e4m3x4_to_f16x4(w[i], lo, hi);
      const float2 a = __half22float2(*reinterpret_cast<const __half2*>(&lo));
      const float2 b = __half22float2(*reinterpret_cast<const __half2*>(&hi));
      f[4 * i] = a.x;
      f[4 * i + 1] = a.y;
      f[4 * i + 2] = b.x;
      f[4 * i + 3] = b.y;
    }
  }
}

// One 16-byte vector of T -> 16 / sizeof(T) floats.
template <class T>
__device__ __forceinline__ void unpack(const uint4& u, float* f) {
  const uint32_t w[4] = {u.x, u.y, u.z, u.w};
  to_floats<T, 4>(w, f);
}

// 16 / sizeof(T) floats -> one 16-byte vector of T (fp32, fp16 or bf16).
template <class T>
__device__ __forceinline__ uint4 pack(const float* f) {
  uint32_t w[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    if constexpr (std::is_same_v<T, float>) {
      w[i] = __float_as_uint(f[i]);
    } else {
      w[i] = to_bits(from_float<T>(f[2 * i])) | (to_bits(from_float<T>(f[2 * i + 1])) << 16);
    }
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}

// Stores N (4 or 8) floats as T at dst (aligned to N elements).
template <class T, int N>
__device__ __forceinline__ void store_n(T* dst, const float* f) {
  if constexpr (std::is_same_v<T, float>) {
#pragma unroll
    for (int i = 0; i < N; i += 4)
      *reinterpret_cast<float4*>(dst + i) = make_float4(f[i], f[i + 1], f[i + 2], f[i + 3]);
  } else if constexpr (N == 8) {
    *reinterpret_cast<uint4*>(dst) =
        make_uint4(pack2<T>(f[0], f[1]), pack2<T>(f[2], f[3]), pack2<T>(f[4], f[5]), pack2<T>(f[6], f[7]));
  } else {
    *reinterpret_cast<uint2*>(dst) = make_uint2(pack2<T>(f[0], f[1]), pack2<T>(f[2], f[3]));
  }
}

}  // namespace attnbench
