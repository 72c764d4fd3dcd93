// The reshape_and_cache rungs' kernel (1_scatter.cu, 2_token_major.cu): one thread a 16-byte
// chunk of a token's key, which it writes to K as one store and to V as x elements block_size
// apart; fp8 caches store __nv_cvt_float_to_fp8(value / scale, satfinite), which rounds to
// nearest even and saturates at +-448 as app/numeric.cpp does. With RoPE each key is turned
// at its position first, in fp32 (its partners read from the token's row), then rounded or
// quantised. The rungs differ in which chunks neighbouring threads take.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "kernels/common/dispatch.cuh"
#include "kernels/common/rope.cuh"
#include "kernels/common/storage.cuh"
#include "kernels/paged/paged.hpp"
#include "kernels/reshape_and_cache/reshape_and_cache.hpp"

namespace attnbench::reshape_and_cache_impl {
namespace {

// One thread per (token, kv head, K chunk of x dims): reads the x dims (16-byte loads where
// kVec), writes them to K as one 16-byte store and to V as x elements block_size apart. Tokens
// with a negative slot (vLLM's padding) are skipped. Consecutive threads take a token's
// consecutive chunks (vLLM's order), or with kTokenMajor consecutive tokens' same chunk.
template <class Tin, class C, bool kVec, bool kTokenMajor>
__global__ void reshape_and_cache_kernel(const Tin* __restrict__ k, const Tin* __restrict__ v, C* __restrict__ k_cache,
                                         C* __restrict__ v_cache, const int64_t* __restrict__ slot_mapping,
                                         int64_t tokens, int kv_heads, int head_dim, int block_size, float k_scale,
                                         float v_scale, RopeTable rope, const int32_t* __restrict__ positions) {
  constexpr int kX = 16 / static_cast<int>(sizeof(C));
  const int nch = head_dim / kX;
  const int64_t total = tokens * kv_heads * nch;
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < total; i += stride) {
    int c, h;
    int64_t tok;
    if constexpr (kTokenMajor) {
      tok = i % tokens;
      const int64_t hc = i / tokens;
      c = static_cast<int>(hc % nch);
      h = static_cast<int>(hc / nch);
    } else {
      c = static_cast<int>(i % nch);
      const int64_t th = i / nch;
      h = static_cast<int>(th % kv_heads);
      tok = th / kv_heads;
    }
    const int64_t slot = slot_mapping[tok];
    if (slot < 0) continue;
    const int64_t blk = slot / block_size;
    const int off = static_cast<int>(slot % block_size);
    const int64_t src = (tok * kv_heads + h) * head_dim + int64_t{c} * kX;
    const int64_t head = blk * kv_heads + h;
    C* kdst = k_cache + ((head * nch + c) * block_size + off) * kX;
    C* vdst = v_cache + (head * head_dim + int64_t{c} * kX) * block_size + off;
#pragma unroll
    for (int which = 0; which < 2; ++which) {
      const Tin* in = (which ? v : k) + src;
      __align__(16) C out[kX];
      const bool turn = which == 0 && rope.on();  // the key, turned at its position before it is stored
      if (turn) {
        float f[kX];
#pragma unroll
        for (int e = 0; e < kX; ++e) f[e] = to_float(in[e]);
        rope_row_part<Tin, kX>(k + (tok * kv_heads + h) * head_dim, c * kX, f, positions[tok], rope);
#pragma unroll
        for (int e = 0; e < kX; ++e) {
          if constexpr (std::is_same_v<Tin, C>)
            out[e] = from_float<C>(f[e]);
          else
            out[e].__x = __nv_cvt_float_to_fp8(__fdiv_rn(f[e], k_scale), __NV_SATFINITE, __NV_E4M3);
        }
      } else if constexpr (std::is_same_v<Tin, C>) {
        if constexpr (kVec) {
          *reinterpret_cast<uint4*>(out) = *reinterpret_cast<const uint4*>(in);
        } else {
#pragma unroll
          for (int e = 0; e < kX; ++e) out[e] = in[e];
        }
      } else {  // fp8: value / scale, rounded to nearest even, saturated at +-448
        const float scale = which ? v_scale : k_scale;
        float f[kX];
        if constexpr (kVec) {
          constexpr int kWords = kX * static_cast<int>(sizeof(Tin)) / 4;
          uint32_t wv[kWords];
#pragma unroll
          for (int u = 0; u < kWords / 4; ++u) {
            const uint4 raw = reinterpret_cast<const uint4*>(in)[u];
            wv[4 * u] = raw.x, wv[4 * u + 1] = raw.y, wv[4 * u + 2] = raw.z, wv[4 * u + 3] = raw.w;
          }
          to_floats<Tin, kWords>(wv, f);
        } else {
#pragma unroll
          for (int e = 0; e < kX; ++e) f[e] = to_float(in[e]);
        }
#pragma unroll
        for (int e = 0; e < kX; ++e)
          out[e].__x = __nv_cvt_float_to_fp8(__fdiv_rn(f[e], scale), __NV_SATFINITE, __NV_E4M3);
      }
      if (which == 0) {
        if constexpr (kVec) {
          *reinterpret_cast<uint4*>(kdst) = *reinterpret_cast<const uint4*>(out);
        } else {
#pragma unroll
          for (int e = 0; e < kX; ++e) kdst[e] = out[e];
        }
      } else {
#pragma unroll
        for (int e = 0; e < kX; ++e) vdst[int64_t{e} * block_size] = out[e];
      }
    }
  }
}

}  // namespace

// Checks p, then launches the kernel over every (token, kv head, chunk).
template <bool kTokenMajor>
void launch_scatter(const ReshapeAndCacheParams& p, const LaunchContext& ctx, const char* name) {
  if (p.kv_dtype != p.dtype && p.kv_dtype != DType::fp8_e4m3)
    throw std::invalid_argument(std::string(name) + ": kv_dtype must be dtype or fp8_e4m3");
  const int64_t x = paged_x(p.kv_dtype);
  if (p.head_dim < x || p.head_dim % x != 0 || p.block_size < 1 || p.kv_heads < 1)
    throw std::invalid_argument(std::string(name) + ": head_dim must be a multiple of x = " + std::to_string(x) +
                                ", block_size and kv_heads >= 1");
  if (p.tokens <= 0) return;
  bool vec = true;
  for (const void* ptr : {p.k, p.v, static_cast<const void*>(p.k_cache), static_cast<const void*>(p.v_cache)})
    vec = vec && aligned16(ptr);
  const int64_t total = p.tokens * p.kv_heads * (p.head_dim / x);
  constexpr int kThreads = 256;
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(ceil_div(total, kThreads), 65535));
  with_types(p.dtype, p.kv_dtype, name, [&](auto t, auto c) {
    using T = decltype(t);
    using C = decltype(c);
    auto launch = [&](auto kernel) {
      kernel<<<blocks, kThreads, 0, ctx.stream>>>(
          static_cast<const T*>(p.k), static_cast<const T*>(p.v), static_cast<C*>(p.k_cache),
          static_cast<C*>(p.v_cache), p.slot_mapping, p.tokens, static_cast<int>(p.kv_heads),
          static_cast<int>(p.head_dim), static_cast<int>(p.block_size), p.k_scale, p.v_scale, p.rope, p.positions);
    };
    if (vec)
      launch(reshape_and_cache_kernel<T, C, true, kTokenMajor>);
    else
      launch(reshape_and_cache_kernel<T, C, false, kTokenMajor>);
  });
  check_launch(name);
}

}  // namespace attnbench::reshape_and_cache_impl
