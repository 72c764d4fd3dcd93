// gemm_q rung 1, dequant_cublas: the simple way, and the baseline. A first kernel expands the
// packed codes into W [n, k] in the dtype in the workspace, W[j, kk] = (code - zero) · scale rounded
// once (each thread one 32-bit word: 8 int4 or 4 int8 codes of one row, one group), then cuBLAS
// multiplies C = A · Wᵀ as the gemm op's cublas rung does (fp32 compute). It reads the packed
// weights, writes and reads back the dense ones (4x the int4 bytes twice over), so at small m it is
// slower than the dense GEMM it feeds: the cost the fused rungs remove.
//
// dense_cublas, in this file because it is the second half of this rung alone: the same cuBLAS call
// on W dequantized by the problem before timing (GemmQParams::w_dense), i.e. the fp16/bf16 GEMM of
// the same shape, so that a run times the issue's "our fp16 cuBLAS time" in the same call.
// Verified on an H100 over every case (runs 273 and 277). Timed (H100 80GB HBM3, run 277, cold
// L2), int4 g128 k 4096 n 4096: 38.6 µs at m = 1, 0.46x dense_cublas (17.9 µs), and 45.0 µs at
// m = 256, 0.46x: slower than the dense GEMM it feeds, as expected.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <string>

#include "kernels/common/cublas.hpp"
#include "kernels/common/dispatch.cuh"
#include "kernels/common/storage.cuh"
#include "kernels/gemm_q/rungs.hpp"

namespace attnbench {
namespace {

constexpr int kThreads = 256;

// One thread a 32-bit word of codes: 8 int4 codes (k = 8i..8i+7, code at bits 4 (k % 8)) or 4
// int8 (byte k % 4). A word never straddles a row (k % 8 == 0) nor a group for group % 8 == 0;
// each code's group is taken on its own, so any group dividing k works.
template <class T, int kBits>
__global__ void dequantize_kernel(const uint8_t* __restrict__ w, const T* __restrict__ scales,
                                  const uint8_t* __restrict__ zeros, T* __restrict__ out, int64_t words, int k,
                                  int group, int groups) {
  constexpr int kCodes = 32 / kBits;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < words;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const uint32_t word = reinterpret_cast<const uint32_t*>(w)[i];
    const int64_t first = i * kCodes;  // element index in W [n, k]
    const int64_t row = first / k;
    const int col = static_cast<int>(first - row * k);
    T v[kCodes];
#pragma unroll
    for (int c = 0; c < kCodes; ++c) {
      const int g = (col + c) / group;
      const int zero = zeros ? zeros[row * groups + g] : 1 << (kBits - 1);
      const int code = static_cast<int>((word >> (kBits * c)) & ((1u << kBits) - 1));
      v[c] = from_float<T>(static_cast<float>(code - zero) * to_float(scales[row * groups + g]));
    }
    T* dst = out + first;
    if constexpr (kBits == 4)
      *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(v);  // 16 bytes: first % 8 == 0
    else
      *reinterpret_cast<uint2*>(dst) = *reinterpret_cast<const uint2*>(v);
  }
}

}  // namespace

std::size_t gemm_q_impl::dequant_cublas_workspace(const GemmQParams& p) {
  return static_cast<std::size_t>(p.n * p.k) * dtype_bytes(p.dtype);
}

void gemm_q_impl::dequant_cublas(const GemmQParams& p, const LaunchContext& ctx) {
  with_16bit(p.dtype, "gemm_q/dequant_cublas", [&](auto tag) {
    using T = decltype(tag);
    with_value<4, 8>(p.bits, "gemm_q/dequant_cublas", "bits", [&](auto bits) {
      constexpr int kBits = decltype(bits)::value;
      const int64_t words = p.n * p.k * kBits / 32;
      dequantize_kernel<T, kBits><<<grid_stride_blocks(words, kThreads), kThreads, 0, ctx.stream>>>(
          p.w, static_cast<const T*>(p.scales), p.zeros, static_cast<T*>(ctx.workspace), words,
          static_cast<int>(p.k), static_cast<int>(p.group), static_cast<int>(p.groups()));
      check_launch("gemm_q/dequant_cublas: dequantize");
    });
  });
  cublas_a_wt(ctx, p.a, p.k, ctx.workspace, p.c, cuda_data_type(p.dtype), p.m, p.n, p.k, p.dtype,
              "gemm_q/dequant_cublas");
}

std::string gemm_q_impl::dequant_cublas_supports(const GemmQParams& p, const DeviceCaps&) { return common_reason(p); }

void gemm_q_impl::dense_cublas(const GemmQParams& p, const LaunchContext& ctx) {
  if (!p.w_dense) throw std::invalid_argument("gemm_q/dense_cublas: the dense weights were not prepared");
  cublas_a_wt(ctx, p.a, p.k, p.w_dense, p.c, cuda_data_type(p.dtype), p.m, p.n, p.k, p.dtype, "gemm_q/dense_cublas");
}

std::string gemm_q_impl::dense_cublas_supports(const GemmQParams& p, const DeviceCaps&) { return common_reason(p); }

}  // namespace attnbench
