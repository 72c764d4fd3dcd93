// ragged rung 1, naive: the learner's kernel for a serving engine's mixed batch, one block of 128
// threads per (query token, query head), everything in fp32. The block first finds its sequence
// (a binary search of cu_seqlens_q: tokens of one sequence are consecutive), so a decode, a
// 4-token speculative verification and a 2k-token chunked prefill are the same code: a query at
// position context - query_len + t that sees keys [0, position] (bottom-right causal) or its
// last `window` of them. Keys are found through the sequence's block table one at a time, in
// the flash layout [block, token, kv head, dim], so any block size works. Two passes over K:
// one thread per key computes its score (its own K row, uncoalesced) for the max, then again
// in chunks of 128 keys whose exp(s - max) go to shared memory beside each key's slot, where
// one thread per dim sums p·v (coalesced along the dims). Recomputing scores costs a second
// read of K; it buys no score workspace at all, which for one 2k-token chunk over 8k keys and
// 32 heads would be 2 GB. An attention sink joins the max and the denominator without a value;
// soft-capping is exact (tanhf), ALiBi is -slope·(position - key), fp8 codes are scaled by
// k_scale in the score and v_scale at the end, and RoPE turns the staged query at its position.
// K and V are read once per query head and per query token: a prefill chunk of n tokens reads
// its context n·group times. The baseline every later rung is verified beside.
// H100, run 267: the serving mix 263 ms, all-decode (44 decodes to 8k keys) 5.03 ms, all-prefill 10.2 ms.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <climits>
#include <cmath>
#include <cstdint>
#include <string>

#include "kernels/common/dispatch.cuh"
#include "kernels/common/mask.cuh"
#include "kernels/common/reduce.cuh"
#include "kernels/common/rope.cuh"
#include "kernels/common/storage.cuh"
#include "kernels/ragged/rungs.hpp"
#include "kernels/ragged/sequence.cuh"

namespace attnbench::ragged_impl {
namespace {

constexpr int kThreads = 128;
constexpr int kMaxDim = 256;
constexpr int kDimsPerThread = kMaxDim / kThreads;

// The element offset of key j's kv head in the flash-layout cache of a sequence whose table
// row is `table`: block table[j / block_size], token j % block_size.
__device__ __forceinline__ int64_t key_offset(const RaggedParams& p, const int32_t* table, int j, int kvh) {
  const int bs = static_cast<int>(p.block_size);
  return ((int64_t{table[j / bs]} * bs + j % bs) * p.kv_heads + kvh) * p.head_dim;
}

// T: q and o; C: the cache (T, or Fp8 codes).
template <class T, class C>
__global__ void __launch_bounds__(kThreads) naive_kernel(const RaggedParams p) {
  __shared__ float sq[kMaxDim];
  __shared__ float sp[kThreads];    // a chunk's exp(s - max)
  __shared__ int64_t sk[kThreads];  // and each of its keys' offsets in V
  __shared__ float red[kThreads / 32];
  const int row = static_cast<int>(blockIdx.x);  // t · heads + h, o's row
  const int heads = static_cast<int>(p.heads), head_dim = static_cast<int>(p.head_dim);
  const int t = row / heads, h = row % heads, kvh = h / (heads / static_cast<int>(p.kv_heads));
  const int tid = static_cast<int>(threadIdx.x);

  // The sequence of token t: the last b with cu_seqlens_q[b] <= t.
  const int b = last_at_most(static_cast<int>(p.batch), t, [&p](int i) { return p.cu_seqlens_q[i]; });
  const int first_q = p.cu_seqlens_q[b], query_len = p.cu_seqlens_q[b + 1] - first_q;
  const int pos = p.context_lens[b] - query_len + (t - first_q);  // bottom-right: the last query sees the last key
  const int lo = p.window > 0 ? max(0, pos - static_cast<int>(p.window) + 1) : 0;  // keys [lo, pos]
  const int32_t* table = p.block_tables + int64_t{b} * p.max_blocks_per_seq;
  const C* kc = static_cast<const C*>(p.k_cache);
  const C* vc = static_cast<const C*>(p.v_cache);

  const T* q = static_cast<const T*>(p.q) + int64_t{row} * head_dim;
  for (int d = tid; d < head_dim; d += kThreads) sq[d] = to_float(q[d]);
  __syncthreads();
  if (p.rope.on()) {  // the query at its own position
    rope_shared_floats(sq, pos, p.rope, tid, kThreads);
    __syncthreads();
  }

  // s = scale · q·k (k = code · k_scale), soft-capped, minus ALiBi's slope · distance.
  const float unit = p.score.scale * p.k_scale, softcap = p.score.softcap;
  const float inv_softcap = softcap > 0.f ? 1.f / softcap : 0.f;  // a multiply a score (a division's slow path spilled)
  const float slope = alibi_slope(p.score.alibi, p.score.alibi_slopes, h, 1.f);
  const auto score = [&](int j, int64_t at) {
    float dot = 0.f;
    for (int d = 0; d < head_dim; ++d) dot = fmaf(sq[d], to_float(kc[at + d]), dot);
    float s = dot * unit;
    if (softcap > 0.f) s = softcap * tanhf(s * inv_softcap);
    return s - slope * static_cast<float>(pos - j);
  };

  // Pass 1: the max, a sink's logit among the scores.
  float m = -INFINITY;
  for (int j = lo + tid; j <= pos; j += kThreads) m = fmaxf(m, score(j, key_offset(p, table, j, kvh)));
  m = block_reduce<true, kThreads / 32>(m, red);  // finite: the query sees itself
  const float sink = p.score.sinks ? p.score.sink_logits[h] : -INFINITY;
  m = fmaxf(m, sink);

  // Pass 2: chunks of kThreads keys, each thread one key's p, then one thread per dim sums p·v.
  float acc[kDimsPerThread] = {};
  float l = 0.f;
  for (int j0 = lo; j0 <= pos; j0 += kThreads) {
    const int j = j0 + tid;
    if (j <= pos) {
      const int64_t at = key_offset(p, table, j, kvh);
      const float e = expf(score(j, at) - m);
      sp[tid] = e;
      sk[tid] = at;
      l += e;
    }
    __syncthreads();
    const int n = min(kThreads, pos - j0 + 1);  // keys past the position are never read: they may be NaN
#pragma unroll
    for (int i = 0; i < kDimsPerThread; ++i) {
      const int d = tid + i * kThreads;
      if (d >= head_dim) break;
      for (int u = 0; u < n; ++u) acc[i] = fmaf(sp[u], to_float(vc[sk[u] + d]), acc[i]);
    }
    __syncthreads();  // the chunk is read before the next overwrites it
  }
  l = block_reduce<false, kThreads / 32>(l, red);
  l += expf(sink - m);  // 0 without a sink

  T* o = static_cast<T*>(p.o) + int64_t{row} * head_dim;
  const float out_scale = p.v_scale / l;
#pragma unroll
  for (int i = 0; i < kDimsPerThread; ++i) {
    const int d = tid + i * kThreads;
    if (d < head_dim) o[d] = from_float<T>(acc[i] * out_scale);
  }
}

}  // namespace

void naive(const RaggedParams& p, const LaunchContext& ctx) {
  with_types(p.dtype, p.kv_dtype, "ragged/naive", [&](auto t, auto c) {
    naive_kernel<decltype(t), decltype(c)>
        <<<static_cast<unsigned>(p.total_queries * p.heads), kThreads, 0, ctx.stream>>>(p);
  });
  check_launch("ragged/naive");
}

std::string common_reason(const RaggedParams& p) {
  if (p.dtype != DType::fp32 && p.dtype != DType::fp16 && p.dtype != DType::bf16)
    return std::string("dtype ") + dtype_name(p.dtype) + " is not a query/output type (fp32, fp16, bf16)";
  if (p.kv_dtype != p.dtype && p.kv_dtype != DType::fp8_e4m3)
    return std::string("kv_dtype ") + dtype_name(p.kv_dtype) + " must be the query's dtype or fp8_e4m3";
  if (p.batch < 1 || p.total_queries < p.batch || p.heads < 1 || p.kv_heads < 1)
    return "batch, heads and kv_heads must be >= 1, with at least one query a sequence";
  if (p.heads % p.kv_heads != 0) return "heads must be a multiple of kv_heads";
  if (p.head_dim < 1 || p.head_dim > kMaxDim) return "head_dim must be in [1, 256]";
  if (p.block_size < 1 || p.num_blocks < 1 || p.max_blocks_per_seq < 1)
    return "block_size, num_blocks and max_blocks_per_seq must be >= 1";
  if (p.window < 0) return "window must be >= 0";
  if (const std::string r = score_reason(p.score); !r.empty()) return r;
  if (p.longest_context < 1 || p.longest_context > p.max_blocks_per_seq * p.block_size)
    return "longest_context must be in [1, max_blocks_per_seq * block_size]";
  if (p.max_blocks_per_seq * p.block_size > INT_MAX) return "max_blocks_per_seq * block_size must be < 2^31";
  if (p.kv_dtype == DType::fp8_e4m3 &&
      !(p.k_scale > 0 && p.v_scale > 0 && std::isfinite(p.k_scale) && std::isfinite(p.v_scale)))
    return "k_scale and v_scale must be positive and finite";
  return {};
}

std::string naive_supports(const RaggedParams& p, const DeviceCaps&) {
  if (const std::string r = common_reason(p); !r.empty()) return r;
  if (p.total_queries * p.heads > INT_MAX) return "total_queries * heads must be < 2^31 (blocks in gridDim.x)";
  return {};
}

}  // namespace attnbench::ragged_impl
