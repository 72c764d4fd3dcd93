// Mutant suite, paged decode over vLLM's cache layouts (tests/mutants/README.md). One correct
// kernel, ctl_paged, and mutants of it that each carry exactly one bug, chosen at compile
// time by `Bug`.
//
// The kernel: one block of 4 warps per (sequence, query head); warp w takes tokens w, w + 4,
// ... of the context, finds each token's block through the sequence's block table and its
// key and value in the pool's layouts (k [block][kv_head][d / x][slot][x], v
// [block][kv_head][d][slot]), dequantises an fp8 cache with k_scale and v_scale, and keeps
// an online softmax in fp32; the warps merge at the end. GQA; no window, ALiBi,
// soft-capping or RoPE (refused).
//   attnbench verify tests/mutants/cases/paged.toml --plugin tests/mutants/paged.cu
#include "mutant_math.cuh"

namespace {

using mutant::from_float;
using mutant::to_float;

enum class Bug {
  none,           // the control
  logical_block,  // uses the token's logical block number as the physical block (no table)
  table0,         // every sequence reads sequence 0's block table row
  k_layout,       // reads the key cache in the value cache's layout ([d][slot], no x runs)
  fp8_noscale,    // loads an fp8 cache without multiplying by k_scale / v_scale
};

constexpr int kWarps = 4, kDims = 8;  // head_dim <= 256

template <class T, class Cache, Bug kBug>
__global__ void paged_kernel(attnbench_paged_params p) {
  __shared__ float part[kWarps][2 + 32 * kDims];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t b = blockIdx.y, h = blockIdx.x, d_n = p.head_dim, bs = p.block_size;
  const int64_t g = h / (p.heads / p.kv_heads);
  const int64_t x = 16 / sizeof(Cache);  // a key's head dims come in runs of x
  const int64_t context = p.context_lens[b];
  const int32_t* table = p.block_tables + (kBug == Bug::table0 ? 0 : b) * p.max_blocks_per_seq;
  const float k_scale = kBug == Bug::fp8_noscale ? 1.f : p.k_scale;
  const float v_scale = kBug == Bug::fp8_noscale ? 1.f : p.v_scale;
  const T* q = (const T*)p.q + (b * p.heads + h) * d_n;
  float qr[kDims];
  for (int c = 0; c < kDims; ++c) {
    const int64_t d = lane + 32 * c;
    qr[c] = d < d_n ? to_float(q[d]) : 0.f;
  }
  float m = -INFINITY, s = 0.f, acc[kDims] = {};
  for (int64_t t = warp; t < context; t += kWarps) {
    const int64_t block = kBug == Bug::logical_block ? t / bs : table[t / bs], slot = t % bs;
    const Cache* k = (const Cache*)p.k_cache + (block * p.kv_heads + g) * d_n * bs;
    const Cache* v = (const Cache*)p.v_cache + (block * p.kv_heads + g) * d_n * bs;
    float dot = 0.f;
    for (int c = 0; c < kDims; ++c) {
      const int64_t d = lane + 32 * c;
      if (d >= d_n) continue;
      const int64_t at = kBug == Bug::k_layout ? d * bs + slot : (d / x) * bs * x + slot * x + d % x;
      dot += qr[c] * to_float(k[at]) * k_scale;
    }
    const float score = mutant::warp_sum(dot) * p.score.scale;
    const float m_new = fmaxf(m, score), alpha = expf(m - m_new), pt = expf(score - m_new);
    s = s * alpha + pt;
    for (int c = 0; c < kDims; ++c) {
      const int64_t d = lane + 32 * c;
      acc[c] = acc[c] * alpha + (d < d_n ? pt * to_float(v[d * bs + slot]) * v_scale : 0.f);
    }
    m = m_new;
  }
  float* mine = part[warp];
  if (lane == 0) mine[0] = m, mine[1] = s;
  for (int c = 0; c < kDims; ++c) mine[2 + 32 * c + lane] = acc[c];
  __syncthreads();
  if (warp != 0) return;
  float mt = -INFINITY;
  for (int w = 0; w < kWarps; ++w) mt = fmaxf(mt, part[w][0]);
  float st = 0.f, at[kDims] = {};
  for (int w = 0; w < kWarps; ++w) {
    const float f = part[w][0] == -INFINITY ? 0.f : expf(part[w][0] - mt);
    st += part[w][1] * f;
    for (int c = 0; c < kDims; ++c) at[c] += part[w][2 + 32 * c + lane] * f;
  }
  T* o = (T*)p.o + (b * p.heads + h) * d_n;
  for (int c = 0; c < kDims; ++c) {
    const int64_t d = lane + 32 * c;
    if (d < d_n) o[d] = from_float<T>(st > 0.f ? at[c] / st : 0.f);
  }
}

template <Bug kBug>
cudaError_t launch(const void* params, void*, cudaStream_t stream) {
  const auto& p = *(const attnbench_paged_params*)params;
  return mutant::by_dtype(p.dtype, [&](auto t) {
    using T = decltype(t);
    const dim3 grid((unsigned)p.heads, (unsigned)p.batch);
    if (p.kv_dtype == ATTNBENCH_FP8_E4M3)
      paged_kernel<T, __nv_fp8_e4m3, kBug><<<grid, kWarps * 32, 0, stream>>>(p);
    else
      paged_kernel<T, T, kBug><<<grid, kWarps * 32, 0, stream>>>(p);
    return cudaGetLastError();
  });
}

const char* supports(const void* params, const attnbench_device*) {
  const auto& p = *(const attnbench_paged_params*)params;
  if (p.kv_dtype != p.dtype && p.kv_dtype != ATTNBENCH_FP8_E4M3)
    return "mutant suite kernel: the cache in the queries' dtype, or fp8";
  return mutant::one_query_refuses(p, kDims);
}

constexpr int32_t kOp = ATTNBENCH_OP_PAGED;

const attnbench_variant variants[] = {
    {"ctl_paged", "mutant suite control: a block per (sequence, head), 4 warps online over strided tokens",
     ATTNBENCH_OP_PAGED, supports, nullptr, launch<Bug::none>},
    MUTANT("mut_paged_logical_block", logical_block, "uses the logical block number as the physical block"),
    MUTANT("mut_paged_table0", table0, "every sequence reads sequence 0's block table"),
    MUTANT("mut_paged_k_layout", k_layout, "reads the key cache in the value cache's layout"),
    MUTANT("mut_paged_fp8_noscale", fp8_noscale, "loads the fp8 cache without k_scale / v_scale"),
};


}  // namespace

ATTNBENCH_PLUGIN(variants)
