// Mutant suite, prefill attention (tests/mutants/README.md). One correct kernel,
// ctl_attention, and mutants of it that each carry exactly one bug, chosen at compile time
// by `Bug`.
//
// The kernel: one warp per query row (4 warps a block), walking the keys it sees in tiles of
// 64 with an online softmax in fp32. Each lane scores keys j0 + lane and j0 + 32 + lane of
// the tile (the query row in shared memory), the warp takes the tile's max and sum, and the
// lanes then add the tile's P.V for the head dims they own (lane, lane + 32, ...). GQA and
// both causal alignments through q_offset, attention sinks (the head's sink joins l at the
// end, relative to the row's max); no window, ALiBi, soft-capping, RoPE, sparsity or fp8
// (refused: those points are skipped).
//   attnbench verify tests/mutants/cases/attention-causal-br.toml --plugin tests/mutants/attention.cu
#include "mutant_math.cuh"

namespace {

using mutant::from_float;
using mutant::to_float;

enum class Bug {
  none,           // the control
  causal_past1,   // causal limit one key too far: query i sees j <= i + q_offset + 1
  causal_short1,  // causal limit one key short: query i sees j < i + q_offset (not its diagonal key)
  tl_as_br,       // ignores q_offset and aligns bottom-right (seq_k - seq_q) always
  br_as_tl,       // ignores q_offset and aligns top-left (0) always
  kv_tail,        // visits whole 64-key tiles only: keys past the last multiple of 64 are ignored
  scale_d1,       // softmax scale 1/sqrt(head_dim + 1) instead of the params' scale
  gqa_mod,        // kv head h % kv_heads instead of h / (heads / kv_heads)
  no_max,         // exp(s) without the running max: overflows on large logits
  drop_last,      // drops the last key the query sees
  pv_lowp,        // accumulates P.V in the storage dtype (fp16/bf16) instead of fp32
  sink_ignored,   // leaves the attention sink out of the denominator
  sink_head0,     // every head takes head 0's sink
};

constexpr int kWarps = 4, kTileK = 64, kDims = 8;  // head_dim <= 256

template <class T, Bug kBug>
__global__ void attention_kernel(attnbench_attention_params p) {
  __shared__ float q_row[kWarps][32 * kDims];
  __shared__ float probs[kWarps][kTileK];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t i = blockIdx.x * (int64_t)kWarps + warp, h = blockIdx.y, b = blockIdx.z;
  if (i >= p.seq_q) return;  // warps are independent: no block-wide barrier below
  const int64_t g = kBug == Bug::gqa_mod ? h % p.kv_heads : h / (p.heads / p.kv_heads);
  const int64_t d_n = p.head_dim;
  const T* q = (const T*)p.q + b * p.q_batch_stride + (i * p.heads + h) * d_n;
  const T* k = (const T*)p.k + b * p.kv_batch_stride + g * d_n;  // key j at k + j * kv_heads * head_dim
  const T* v = (const T*)p.v + b * p.kv_batch_stride + g * d_n;
  const int64_t kv_row = p.kv_heads * d_n;
  for (int64_t d = lane; d < d_n; d += 32) q_row[warp][d] = to_float(q[d]);
  __syncwarp();

  // The keys this query sees: [0, end).
  int64_t offset = p.q_offset;
  if (kBug == Bug::tl_as_br) offset = p.seq_k - p.seq_q;
  if (kBug == Bug::br_as_tl) offset = 0;
  int64_t end = p.seq_k;
  if (p.causal) {
    int64_t last = i + offset;  // the last key position it sees
    if (kBug == Bug::causal_past1) last += 1;
    if (kBug == Bug::causal_short1) last -= 1;
    end = min(end, last + 1);
  }
  if (kBug == Bug::drop_last) end -= 1;
  if (kBug == Bug::kv_tail) end = end / kTileK * kTileK;
  const float scale = kBug == Bug::scale_d1 ? rsqrtf((float)(d_n + 1)) : p.score.scale;

  using Acc = std::conditional_t<kBug == Bug::pv_lowp, T, float>;
  Acc acc[kDims];
  for (int c = 0; c < kDims; ++c) acc[c] = from_float<Acc>(0.f);
  float m = kBug == Bug::no_max ? 0.f : -INFINITY, l = 0.f;
  for (int64_t j0 = 0; j0 < end; j0 += kTileK) {
    float s[2];
    for (int t = 0; t < 2; ++t) {
      const int64_t j = j0 + 32 * t + lane;
      s[t] = -INFINITY;
      if (j < end) {
        const T* kj = k + j * kv_row;
        float dot = 0.f;
        for (int64_t d = 0; d < d_n; ++d) dot += q_row[warp][d] * to_float(kj[d]);
        s[t] = dot * scale;
      }
    }
    float m_new = m;
    if constexpr (kBug != Bug::no_max) m_new = fmaxf(m, mutant::warp_max(fmaxf(s[0], s[1])));
    const float alpha = expf(m - m_new);  // 0 on the first tile (m = -inf); 1 without a max
    const float p0 = expf(s[0] - m_new), p1 = expf(s[1] - m_new);
    l = l * alpha + mutant::warp_sum(p0 + p1);
    probs[warp][lane] = p0;
    probs[warp][32 + lane] = p1;
    __syncwarp();
    const int64_t n = min((int64_t)kTileK, end - j0);
    for (int c = 0; c < kDims; ++c) {
      const int64_t d = lane + 32 * c;
      if (d >= d_n) break;
      acc[c] = from_float<Acc>(to_float(acc[c]) * alpha);
      for (int64_t jj = 0; jj < n; ++jj) acc[c] = mutant::add_to(acc[c], probs[warp][jj] * to_float(v[(j0 + jj) * kv_row + d]));
    }
    __syncwarp();
    m = m_new;
  }
  // The sink joins the denominator relative to the row's max (m = -inf for a query that sees no
  // key: l becomes inf, and the sink takes all the weight).
  if (p.score.sinks && kBug != Bug::sink_ignored) l += expf(p.score.sink_logits[kBug == Bug::sink_head0 ? 0 : h] - m);
  // A query that sees no key outputs zeros.
  T* o = (T*)p.o + b * p.o_batch_stride + (i * p.heads + h) * d_n;
  for (int c = 0; c < kDims; ++c) {
    const int64_t d = lane + 32 * c;
    if (d < d_n) o[d] = from_float<T>(l > 0.f ? to_float(acc[c]) / l : 0.f);
  }
}

template <Bug kBug>
cudaError_t launch(const void* params, void*, cudaStream_t stream) {
  const auto& p = *(const attnbench_attention_params*)params;
  return mutant::by_dtype(p.dtype, [&](auto t) {
    using T = decltype(t);
    const dim3 grid((unsigned)((p.seq_q + kWarps - 1) / kWarps), (unsigned)p.heads, (unsigned)p.batch);
    attention_kernel<T, kBug><<<grid, kWarps * 32, 0, stream>>>(p);
    return cudaGetLastError();
  });
}

const char* supports(const void* params, const attnbench_device*) {
  const auto& p = *(const attnbench_attention_params*)params;
  if (p.dtype == ATTNBENCH_FP8_E4M3) return "mutant suite kernel: fp32, fp16 and bf16 only";
  if (const char* why = mutant::plain_scores_only(p.score, p.window, p.rope, true)) return why;
  if (p.sparse_block > 0) return "mutant suite kernel: dense only";
  if (p.head_dim > 32 * kDims) return "head_dim must be at most 256";
  if ((p.seq_q + kWarps - 1) / kWarps > 2147483647 || p.batch > 65535) return "grid too large";
  return nullptr;
}

constexpr int32_t kOp = ATTNBENCH_OP_ATTENTION;

const attnbench_variant variants[] = {
    {"ctl_attention", "mutant suite control: a warp per query row, 64-key tiles, online softmax in fp32",
     ATTNBENCH_OP_ATTENTION, supports, nullptr, launch<Bug::none>},
    MUTANT("mut_attn_causal_past1", causal_past1, "causal limit one key too far (j <= i + q_offset + 1)"),
    MUTANT("mut_attn_causal_short1", causal_short1, "causal limit one key short (j < i + q_offset: no diagonal key)"),
    MUTANT("mut_attn_tl_as_br", tl_as_br, "ignores q_offset, aligns causal bottom-right always"),
    MUTANT("mut_attn_br_as_tl", br_as_tl, "ignores q_offset, aligns causal top-left always"),
    MUTANT("mut_attn_kv_tail", kv_tail, "skips the partial last 64-key tile"),
    MUTANT("mut_attn_scale_d1", scale_d1, "softmax scale 1/sqrt(head_dim + 1)"),
    MUTANT("mut_attn_gqa_mod", gqa_mod, "GQA kv head h % kv_heads instead of h / (heads / kv_heads)"),
    MUTANT("mut_attn_no_max", no_max, "exp(score) without the running max (overflows on large logits)"),
    MUTANT("mut_attn_drop_last", drop_last, "drops the last key each query sees"),
    MUTANT("mut_attn_pv_lowp", pv_lowp, "accumulates P.V in the storage dtype (fp16/bf16) instead of fp32"),
    MUTANT("mut_attn_sink_ignored", sink_ignored, "leaves the attention sink out of the softmax's denominator"),
    MUTANT("mut_attn_sink_head0", sink_head0, "every query head takes head 0's attention sink"),
};


}  // namespace

ATTNBENCH_PLUGIN(variants)
