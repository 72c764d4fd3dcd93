// paged rung 1, v1: vLLM's PagedAttention v1, one block of 4 warps per (sequence, query head),
// the whole context in one pass. Warps take cache blocks in turn; in a warp, a thread group of
// 32 / block_size lanes takes one key and reads it in 16-byte chunks of the K layout (dot
// products reduced across the group by shuffles). Every logit goes to dynamic shared memory (4
// bytes per token of the longest context), the block's max and sum turn them into
// probabilities, then each warp sums p_t v_t over its cache blocks (lanes take 16-byte runs of
// tokens of one dim), and the warps add their rows through shared memory. Reads K and V once
// per query head (group times per byte under GQA) and refuses contexts whose logits do not fit
// the card's opt-in shared memory. The baseline: fine where batch x heads fills the card and
// contexts are short, hopeless on long contexts at small batch.
// H200, run 24: fp8 cache b8 ctx32768 3.146 ms, 171 GB/s (3.8% of the memory floor).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <string>

#include "kernels/common/dispatch.cuh"
#include "kernels/common/mask.cuh"
#include "kernels/common/reduce.cuh"
#include "kernels/common/softmax_math.cuh"
#include "kernels/common/storage.cuh"
#include "kernels/paged/rungs.hpp"
#include "kernels/paged/vllm.hpp"

namespace attnbench::paged_impl {
namespace {

// One block per (query head, sequence, partition): grid (heads, batch, partitions), logits of
// the partition's tokens in dynamic shared memory. kD: head_dim class (128 or 256, head_dim
// <= kD runs with the rest skipped); kBS: block size (8, 16, 32).
template <class T, class C, int kD, int kBS>
__global__ void __launch_bounds__(kVllmThreads) vllm_kernel(const Paged p) {
  extern __shared__ float logits[];  // [partition tokens], log2 units, then probabilities
  __shared__ float sq[kD];
  __shared__ float red[kVllmWarps];
  __shared__ float out_red[kVllmWarps][kD];
  const int h = static_cast<int>(blockIdx.x), b = static_cast<int>(blockIdx.y), part = static_cast<int>(blockIdx.z);
  const int ctx = p.context_lens[b];
  const int t0 = part * p.partition;
  if (t0 >= ctx) return;  // a partition past this sequence's context: the reduce skips it
  const int t1 = min(ctx, t0 + p.partition);
  // max_parts bounds it should a context exceed longest_context: never a write past the workspace.
  const int nparts = min(p.max_parts, (ctx + p.partition - 1) / p.partition);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int kvh = h / p.group;

  const T* q = static_cast<const T*>(p.q) + (int64_t{b} * p.heads + h) * p.head_dim;
  for (int d = threadIdx.x; d < kD; d += kVllmThreads) sq[d] = d < p.head_dim ? to_float(q[d]) : 0.f;
  __syncthreads();

  const int32_t* table = p.block_tables + int64_t{b} * p.max_blocks;
  const C* kc = static_cast<const C*>(p.k) + int64_t{kvh} * p.head_stride;
  const C* vc = static_cast<const C*>(p.v) + int64_t{kvh} * p.head_stride;
  const int blk_begin = t0 / kBS, blk_end = (t1 + kBS - 1) / kBS;
  const float slope = alibi_slope(p.score.alibi, p.score.slopes, h, kLog2e);
  const int pos = ctx - 1;

  // Q·K: a thread group of kTG lanes per key, each lane a 16-byte chunk (x dims) at a time.
  constexpr int kTG = 32 / kBS > 1 ? 32 / kBS : 1;
  constexpr int kX = 16 / static_cast<int>(sizeof(C));
  const int nch = p.head_dim / kX;
  const int tt = lane / kTG, gl = lane % kTG;  // token of the block, lane of the group
  float qk_max = -INFINITY;
  for (int bi = blk_begin + warp; bi < blk_end; bi += kVllmWarps) {
    const C* kb = kc + int64_t{table[bi]} * p.block_stride + tt * kX;
    const int token = bi * kBS + tt;
    float dot = 0.f;
    if (token < t1) {
#pragma unroll 2
      for (int c = gl; c < nch; c += kTG) {
        const uint4 raw = *reinterpret_cast<const uint4*>(kb + c * kBS * kX);
        const uint32_t wv[4] = {raw.x, raw.y, raw.z, raw.w};
        float kf[kX];
        to_floats<C, 4>(wv, kf);
#pragma unroll
        for (int e = 0; e < kX; ++e) dot = fmaf(sq[c * kX + e], kf[e], dot);
      }
    }
    dot = allreduce_sum<kTG>(dot);
    if (token < t1) {
      if (p.score.cap > 0.f) dot = p.score.cap * tanhf(dot * p.score.inv_cap);  // exact, as the rung below the fused one
      const float x = fmaf(dot, p.score_log2, slope * static_cast<float>(token - pos));
      if (gl == 0) logits[token - t0] = x;
      qk_max = fmaxf(qk_max, x);
    }
  }
  qk_max = block_reduce<true, kVllmWarps>(qk_max, red);  // finite: the partition holds a key

  float sum = 0.f;
  for (int i = threadIdx.x; i < t1 - t0; i += kVllmThreads) {
    const float e = exp2_approx(logits[i] - qk_max);
    logits[i] = e;
    sum += e;
  }
  sum = block_reduce<false, kVllmWarps>(sum, red);  // >= 1; its barriers publish the exps
  const float inv_sum = 1.f / sum;
  for (int i = threadIdx.x; i < t1 - t0; i += kVllmThreads) logits[i] *= inv_sum;
  __syncthreads();

  // P·V: lanes take kVV-token runs of one dim row of a cache block; kNV runs per row.
  constexpr int kVV = 16 / static_cast<int>(sizeof(C)) < kBS ? 16 / static_cast<int>(sizeof(C)) : kBS;
  constexpr int kNV = kBS / kVV;
  constexpr int kRowsPerIter = 32 / kNV;
  constexpr int kRows = (kD + kRowsPerIter - 1) / kRowsPerIter;
  constexpr int kVWords = kVV * static_cast<int>(sizeof(C)) / 4;
  const int vv = lane % kNV, r0 = lane / kNV;
  float acc[kRows] = {};
  for (int bi = blk_begin + warp; bi < blk_end; bi += kVllmWarps) {
    const int tok = bi * kBS + vv * kVV;
    float pv[kVV];
#pragma unroll
    for (int e = 0; e < kVV; ++e) pv[e] = tok + e < t1 ? logits[tok + e - t0] : 0.f;
    const C* vb = vc + int64_t{table[bi]} * p.block_stride + vv * kVV;
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      const int d = r0 + kRowsPerIter * i;
      if (d >= p.head_dim) continue;
      uint32_t wv[kVWords];
      if constexpr (kVWords == 4) {
        const uint4 raw = *reinterpret_cast<const uint4*>(vb + d * kBS);
        wv[0] = raw.x, wv[1] = raw.y, wv[2] = raw.z, wv[3] = raw.w;
      } else {
        const uint2 raw = *reinterpret_cast<const uint2*>(vb + d * kBS);
        wv[0] = raw.x, wv[1] = raw.y;
      }
      float vf[kVV];
      to_floats<C, kVWords>(wv, vf);
      // Tokens past the partition hold NaN or another partition's keys: 0 * NaN is NaN, so
      // they are zeroed, not only weighted by p = 0.
#pragma unroll
      for (int e = 0; e < kVV; ++e) acc[i] = fmaf(pv[e], tok + e < t1 ? vf[e] : 0.f, acc[i]);
    }
  }
#pragma unroll
  for (int i = 0; i < kRows; ++i) {
    acc[i] = allreduce_sum<kNV>(acc[i]);
  }
  if (vv == 0) {
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      const int d = r0 + kRowsPerIter * i;
      if (d < kD) out_red[warp][d] = acc[i];
    }
  }
  __syncthreads();
  const int64_t bh = int64_t{b} * p.heads + h;
  for (int d = threadIdx.x; d < p.head_dim; d += kVllmThreads) {
    float out = 0.f;
#pragma unroll
    for (int w = 0; w < kVllmWarps; ++w) out += out_red[w][d];
    out *= p.v_scale;
    if (nparts == 1)
      static_cast<T*>(p.o)[bh * p.head_dim + d] = from_float<T>(out);
    else
      p.tmp_out[(bh * p.max_parts + part) * p.head_dim + d] = out;
  }
  if (nparts > 1 && threadIdx.x == 0) {
    p.max_logits[bh * p.max_parts + part] = qk_max;
    p.exp_sums[bh * p.max_parts + part] = sum;
  }
}

// Raises the kernel's dynamic shared memory limit once per size it has not been allowed yet.
template <class Kernel>
void allow_smem(Kernel kernel, int64_t bytes, int64_t& allowed, const char* name) {
  if (bytes <= 48 * 1024 || bytes <= allowed) return;
  check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)), name);
  allowed = bytes;
}

template <class T, class C, int kD, int kBS>
void launch_vllm_kernel(const PagedParams& p, const Paged& d, int64_t parts, const LaunchContext& ctx, const char* name) {
  const int64_t smem = int64_t{d.partition} * 4;
  static int64_t allowed = 0;
  auto kernel = vllm_kernel<T, C, kD, kBS>;
  allow_smem(kernel, smem, allowed, name);
  kernel<<<dim3(static_cast<unsigned>(p.heads), static_cast<unsigned>(p.batch), static_cast<unsigned>(parts)),
           kVllmThreads, static_cast<size_t>(smem), ctx.stream>>>(d);
  check_launch(name);
}

}  // namespace

void launch_vllm(const PagedParams& p, const Paged& d, int64_t parts, const LaunchContext& ctx, const char* name) {
  with_types(p.dtype, p.kv_dtype, name, [&](auto t, auto c) {
    using T = decltype(t);
    using C = decltype(c);
    with_head_dim_class<128, 256>(p.head_dim, [&](auto dim) {
      constexpr int kD = decltype(dim)::value;
      switch (p.block_size) {
        case 8:
          return launch_vllm_kernel<T, C, kD, 8>(p, d, parts, ctx, name);
        case 16:
          return launch_vllm_kernel<T, C, kD, 16>(p, d, parts, ctx, name);
        default:
          return launch_vllm_kernel<T, C, kD, 32>(p, d, parts, ctx, name);
      }
    });
  });
}

void v1(const PagedParams& p, const LaunchContext& ctx) {
  Paged d = make_paged(p);
  d.partition = static_cast<int>(v1_tokens(p));
  launch_vllm(p, d, 1, ctx, "paged/v1");
}

std::string v1_supports(const PagedParams& p, const DeviceCaps& caps) {
  std::string r = vllm_reason(p, caps);
  if (!r.empty()) return r;
  return smem_reason(p, caps, v1_tokens(p), "the longest context");
}

}  // namespace attnbench::paged_impl
