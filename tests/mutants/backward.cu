// Mutant suite, attention_backward: the gradients dQ, dK, dV of prefill attention from Q, K, V,
// O, dO and the forward's LSE (tests/mutants/README.md). One correct kernel pair, ctl_backward,
// and mutants of it that each carry exactly one bug, chosen at compile time by `Bug`.
//
// The kernels: one warp per output row, fp32 throughout, as the formulas read
// (kernels/backward/backward.hpp): with s = scale · q·k, z = cap(s) - slope · |pos - j| the
// logit (cap(s) = softcap · tanh(s / softcap)), p = exp(z - lse), D_i = dO_i · O_i,
// dp = dO_i · v_j, ds = p · (dp - D_i) · (1 - tanh²(s / softcap)),
//   dQ_i = scale · Σ_j ds k_j over the keys query i sees (kernel 1, a warp per query row),
//   dK_j = scale · Σ ds q_i and dV_j = Σ p dO_i over every query head of kv head g's group and
//   every query that sees key j (kernel 2, a warp per key row, D_i recomputed per query).
// Causal in both alignments, window, ALiBi, soft-capping, GQA; fp32, fp16 and bf16.
//   attnbench verify tests/mutants/cases/backward-causal-br.toml --plugin tests/mutants/backward.cu
#include <cmath>
#include <type_traits>

#include "mutant_math.cuh"

namespace {

using mutant::add_to;
using mutant::from_float;
using mutant::to_float;
using mutant::warp_sum;

enum class Bug {
  none,             // the control
  no_d,             // ds = p · dp: forgets the - D_i term (the preprocess's rowsum(dO ∘ O))
  dk_unscaled,      // dK without the softmax scale
  dv_from_ds,       // dV = Σ ds · dO instead of Σ p · dO
  gqa_first_head,   // dK and dV summed over the first query head of each group only
  top_left,         // ignores q_offset: causal aligned top-left always
  lse_log2,         // takes the LSE as a log2: p = exp2(z · log2 e - lse)
  no_cap_slope,     // leaves soft-capping's derivative 1 - tanh² out of ds
  alibi_sign,       // adds ALiBi's bias instead of subtracting it
  dq_drop_last,     // dQ skips the last key a query sees
  dk_lowp_acc,      // accumulates dK in the storage dtype instead of fp32
};

constexpr int kDims = 8;  // head_dim <= 256: element c of a row is lane c % 32's (c / 32)th

struct Row {
  float x[kDims];
};

template <class T>
__device__ Row load(const T* row, int64_t d_n, int lane) {
  Row r;
  for (int c = 0; c < kDims; ++c) r.x[c] = lane + 32 * c < d_n ? to_float(row[lane + 32 * c]) : 0.f;
  return r;
}

template <class T>
__device__ float dot(const Row& a, const T* row, int64_t d_n, int lane) {
  float acc = 0.f;
  for (int c = 0; c < kDims; ++c)
    if (lane + 32 * c < d_n) acc += a.x[c] * to_float(row[lane + 32 * c]);
  return warp_sum(acc);
}

template <Bug kBug>
__device__ bool sees(const attnbench_attention_backward_params& p, int64_t i, int64_t j) {
  const int64_t pos = i + (kBug == Bug::top_left ? 0 : p.q_offset), gap = pos - j;
  return (!p.causal || gap >= 0) && (p.window == 0 || (gap < 0 ? -gap : gap) < p.window);
}

// p and ds of the pair (query head h, query i, key j) from qk = q·k, dp = dO·v, the row's lse and D.
template <Bug kBug>
__device__ void pair(const attnbench_attention_backward_params& p, int64_t h, int64_t i, int64_t j, float qk,
                     float dp, float lse, float d, float& pr, float& ds) {
  const float s = p.score.scale * qk;
  float z = s, slope = 1.f;
  if (p.score.softcap > 0.f) {
    const float t = tanhf(s / p.score.softcap);
    z = p.score.softcap * t;
    if (kBug != Bug::no_cap_slope) slope = 1.f - t * t;
  }
  if (p.score.alibi) {
    const int64_t pos = i + p.q_offset, dist = pos > j ? pos - j : j - pos;
    const float bias = p.score.alibi_slopes[h] * (float)dist;
    z += kBug == Bug::alibi_sign ? bias : -bias;
  }
  pr = kBug == Bug::lse_log2 ? exp2f(z * 1.4426950408889634f - lse) : expf(z - lse);
  ds = pr * (kBug == Bug::no_d ? dp : dp - d) * slope;
}

// Kernel 1: dQ, a warp per query row (b, i, h) in q's row order.
template <class T, Bug kBug>
__global__ void dq_kernel(attnbench_attention_backward_params p) {
  const int lane = threadIdx.x % 32;
  const int64_t row = (int64_t)blockIdx.x * 4 + threadIdx.x / 32;
  if (row >= p.batch * p.seq_q * p.heads) return;
  const int64_t h = row % p.heads, i = row / p.heads % p.seq_q, b = row / p.heads / p.seq_q;
  const int64_t d_n = p.head_dim, g = h / (p.heads / p.kv_heads);
  const Row q = load((const T*)p.q + row * d_n, d_n, lane), d_o = load((const T*)p.d_o + row * d_n, d_n, lane);
  const float d = dot(d_o, (const T*)p.o + row * d_n, d_n, lane);
  const float lse = p.lse[(b * p.heads + h) * p.seq_q + i];
  int64_t last = -1;  // the last key the query sees
  for (int64_t j = 0; j < p.seq_k; ++j)
    if (sees<kBug>(p, i, j)) last = j;
  float acc[kDims] = {};
  for (int64_t j = 0; j < p.seq_k; ++j) {
    if (!sees<kBug>(p, i, j) || (kBug == Bug::dq_drop_last && j == last)) continue;
    const int64_t kv = ((b * p.seq_k + j) * p.kv_heads + g) * d_n;
    const T* k = (const T*)p.k + kv;
    float pr, ds;
    pair<kBug>(p, h, i, j, dot(q, k, d_n, lane), dot(d_o, (const T*)p.v + kv, d_n, lane), lse, d, pr, ds);
    for (int c = 0; c < kDims; ++c)
      if (lane + 32 * c < d_n) acc[c] += ds * to_float(k[lane + 32 * c]);
  }
  T* dq = (T*)p.dq + row * d_n;
  for (int c = 0; c < kDims; ++c)
    if (lane + 32 * c < d_n) dq[lane + 32 * c] = from_float<T>(p.score.scale * acc[c]);
}

// Kernel 2: dK and dV, a warp per key row (b, j, g) in k's row order.
template <class T, Bug kBug>
__global__ void dkv_kernel(attnbench_attention_backward_params p) {
  using AccK = std::conditional_t<kBug == Bug::dk_lowp_acc, T, float>;
  const int lane = threadIdx.x % 32;
  const int64_t row = (int64_t)blockIdx.x * 4 + threadIdx.x / 32;
  if (row >= p.batch * p.seq_k * p.kv_heads) return;
  const int64_t g = row % p.kv_heads, j = row / p.kv_heads % p.seq_k, b = row / p.kv_heads / p.seq_k;
  const int64_t d_n = p.head_dim, group = p.heads / p.kv_heads;
  const Row k = load((const T*)p.k + row * d_n, d_n, lane), v = load((const T*)p.v + row * d_n, d_n, lane);
  AccK dk[kDims];
  float dv[kDims] = {};
  for (int c = 0; c < kDims; ++c) dk[c] = from_float<AccK>(0.f);
  const int64_t heads_end = kBug == Bug::gqa_first_head ? g * group + 1 : (g + 1) * group;
  for (int64_t h = g * group; h < heads_end; ++h)
    for (int64_t i = 0; i < p.seq_q; ++i) {
      if (!sees<kBug>(p, i, j)) continue;
      const int64_t qrow = (b * p.seq_q + i) * p.heads + h;
      const T* q = (const T*)p.q + qrow * d_n;
      const T* d_o = (const T*)p.d_o + qrow * d_n;
      const Row o_row = load((const T*)p.o + qrow * d_n, d_n, lane);
      const float d = dot(o_row, d_o, d_n, lane);
      float pr, ds;
      pair<kBug>(p, h, i, j, dot(k, q, d_n, lane), dot(v, d_o, d_n, lane), p.lse[(b * p.heads + h) * p.seq_q + i], d,
                 pr, ds);
      const float w_v = kBug == Bug::dv_from_ds ? ds : pr;
      for (int c = 0; c < kDims; ++c)
        if (lane + 32 * c < d_n) {
          dk[c] = add_to(dk[c], ds * to_float(q[lane + 32 * c]));
          dv[c] += w_v * to_float(d_o[lane + 32 * c]);
        }
    }
  const float k_scale = kBug == Bug::dk_unscaled ? 1.f : p.score.scale;
  T* dk_out = (T*)p.dk + row * d_n;
  T* dv_out = (T*)p.dv + row * d_n;
  for (int c = 0; c < kDims; ++c)
    if (lane + 32 * c < d_n) {
      dk_out[lane + 32 * c] = from_float<T>(k_scale * to_float(dk[c]));
      dv_out[lane + 32 * c] = from_float<T>(dv[c]);
    }
}

template <Bug kBug>
cudaError_t launch(const void* params, void*, cudaStream_t stream) {
  const auto& p = *(const attnbench_attention_backward_params*)params;
  return mutant::by_dtype(p.dtype, [&](auto t) {
    using T = decltype(t);
    dq_kernel<T, kBug><<<(unsigned)((p.batch * p.seq_q * p.heads + 3) / 4), 128, 0, stream>>>(p);
    dkv_kernel<T, kBug><<<(unsigned)((p.batch * p.seq_k * p.kv_heads + 3) / 4), 128, 0, stream>>>(p);
    return cudaGetLastError();
  });
}

const char* supports(const void* params, const attnbench_device*) {
  const auto& p = *(const attnbench_attention_backward_params*)params;
  if (p.dtype != ATTNBENCH_FP32 && p.dtype != ATTNBENCH_FP16 && p.dtype != ATTNBENCH_BF16)
    return "mutant suite kernel: fp32, fp16 and bf16 only";
  if (p.score.sinks) return "mutant suite kernel: no attention sinks";
  if (p.head_dim > 32 * kDims) return "head_dim must be at most 256";
  if ((p.batch * p.seq_q * p.heads + 3) / 4 > 2147483647 || (p.batch * p.seq_k * p.kv_heads + 3) / 4 > 2147483647)
    return "too many rows for gridDim.x";
  return nullptr;
}

constexpr int32_t kOp = ATTNBENCH_OP_ATTENTION_BACKWARD;

const attnbench_variant variants[] = {
    {"ctl_backward",
     "mutant suite control: a warp per dQ row and per dK/dV row, fp32, the formulas as written",
     ATTNBENCH_OP_ATTENTION_BACKWARD, supports, nullptr, launch<Bug::none>},
    MUTANT("mut_bwd_no_d", no_d, "ds = p dp: forgets the - D term (rowsum(dO o O))"),
    MUTANT("mut_bwd_dk_unscaled", dk_unscaled, "dK without the softmax scale"),
    MUTANT("mut_bwd_dv_from_ds", dv_from_ds, "dV = sum ds dO instead of sum p dO"),
    MUTANT("mut_bwd_gqa_first_head", gqa_first_head, "dK, dV summed over the first query head of each group only"),
    MUTANT("mut_bwd_top_left", top_left, "ignores q_offset: causal aligned top-left always"),
    MUTANT("mut_bwd_lse_log2", lse_log2, "takes the LSE as a log2: p = exp2(z log2 e - lse)"),
    MUTANT("mut_bwd_no_cap_slope", no_cap_slope, "leaves soft-capping's derivative 1 - tanh^2 out of ds"),
    MUTANT("mut_bwd_alibi_sign", alibi_sign, "adds ALiBi's bias instead of subtracting it"),
    MUTANT("mut_bwd_dq_drop_last", dq_drop_last, "dQ skips the last key a query sees"),
    MUTANT("mut_bwd_dk_lowp_acc", dk_lowp_acc, "accumulates dK in the storage dtype instead of fp32"),
};

}  // namespace

ATTNBENCH_PLUGIN(variants)
