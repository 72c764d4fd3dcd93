// attention_backward rung 1, naive: the backward pass as a learner first writes it, from its
// formulas and nothing else (backward.hpp): three kernels, one warp per row, no atomics, no
// shared memory, no tensor cores. Kernel 1, preprocess (preprocess.cuh, every rung's): D_i =
// rowsum(dO_i ∘ O_i) in fp32, one warp per query row (FlashAttention's "preprocess" kernel,
// the term every dS of the row subtracts). Kernel 2, dQ: one warp per (batch, head, query i),
// q_i and dO_i in registers (head_dim / 32 elements a lane); for every key j it sees, s = scale·q_i·k_j and
// dp = dO_i·v_j (each a warp reduction), p = exp(z - lse_i) from the forward's LSE,
// ds = p·(dp - D_i)·cap'(s), and dQ_i += ds·k_j; one rounding to the dtype at the end. Kernel 3,
// dK and dV: one warp per (batch, kv head, key j), k_j and v_j in registers; for every query
// head of the group and every query i that sees j it recomputes s, dp, p and ds, and
// dV_j += p·dO_i, dK_j += ds·q_i. Each output row has one writer and sums in a fixed order, so
// the rung is deterministic; the price is S and dP computed twice (14·d FLOPs per visible pair
// where the algorithm needs 10·d) and every row of Q, dO (kernel 3) and K, V (kernel 2) read
// again by every warp that needs it. Accurate expf and tanhf: the baseline stays exact.
// Verified on an H100 (run 273: smoke/attention_backward and cases/backward, every point; clean
// under compute-sanitizer memcheck). Not timed: a warp per row is the baseline, not a contender.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <string>

#include "kernels/backward/preprocess.cuh"
#include "kernels/backward/rungs.hpp"
#include "kernels/common/dispatch.cuh"
#include "kernels/common/storage.cuh"

namespace attnbench::backward_impl {
namespace {

constexpr int kWarpsPerBlock = 4;
constexpr int kPerLane = 8;  // head_dim <= 32 · kPerLane = 256: element c of a row is lane c % 32's (c / 32)th

// What the kernels read of BackwardParams, in the widths they index with.
struct Args {
  int64_t batch, heads, kv_heads, seq_q, seq_k;
  int head_dim, group;  // group: query heads per kv head
  int64_t q_offset;     // query i sits at key position i + q_offset
  bool causal;
  int64_t window;       // 0 = none
  float scale;          // s = scale · q·k
  float softcap;        // score units; 0 = none
  bool alibi;
  const float* slopes;  // [heads], with alibi
};

Args args_of(const BackwardParams& p) {
  return {p.batch,
          p.heads,
          p.kv_heads,
          p.seq_q,
          p.seq_k,
          static_cast<int>(p.head_dim),
          static_cast<int>(p.heads / p.kv_heads),
          p.q_offset,
          p.causal,
          p.window,
          p.score.scale,
          p.score.softcap,
          p.score.alibi,
          p.score.alibi_slopes};
}

// Whether the query at position pos sees key j (the forward's mask: AttentionParams).
__device__ __forceinline__ bool sees(const Args& a, int64_t pos, int64_t j) {
  const int64_t gap = pos - j;
  return (!a.causal || gap >= 0) && (a.window == 0 || (gap < 0 ? -gap : gap) < a.window);
}

// The row's elements this lane holds, widened to float (0 past head_dim).
template <class T>
__device__ __forceinline__ void load_row(const T* row, int head_dim, int lane, float (&x)[kPerLane]) {
#pragma unroll
  for (int e = 0; e < kPerLane; ++e) {
    const int c = lane + 32 * e;
    x[e] = c < head_dim ? to_float(row[c]) : 0.f;
  }
}

template <class T>
__device__ __forceinline__ void store_row(T* row, int head_dim, int lane, const float (&x)[kPerLane], float times) {
#pragma unroll
  for (int e = 0; e < kPerLane; ++e) {
    const int c = lane + 32 * e;
    if (c < head_dim) row[c] = from_float<T>(times * x[e]);
  }
}

// x · row over head_dim, the whole warp's sum in every lane.
template <class T>
__device__ __forceinline__ float dot(const float (&x)[kPerLane], const T* row, int head_dim, int lane) {
  float acc = 0.f;
#pragma unroll
  for (int e = 0; e < kPerLane; ++e) {
    const int c = lane + 32 * e;
    if (c < head_dim) acc = fmaf(x[e], to_float(row[c]), acc);
  }
  return warp_sum(acc);
}

// What a visible pair (query head h at position pos, key j) contributes: p = exp(z - lse) and
// ds = p·(dp - D)·cap'(s), from the raw dot products qk = q·k and dp = dO·v.
struct Pair {
  float p, ds;
};
__device__ __forceinline__ Pair pair_terms(const Args& a, int h, int64_t pos, int64_t j, float qk, float dp,
                                           float lse, float d_row) {
  const float s = a.scale * qk;
  float z = s, slope = 1.f;  // slope: dz/ds
  if (a.softcap > 0.f) {
    const float t = tanhf(s / a.softcap);
    z = a.softcap * t;
    slope = 1.f - t * t;
  }
  if (a.alibi) z -= a.slopes[h] * static_cast<float>(pos > j ? pos - j : j - pos);
  const float p = expf(z - lse);
  return {p, p * (dp - d_row) * slope};
}

// Kernel 2: dQ_i = scale · Σ_j ds_ij k_j over the keys query i sees, one warp per query row.
template <class T>
__global__ void __launch_bounds__(32 * kWarpsPerBlock)
    dq_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v, const T* __restrict__ d_o,
              const float* __restrict__ lse, const float* __restrict__ d, T* __restrict__ dq, const Args a) {
  const int lane = threadIdx.x % 32;
  const int64_t row = int64_t{blockIdx.x} * kWarpsPerBlock + threadIdx.x / 32;  // (b, i, h)
  if (row >= a.batch * a.seq_q * a.heads) return;
  const int h = static_cast<int>(row % a.heads);
  const int64_t i = row / a.heads % a.seq_q, b = row / a.heads / a.seq_q;
  const int64_t pos = i + a.q_offset;
  const int64_t stat = (b * a.heads + h) * a.seq_q + i;  // lse and d
  const float row_lse = lse[stat], row_d = d[stat];
  float qi[kPerLane], doi[kPerLane], acc[kPerLane];
  load_row(q + row * a.head_dim, a.head_dim, lane, qi);
  load_row(d_o + row * a.head_dim, a.head_dim, lane, doi);
#pragma unroll
  for (int e = 0; e < kPerLane; ++e) acc[e] = 0.f;
  for (int64_t j = 0; j < a.seq_k; ++j) {
    if (!sees(a, pos, j)) continue;  // the same j in every lane: the warp stays together
    const int64_t kv_row = (b * a.seq_k + j) * a.kv_heads + h / a.group;
    const T* kj = k + kv_row * a.head_dim;
    const float qk = dot(qi, kj, a.head_dim, lane);
    const float dp = dot(doi, v + kv_row * a.head_dim, a.head_dim, lane);
    const Pair t = pair_terms(a, h, pos, j, qk, dp, row_lse, row_d);
#pragma unroll
    for (int e = 0; e < kPerLane; ++e) {
      const int c = lane + 32 * e;
      if (c < a.head_dim) acc[e] = fmaf(t.ds, to_float(kj[c]), acc[e]);
    }
  }
  store_row(dq + row * a.head_dim, a.head_dim, lane, acc, a.scale);
}

// Kernel 3: dV_j = Σ p_ij dO_i and dK_j = scale · Σ ds_ij q_i over every query head h of kv
// head g's group and every query i that sees key j, one warp per key row.
template <class T>
__global__ void __launch_bounds__(32 * kWarpsPerBlock)
    dkv_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v, const T* __restrict__ d_o,
               const float* __restrict__ lse, const float* __restrict__ d, T* __restrict__ dk, T* __restrict__ dv,
               const Args a) {
  const int lane = threadIdx.x % 32;
  const int64_t row = int64_t{blockIdx.x} * kWarpsPerBlock + threadIdx.x / 32;  // (b, j, g), k's row order
  if (row >= a.batch * a.seq_k * a.kv_heads) return;
  const int g = static_cast<int>(row % a.kv_heads);
  const int64_t j = row / a.kv_heads % a.seq_k, b = row / a.kv_heads / a.seq_k;
  float kj[kPerLane], vj[kPerLane], dk_acc[kPerLane], dv_acc[kPerLane];
  load_row(k + row * a.head_dim, a.head_dim, lane, kj);
  load_row(v + row * a.head_dim, a.head_dim, lane, vj);
#pragma unroll
  for (int e = 0; e < kPerLane; ++e) dk_acc[e] = dv_acc[e] = 0.f;
  for (int h = g * a.group; h < (g + 1) * a.group; ++h)
    for (int64_t i = 0; i < a.seq_q; ++i) {
      const int64_t pos = i + a.q_offset;
      if (!sees(a, pos, j)) continue;
      const int64_t q_row = (b * a.seq_q + i) * a.heads + h;
      const T* qi = q + q_row * a.head_dim;
      const T* doi = d_o + q_row * a.head_dim;
      const int64_t stat = (b * a.heads + h) * a.seq_q + i;
      const float qk = dot(kj, qi, a.head_dim, lane);
      const float dp = dot(vj, doi, a.head_dim, lane);
      const Pair t = pair_terms(a, h, pos, j, qk, dp, lse[stat], d[stat]);
#pragma unroll
      for (int e = 0; e < kPerLane; ++e) {
        const int c = lane + 32 * e;
        if (c < a.head_dim) {
          dv_acc[e] = fmaf(t.p, to_float(doi[c]), dv_acc[e]);
          dk_acc[e] = fmaf(t.ds, to_float(qi[c]), dk_acc[e]);
        }
      }
    }
  store_row(dk + row * a.head_dim, a.head_dim, lane, dk_acc, a.scale);
  store_row(dv + row * a.head_dim, a.head_dim, lane, dv_acc, 1.f);
}

unsigned warp_blocks(int64_t rows) { return static_cast<unsigned>(ceil_div(rows, kWarpsPerBlock)); }

}  // namespace

// The workspace: D, [batch, heads, seq_q] fp32.
std::size_t naive_workspace(const BackwardParams& p) {
  return round_up_256(static_cast<std::size_t>(p.batch * p.heads * p.seq_q) * sizeof(float));
}

std::string naive_supports(const BackwardParams& p, const DeviceCaps& caps) {
  (void)caps;
  if (p.dtype != DType::fp32 && p.dtype != DType::fp16 && p.dtype != DType::bf16)
    return std::string("dtype ") + dtype_name(p.dtype) + ": the backward takes fp32, fp16 or bf16";
  if (p.batch < 1 || p.heads < 1 || p.kv_heads < 1 || p.seq_q < 1 || p.seq_k < 1)
    return "batch, heads, kv_heads, seq_q and seq_k must be >= 1";
  if (p.heads % p.kv_heads != 0) return "heads must be a multiple of kv_heads";
  if (p.head_dim < 8 || p.head_dim > 32 * kPerLane || p.head_dim % 8 != 0)
    return "head_dim must be a multiple of 8, at most 256";
  if (p.window < 0) return "window must be >= 0";
  if (const std::string r = score_reason(p.score); !r.empty()) return r;
  if (p.score.sinks) return "attention sinks: no backward yet";
  const int64_t rows = std::max(p.batch * p.seq_q * p.heads, p.batch * p.seq_k * p.kv_heads);
  if (ceil_div(rows, kWarpsPerBlock) > INT_MAX) return "too many rows for one grid";
  return {};
}

void naive(const BackwardParams& p, const LaunchContext& ctx) {
  const Args a = args_of(p);
  float* d = static_cast<float*>(ctx.workspace);
  const dim3 block(32 * kWarpsPerBlock);
  with_storage(p.dtype, "attention_backward/naive", [&](auto tag) {
    using T = decltype(tag);
    const T* q = static_cast<const T*>(p.q);
    const T* k = static_cast<const T*>(p.k);
    const T* v = static_cast<const T*>(p.v);
    const T* d_o = static_cast<const T*>(p.d_o);
    launch_preprocess(static_cast<const T*>(p.o), d_o, d, nullptr, p.batch, p.seq_q, p.heads, a.head_dim, ctx.stream);
    check_launch("attention_backward/naive (preprocess)");
    dq_kernel<T><<<warp_blocks(p.batch * p.seq_q * p.heads), block, 0, ctx.stream>>>(q, k, v, d_o, p.lse, d,
                                                                                       static_cast<T*>(p.dq), a);
    check_launch("attention_backward/naive (dq)");
    dkv_kernel<T><<<warp_blocks(p.batch * p.seq_k * p.kv_heads), block, 0, ctx.stream>>>(
        q, k, v, d_o, p.lse, d, static_cast<T*>(p.dk), static_cast<T*>(p.dv), a);
    check_launch("attention_backward/naive (dk, dv)");
  });
}

}  // namespace attnbench::backward_impl
