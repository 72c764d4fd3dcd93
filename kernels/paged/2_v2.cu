// paged rung 2, v2: vLLM's PagedAttention v2, rung 1's kernel over partitions of
// partition_size tokens (a multiple of block_size), one block per (sequence, head, partition):
// each writes its max logit, its exp sum and its normalised fp32 output to the workspace, and a
// reduce kernel merges the partitions with the stable formula o = sum_p e_p exp2(m_p - M) o_p /
// sum_p e_p exp2(m_p - M). A sequence of one partition writes o directly and the reduce skips
// it, as vLLM's does. Fills the card at small batch where rung 1 cannot; still one read per
// query head, which caps it near 1.5 TB/s under GQA 4:1.
// H200, run 24: fp8 cache b8 ctx32768 0.4831 ms, 1112 GB/s, 6.5x rung 1; run 36: bf16 b8
// ctx32768 ~0.71 ms.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <string>

#include "kernels/common/dispatch.cuh"
#include "kernels/common/reduce.cuh"
#include "kernels/common/softmax_math.cuh"
#include "kernels/common/storage.cuh"
#include "kernels/paged/rungs.hpp"
#include "kernels/paged/vllm.hpp"

namespace attnbench::paged_impl {
namespace {

// v2's reduce: block (head, sequence) merges the partitions of a sequence that has several:
// M = max m_p, w_p = e_p exp2(m_p - M), o = sum_p w_p o_p / sum_p w_p. Each thread recomputes
// the weights it needs from the (L1-resident) statistics rather than staging them in shared
// memory: a few dozen partitions cost a few dozen exp2 per output element.
template <class T>
__global__ void __launch_bounds__(kVllmThreads) vllm_reduce_kernel(const Paged p) {
  __shared__ float red[kVllmWarps];
  const int h = static_cast<int>(blockIdx.x), b = static_cast<int>(blockIdx.y);
  const int ctx = p.context_lens[b];
  const int n = min(p.max_parts, (ctx + p.partition - 1) / p.partition);
  if (n <= 1) return;  // the main kernel wrote o
  const int64_t bh = int64_t{b} * p.heads + h;
  const float* ml = p.max_logits + bh * p.max_parts;
  const float* es = p.exp_sums + bh * p.max_parts;
  float mx = -INFINITY;
  for (int i = threadIdx.x; i < n; i += kVllmThreads) mx = fmaxf(mx, ml[i]);
  mx = block_reduce<true, kVllmWarps>(mx, red);
  float total = 0.f;
  for (int i = threadIdx.x; i < n; i += kVllmThreads) total += es[i] * exp2_approx(ml[i] - mx);
  total = block_reduce<false, kVllmWarps>(total, red);
  const float inv = 1.f / total;
  const float* po = p.tmp_out + bh * p.max_parts * p.head_dim;
  for (int d = threadIdx.x; d < p.head_dim; d += kVllmThreads) {
    float acc = 0.f;
    for (int i = 0; i < n; ++i) acc = fmaf(es[i] * exp2_approx(ml[i] - mx), po[int64_t{i} * p.head_dim + d], acc);
    static_cast<T*>(p.o)[bh * p.head_dim + d] = from_float<T>(acc * inv);
  }
}

}  // namespace

void v2(const PagedParams& p, const LaunchContext& ctx) {
  const char* name = "paged/v2";
  Paged d = make_paged(p);
  d.partition = static_cast<int>(p.partition_size);
  const int64_t parts = v2_parts(p);
  d.max_parts = static_cast<int>(parts);
  if (parts > 1) {
    char* ws = static_cast<char*>(ctx.workspace);
    const int64_t rows = p.batch * p.heads * parts;
    d.tmp_out = reinterpret_cast<float*>(ws);
    d.max_logits = reinterpret_cast<float*>(ws + ceil_div(rows * p.head_dim * 4, 256) * 256);
    d.exp_sums = d.max_logits + rows;
  }
  launch_vllm(p, d, parts, ctx, name);
  if (parts == 1) return;
  with_storage(p.dtype, name, [&](auto tag) {
    using T = decltype(tag);
    vllm_reduce_kernel<T><<<dim3(static_cast<unsigned>(p.heads), static_cast<unsigned>(p.batch)), kVllmThreads, 0,
                            ctx.stream>>>(d);
  });
  check_launch(name);
}

std::string v2_supports(const PagedParams& p, const DeviceCaps& caps) {
  std::string r = vllm_reason(p, caps);
  if (!r.empty()) return r;
  if (p.partition_size < p.block_size || p.partition_size % p.block_size != 0)
    return "partition_size must be a positive multiple of block_size";
  if (p.partition_size >= kMaxContext) return "partition_size must be < 2^30";
  if (v2_parts(p) > 65535) return "more than 65535 partitions (gridDim.z)";
  if (v2_parts(p) * 4 > 48 * 1024) return "more than 12288 partitions (the reduce's shared memory)";
  return smem_reason(p, caps, p.partition_size, "a partition");
}

std::size_t v2_workspace(const PagedParams& p) {
  if (p.partition_size <= 0 || p.block_size <= 0) return 0;
  const int64_t parts = v2_parts(p);
  if (parts <= 1) return 0;
  const int64_t rows = p.batch * p.heads * parts;
  return static_cast<std::size_t>(ceil_div(rows * p.head_dim * 4, 256) * 256 + rows * 8);
}

}  // namespace attnbench::paged_impl
