// Mutant suite, decode over a dense KV cache of varying lengths (tests/mutants/README.md).
// One correct kernel, ctl_decode, and mutants of it that each carry exactly one bug, chosen
// at compile time by `Bug`.
//
// The kernel: one block of 4 warps per (sequence, query head); warp w walks keys w, w + 4,
// ... of the sequence's context with an online softmax in fp32 (a key's dot product split
// over the lanes, each lane owning head dims lane, lane + 32, ...), then the warps merge
// their (max, sum, accumulator) through shared memory, each rescaled to the common max.
// GQA; no window, ALiBi, soft-capping or RoPE (refused).
//   attnbench verify tests/mutants/cases/decode-varlen.toml --plugin tests/mutants/decode.cu
#include "mutant_math.cuh"

namespace {

using mutant::from_float;
using mutant::to_float;

enum class Bug {
  none,         // the control
  len0,         // every sequence takes sequence 0's context length
  seq0,         // every sequence reads sequence 0's cache (the batch offset left out)
  drop_last,    // drops the last key of the context
  no_rescale,   // merges the warps' sums and accumulators without rescaling them to the common max
};

constexpr int kWarps = 4, kDims = 8;  // head_dim <= 256

template <class T, Bug kBug>
__global__ void decode_kernel(attnbench_decode_params p) {
  __shared__ float part[kWarps][2 + 32 * kDims];  // each warp's max, sum and accumulator
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t b = blockIdx.y, h = blockIdx.x, d_n = p.head_dim;
  const int64_t g = h / (p.heads / p.kv_heads);
  int64_t context = p.context_lens[kBug == Bug::len0 ? 0 : b];
  if (kBug == Bug::drop_last) context -= 1;
  const int64_t cache_b = kBug == Bug::seq0 ? 0 : b;
  const T* q = (const T*)p.q + (b * p.heads + h) * d_n;
  float qr[kDims];
  for (int c = 0; c < kDims; ++c) {
    const int64_t d = lane + 32 * c;
    qr[c] = d < d_n ? to_float(q[d]) : 0.f;
  }
  float m = -INFINITY, s = 0.f, acc[kDims] = {};
  for (int64_t j = warp; j < context; j += kWarps) {
    const int64_t row = ((cache_b * p.max_context + j) * p.kv_heads + g) * d_n;
    const T* k = (const T*)p.k_cache + row;
    const T* v = (const T*)p.v_cache + row;
    float dot = 0.f;
    for (int c = 0; c < kDims; ++c) {
      const int64_t d = lane + 32 * c;
      if (d < d_n) dot += qr[c] * to_float(k[d]);
    }
    const float score = mutant::warp_sum(dot) * p.score.scale;
    const float m_new = fmaxf(m, score), alpha = expf(m - m_new), pj = expf(score - m_new);
    s = s * alpha + pj;
    for (int c = 0; c < kDims; ++c) {
      const int64_t d = lane + 32 * c;
      acc[c] = acc[c] * alpha + (d < d_n ? pj * to_float(v[d]) : 0.f);
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
    float f = part[w][0] == -INFINITY ? 0.f : expf(part[w][0] - mt);  // a warp with no key adds nothing
    if (kBug == Bug::no_rescale) f = part[w][0] == -INFINITY ? 0.f : 1.f;
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
  const auto& p = *(const attnbench_decode_params*)params;
  return mutant::by_dtype(p.dtype, [&](auto t) {
    using T = decltype(t);
    decode_kernel<T, kBug><<<dim3((unsigned)p.heads, (unsigned)p.batch), kWarps * 32, 0, stream>>>(p);
    return cudaGetLastError();
  });
}

const char* supports(const void* params, const attnbench_device*) {
  const auto& p = *(const attnbench_decode_params*)params;
  return mutant::one_query_refuses(p, kDims);
}

constexpr int32_t kOp = ATTNBENCH_OP_DECODE;

const attnbench_variant variants[] = {
    {"ctl_decode", "mutant suite control: a block per (sequence, head), 4 warps online over strided keys",
     ATTNBENCH_OP_DECODE, supports, nullptr, launch<Bug::none>},
    MUTANT("mut_decode_len0", len0, "every sequence takes sequence 0's context length"),
    MUTANT("mut_decode_seq0", seq0, "every sequence reads sequence 0's cache"),
    MUTANT("mut_decode_drop_last", drop_last, "drops the last key of the context"),
    MUTANT("mut_decode_no_rescale", no_rescale, "merges the warps' partial sums without rescaling to the common max"),
};


}  // namespace

ATTNBENCH_PLUGIN(variants)
