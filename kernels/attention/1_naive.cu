// attention rung 1, naive: the unfused path a learner writes first, four kernels: S = Q Kᵀ in
// fp32, one thread per score (a warp reads 32 key rows a whole row apart: nothing coalesces);
// scale and mask (ALiBi bias, causal / window -> -inf); the softmax family's block_reduce on
// the fp32 score matrix; O = P V, one thread per output. S and P ([batch, heads, seq_q,
// seq_k] fp32) live in device memory: 8 bytes per (query, key) pair, written and read back
// between kernels. The baseline.
// H200, run 6: bf16 b4 s4096 d128 611.9 ms, 0.9 TFLOP/s; fp32 b8 s1024 d64 0.9 TFLOP/s.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "kernels/attention/rungs.hpp"
#include "kernels/attention/unfused.hpp"
#include "kernels/common/dispatch.cuh"
#include "kernels/common/mask.cuh"
#include "kernels/common/storage.cuh"

namespace attnbench::attention_impl {
namespace {

// s: [batch·heads, seq_q, ld] fp32, s[(bh·seq_q + i)·ld + j] = q_i · k_j (fp32 accumulate).
// q: [batch, seq_q, heads, head_dim]; k: [batch, seq_k, kv_heads, head_dim].
// One thread per score, keys fastest: a warp reads one query row (a broadcast) and 32 key
// rows a whole row apart, so no read is coalesced: the baseline.
template <class T>
__global__ void naive_scores_kernel(const T* __restrict__ q, const T* __restrict__ k, float* __restrict__ s,
                                    const Shape sh, int64_t ld) {
  const int64_t idx = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (idx >= sh.batch_heads * sh.seq_q * sh.seq_k) return;
  const int64_t j = idx % sh.seq_k, row = idx / sh.seq_k;
  const int64_t i = row % sh.seq_q, bh = row / sh.seq_q;
  const int64_t b = bh / sh.heads;
  const int h = static_cast<int>(bh % sh.heads);
  const T* qr = q + b * sh.q_batch_stride + i * sh.q_row_stride + int64_t{h} * sh.head_dim;
  const T* kr = k + b * sh.kv_batch_stride + j * sh.kv_row_stride + int64_t{h / sh.group} * sh.head_dim;
  float acc = 0.f;
  for (int c = 0; c < sh.head_dim; ++c) acc = fmaf(to_float(qr[c]), to_float(kr[c]), acc);
  s[row * ld + j] = acc;
}

// s: [batch·heads, seq_q, ld] fp32, in place: cap(s·scale) - slope(h)·|pos - j| where query i
// (at key position pos) sees key j, -inf where it does not and in the padding j >= seq_k, but
// for column seq_k with attention sinks: the head's sink (unfused.hpp);
// cap(x) = softcap·tanh(x / softcap) (tanhf: the rungs below the fused ones stay exact).
// The softmax then turns -inf into 0, and a row of only -inf into zeros.
// kCap: soft-capping, kSparse: the block-sparse mask, each its own instantiation so that the
// plain kernel keeps its code.
template <bool kCap, bool kSparse>
__global__ void scale_and_mask_kernel(float* __restrict__ s, const Shape sh, int64_t ld, const BlockSparse sparse) {
  const int64_t idx = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (idx >= sh.batch_heads * sh.seq_q * ld) return;
  const int j = static_cast<int>(idx % ld);
  const int64_t row = idx / ld;
  const int pos = static_cast<int>(row % sh.seq_q) + sh.offset;
  const int h = static_cast<int>(row / sh.seq_q % sh.heads);
  const float bias = sh.score.alibi ? sh.score.slopes[h] * static_cast<float>(abs(pos - j)) : 0.f;
  float x = s[idx] * sh.scale;
  if constexpr (kCap) x = sh.score.cap * tanhf(x / sh.score.cap);
  bool sees = j < sh.seq_k && visible(sh, pos, j);
  if constexpr (kSparse) sees = sees && block_live(sparse, h, pos - sh.offset, j);
  s[idx] = sees ? x - bias : j == sh.seq_k && sh.sinks ? sh.sinks[h] : -INFINITY;
}

// o = P V. p: [batch·heads, seq_q, ld] fp32; v: [batch, seq_k, kv_heads, head_dim];
// o: [batch, seq_q, heads, head_dim]. One thread per output element, head_dim fastest: a
// warp reads one row of P (a broadcast) and consecutive elements of each V row. fp8 inputs
// write bf16 (TO), times v's descale.
template <class T, class TO>
__global__ void naive_pv_kernel(const float* __restrict__ p, const T* __restrict__ v, TO* __restrict__ o,
                                const Shape sh, int64_t ld, float descale_v) {
  const int64_t idx = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (idx >= sh.batch_heads * sh.seq_q * sh.head_dim) return;
  const int c = static_cast<int>(idx % sh.head_dim);
  const int64_t row = idx / sh.head_dim;
  const int64_t i = row % sh.seq_q, bh = row / sh.seq_q;
  const int64_t b = bh / sh.heads;
  const int h = static_cast<int>(bh % sh.heads);
  const float* pr = p + row * ld;
  const T* vc = v + b * sh.kv_batch_stride + int64_t{h / sh.group} * sh.head_dim + c;
  float acc = 0.f;
  for (int j = 0; j < sh.seq_k; ++j) acc = fmaf(pr[j], to_float(vc[j * sh.kv_row_stride]), acc);
  if constexpr (kIsFp8<T>) acc *= descale_v;
  o[b * sh.o_batch_stride + i * sh.q_row_stride + int64_t{h} * sh.head_dim + c] = from_float<TO>(acc);
}

}  // namespace

void launch_scale_and_mask(float* s, const Shape& sh, int64_t ld, const BlockSparse& sparse, cudaStream_t stream) {
  const int blocks = elementwise_blocks(sh.batch_heads * sh.seq_q * ld);
  auto launch = [&](auto kernel) { kernel<<<blocks, kElementwiseThreads, 0, stream>>>(s, sh, ld, sparse); };
  with_bool(sh.score.cap > 0.f, [&](auto cap) {
    with_bool(sparse.on(), [&](auto sp) { launch(scale_and_mask_kernel<cap, sp>); });
  });
}

void naive(const AttentionParams& p, const LaunchContext& ctx) {
  const Shape sh = make_shape(p);
  const UnfusedLayout w = unfused_layout(p, false);
  float* s = static_cast<float*>(ctx.workspace);
  float* prob = reinterpret_cast<float*>(static_cast<char*>(ctx.workspace) + w.matrix_bytes);
  const auto run = [&](auto tag, auto out_tag) {
    using T = decltype(tag);
    using TO = decltype(out_tag);
    naive_scores_kernel<T>
        <<<elementwise_blocks(sh.batch_heads * sh.seq_q * sh.seq_k), kElementwiseThreads, 0, ctx.stream>>>(
            static_cast<const T*>(p.q), static_cast<const T*>(p.k), s, sh, w.ld);
    check_launch("attention/naive");
    launch_scale_and_mask(s, sh, w.ld, p.sparse, ctx.stream);
    check_launch("attention/naive");
    softmax_variant("block_reduce").launch(softmax_params(p, s, prob, w.ld), ctx);
    naive_pv_kernel<T, TO>
        <<<elementwise_blocks(sh.batch_heads * sh.seq_q * sh.head_dim), kElementwiseThreads, 0, ctx.stream>>>(
            prob, static_cast<const T*>(p.v), static_cast<TO*>(p.o), sh, w.ld, p.descale_v);
    check_launch("attention/naive");
  };
  if (p.dtype == DType::fp8_e4m3) return run(Fp8{}, __nv_bfloat16{});
  with_storage(p.dtype, "attention/naive", [&](auto tag) { run(tag, tag); });
}

std::size_t naive_workspace(const AttentionParams& p) { return unfused_layout(p, false).total(); }

std::string naive_supports(const AttentionParams& p, const DeviceCaps& caps) { return unfused_reason(p, caps, false); }

}  // namespace attnbench::attention_impl
