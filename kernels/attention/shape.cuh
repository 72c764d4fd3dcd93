// What attention's SIMT rungs (1_naive.cu, 2_cublas.cu, 3_flash_fp32.cu) share: the shape and
// mask parameters their kernels take (Shape), the mask rule, and the checks of
// AttentionParams.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <string>

#include "kernels/attention/attention.hpp"

namespace attnbench::attention_impl {

// Sequence lengths stay below this so that positions, windows and their sums fit in int.
constexpr int64_t kMaxSeq = int64_t{1} << 29;

// What the kernels read, derived once on the host from AttentionParams.
struct Shape {
  int64_t q_batch_stride, kv_batch_stride, o_batch_stride;  // elements
  int64_t q_row_stride, kv_row_stride;                      // heads·head_dim, kv_heads·head_dim
  int64_t batch_heads;
  int heads, group;  // group: query heads per kv head; query head h reads kv head h / group
  int seq_q, seq_k, head_dim;
  int offset;  // query i sits at key position i + offset (AttentionParams::q_offset)
  int window;  // 0 = none; capped at seq_q + seq_k, a distance no pair reaches
  bool causal;
  ScoreArgs score;  // in score units (scale · q·k)
  float scale, scale_log2;
  const float* sinks;  // [heads] attention sinks in score units, or null (the unfused rungs' last column of S)
};

inline Shape make_shape(const AttentionParams& p) {
  Shape s;
  s.q_batch_stride = p.q_batch_stride;
  s.kv_batch_stride = p.kv_batch_stride;
  s.o_batch_stride = p.o_batch_stride;
  s.q_row_stride = p.heads * p.head_dim;
  s.kv_row_stride = p.kv_heads * p.head_dim;
  s.batch_heads = p.batch * p.heads;
  s.heads = static_cast<int>(p.heads);
  s.group = static_cast<int>(p.heads / p.kv_heads);
  s.seq_q = static_cast<int>(p.seq_q);
  s.seq_k = static_cast<int>(p.seq_k);
  s.head_dim = static_cast<int>(p.head_dim);
  s.offset = static_cast<int>(p.q_offset);
  s.window = static_cast<int>(std::min(p.window, p.seq_q + p.seq_k));
  s.causal = p.causal;
  s.score = score_args(p.score, 1.f);
  s.scale = p.score.scale * p.descale_q * p.descale_k;
  s.scale_log2 = p.score.scale_log2;
  s.sinks = p.score.sinks ? p.score.sink_logits : nullptr;
  return s;
}

// Whether the query at key position `pos` sees key j (j < seq_k is the caller's to check).
// Bitwise & and |, not && and ||: per-score code stays free of branches.
__host__ __device__ __forceinline__ bool visible(const Shape& s, int pos, int j) {
  return (!s.causal | (j <= pos)) & ((s.window == 0) | (abs(pos - j) < s.window));
}

// Block-sparse: whether query i of head h sees key j's block.
__host__ __device__ __forceinline__ bool block_live(const BlockSparse& sp, int h, int i, int j) {
  return sp.live[(static_cast<int64_t>(h) * sp.q_blocks + i / sp.block) * sp.k_blocks + j / sp.block] != 0;
}

// What no variant can run; empty when AttentionParams is within its documented semantics.
inline std::string common_reason(const AttentionParams& p) {
  if (p.dtype != DType::fp32 && p.dtype != DType::fp16 && p.dtype != DType::bf16 && p.dtype != DType::fp8_e4m3)
    return std::string("dtype ") + dtype_name(p.dtype) + " is not an attention storage type (fp32, fp16, bf16, fp8_e4m3)";
  if (!(p.descale_q > 0) || !(p.descale_k > 0) || !(p.descale_v > 0) || !std::isfinite(p.descale_q) ||
      !std::isfinite(p.descale_k) || !std::isfinite(p.descale_v))
    return "descale_q, descale_k and descale_v must be finite numbers > 0";
  if (p.batch < 1 || p.heads < 1 || p.kv_heads < 1 || p.seq_q < 1 || p.seq_k < 1)
    return "batch, heads, kv_heads, seq_q and seq_k must be >= 1";
  if (p.heads % p.kv_heads != 0) return "heads must be a multiple of kv_heads";
  if (p.head_dim < 8 || p.head_dim > 256 || p.head_dim % 8 != 0) return "head_dim must be a multiple of 8, at most 256";
  if (p.window < 0) return "window must be >= 0";
  if (const std::string r = score_reason(p.score); !r.empty()) return r;
  if (p.seq_q >= kMaxSeq || p.seq_k >= kMaxSeq) return "seq_q and seq_k must be < 2^29";
  if (p.heads > INT_MAX || p.batch * p.heads > INT_MAX) return "batch * heads must be < 2^31";
  return {};
}

// Inputs and output start on 16-byte boundaries in every batch (16-byte vector loads,
// cp.async, cuBLAS's tensor-core paths). Null pointers are not checked: supports() may
// be asked before allocation.
inline std::string alignment_reason(const AttentionParams& p) {
  const int64_t e = static_cast<int64_t>(dtype_bytes(p.dtype));
  for (const void* ptr : {p.q, p.k, p.v, static_cast<const void*>(p.o)})
    if (ptr && !aligned16(ptr)) return "q, k, v and o must be 16-byte aligned";
  if ((p.q_batch_stride * e) % 16 || (p.kv_batch_stride * e) % 16 || (p.o_batch_stride * e) % 16)
    return "batch strides must be multiples of 16 bytes";
  return {};
}

}  // namespace attnbench::attention_impl
