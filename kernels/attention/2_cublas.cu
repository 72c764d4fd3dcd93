// attention rung 2, cublas: the same unfused path as a framework without fused attention runs
// it: S = Q Kᵀ and O = P V with cublasGemmBatchedEx over pointer arrays built on the device (so
// GQA maps heads without copying and the batch strides need not be uniform); 16-bit inputs
// with fp32 scores, true fp32 for fp32, and the softmax family's warp_online between. Scores
// stay fp32 until the max is subtracted (an fp16 score could overflow); P is rounded to the
// storage type for the second GEMM, as frameworks do. The GEMMs are fast; the S and P round
// trips through memory are what is left.
// H200, run 6: bf16 b4 s4096 d128 10.67 ms, 51.5 TFLOP/s (57x rung 1); fp32 b8 s1024 d64
// 18.2 TFLOP/s.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>
#include <string>
#include <type_traits>

#include "kernels/attention/rungs.hpp"
#include "kernels/attention/unfused.hpp"
#include "kernels/common/dispatch.cuh"
#include "kernels/common/storage.cuh"

namespace attnbench::attention_impl {
namespace {

// The operand arrays of cublas's two batched GEMMs, batch·heads entries each.
struct GemmPointers {
  const void** k;  // S = Q Kᵀ
  const void** q;
  void** s;
  const void** v;  // O = P V
  const void** p;
  void** o;
};

// One (batch, head) per thread. The head -> kv head map (GQA) and the batch strides go
// into the pointers, so no operand is copied. p: P in the storage type, [bh, seq_q, ld].
template <class T>
__global__ void gemm_pointers_kernel(const T* q, const T* k, const T* v, T* o, float* s, const T* p, const Shape sh,
                                     int64_t ld, GemmPointers ptr) {
  const int64_t bh = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (bh >= sh.batch_heads) return;
  const int64_t b = bh / sh.heads, h = bh % sh.heads;
  const int64_t kv = b * sh.kv_batch_stride + (h / sh.group) * sh.head_dim;
  ptr.k[bh] = k + kv;
  ptr.q[bh] = q + b * sh.q_batch_stride + h * sh.head_dim;
  ptr.s[bh] = s + bh * sh.seq_q * ld;
  ptr.v[bh] = v + kv;
  ptr.p[bh] = p + bh * sh.seq_q * ld;
  ptr.o[bh] = o + b * sh.o_batch_stride + h * sh.head_dim;
}

// out = p rounded to T, 4 elements per thread (the element count is a multiple of 4:
// ld is a multiple of 8).
template <class T>
__global__ void to_storage_kernel(const float4* __restrict__ p, T* __restrict__ out, int64_t n4) {
  const int64_t idx = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (idx >= n4) return;
  const float4 x = p[idx];
  out[4 * idx + 0] = from_float<T>(x.x);
  out[4 * idx + 1] = from_float<T>(x.y);
  out[4 * idx + 2] = from_float<T>(x.z);
  out[4 * idx + 3] = from_float<T>(x.w);
}

template <class T>
constexpr cudaDataType_t cuda_type() {
  if constexpr (std::is_same_v<T, float>) return CUDA_R_32F;
  if constexpr (std::is_same_v<T, __half>) return CUDA_R_16F;
  return CUDA_R_16BF;
}

}  // namespace

void cublas(const AttentionParams& p, const LaunchContext& ctx) {
  const Shape sh = make_shape(p);
  const UnfusedLayout w = unfused_layout(p, true);
  char* ws = static_cast<char*>(ctx.workspace);
  float* s = reinterpret_cast<float*>(ws);
  float* prob = reinterpret_cast<float*>(ws + w.matrix_bytes);
  const void** arrays = reinterpret_cast<const void**>(ws + 2 * w.matrix_bytes);
  const int64_t n = sh.batch_heads;
  const GemmPointers ptr{arrays,
                         arrays + n,
                         const_cast<void**>(arrays + 2 * n),
                         arrays + 3 * n,
                         arrays + 4 * n,
                         const_cast<void**>(arrays + 5 * n)};
  const int batch = static_cast<int>(n);
  const int seq_q = static_cast<int>(p.seq_q), seq_k = static_cast<int>(p.seq_k), d = static_cast<int>(p.head_dim);
  const int ld = static_cast<int>(w.ld), ldq = static_cast<int>(sh.q_row_stride),
            ldkv = static_cast<int>(sh.kv_row_stride);

  // Default math: fp32 stays fp32 (TF32 only under CUBLAS_TF32_TENSOR_OP_MATH) while
  // fp16/bf16 get tensor cores. Pointer mode host: alpha and beta live here.
  check_cublas(cublasSetMathMode(ctx.cublas, CUBLAS_DEFAULT_MATH), "attention/cublas: cublasSetMathMode");
  check_cublas(cublasSetPointerMode(ctx.cublas, CUBLAS_POINTER_MODE_HOST), "attention/cublas: cublasSetPointerMode");
  const float one = 1.f, zero = 0.f;

  with_storage(p.dtype, "attention/cublas", [&](auto tag) {
    using T = decltype(tag);
    constexpr cudaDataType_t type = cuda_type<T>();
    constexpr bool kFp32 = std::is_same_v<T, float>;
    // P as the second GEMM reads it: the softmax output itself for fp32, else its 16-bit
    // copy, written over S (dead once the softmax has read it).
    const T* p_op = kFp32 ? reinterpret_cast<const T*>(prob) : reinterpret_cast<const T*>(s);
    gemm_pointers_kernel<T><<<elementwise_blocks(n), kElementwiseThreads, 0, ctx.stream>>>(
        static_cast<const T*>(p.q), static_cast<const T*>(p.k), static_cast<const T*>(p.v), static_cast<T*>(p.o), s,
        p_op, sh, w.ld, ptr);
    check_launch("attention/cublas");

    // cuBLAS is column-major; a row-major X [r, c] with row stride ld is the column-major
    // Xᵀ [c, r]. S [seq_q, seq_k] as Sᵀ = K Qᵀ: A = K seen as Kᵀ [d, seq_k] (op T),
    // B = Q seen as Qᵀ [d, seq_q], C = Sᵀ [seq_k, seq_q] with ld.
    check_cublas(cublasGemmBatchedEx(ctx.cublas, CUBLAS_OP_T, CUBLAS_OP_N, seq_k, seq_q, d, &one, ptr.k, type, ldkv,
                                     ptr.q, type, ldq, &zero, ptr.s, CUDA_R_32F, ld, batch, CUBLAS_COMPUTE_32F,
                                     CUBLAS_GEMM_DEFAULT),
                 "attention/cublas: S = Q K^T");
    launch_scale_and_mask(s, sh, w.ld, p.sparse, ctx.stream);
    check_launch("attention/cublas");
    softmax_variant("warp_online").launch(softmax_params(p, s, prob, w.ld), ctx);
    if constexpr (!kFp32) {
      const int64_t n4 = n * seq_q * w.ld / 4;
      to_storage_kernel<T><<<elementwise_blocks(n4), kElementwiseThreads, 0, ctx.stream>>>(
          reinterpret_cast<const float4*>(prob), reinterpret_cast<T*>(s), n4);
      check_launch("attention/cublas");
    }
    // O [seq_q, d] as Oᵀ = Vᵀ Pᵀ: A = V seen as Vᵀ [d, seq_k], B = P seen as Pᵀ
    // [seq_k, seq_q] with ld (its padding columns are never read: k = seq_k), C = Oᵀ.
    check_cublas(cublasGemmBatchedEx(ctx.cublas, CUBLAS_OP_N, CUBLAS_OP_N, d, seq_q, seq_k, &one, ptr.v, type, ldkv,
                                     ptr.p, type, ld, &zero, ptr.o, type, ldq, batch, CUBLAS_COMPUTE_32F,
                                     CUBLAS_GEMM_DEFAULT),
                 "attention/cublas: O = P V");
  });
}

std::size_t cublas_workspace(const AttentionParams& p) { return unfused_layout(p, true).total(); }

std::string cublas_supports(const AttentionParams& p, const DeviceCaps& caps) {
  if (p.dtype == DType::fp8_e4m3) return "fp32, fp16 and bf16 (fp8: naive and flash_ws)";
  std::string r = unfused_reason(p, caps, true);
  if (!r.empty()) return r;
  r = alignment_reason(p);
  if (!r.empty()) return r;
  if (p.heads * p.head_dim > INT_MAX) return "heads * head_dim must fit in int (a cuBLAS leading dimension)";
  return {};
}

}  // namespace attnbench::attention_impl
