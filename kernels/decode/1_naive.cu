// decode rung 1, naive: the course's kernel, one block per (sequence, query head). Scores q·k_j
// for the whole context go to memory (workspace, fp32), one thread per key walking its own K
// row (uncoalesced); the block's max and sum turn them into p_j in place; then one thread per
// dim sums p_j v_j / l. Three passes, and K/V are read once per query head: `group` times per
// byte under GQA. The baseline.
// H200, run 19: bf16 b1 kv8 ctx131072 31.63 ms, 17 GB/s (0.4% of the memory floor).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "kernels/common/dispatch.cuh"
#include "kernels/common/mask.cuh"
#include "kernels/common/reduce.cuh"
#include "kernels/common/storage.cuh"
#include "kernels/decode/args.hpp"
#include "kernels/decode/rungs.hpp"

namespace attnbench::decode_impl {
namespace {

constexpr int kNaiveThreads = 128;

// scores: [batch, heads, max_context] fp32. Block b·heads + h owns query head h of sequence b.
// kCap: soft-capping, kWindow: a sliding window; each its own instantiation so that the plain
// kernel keeps its code.
template <class T, bool kCap, bool kWindow>
__global__ void __launch_bounds__(kNaiveThreads)
    naive_kernel(const Decode p, float* __restrict__ scores, int64_t max_context) {
  __shared__ float sq[256];
  __shared__ float red[kNaiveThreads / 32];
  const int bh = static_cast<int>(blockIdx.x);
  const int b = bh / p.heads, h = bh % p.heads;
  const int ctx = p.context_lens[b];
  const T* q = static_cast<const T*>(p.q) + int64_t{bh} * p.head_dim;
  const int64_t head_offset = int64_t{b} * p.seq_stride + int64_t{h / p.group} * p.head_dim;
  const T* k = static_cast<const T*>(p.k) + head_offset;
  const T* v = static_cast<const T*>(p.v) + head_offset;
  float* s = scores + int64_t{bh} * max_context;
  for (int d = threadIdx.x; d < p.head_dim; d += kNaiveThreads) sq[d] = to_float(q[d]);
  __syncthreads();
  if (p.rope.on()) {  // the query at its position, ctx - 1
    rope_shared_floats(sq, ctx - 1, p.rope, threadIdx.x, kNaiveThreads);
    __syncthreads();
  }

  // The query sits at position ctx - 1: key j is ctx - 1 - j behind it.
  const float slope = alibi_slope(p.score.alibi, p.score.slopes, h, 1.f);
  const float cap = p.score.cap * p.scale;                        // soft-capping in score units (tanhf: exact)
  const int first = kWindow ? window_first(ctx, p.window) : 0;  // with a window, the keys before it are skipped
  float m = -INFINITY;
  for (int j = first + static_cast<int>(threadIdx.x); j < ctx; j += kNaiveThreads) {
    const T* kj = k + j * p.row_stride;
    float dot = 0.f;
    for (int d = 0; d < p.head_dim; ++d) dot = fmaf(sq[d], to_float(kj[d]), dot);
    float x = dot * p.scale;
    if constexpr (kCap) x = cap * tanhf(x / cap);
    x -= slope * static_cast<float>(ctx - 1 - j);
    s[j] = x;
    m = fmaxf(m, x);
  }
  m = block_reduce<true, kNaiveThreads / 32>(m, red);  // finite: ctx >= 1
  const float sink = p.sinks ? p.sinks[h] : -INFINITY;  // an attention sink joins the max and the sum
  m = fmaxf(m, sink);

  float l = 0.f;
  for (int j = first + static_cast<int>(threadIdx.x); j < ctx; j += kNaiveThreads) {
    const float e = expf(s[j] - m);
    s[j] = e;
    l += e;
  }
  l = block_reduce<false, kNaiveThreads / 32>(l, red);  // its barriers also publish every p_j to the block
  l += expf(sink - m);                                   // 0 without a sink

  T* o = static_cast<T*>(p.o) + int64_t{bh} * p.head_dim;
  for (int d = threadIdx.x; d < p.head_dim; d += kNaiveThreads) {
    float acc = 0.f;
    for (int j = first; j < ctx; ++j) acc = fmaf(s[j], to_float(v[j * p.row_stride + d]), acc);
    o[d] = from_float<T>(acc / l);
  }
}

}  // namespace

void naive(const DecodeParams& p, const LaunchContext& ctx) {
  const Decode d = make_decode(p);
  with_storage(p.dtype, "decode/naive", [&](auto tag) {
    using T = decltype(tag);
    const auto kernel = with_bool(p.score.softcap > 0, [&](auto cap) {
      return with_bool(p.window > 0, [&](auto window) { return naive_kernel<T, cap, window>; });
    });
    kernel<<<static_cast<unsigned>(p.batch * p.heads), kNaiveThreads, 0, ctx.stream>>>(
        d, static_cast<float*>(ctx.workspace), p.max_context);
  });
  check_launch("decode/naive");
}

std::size_t naive_workspace(const DecodeParams& p) {
  return static_cast<std::size_t>(p.batch * p.heads * p.max_context) * sizeof(float);
}

std::string naive_supports(const DecodeParams& p, const DeviceCaps& caps) {
  std::string r = common_reason(p);
  if (!r.empty()) return r;
  if (caps.total_memory > 0 && naive_workspace(p) > caps.total_memory / 4)
    return "the score matrix [batch, heads, max_context] needs more than a quarter of the card";
  return {};
}

}  // namespace attnbench::decode_impl
