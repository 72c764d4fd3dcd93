// Mutant suite, ragged: a serving engine's mixed batch over a paged cache in the flash layout
// (tests/mutants/README.md). One correct kernel, ctl_ragged, and mutants of it that each carry
// exactly one bug, chosen at compile time by `Bug`.
//
// The kernel: one block of 4 warps per (query token, query head), o's row. The block finds its
// token's sequence b (the last b with cu_seqlens_q[b] <= token), puts the query at position
// context_lens[b] - query_len[b] + (its index in the sequence) (causal, aligned bottom-right
// within the sequence) and visits keys [lo, position], lo = 0 or, with a window, position -
// window + 1. Warp w takes keys lo + w, lo + w + 4, ...; key j is token j % block_size of block
// block_tables[b][j / block_size] in the flash layout [block, token, kv head, dim], lane l owns
// dims l, l + 32, ... of it. Scores in fp32: scale · q·k (k = code · k_scale for an fp8 cache),
// soft-capped, minus ALiBi's slope · |position - j|; each warp keeps an online softmax, and the
// warps merge at the end, where the head's sink joins the max and the denominator. Values are
// code · v_scale for an fp8 cache. GQA; fp32, fp16 and bf16 queries over a cache in their dtype
// or fp8 e4m3; no RoPE (refused: those points are skipped).
//   attnbench verify tests/mutants/cases/ragged-batch.toml --plugin tests/mutants/ragged.cu
#include "mutant_math.cuh"

namespace {

using mutant::from_float;
using mutant::to_float;

enum class Bug {
  none,               // the control
  top_left,           // query t of a sequence at position t (top-left), not context - query_len + t
  seq_off_by_one,     // finds the sequence with cu_seqlens_q[b] < token: a sequence's first token goes to the one before
  past_context,       // visits keys [lo, position + 1]: one key past what the query may see
  logical_block,      // uses the key's logical block number as the physical block (no table)
  table0,             // every sequence reads sequence 0's block table row
  sink_ignored,       // leaves the attention sink out of the softmax's denominator
  fp8_noscale,        // loads an fp8 cache without multiplying by k_scale / v_scale
  window_off_by_one,  // a window keeps position - window too: one key more than `window`
};

constexpr int kWarps = 4, kDims = 8;  // head_dim <= 256

template <class T, class Cache, Bug kBug>
__global__ void ragged_kernel(attnbench_ragged_params p) {
  __shared__ float part[kWarps][2 + 32 * kDims];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t row = blockIdx.x, token = row / p.heads, h = row % p.heads;
  const int64_t d_n = p.head_dim, bs = p.block_size;
  const int64_t g = h / (p.heads / p.kv_heads);

  // The token's sequence: the last b with cu_seqlens_q[b] <= token (a sequence's tokens are
  // consecutive in q, cu_seqlens_q grows).
  int64_t b = 0;
  for (int64_t hi = p.batch - 1; b < hi;) {
    const int64_t mid = (b + hi + 1) / 2;
    const bool at_or_before = kBug == Bug::seq_off_by_one ? p.cu_seqlens_q[mid] < token : p.cu_seqlens_q[mid] <= token;
    if (at_or_before) b = mid;
    else hi = mid - 1;
  }
  const int64_t first = p.cu_seqlens_q[b], query_len = p.cu_seqlens_q[b + 1] - first;
  const int64_t context = p.context_lens[b];
  // Bottom-right: the sequence's last query sits at its last key.
  const int64_t pos = (kBug == Bug::top_left ? 0 : context - query_len) + (token - first);
  // The keys it sees: [lo, hi].
  int64_t lo = 0;
  if (p.window > 0) {
    lo = pos - p.window + (kBug == Bug::window_off_by_one ? 0 : 1);
    if (lo < 0) lo = 0;
  }
  const int64_t hi = kBug == Bug::past_context ? pos + 1 : pos;

  const int32_t* table = p.block_tables + (kBug == Bug::table0 ? 0 : b) * p.max_blocks_per_seq;
  constexpr bool kScaled = std::is_same<Cache, __nv_fp8_e4m3>::value && kBug != Bug::fp8_noscale;
  const float k_scale = kScaled ? p.k_scale : 1.f, v_scale = kScaled ? p.v_scale : 1.f;
  const float unit = p.score.scale * k_scale, softcap = p.score.softcap;
  const float slope = p.score.alibi ? p.score.alibi_slopes[h] : 0.f;

  const T* q = (const T*)p.q + row * d_n;
  float qr[kDims];
  for (int c = 0; c < kDims; ++c) {
    const int64_t d = lane + 32 * c;
    qr[c] = d < d_n ? to_float(q[d]) : 0.f;
  }
  float m = -INFINITY, s = 0.f, acc[kDims] = {};
  for (int64_t j = lo + warp; j <= hi; j += kWarps) {
    const int64_t block = kBug == Bug::logical_block ? j / bs : table[j / bs], slot = j % bs;
    const int64_t at = ((block * bs + slot) * p.kv_heads + g) * d_n;  // key j's kv head g
    const Cache* k = (const Cache*)p.k_cache + at;
    const Cache* v = (const Cache*)p.v_cache + at;
    float dot = 0.f;
    for (int c = 0; c < kDims; ++c) {
      const int64_t d = lane + 32 * c;
      if (d < d_n) dot += qr[c] * to_float(k[d]);
    }
    float score = mutant::warp_sum(dot) * unit;
    if (softcap > 0.f) score = softcap * tanhf(score / softcap);
    if (p.score.alibi) score -= slope * fabsf((float)(pos - j));
    const float m_new = fmaxf(m, score), alpha = expf(m - m_new), pt = expf(score - m_new);
    s = s * alpha + pt;
    for (int c = 0; c < kDims; ++c) {
      const int64_t d = lane + 32 * c;
      acc[c] = acc[c] * alpha + (d < d_n ? pt * to_float(v[d]) : 0.f);
    }
    m = m_new;
  }

  // Merge the warps; the sink (a logit without a value) joins the max and the denominator.
  float* mine = part[warp];
  if (lane == 0) mine[0] = m, mine[1] = s;
  for (int c = 0; c < kDims; ++c) mine[2 + 32 * c + lane] = acc[c];
  __syncthreads();
  if (warp != 0) return;
  float mt = -INFINITY;
  for (int w = 0; w < kWarps; ++w) mt = fmaxf(mt, part[w][0]);
  const float sink = p.score.sinks ? p.score.sink_logits[h] : -INFINITY;
  mt = fmaxf(mt, sink);
  float st = 0.f, out[kDims] = {};
  for (int w = 0; w < kWarps; ++w) {
    const float f = part[w][0] == -INFINITY ? 0.f : expf(part[w][0] - mt);
    st += part[w][1] * f;
    for (int c = 0; c < kDims; ++c) out[c] += part[w][2 + 32 * c + lane] * f;
  }
  if (p.score.sinks && kBug != Bug::sink_ignored) st += expf(sink - mt);
  // A query that sees no key outputs zeros (none here: a query sees itself). `st != 0`, not
  // `st > 0`: a NaN read from the cache must reach the output.
  T* o = (T*)p.o + row * d_n;
  for (int c = 0; c < kDims; ++c) {
    const int64_t d = lane + 32 * c;
    if (d < d_n) o[d] = from_float<T>(st != 0.f ? out[c] / st * v_scale : 0.f);
  }
}

template <Bug kBug>
cudaError_t launch(const void* params, void*, cudaStream_t stream) {
  const auto& p = *(const attnbench_ragged_params*)params;
  return mutant::by_dtype(p.dtype, [&](auto t) {
    using T = decltype(t);
    const unsigned grid = (unsigned)(p.total_queries * p.heads);
    if (p.kv_dtype == ATTNBENCH_FP8_E4M3)
      ragged_kernel<T, __nv_fp8_e4m3, kBug><<<grid, kWarps * 32, 0, stream>>>(p);
    else
      ragged_kernel<T, T, kBug><<<grid, kWarps * 32, 0, stream>>>(p);
    return cudaGetLastError();
  });
}

const char* supports(const void* params, const attnbench_device*) {
  const auto& p = *(const attnbench_ragged_params*)params;
  if (p.dtype != ATTNBENCH_FP32 && p.dtype != ATTNBENCH_FP16 && p.dtype != ATTNBENCH_BF16)
    return "mutant suite kernel: fp32, fp16 and bf16 queries only";
  if (p.kv_dtype != p.dtype && p.kv_dtype != ATTNBENCH_FP8_E4M3)
    return "mutant suite kernel: the cache in the queries' dtype, or fp8";
  if (p.rope.style != 0) return "mutant suite kernel: no RoPE";
  if (p.head_dim > 32 * kDims) return "head_dim must be at most 256";
  if (p.total_queries * p.heads > 2147483647) return "total_queries * heads must be < 2^31 (gridDim.x)";
  return nullptr;
}

constexpr int32_t kOp = ATTNBENCH_OP_RAGGED;

const attnbench_variant variants[] = {
    {"ctl_ragged",
     "mutant suite control: a block per (query token, head), 4 warps online over strided keys through the block table",
     ATTNBENCH_OP_RAGGED, supports, nullptr, launch<Bug::none>},
    MUTANT("mut_ragged_top_left", top_left, "query t of a sequence at position t (top-left), not context - query_len + t"),
    MUTANT("mut_ragged_seq_off_by_one", seq_off_by_one,
           "finds the sequence with cu_seqlens_q[b] < token: each first token goes to the sequence before"),
    MUTANT("mut_ragged_past_context", past_context, "reads one key past the keys the query sees"),
    MUTANT("mut_ragged_logical_block", logical_block, "uses the logical block number as the physical block"),
    MUTANT("mut_ragged_table0", table0, "every sequence reads sequence 0's block table"),
    MUTANT("mut_ragged_sink_ignored", sink_ignored, "leaves the attention sink out of the softmax's denominator"),
    MUTANT("mut_ragged_fp8_noscale", fp8_noscale, "loads the fp8 cache without k_scale / v_scale"),
    MUTANT("mut_ragged_window_off_by_one", window_off_by_one, "a window keeps one key more than `window`"),
};

}  // namespace

ATTNBENCH_PLUGIN(variants)
