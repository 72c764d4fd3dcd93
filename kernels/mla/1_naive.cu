// mla rung 1, naive: the learner's kernel for multi-head latent attention decode, one block of 128
// threads per output row (sequence b, query token t, head h), everything in fp32 with the exact
// expf. It is attention with head_dim 576 for the scores and 512 for the values, over one
// latent KV head: the row's query token sits at position context - s_q + t (its s_q - 1 - t
// speculative successors are after it; without causal it sees the whole context), and its keys
// [0, that position] are found through the sequence's block table one at a time, token j in
// slot j % block_size of block table[j / block_size], so any block size works. Two passes over
// the keys, as ragged's naive rung: one thread per key computes its 576-wide dot product (its
// own row, uncoalesced) for the max; then again in chunks of 128 keys whose exp(s - max) go to
// shared memory beside each key's row, where one thread per latent dim sums p · value (the
// first latent_dim values of the same row, coalesced along the dims). Recomputing the scores
// costs a second read of the keys and needs no score workspace. An fp8 cache (FlashMLA's
// layout: 512 e4m3 codes, four fp32 scales, 64 bf16 RoPE values a token) is dequantised as it
// is read, code · its tile's scale.
// What it does not do is the point of the next rung: every head of a sequence reads the whole
// latent cache again, and every query token too, so a batch of heads · s_q rows moves heads ·
// s_q times the bytes the latent cache holds, where MLA's whole design is that all heads share
// one read. Verified on an H100 (runs 273 and 277).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <climits>
#include <cmath>
#include <cstdint>
#include <string>

#include "kernels/common/dispatch.cuh"
#include "kernels/common/reduce.cuh"
#include "kernels/common/storage.cuh"
#include "kernels/mla/rungs.hpp"

namespace attnbench::mla_impl {
namespace {

constexpr int kThreads = 128;
constexpr int kMaxLatent = 1024, kMaxRope = 256;
constexpr int kLatentPerThread = kMaxLatent / kThreads;
constexpr int kFp8Tile = 128;  // latent values per fp8 scale

// One cached token's row, in the queries' dtype T: width values.
template <class T>
struct DenseRow {
  const T* v;
  __device__ DenseRow(const uint8_t* token, const MlaParams&) : v(reinterpret_cast<const T*>(token)) {}
  static int64_t bytes(const MlaParams& p) { return p.width() * static_cast<int64_t>(sizeof(T)); }
  __device__ float dot(const float* q, int latent_dim, int rope_dim) const {
    float s = 0.f;
    for (int d = 0; d < latent_dim + rope_dim; ++d) s = fmaf(q[d], to_float(v[d]), s);
    return s;
  }
  __device__ float value(int d) const { return to_float(v[d]); }
};

// One cached token's row in FlashMLA's fp8 layout: latent_dim e4m3 codes, latent_dim / 128 fp32
// scales, rope_dim bf16 RoPE values. A latent value is code · its tile's scale.
struct Fp8Row {
  const Fp8* codes;
  const float* scales;
  const __nv_bfloat16* rope;
  __device__ Fp8Row(const uint8_t* token, const MlaParams& p)
      : codes(reinterpret_cast<const Fp8*>(token)),
        scales(reinterpret_cast<const float*>(token + p.latent_dim)),
        rope(reinterpret_cast<const __nv_bfloat16*>(token + p.latent_dim + 4 * (p.latent_dim / kFp8Tile))) {}
  static int64_t bytes(const MlaParams& p) { return p.latent_dim + 4 * (p.latent_dim / kFp8Tile) + 2 * p.rope_dim; }
  __device__ float dot(const float* q, int latent_dim, int rope_dim) const {
    float s = 0.f;
    for (int d = 0; d < latent_dim; ++d) s = fmaf(q[d], value(d), s);
    for (int d = 0; d < rope_dim; ++d) s = fmaf(q[latent_dim + d], __bfloat162float(rope[d]), s);
    return s;
  }
  __device__ float value(int d) const { return to_float(codes[d]) * scales[d / kFp8Tile]; }
};

// T: q and o; Row: how a cached token is stored (DenseRow<T> or Fp8Row).
template <class T, class Row>
__global__ void __launch_bounds__(kThreads) naive_kernel(const MlaParams p, const int64_t token_bytes) {
  __shared__ float sq[kMaxLatent + kMaxRope];
  __shared__ float sp[kThreads];           // a chunk's exp(s - max)
  __shared__ const uint8_t* sk[kThreads];  // and each of its keys' rows
  __shared__ float red[kThreads / 32];
  const int row = static_cast<int>(blockIdx.x);  // (b · s_q + t) · heads + h, o's row
  const int heads = static_cast<int>(p.heads), s_q = static_cast<int>(p.s_q);
  const int t = row / heads % s_q, b = row / heads / s_q;
  const int latent_dim = static_cast<int>(p.latent_dim), rope_dim = static_cast<int>(p.rope_dim);
  const int width = latent_dim + rope_dim;
  const int tid = static_cast<int>(threadIdx.x);

  const int context = p.context_lens[b];
  const int last = p.causal ? context - s_q + t : context - 1;  // keys [0, last]: never empty (context >= s_q)
  const int32_t* table = p.block_tables + int64_t{b} * p.max_blocks_per_seq;
  const uint8_t* cache = static_cast<const uint8_t*>(p.cache);
  const int bs = static_cast<int>(p.block_size);
  const auto token = [&](int j) { return cache + (int64_t{table[j / bs]} * bs + j % bs) * token_bytes; };

  const T* q = static_cast<const T*>(p.q) + int64_t{row} * width;
  for (int d = tid; d < width; d += kThreads) sq[d] = to_float(q[d]);
  __syncthreads();

  // Pass 1: the max of s = scale · q·k.
  float m = -INFINITY;
  for (int j = tid; j <= last; j += kThreads) m = fmaxf(m, Row(token(j), p).dot(sq, latent_dim, rope_dim) * p.scale);
  m = block_reduce<true, kThreads / 32>(m, red);

  // Pass 2: chunks of kThreads keys, each thread one key's p, then one thread per latent dim sums p·v.
  float acc[kLatentPerThread] = {};
  float l = 0.f;
  for (int j0 = 0; j0 <= last; j0 += kThreads) {
    const int j = j0 + tid;
    if (j <= last) {
      const uint8_t* k = token(j);
      const float e = expf(Row(k, p).dot(sq, latent_dim, rope_dim) * p.scale - m);
      sp[tid] = e;
      sk[tid] = k;
      l += e;
    }
    __syncthreads();
    const int n = min(kThreads, last - j0 + 1);  // keys past `last` are never read: they may be NaN
#pragma unroll
    for (int i = 0; i < kLatentPerThread; ++i) {
      const int d = tid + i * kThreads;
      if (d >= latent_dim) break;
      for (int u = 0; u < n; ++u) acc[i] = fmaf(sp[u], Row(sk[u], p).value(d), acc[i]);
    }
    __syncthreads();  // the chunk is read before the next overwrites it
  }
  l = block_reduce<false, kThreads / 32>(l, red);

  T* o = static_cast<T*>(p.o) + int64_t{row} * latent_dim;
#pragma unroll
  for (int i = 0; i < kLatentPerThread; ++i) {
    const int d = tid + i * kThreads;
    if (d < latent_dim) o[d] = from_float<T>(acc[i] / l);
  }
}

}  // namespace

void naive(const MlaParams& p, const LaunchContext& ctx) {
  with_storage(p.dtype, "mla/naive", [&](auto tag) {
    using T = decltype(tag);
    with_value<MlaCache::dtype, MlaCache::fp8>(p.cache_format, "mla/naive", "cache", [&](auto cache) {
      using Row = std::conditional_t<decltype(cache)::value == MlaCache::fp8, Fp8Row, DenseRow<T>>;
      naive_kernel<T, Row>
          <<<static_cast<unsigned>(p.batch * p.s_q * p.heads), kThreads, 0, ctx.stream>>>(p, Row::bytes(p));
    });
  });
  check_launch("mla/naive");
}

std::string common_reason(const MlaParams& p) {
  if (p.dtype != DType::fp32 && p.dtype != DType::fp16 && p.dtype != DType::bf16)
    return std::string("dtype ") + dtype_name(p.dtype) + " is not a query/output type (fp32, fp16, bf16)";
  if (p.batch < 1 || p.s_q < 1 || p.heads < 1) return "batch, s_q and heads must be >= 1";
  if (p.latent_dim < 1 || p.latent_dim > kMaxLatent) return "latent_dim must be in [1, 1024]";
  if (p.rope_dim < 0 || p.rope_dim > kMaxRope) return "rope_dim must be in [0, 256]";
  if (p.cache_format == MlaCache::fp8 && p.latent_dim % kFp8Tile != 0)
    return "an fp8 cache needs latent_dim a multiple of 128 (one scale per 128 latent values)";
  if (p.block_size < 1 || p.num_blocks < 1 || p.max_blocks_per_seq < 1)
    return "block_size, num_blocks and max_blocks_per_seq must be >= 1";
  if (p.max_blocks_per_seq * p.block_size > INT_MAX) return "max_blocks_per_seq * block_size must be < 2^31";
  if (p.longest_context < p.s_q || p.longest_context > p.max_blocks_per_seq * p.block_size)
    return "longest_context must be in [s_q, max_blocks_per_seq * block_size]";
  if (!(p.scale > 0) || !std::isfinite(p.scale)) return "scale must be positive and finite";
  return {};
}

std::string naive_supports(const MlaParams& p, const DeviceCaps&) {
  if (const std::string r = common_reason(p); !r.empty()) return r;
  if (p.batch * p.s_q * p.heads > INT_MAX) return "batch * s_q * heads must be < 2^31 (blocks in gridDim.x)";
  return {};
}

}  // namespace attnbench::mla_impl
