// The weight dequantization of gemm_q's fused rungs, in registers: packed int4 / int8 codes to
// fp16 / bf16 pairs, exactly. Rungs 2 and 3 (2_fused_mma.cu, 3_splitk_gemv.cu) make each weight
// (code - zero) · scale in the dtype (2_fused_mma.cu's header says why each step is exact); rung 4
// (4_stream_gemv.cu) gives the mma (code - zero) itself and scales each k step's fp32 partial
// (scaled_step, below), apart from its kernel so that a rung with another load path can share it.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "kernels/common/dispatch.cuh"
#include "kernels/common/mma.cuh"
#include "kernels/common/storage.cuh"
#include "kernels/gemm_q/gemm_q.hpp"

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

// ---- (code - zero) exact, the scale on the fp32 partial: rung 4 ----------------------------

template <class T>
__device__ __forceinline__ T2<T> splat(float x) {
  const T v = from_float<T>(x);
  return T2<T>{v, v};
}

// A row's constants for one step: the zero code z folded into what the half2 ops subtract.
template <class T>
struct Zero {
  T2<T> lo;  // 1024 + z (fp16) / 128 + z (bf16): the magic plus the zero, for codes in the low nibble
  T2<T> hi;  // -(64 + z): fp16's high-nibble codes, 1024 + 16·code scaled by 1/16
  float f;   // z, for bf16 int8's fp32 path
};
template <class T>
__device__ __forceinline__ Zero<T> zero_of(int z) {
  const float zf = static_cast<float>(z);
  return {splat<T>(kMagicValue<T> + zf), splat<T>(-(64.f + zf)), zf};
}

// (x & mask) | magic in one LOP3: with both constants as immediates the compiler emits an AND
// and an OR; the magic in a register (set once, outside the loop) lets one LOP3 take both.
template <uint32_t kMask>
__device__ __forceinline__ uint32_t and_or(uint32_t x, uint32_t magic) {
  uint32_t d;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;\n" : "=r"(d) : "r"(x), "n"(kMask), "r"(magic));  // (a & b) | c
  return d;
}

// Word w's 8 int4 codes (k 0..7 of the word, nibble i is k i) as four pairs (code i, code i + 4)
// minus the zero, exact in T: out[i] for i = 0..3.
template <class T>
__device__ __forceinline__ void int4_pairs(uint32_t w, const Zero<T>& z, uint32_t magic, uint32_t (&out)[4]) {
  if constexpr (std::is_same_v<T, __half>) {
    // Low nibbles of each byte as 1024 + code, high nibbles as 1024 + 16·code (both inside fp16's
    // 10-bit mantissa); bytes 1 and 3 after one shift.
    const uint32_t u = w >> 8;
    const __half2 sixteenth = __half2{__float2half_rn(0.0625f), __float2half_rn(0.0625f)};
    out[0] = as_u32<T>(__hsub2(as_t2<T>(and_or<0x000f000fu>(w, magic)), z.lo));
    out[1] = as_u32<T>(__hfma2(as_t2<T>(and_or<0x00f000f0u>(w, magic)), sixteenth, z.hi));
    out[2] = as_u32<T>(__hsub2(as_t2<T>(and_or<0x000f000fu>(u, magic)), z.lo));
    out[3] = as_u32<T>(__hfma2(as_t2<T>(and_or<0x00f000f0u>(u, magic)), sixteenth, z.hi));
  } else {
    // bf16's 7-bit mantissa holds 128 + code only in the low nibble: one shift a pair.
#pragma unroll
    for (int i = 0; i < 4; ++i) out[i] = as_u32<T>(__hsub2(as_t2<T>(and_or<0x000f000fu>(w >> (4 * i), magic)), z.lo));
  }
}

// Word w's 4 int8 codes (k 0..3) as pairs (byte 0, byte 2) and (byte 1, byte 3) minus the zero,
// exact in T (|code - zero| <= 255: an integer both dtypes hold).
template <class T>
__device__ __forceinline__ void int8_pairs(uint32_t w, const Zero<T>& z, uint32_t (&out)[2]) {
  if constexpr (std::is_same_v<T, __half>) {
    out[0] = as_u32<T>(__hsub2(as_t2<T>(__byte_perm(w, 0x64646464u, 0x4240)), z.lo));  // [b0, 0x64, b2, 0x64]
    out[1] = as_u32<T>(__hsub2(as_t2<T>(__byte_perm(w, 0x64646464u, 0x4341)), z.lo));
  } else {
    // 2^23 + byte as fp32 (0x4B000000 | byte), minus 2^23 + zero: exact; two to a bf16 pair, exact.
    auto f = [&](int byte) {
      return __uint_as_float(__byte_perm(w, 0x4Bu, 0x4550 + byte)) - (8388608.f + z.f);
    };
    out[0] = pack2<T>(f(0), f(2));
    out[1] = pack2<T>(f(1), f(3));
  }
}

// One k step of a lane's two rows (g, g + 8: a 16-byte piece each, wv) for rung 4: (code -
// zero) · activation into an fp32 step partial by mma.sync (W's channels as M, the tokens as N:
// Cᵀ = W·Aᵀ), then the partial times each row's scale s into acc (c0, c1 row g; c2, c3 row g + 8).
// x: the lane's activations of the step, token 8j + g, 8 k a uint4.
template <class T, int kBits, int kNt>
__device__ __forceinline__ void scaled_step(const uint4 (&wv)[2], const float (&s)[2], const Zero<T>& z0,
                                            const Zero<T>& z1, uint32_t magic,
                                            const uint4 (&x)[kNt][kBits == 4 ? 4 : 2], float (&acc)[kNt][4]) {
  float part_acc[kNt][4] = {};
  if constexpr (kBits == 4) {
    // Word q holds k 8q + (0..7) of the piece; mma h takes codes (2h, 2h + 4) as slots 2t, 2t + 1
    // and (2h + 1, 2h + 5) as slots 2t + 8, 2t + 9 (rung 2's order), the activations to match.
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      uint32_t r0[4], r1[4];
      int4_pairs<T>(word_of(wv[0], q), z0, magic, r0);
      int4_pairs<T>(word_of(wv[1], q), z1, magic, r1);
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int j = 0; j < kNt; ++j) {
          const uint32_t lo = h ? x[j][q].y : x[j][q].x, hi = h ? x[j][q].w : x[j][q].z;
          mma_16816<T>(part_acc[j], r0[2 * h], r1[2 * h], r0[2 * h + 1], r1[2 * h + 1], __byte_perm(lo, hi, 0x5410),
                       __byte_perm(lo, hi, 0x7632));
        }
    }
  } else {
    // Word q holds k 4q + (0..3); bytes (0, 2) are slots 2t, 2t + 1, bytes (1, 3) slots 2t + 8, 2t + 9.
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      uint32_t r0[2], r1[2];
      int8_pairs<T>(word_of(wv[0], q), z0, r0);
      int8_pairs<T>(word_of(wv[1], q), z1, r1);
#pragma unroll
      for (int j = 0; j < kNt; ++j) {
        const uint4& xv = x[j][q / 2];
        const uint32_t lo = q % 2 ? xv.z : xv.x, hi = q % 2 ? xv.w : xv.y;  // k (0, 1), (2, 3) of word q
        mma_16816<T>(part_acc[j], r0[0], r1[0], r0[1], r1[1], __byte_perm(lo, hi, 0x5410), __byte_perm(lo, hi, 0x7632));
      }
    }
  }
#pragma unroll
  for (int j = 0; j < kNt; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[j][e] = fmaf(s[e / 2], part_acc[j][e], acc[j][e]);
}

// The small-m rungs' dispatch (splitk_gemv, stream_gemv): f(T{}, bits, token_tiles) with the
// dtype, the code width (4 or 8) and the 8-token tiles m takes (1 or 2) as compile-time values.
template <class F>
void with_small_m(const GemmQParams& p, const char* name, F&& f) {
  with_16bit(p.dtype, name, [&](auto tag) {
    with_value<4, 8>(p.bits, name, "bits", [&](auto bits) {
      with_value<1, 2>(p.m <= 8 ? 1 : 2, name, "token tiles", [&](auto nt) { f(tag, bits, nt); });
    });
  });
}

}  // namespace attnbench::gemm_q_impl
