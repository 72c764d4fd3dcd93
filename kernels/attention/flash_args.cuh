// What attention's tensor-core rungs (4_flash_mma.cu, 5_flash_wgmma.cu, 6_flash_ws.cu) share: the kernel
// arguments flattened from AttentionParams (Args, make_args), which path a problem takes
// (is_masked), and the launch over batch chunks.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "kernels/attention/attention.hpp"
#include "kernels/common/mask.cuh"

namespace attnbench::attention_impl {

// What the kernel reads, flattened from AttentionParams on the host (kernel parameters live
// in the constant bank: no registers spent on them).
struct Args {
  const void* q;  // [batch, seq_q, heads, head_dim]
  const void* k;  // [batch, seq_k, kv_heads, head_dim], batch stride kv_batch_stride
  const void* v;  // same as k
  void* o;        // [batch, seq_q, heads, head_dim]
  int64_t q_batch_stride, kv_batch_stride, o_batch_stride;  // elements
  int64_t q_row_stride, kv_row_stride;                      // heads * head_dim, kv_heads * head_dim
  // kv head of query head h: h / (heads / kv_heads) = (h * group_rcp) >> 32 with group_rcp =
  // ceil(2^32 / group), exact while h * group <= 2^32 (heads <= 65535): a multiply instead
  // of a division sequence.
  uint64_t group_rcp;
  int batch_offset;  // first batch of this launch (batches go in chunks of gridDim.z <= 65535)
  int seq_q, seq_k, head_dim;
  // Causal and window as reaches (key_reach, mask.cuh): a query at position pos sees keys
  // [pos - lo_reach, pos + hi_reach] within [0, seq_k).
  int lo_reach, hi_reach;
  int q_offset;  // query i sits at key position i + q_offset (AttentionParams::q_offset)
  ScoreArgs score;             // in raw score units
  float alibi_scale;           // 1 / scale: the bias is added to raw scores, before the scale
  float scale_log2;            // scale * log2(e) (fp8: times descale_q · descale_k)
  float inv_scale_log2;        // 1 / scale_log2: the lazy threshold in raw score units
  RopeTable rope;              // fused RoPE (the ROPE kernels only)
  BlockSparse sparse;          // the live key blocks of each query block (the SPARSE kernels only)
  float descale_v;             // fp8: the output's factor (last: the other fields keep their offsets)
};

// Causal, window or a score option (ALiBi, soft-capping): the kernel's MASKED path, and the tiles of
// Tiles::masked (the plain path stays free of their per-score work).
inline bool is_masked(const AttentionParams& p) {
  return p.sparse.on() || p.causal || effective_window(p.window, p.seq_q, p.seq_k) > 0 || score_has_terms(p.score);
}

// The kernel arguments of p.
inline Args make_args(const AttentionParams& p) {
  Args a;
  a.q = p.q;
  a.k = p.k;
  a.v = p.v;
  a.o = p.o;
  a.q_batch_stride = p.q_batch_stride;
  a.kv_batch_stride = p.kv_batch_stride;
  a.o_batch_stride = p.o_batch_stride;
  a.q_row_stride = p.heads * p.head_dim;
  a.kv_row_stride = p.kv_heads * p.head_dim;
  a.group_rcp = ((uint64_t{1} << 32) + static_cast<uint64_t>(p.heads / p.kv_heads) - 1) /
                static_cast<uint64_t>(p.heads / p.kv_heads);
  a.seq_q = static_cast<int>(p.seq_q);
  a.seq_k = static_cast<int>(p.seq_k);
  a.head_dim = static_cast<int>(p.head_dim);
  const Reach reach = key_reach(p.causal, p.window, p.seq_q, p.seq_k);
  a.lo_reach = reach.lo;
  a.hi_reach = reach.hi;
  a.q_offset = static_cast<int>(p.q_offset);
  a.score = score_args(p.score, p.score.scale);
  a.alibi_scale = p.score.alibi ? 1.f / p.score.scale : 0.f;
  a.scale_log2 = p.score.scale_log2;
  a.descale_v = p.descale_v;
  a.inv_scale_log2 = 1.f / p.score.scale_log2;
  a.rope = p.rope;
  a.sparse = p.sparse;
  a.batch_offset = 0;
  return a;
}

// What RoPE in a tensor-core rung's Q load needs (flash_mma, flash_ws): the keys turned into a
// dense copy, and whole 16-byte chunks of a row to turn, a chunk with its partner for neox.
inline std::string rope_in_q_load_supports(const AttentionParams& p) {
  if (p.kv_batch_stride != p.seq_k * p.kv_heads * p.head_dim)
    return "RoPE turns K into a dense copy: k must be dense (batch stride seq_k * kv_heads * head_dim)";
  if (p.rope.style == RopeTable::neox && p.rope.rotary_dim % 16 != 0)
    return "neox RoPE in the Q load turns whole 16-byte chunks with their partners: rotary_dim must be a multiple of "
           "16";
  if (p.rope.style == RopeTable::gptj && p.rope.rotary_dim % 8 != 0)
    return "gptj RoPE in the Q load turns whole 16-byte chunks: rotary_dim must be a multiple of 8";
  return {};
}

// Grid (row blocks of `rows` query rows, heads, batches). gridDim.y (heads) and gridDim.z
// (batches) stop at 65535: supports() bounds heads, and larger batches go in several launches.
template <class Kernel>
void launch_per_batch_chunk(const AttentionParams& p, Kernel kernel, Args a, int rows, int threads, int smem,
                            const LaunchContext& ctx, const char* name) {
  const int64_t m_blocks = ceil_div(p.seq_q, rows);
  for (int64_t b0 = 0; b0 < p.batch; b0 += kMaxGridYZ) {
    a.batch_offset = static_cast<int>(b0);
    const dim3 grid(static_cast<unsigned>(m_blocks), static_cast<unsigned>(p.heads),
                    static_cast<unsigned>(std::min(kMaxGridYZ, p.batch - b0)));
    kernel<<<grid, threads, smem, ctx.stream>>>(a);
    check_launch(name);
  }
}

}  // namespace attnbench::attention_impl
