// paged family: decode attention (one new query token per sequence) over a KV cache kept in
// fixed-size blocks of a shared pool and found through per-sequence block tables, in vLLM's
// layouts (paged.hpp): k_cache [blocks, kv_heads, head_dim / x, block_size, x], so that 16 bytes
// are x consecutive dims of one key; v_cache [blocks, kv_heads, head_dim, block_size], so that 16
// bytes are consecutive tokens of one dim. q/o fp32, fp16 or bf16; the cache in q's dtype or fp8
// e4m3 (value / scale; k_scale and v_scale are folded into the score scale and the output).
// Scores, softmax statistics and accumulators are fp32. Like dense decode (decode.cu), a step
// moves every cached byte once for ~2·group FLOPs per byte: memory bound, so what separates the
// variants is how many times each byte is read and how many bytes are in flight.
//
//   v1           vLLM's PagedAttention v1: one block of 4 warps per (sequence, query head), the
//                whole context in one pass. Warps take cache blocks in turn; in a warp, a thread
//                group of 32 / block_size lanes takes one key and reads it in 16-byte chunks of
//                the K layout (dot products reduced across the group by shuffles). Every logit
//                goes to dynamic shared memory (4 bytes per token of the longest context), the
//                block's max and sum turn them into probabilities, then each warp sums p_t v_t
//                over its cache blocks (lanes take 16-byte runs of tokens of one dim), and the
//                warps add their rows through shared memory. Reads K and V once per query head
//                (group times per byte under GQA) and refuses contexts whose logits do not fit
//                the card's opt-in shared memory. The baseline.
//   v2           vLLM's PagedAttention v2: the same kernel over partitions of partition_size
//                tokens (a multiple of block_size), one block per (sequence, head, partition):
//                each writes its max logit, its exp sum and its normalised fp32 output to the
//                workspace, and a reduce kernel merges the partitions with the stable formula
//                o = sum_p e_p exp2(m_p - M) o_p / sum_p e_p exp2(m_p - M). A sequence of one
//                partition writes o directly and the reduce skips it, as vLLM's does. Fills the
//                card at small batch; still one read per query head.
//   paged_flash  ours: decode.cu's split_kv on the paged layout. One block per (sequence, kv
//                head, split) computes every query head of its GQA group (up to 8; larger groups
//                take side-by-side head tiles that share bytes through L2), so each cache byte
//                is read once; online softmax (running max in log2 units, lazy rescale); splits
//                fill SMs x occupancy in one round (plan_splits), fp32 partials and a combine
//                launched with programmatic dependent launch on sm_90 (the partial layout, the
//                combine, its launch and the device helpers are split_kv.cuh's, shared with
//                decode.cu). The block's block-table entries are copied to shared memory before
//                the key loop, so a key's address is one shared load and two integer ops
//                whatever the block size. fp16/bf16 queries with head_dim <= 128 run on tensor
//                cores (mma.sync m16n8k16, fp32 accumulators), as decode.cu's kernel does: 2
//                warps per block, each streaming its key tiles through a 3-stage cp.async ring
//                in shared memory, copied whole lines at a time into the layouts ldmatrix wants
//                whatever the block size (see mma_paged_kernel):
//                  Sᵀ = K Qᵀ takes 16 keys as M, the group's heads as N: a 16-byte K chunk is x
//                  dims of one key, so the ring holds K as [chunk][key] and ldmatrix hands out
//                  A fragments directly.
//                  Oᵀ += Vᵀ Pᵀ takes 16 dims as M: a V row of the layout is a row of Vᵀ, so the
//                  ring holds V as [dim][tokens] and ldmatrix (not .trans) gives A.
//                Where a kv head's cache block is one region of head_dim x 16 bytes (fp8 at
//                block 16, fp16/bf16 at block 8: 2 KB at d128), sm_90 fills the ring with bulk
//                copies of whole regions instead (the TMA unit, one mbarrier per stage), which
//                are already in those layouts: cp.async moved 2 KB regions at ~70% of the read
//                bandwidth, bulk copies at ~91%, as fast as 4 KB regions (bench notes, run 23).
//                An fp8 cache runs the mma in fp16 (e4m3 -> fp16 is exact, one cvt per 2 values;
//                bf16 queries are rounded to fp16 once, in shared memory): a tile is 32 keys
//                (two Sᵀ sub-tiles), so that a stage holds the same 8 KB as with bf16. fp32 (tf32 would
//                miss the fp32 tolerance) and head_dim > 128 run a CUDA-core kernel: one thread
//                per key for Sᵀ (consecutive keys are consecutive 16-byte chunks of the K
//                layout), one thread per dim for Oᵀ, 128-key steps, 4 heads per block (1 for
//                MHA). Limits: block_size a power of two from 8 to 256; bf16 queries over an
//                fp8 cache are rounded to fp16, so |q| must stay below 65504.
//
// reshape_and_cache writes token i's K and V rows into slot slot_mapping[i]: one thread per 16
// bytes of the K layout (x dims of one key), which also writes those dims of V (one element per
// dim row, block_size elements apart); fp8 caches store __nv_cvt_float_to_fp8(value / scale,
// satfinite), which rounds to nearest even and saturates at +-448 as app/numeric.cpp does.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/common.cuh"
#include "kernels/paged.hpp"
#include "kernels/split_kv.cuh"

namespace attnbench {
namespace {

using namespace splitkv;

// ---------------------------------------------------------------------------------------
// Helpers

// Storage type of an fp8 e4m3 cache element (one byte).
using Fp8 = __nv_fp8_e4m3;
template <class C>
constexpr bool kIsFp8 = std::is_same_v<C, Fp8>;

// Block-table entries a paged_flash block keeps in shared memory (4 KB): splits are cut so that
// a split's keys span at most kTable cache blocks (max_splits, and so the workspace, count those).
constexpr int kTable = 1024;
// The longest key step of any paged_flash kernel (the CUDA-core kernel's 128 keys).
constexpr int64_t kMaxStep = 128;

// Everything a kernel reads, derived once on the host from PagedParams.
struct Paged {
  const void* q;                // [batch, heads, head_dim], T
  const void* k;                // [num_blocks, kv_heads, head_dim / x, block_size, x], C
  const void* v;                // [num_blocks, kv_heads, head_dim, block_size], C
  void* o;                      // [batch, heads, head_dim], T
  const int32_t* block_tables;  // [batch, max_blocks]
  const int32_t* context_lens;  // [batch]
  // paged_flash, splits > 1: [batch, heads, splits, head_dim] unnormalised o (times v_scale) and
  // [batch, heads, splits] (m, l), m in log2 units.
  float* part_o;
  float2* part_ml;
  // v2, several partitions: [batch, heads, max_parts, head_dim] normalised o (times v_scale),
  // [batch, heads, max_parts] max logit (log2 units) and exp sum.
  float* tmp_out;
  float* max_logits;
  float* exp_sums;
  int64_t block_stride;  // cache elements between pool blocks: kv_heads·head_dim·block_size
  int head_stride;       // cache elements between kv heads of a block: head_dim·block_size
  int heads, kv_heads, group, head_dim, block_size, log2_bs, max_blocks;
  int head_tiles;  // paged_flash blocks per (sequence, kv head) side by side
  int splits;      // paged_flash blocks along the context; 1: the block writes o itself
  int chunk;       // paged_flash keys per split
  int partition;   // v1 / v2 tokens per partition (v1: the whole context)
  int max_parts;   // v2 partitions of the longest context
  float score_log2;  // softmax scale · log2(e) · k_scale
  float v_scale;
  bool alibi;
};

// The block-table entries of a paged_flash block: entry (key >> log2_bs) - first in shared
// memory. A last split longer than longest_context promised may run past the window; its keys
// read the table from global memory.
struct Table {
  const int* s;
  const int32_t* g;
  int first;
  __device__ __forceinline__ int block_of(int key, int log2_bs) const {
    const int i = (key >> log2_bs) - first;
    return i < kTable ? s[i] : g[i];
  }
};

// Copies the entries of keys [w.begin, w.end) to s; a barrier must follow before use.
__device__ __forceinline__ Table load_table(int* s, const Paged& p, const Work& w) {
  Table t;
  t.first = w.begin >> p.log2_bs;
  t.g = p.block_tables + int64_t{w.b} * p.max_blocks + t.first;
  t.s = s;
  const int n = min(kTable, ((w.end - 1) >> p.log2_bs) - t.first + 1);
  for (int i = threadIdx.x; i < n; i += blockDim.x) s[i] = t.g[i];
  return t;
}

// Four e4m3 bytes -> two f16x2 words (bytes 0, 1 and bytes 2, 3; the lower byte in the lower
// half). Exact: every e4m3 value, subnormals included, is an fp16 value.
__device__ __forceinline__ void e4m3x4_to_f16x4(uint32_t w, uint32_t& lo, uint32_t& hi) {
  asm("{\n .reg .b16 a, b;\n mov.b32 {a, b}, %2;\n cvt.rn.f16x2.e4m3x2 %0, a;\n cvt.rn.f16x2.e4m3x2 %1, b;\n}\n"
      : "=r"(lo), "=r"(hi)
      : "r"(w));
}

// kWords 32-bit words of cache elements C -> floats (4 / sizeof(C) per word), in order.
template <class C, int kWords>
__device__ __forceinline__ void to_floats(const uint32_t* w, float* f) {
#pragma unroll
  for (int i = 0; i < kWords; ++i) {
    if constexpr (std::is_same_v<C, float>) {
      f[i] = __uint_as_float(w[i]);
    } else if constexpr (std::is_same_v<C, __nv_bfloat16>) {
      f[2 * i] = __uint_as_float(w[i] << 16);
      f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
    } else if constexpr (std::is_same_v<C, __half>) {
      const float2 h = __half22float2(*reinterpret_cast<const __half2*>(&w[i]));
      f[2 * i] = h.x;
      f[2 * i + 1] = h.y;
    } else {
      uint32_t lo, hi;
      e4m3x4_to_f16x4(w[i], lo, hi);
      const float2 a = __half22float2(*reinterpret_cast<const __half2*>(&lo));
      const float2 b = __half22float2(*reinterpret_cast<const __half2*>(&hi));
      f[4 * i] = a.x;
      f[4 * i + 1] = a.y;
      f[4 * i + 2] = b.x;
      f[4 * i + 3] = b.y;
    }
  }
}

// Block-wide max or sum over kWarps warps (every thread gets it). The second barrier lets `red`
// be reused by the next call.
template <bool kMax, int kWarps>
__device__ __forceinline__ float block_reduce(float v, float* red) {
  v = kMax ? warp_max(v) : warp_sum(v);
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = v;
  __syncthreads();
  float r = red[0];
#pragma unroll
  for (int i = 1; i < kWarps; ++i) r = kMax ? fmaxf(r, red[i]) : r + red[i];
  __syncthreads();
  return r;
}

// ---------------------------------------------------------------------------------------
// v1 / v2 (vLLM's PagedAttention)

constexpr int kVllmWarps = 4;
constexpr int kVllmThreads = 32 * kVllmWarps;

// Bytes of static shared memory of vllm_kernel<kD>: q, the warps' output rows, the reductions.
constexpr int64_t vllm_static_smem(int kD) { return 4 * (kD + kVllmWarps * kD + kVllmWarps); }

// One block per (query head, sequence, partition): grid (heads, batch, partitions), logits of
// the partition's tokens in dynamic shared memory. kD: head_dim class (128 or 256, head_dim
// <= kD runs with the rest skipped); kBS: block size (8, 16, 32).
template <class T, class C, int kD, int kBS>
__global__ void __launch_bounds__(kVllmThreads) vllm_kernel(const Paged p) {
  extern __shared__ float logits[];  // [partition tokens], log2 units, then probabilities
  __shared__ float sq[kD];
  __shared__ float red[kVllmWarps];
  __shared__ float out_red[kVllmWarps][kD];
  const int h = static_cast<int>(blockIdx.x), b = static_cast<int>(blockIdx.y), part = static_cast<int>(blockIdx.z);
  const int ctx = p.context_lens[b];
  const int t0 = part * p.partition;
  if (t0 >= ctx) return;  // a partition past this sequence's context: the reduce skips it
  const int t1 = min(ctx, t0 + p.partition);
  // max_parts bounds it should a context exceed longest_context: never a write past the workspace.
  const int nparts = min(p.max_parts, (ctx + p.partition - 1) / p.partition);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int kvh = h / p.group;

  const T* q = static_cast<const T*>(p.q) + (int64_t{b} * p.heads + h) * p.head_dim;
  for (int d = threadIdx.x; d < kD; d += kVllmThreads) sq[d] = d < p.head_dim ? to_float(q[d]) : 0.f;
  __syncthreads();

  const int32_t* table = p.block_tables + int64_t{b} * p.max_blocks;
  const C* kc = static_cast<const C*>(p.k) + int64_t{kvh} * p.head_stride;
  const C* vc = static_cast<const C*>(p.v) + int64_t{kvh} * p.head_stride;
  const int blk_begin = t0 / kBS, blk_end = (t1 + kBS - 1) / kBS;
  const float slope = p.alibi ? alibi_slope_log2(h, p.heads) : 0.f;
  const int pos = ctx - 1;

  // Q·K: a thread group of kTG lanes per key, each lane a 16-byte chunk (x dims) at a time.
  constexpr int kTG = 32 / kBS > 1 ? 32 / kBS : 1;
  constexpr int kX = 16 / static_cast<int>(sizeof(C));
  const int nch = p.head_dim / kX;
  const int tt = lane / kTG, gl = lane % kTG;  // token of the block, lane of the group
  float qk_max = -INFINITY;
  for (int bi = blk_begin + warp; bi < blk_end; bi += kVllmWarps) {
    const C* kb = kc + int64_t{table[bi]} * p.block_stride + tt * kX;
    const int token = bi * kBS + tt;
    float dot = 0.f;
    if (token < t1) {
#pragma unroll 2
      for (int c = gl; c < nch; c += kTG) {
        const uint4 raw = *reinterpret_cast<const uint4*>(kb + c * kBS * kX);
        const uint32_t wv[4] = {raw.x, raw.y, raw.z, raw.w};
        float kf[kX];
        to_floats<C, 4>(wv, kf);
#pragma unroll
        for (int e = 0; e < kX; ++e) dot = fmaf(sq[c * kX + e], kf[e], dot);
      }
    }
#pragma unroll
    for (int off = kTG / 2; off > 0; off >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, off);
    if (token < t1) {
      const float x = fmaf(dot, p.score_log2, slope * static_cast<float>(token - pos));
      if (gl == 0) logits[token - t0] = x;
      qk_max = fmaxf(qk_max, x);
    }
  }
  qk_max = block_reduce<true, kVllmWarps>(qk_max, red);  // finite: the partition holds a key

  float sum = 0.f;
  for (int i = threadIdx.x; i < t1 - t0; i += kVllmThreads) {
    const float e = exp2_approx(logits[i] - qk_max);
    logits[i] = e;
    sum += e;
  }
  sum = block_reduce<false, kVllmWarps>(sum, red);  // >= 1; its barriers publish the exps
  const float inv_sum = 1.f / sum;
  for (int i = threadIdx.x; i < t1 - t0; i += kVllmThreads) logits[i] *= inv_sum;
  __syncthreads();

  // P·V: lanes take kVV-token runs of one dim row of a cache block; kNV runs per row.
  constexpr int kVV = 16 / static_cast<int>(sizeof(C)) < kBS ? 16 / static_cast<int>(sizeof(C)) : kBS;
  constexpr int kNV = kBS / kVV;
  constexpr int kRowsPerIter = 32 / kNV;
  constexpr int kRows = (kD + kRowsPerIter - 1) / kRowsPerIter;
  constexpr int kVWords = kVV * static_cast<int>(sizeof(C)) / 4;
  const int vv = lane % kNV, r0 = lane / kNV;
  float acc[kRows] = {};
  for (int bi = blk_begin + warp; bi < blk_end; bi += kVllmWarps) {
    const int tok = bi * kBS + vv * kVV;
    float pv[kVV];
#pragma unroll
    for (int e = 0; e < kVV; ++e) pv[e] = tok + e < t1 ? logits[tok + e - t0] : 0.f;
    const C* vb = vc + int64_t{table[bi]} * p.block_stride + vv * kVV;
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      const int d = r0 + kRowsPerIter * i;
      if (d >= p.head_dim) continue;
      uint32_t wv[kVWords];
      if constexpr (kVWords == 4) {
        const uint4 raw = *reinterpret_cast<const uint4*>(vb + d * kBS);
        wv[0] = raw.x, wv[1] = raw.y, wv[2] = raw.z, wv[3] = raw.w;
      } else {
        const uint2 raw = *reinterpret_cast<const uint2*>(vb + d * kBS);
        wv[0] = raw.x, wv[1] = raw.y;
      }
      float vf[kVV];
      to_floats<C, kVWords>(wv, vf);
      // Tokens past the partition hold NaN or another partition's keys: 0 * NaN is NaN, so
      // they are zeroed, not only weighted by p = 0.
#pragma unroll
      for (int e = 0; e < kVV; ++e) acc[i] = fmaf(pv[e], tok + e < t1 ? vf[e] : 0.f, acc[i]);
    }
  }
#pragma unroll
  for (int i = 0; i < kRows; ++i) {
#pragma unroll
    for (int off = kNV / 2; off > 0; off >>= 1) acc[i] += __shfl_xor_sync(0xffffffffu, acc[i], off);
  }
  if (vv == 0) {
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      const int d = r0 + kRowsPerIter * i;
      if (d < kD) out_red[warp][d] = acc[i];
    }
  }
  __syncthreads();
  const int64_t bh = int64_t{b} * p.heads + h;
  for (int d = threadIdx.x; d < p.head_dim; d += kVllmThreads) {
    float out = 0.f;
#pragma unroll
    for (int w = 0; w < kVllmWarps; ++w) out += out_red[w][d];
    out *= p.v_scale;
    if (nparts == 1)
      static_cast<T*>(p.o)[bh * p.head_dim + d] = from_float<T>(out);
    else
      p.tmp_out[(bh * p.max_parts + part) * p.head_dim + d] = out;
  }
  if (nparts > 1 && threadIdx.x == 0) {
    p.max_logits[bh * p.max_parts + part] = qk_max;
    p.exp_sums[bh * p.max_parts + part] = sum;
  }
}

// v2's reduce: block (head, sequence) merges the partitions of a sequence that has several:
// M = max m_p, w_p = e_p exp2(m_p - M), o = sum_p w_p o_p / sum_p w_p. Each thread recomputes
// the weights it needs from the (L1-resident) statistics rather than staging them in shared
// memory: a few dozen partitions cost a few dozen exp2 per output element.
template <class T>
__global__ void __launch_bounds__(kVllmThreads) vllm_reduce_kernel(const Paged p) {
  __shared__ float red[kVllmWarps];
  const int h = static_cast<int>(blockIdx.x), b = static_cast<int>(blockIdx.y);
  const int ctx = p.context_lens[b];
  const int n = min(p.max_parts, (ctx + p.partition - 1) / p.partition);
  if (n <= 1) return;  // the main kernel wrote o
  const int64_t bh = int64_t{b} * p.heads + h;
  const float* ml = p.max_logits + bh * p.max_parts;
  const float* es = p.exp_sums + bh * p.max_parts;
  float mx = -INFINITY;
  for (int i = threadIdx.x; i < n; i += kVllmThreads) mx = fmaxf(mx, ml[i]);
  mx = block_reduce<true, kVllmWarps>(mx, red);
  float total = 0.f;
  for (int i = threadIdx.x; i < n; i += kVllmThreads) total += es[i] * exp2_approx(ml[i] - mx);
  total = block_reduce<false, kVllmWarps>(total, red);
  const float inv = 1.f / total;
  const float* po = p.tmp_out + bh * p.max_parts * p.head_dim;
  for (int d = threadIdx.x; d < p.head_dim; d += kVllmThreads) {
    float acc = 0.f;
    for (int i = 0; i < n; ++i) acc = fmaf(es[i] * exp2_approx(ml[i] - mx), po[int64_t{i} * p.head_dim + d], acc);
    static_cast<T*>(p.o)[bh * p.head_dim + d] = from_float<T>(acc * inv);
  }
}

// ---------------------------------------------------------------------------------------
// paged_flash: tensor-core kernel

// T: q/o; C: the cache (T or Fp8). kD: head_dim class (64 or 128; a smaller head_dim runs
// zero-filled); kBulk: the ring is filled by bulk copies of whole cache-block regions (block
// size x sizeof(C) == 16, sm_90). Each warp owns a ring of kStages tile buffers in shared
// memory and keeps kStages - 1 tiles in flight while it computes one. A tile is 16 keys of a 16-bit cache or
// 32 of fp8: 4 KB of K and 4 KB of V at d128 either way. 2 warps x 3 stages: 48 KB of rings
// and 4 blocks per SM (8 warps, 16 tiles = 128 KB in flight), so that batch 64 x 8 kv heads
// runs in one round of 528 blocks; 3 x 2 timed the same, 4 x 2 and 2 x 4 (3 blocks per SM)
// 15-30% slower (bench notes, run 14).
template <class T, class C, int kD, bool kBulk>
struct PagedMmaCfg {
  static constexpr bool kFp8 = kIsFp8<C>;
  static constexpr int kWarps = 2;
  static constexpr int kStages = 3;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kSub = kFp8 ? 2 : 1;           // 16-key Sᵀ tiles per tile (k16 steps of Oᵀ)
  static constexpr int kKeys = 16 * kSub;             // keys per tile
  static constexpr int kHalf = kKeys / 2;             // tokens per 16-byte V copy
  static constexpr int kHeads = 8;                    // query heads per block: N of both products
  static constexpr int kX = 16 / static_cast<int>(sizeof(C));  // dims per 16-byte K chunk
  static constexpr int kSteps = kD / 16;              // k16 steps of Sᵀ = m16 tiles of Oᵀ
  static constexpr int kTileBytes = kKeys * kD * static_cast<int>(sizeof(C));  // K (or V) of a tile
  static constexpr int kStageBytes = 2 * kTileBytes;  // K then V
  static constexpr int kCopies = kTileBytes / 16 / 32;  // 16-byte copies per lane for K, and for V
  static constexpr int kQWords = kD / 2;              // 32-bit words of a Q row (fp16/bf16)
  static constexpr int kRingBytes = kWarps * kStages * kStageBytes;
  // Bulk copies (see mma_paged_kernel): the ring holds K and V region by region, 2 cache blocks
  // of kHalf tokens per tile, so a chunk (K) or a dim (V) of a block is 16 bytes, ...
  static constexpr int kRegion = kD * 16;                   // ... and a block's K (or V) kD x 16 B
  static constexpr int kChunkBytes = (kBulk ? kHalf : kKeys) * 16;  // between K chunks in the ring
  static constexpr int kBarOffset = kRingBytes + kHeads * kQWords * 4 + kTable * 4;
  static constexpr int kSmemBytes = kBarOffset + kWarps * kStages * 8;  // + an mbarrier per stage
};

// Row `row` (0..15) of Sᵀ sub-tile s holds tile key 16 s + key_of_row(row). 16-bit caches:
// row r = key r. fp8: a 16-byte V row of 16 tokens goes through ldmatrix as 8 16-bit
// elements, so a lane gets tokens 4t..4t + 3 of a dim, which become Oᵀ's k columns 2t, 2t + 1
// and 2t + 8, 2t + 9 (A fragment); Pᵀ's k rows are Sᵀ's rows, so Sᵀ's row 2t + e holds key
// 4t + e and row 8 + 2t + e key 4t + 2 + e (ldmatrix takes any key for any row).
template <bool kFp8>
__device__ __forceinline__ int key_of_row(int row) {
  return kFp8 ? 4 * ((row & 7) >> 1) + 2 * (row >> 3) + (row & 1) : row;
}
// Slot of tile key k in a K chunk of the ring: fp8's rows {0, 1, 4, 5, 8, 9, 12, 13} would
// meet in 4 bank groups; flipping bit 1 on keys 8..15 mod 16 spreads them over 8.
template <bool kFp8>
__device__ __forceinline__ int k_slot(int k) {
  return kFp8 ? k ^ (((k >> 3) & 1) << 1) : k;
}

// fp16/bf16 q, head_dim <= kD in {64, 128}, cache of q's type or fp8. One block: up to 8 query
// heads of one (sequence, kv head), keys [begin, end); warp w takes tiles w, w + kWarps, ...
// Lane = 4 g + t. m16n8k16 fragments (PTX ISA): A (16x16, row) {a0, a1, a2, a3} = rows {g,
// g + 8, g, g + 8} x cols {2t.., 2t.., 2t + 8.., 2t + 8..}; B (16x8, col) {b0, b1} = rows
// {2t.., 2t + 8..} x col g; C (16x8) = rows {g, g, g + 8, g + 8} x cols {2t, 2t + 1}.
//
// Copies (cp.async, 16 bytes, zero-filled past `end` and head_dim, so the NaN in unused pool
// slots is never read) put a tile in shared memory in the layouts ldmatrix wants, whatever the
// block size: K as [16-byte chunk of dims][tile key (k_slot)] x 16 B; V as [dim][2 halves of
// the tile's tokens] x 16 B, the halves swapped on dims 4..7 mod 8 so that the 8 rows of an
// ldmatrix matrix hit 8 distinct bank groups. A lane copies key lane % kKeys of K (its chunks
// lane / kKeys + (32 / kKeys) j: one table lookup) and dims lane / 2 + 16j, half lane % 2 of
// V (one more): at block size 16, each copy instruction of the warp reads 512 contiguous
// bytes. That is the point of staging: the register-fed kernel it replaced loaded fragments
// straight from global memory, which left every K load half of each 128-byte line twice
// and 8-byte V loads; it reached 82-86% of the read bandwidth where this one reaches the
// dense kernel's 97-99% (bench notes, runs 13-14). fp8 at block size 8: a V half (16 tokens)
// spans two cache blocks, so it is two 8-byte copies.
// Bulk copies (kBulk: a tile is 2 cache blocks of kHalf tokens, each a region whose K chunks
// and V dims are 16 bytes): lane 0 copies the K and V regions of the tile's blocks that hold
// keys below `end` as they lie, so the ring holds K as [block][chunk][key] and V as [block =
// half][dim] x 16 B. Those rows are contiguous, so ldmatrix is conflict-free except for fp8's
// K rows (key_of_row), which meet 2 to a bank group: cheap beside the DRAM time. What the
// copies do not fill reads as 0: dims past head_dim (zeroed once) and, in the tile past
// `end`, V tokens past it (zeroed after the wait: they may be a block's NaN tail).
//   Sᵀ = K Qᵀ (16 keys x 8 heads per sub-tile, k = dims): A by ldmatrix.x4 of two k steps.
//     16-bit: matrices (rows 0-7 | 8-15) x (chunk 2ks | 2ks + 1), words as loaded. fp8: (rows
//     0-7 | 8-15) x (chunk c | c + 1), each word 4 e4m3 dims 4t..4t + 3 of chunk c, converted
//     to fp16 pairs (4t, 4t + 1) -> k cols 2t.. and (4t + 2, 4t + 3) -> k cols 2t + 8..; Q's B
//     fragments (fp16 for fp8) take the same dims and stay in registers for the whole loop.
//   Oᵀ += Vᵀ Pᵀ (16 dims x 8 heads per m tile, k = a sub-tile's 16 keys): A by ldmatrix.x4 of
//     (dims 16mt..+7 | +8..+15) x (half 0 | half 1): for 16-bit caches the two halves are the
//     k cols 0-7 and 8-15, for fp8 the two sub-tiles (converted as K is). Pᵀ is Sᵀ's C
//     fragment packed to 16 bits and transposed by movmatrix, as in decode.cu.
//   Oᵀ's C fragment: dims 16mt + g (+ 8) of heads 2t, 2t + 1.
template <class T, class C, int kD, bool kBulk>
__global__ void __launch_bounds__(PagedMmaCfg<T, C, kD, kBulk>::kThreads) mma_paged_kernel(const Paged p) {
  using Cfg = PagedMmaCfg<T, C, kD, kBulk>;
  using M = std::conditional_t<Cfg::kFp8, __half, T>;  // the tensor cores' input type
  using Part = Partials<Cfg::kWarps, Cfg::kHeads, kD>;
  static_assert(sizeof(Part) <= Cfg::kRingBytes, "the partials reuse the rings");
  extern __shared__ __align__(16) unsigned char smem[];
  uint32_t* sq = reinterpret_cast<uint32_t*>(smem + Cfg::kRingBytes);  // [8][kQWords], M
  int* stbl = reinterpret_cast<int*>(smem + Cfg::kRingBytes + Cfg::kHeads * Cfg::kQWords * 4);
  allow_dependents();
  const Work w = block_work<Cfg::kHeads>(p);
  if (w.begin >= w.end) return;  // a split past this sequence's context: the combine skips it

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const Table tbl = load_table(stbl, p, w);
  const uint32_t bars = static_cast<uint32_t>(__cvta_generic_to_shared(smem + Cfg::kBarOffset)) + warp * Cfg::kStages * 8;
  if constexpr (kBulk) {
    // The copies fill the first head_dim x 16 bytes of a region: the rest stays 0 throughout.
    if (p.head_dim < kD)
      for (int i = threadIdx.x; i < Cfg::kRingBytes / 16; i += Cfg::kThreads)
        reinterpret_cast<uint4*>(smem)[i] = make_uint4(0, 0, 0, 0);
    if (lane == 0)
      for (int s = 0; s < Cfg::kStages; ++s) mbar_init(bars + 8 * s, 1);
  }
  // Q's tile: heads past the group and dims past head_dim are 0; rounded to fp16 for fp8.
  const int nq = p.head_dim / 8;
  for (int i = threadIdx.x; i < Cfg::kHeads * (kD / 8); i += Cfg::kThreads) {
    const int n = i / (kD / 8), c = i % (kD / 8);
    uint4 x = make_uint4(0, 0, 0, 0);
    if (n < w.nheads && c < nq) {
      x = *reinterpret_cast<const uint4*>(static_cast<const T*>(p.q) +
                                          (int64_t{w.b} * p.heads + w.h0 + n) * p.head_dim + 8 * c);
      if constexpr (!std::is_same_v<M, T>) {
        const uint32_t wv[4] = {x.x, x.y, x.z, x.w};
        float f[8];
        to_floats<T, 4>(wv, f);
        x = make_uint4(pack2<M>(f[0], f[1]), pack2<M>(f[2], f[3]), pack2<M>(f[4], f[5]), pack2<M>(f[6], f[7]));
      }
    }
    reinterpret_cast<uint4*>(sq)[i] = x;
  }
  __syncthreads();
  // Qᵀ's B fragments, head g: 16-bit, dims 16ks + 2t.. and 16ks + 8 + 2t..; fp8, dims
  // 16ks + 4t.. and 16ks + 4t + 2.. (the K words' order above).
  uint32_t qf[Cfg::kSteps][2];
#pragma unroll
  for (int ks = 0; ks < Cfg::kSteps; ++ks) {
    const uint32_t* row = sq + g * Cfg::kQWords + 8 * ks;
    qf[ks][0] = Cfg::kFp8 ? row[2 * t] : row[t];
    qf[ks][1] = Cfg::kFp8 ? row[2 * t + 1] : row[4 + t];
  }

  const int lbs = p.log2_bs, bmask = p.block_size - 1;
  const C* kh = static_cast<const C*>(p.k) + int64_t{w.kvh} * p.head_stride;
  const C* vh = static_cast<const C*>(p.v) + int64_t{w.kvh} * p.head_stride;
  const int kk = lane % Cfg::kKeys, kc0 = lane / Cfg::kKeys;  // K copies: key kk, chunks kc0 + (32 / kKeys) j
  constexpr int kChunkStep = 32 / Cfg::kKeys;
  const int kchunks = p.head_dim / Cfg::kX;                   // K chunks within head_dim
  const uint32_t k_dst = (kc0 * Cfg::kKeys + k_slot<Cfg::kFp8>(kk)) * 16;
  const int vd0 = lane >> 1, vhalf = lane & 1;                // V copies: dims vd0 + 16j, half vhalf
  const uint32_t v_dst = Cfg::kTileBytes + (2 * vd0 + (vhalf ^ ((vd0 >> 2) & 1))) * 16;
  const bool v_split = Cfg::kFp8 && p.block_size < Cfg::kHalf;  // fp8, block 8: two 8-byte copies
  const uint32_t ring0 = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  const uint32_t ring = ring0 + warp * Cfg::kStages * Cfg::kStageBytes;
  const int ntiles = (w.end - w.begin + Cfg::kKeys - 1) / Cfg::kKeys;

  // Tile `warp + n·kWarps` into stage n % kStages, one commit group per call (empty past the
  // last tile, so that the wait count below stays exact).
  auto issue = [&](int n) {
    const int tile = warp + n * Cfg::kWarps;
    if constexpr (kBulk) {
      // Lane 0 copies the tile's cache blocks that hold keys below `end` (K region, V region).
      if (tile < ntiles && lane == 0) {
        const int key0 = w.begin + tile * Cfg::kKeys;
        const uint32_t st = ring + (n % Cfg::kStages) * Cfg::kStageBytes, bar = bars + 8 * (n % Cfg::kStages);
        const int nb = min(2, (w.end - key0 + Cfg::kHalf - 1) / Cfg::kHalf);
        const int bytes = p.head_dim * 16;
        mbar_expect_tx(bar, 2 * nb * bytes);
        for (int j = 0; j < nb; ++j) {
          const int64_t off = int64_t{tbl.block_of(key0 + j * Cfg::kHalf, lbs)} * p.block_stride;
          bulk_copy(st + j * Cfg::kRegion, kh + off, bytes, bar);
          bulk_copy(st + Cfg::kTileBytes + j * Cfg::kRegion, vh + off, bytes, bar);
        }
      }
      return;
    }
    if (tile < ntiles) {
      const int key0 = w.begin + tile * Cfg::kKeys;
      const uint32_t st = ring + (n % Cfg::kStages) * Cfg::kStageBytes;
      const int key = key0 + kk;
      const bool kok = key < w.end;
      const C* ks = kh;
      if (kok) ks += int64_t{tbl.block_of(key, lbs)} * p.block_stride + ((kc0 << lbs) + (key & bmask)) * Cfg::kX;
#pragma unroll
      for (int j = 0; j < Cfg::kCopies; ++j) {
        const bool ok = kok && kc0 + kChunkStep * j < kchunks;
        cp_async_16z(st + k_dst + j * kChunkStep * Cfg::kKeys * 16, ok ? ks + ((kChunkStep * j) << lbs) * Cfg::kX : kh,
                     ok ? 16 : 0);
      }
      const int tok = key0 + Cfg::kHalf * vhalf;  // whole 8-token runs lie in one cache block
      const int nv = min(Cfg::kHalf, w.end - tok);  // tokens within `end`; the rest read as 0
      if (!v_split) {
        const C* vs = vh;
        if (nv > 0) vs += int64_t{tbl.block_of(tok, lbs)} * p.block_stride + (vd0 << lbs) + (tok & bmask);
#pragma unroll
        for (int j = 0; j < Cfg::kCopies; ++j) {
          const bool ok = nv > 0 && vd0 + 16 * j < p.head_dim;
          cp_async_16z(st + v_dst + j * 512, ok ? vs + ((16 * j) << lbs) : vh,
                       ok ? nv * static_cast<int>(sizeof(C)) : 0);
        }
      } else {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int n8 = min(8, nv - 8 * h);
          const C* vs = vh;
          if (n8 > 0) vs += int64_t{tbl.block_of(tok + 8 * h, lbs)} * p.block_stride + (vd0 << lbs);
#pragma unroll
          for (int j = 0; j < Cfg::kCopies; ++j) {
            const bool ok = n8 > 0 && vd0 + 16 * j < p.head_dim;
            cp_async_8z(st + v_dst + j * 512 + 8 * h, ok ? vs + ((16 * j) << lbs) : vh,
                        ok ? n8 * static_cast<int>(sizeof(C)) : 0);
          }
        }
      }
    }
    cp_async_commit();
  };

  const int pos = w.ctx - 1;
  float slope[2], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
#pragma unroll
  for (int jj = 0; jj < 2; ++jj) slope[jj] = p.alibi ? alibi_slope_log2(w.h0 + 2 * t + jj, p.heads) : 0.f;
  float o[Cfg::kSteps][4] = {};
  // ldmatrix lane addresses within a stage. K: row (lane % 8) + 8 ((lane / 8) % 2) of the
  // sub-tile (its key by key_of_row), chunk + lane / 16. V: dim (lane % 8) + 8 ((lane / 8) % 2)
  // of the m tile, half lane / 16 (swizzled).
  // Bulk copies: K as [block][chunk][key] and V as [block = half][dim], unswizzled.
  const int krow = (lane & 7) + 8 * ((lane >> 3) & 1), kkey = key_of_row<Cfg::kFp8>(krow);
  const uint32_t k_lane =
      kBulk ? (kkey / Cfg::kHalf) * Cfg::kRegion + ((lane >> 4) * Cfg::kHalf + kkey % Cfg::kHalf) * 16
            : ((lane >> 4) * Cfg::kKeys + k_slot<Cfg::kFp8>(kkey)) * 16;
  const uint32_t v_lane = Cfg::kTileBytes + (kBulk ? ((lane >> 4) * kD + krow) * 16
                                                   : (krow * 2 + ((lane >> 4) ^ ((lane >> 2) & 1))) * 16);

#pragma unroll
  for (int s = 0; s < Cfg::kStages - 1; ++s) issue(s);
  for (int n = 0; warp + n * Cfg::kWarps < ntiles; ++n) {
    __syncwarp();  // every lane is done with the stage the next copies overwrite
    issue(n + Cfg::kStages - 1);
    const uint32_t st = ring + (n % Cfg::kStages) * Cfg::kStageBytes;
    const int key0 = w.begin + (warp + n * Cfg::kWarps) * Cfg::kKeys;
    if constexpr (kBulk) {
      mbar_wait(bars + 8 * (n % Cfg::kStages), (n / Cfg::kStages) & 1);
      // The tile past `end`: its V tokens there are a block's unused tail (NaN in the pool) or
      // blocks left uncopied, and p = 0 must not meet them. K needs nothing: masked scores.
      if (key0 + Cfg::kKeys > w.end) {
        for (int r = lane; r < 2 * kD; r += 32) {
          const int valid = (w.end - key0 - (r / kD) * Cfg::kHalf) * static_cast<int>(sizeof(C));  // bytes
          if (valid < 16) {
            uint32_t* row = reinterpret_cast<uint32_t*>(smem + (st - ring0) + Cfg::kTileBytes + r * 16);
#pragma unroll
            for (int i = 0; i < 4; ++i) {
              const int keep = min(4, max(0, valid - 4 * i));  // bytes of word i to keep
              row[i] = keep == 4 ? row[i] : row[i] & ((1u << (8 * keep)) - 1u);
            }
          }
        }
      }
    } else {
      cp_async_wait<Cfg::kStages - 1>();
    }
    __syncwarp();  // tile n's copies (and the zeroed tail), from every lane, are visible to the warp

    float s[Cfg::kSub][4] = {};
#pragma unroll
    for (int sub = 0; sub < Cfg::kSub; ++sub) {
#pragma unroll
      for (int ks = 0; ks < Cfg::kSteps; ks += 2) {
        uint32_t a[4];
        if constexpr (!Cfg::kFp8) {
#pragma unroll
          for (int k = ks; k < ks + 2; ++k) {
            ldsm_x4(a, st + k_lane + 2 * k * Cfg::kChunkBytes);  // chunks 2k, 2k + 1: k step k
            mma_16816<M>(s[sub], a[0], a[1], a[2], a[3], qf[k][0], qf[k][1]);
          }
        } else {
          constexpr int kSubBytes = kBulk ? Cfg::kRegion : 16 * 16;  // between Sᵀ sub-tiles
          ldsm_x4(a, st + k_lane + ks * Cfg::kChunkBytes + sub * kSubBytes);  // chunks ks, ks + 1
          uint32_t lo[4], hi[4];
#pragma unroll
          for (int r = 0; r < 4; ++r) e4m3x4_to_f16x4(a[r], lo[r], hi[r]);
          mma_16816<M>(s[sub], lo[0], lo[1], hi[0], hi[1], qf[ks][0], qf[ks][1]);
          mma_16816<M>(s[sub], lo[2], lo[3], hi[2], hi[3], qf[ks + 1][0], qf[ks + 1][1]);
        }
      }
    }

    // x[sub] = {row g: head 2t, 2t + 1; row g + 8: head 2t, 2t + 1}, exp2 units with the bias.
    float x[Cfg::kSub][4];
#pragma unroll
    for (int sub = 0; sub < Cfg::kSub; ++sub) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int key = key0 + 16 * sub + key_of_row<Cfg::kFp8>(g + 8 * r);
        const bool ok = key < w.end;
        const float dist = static_cast<float>(key - pos);
#pragma unroll
        for (int jj = 0; jj < 2; ++jj)
          x[sub][2 * r + jj] = ok ? fmaf(s[sub][2 * r + jj], p.score_log2, slope[jj] * dist) : -INFINITY;
      }
    }
    uint32_t pb0[Cfg::kSub], pb1[Cfg::kSub];
    softmax_tile<M>(x, m, l, o, pb0, pb1);

#pragma unroll
    for (int mt = 0; mt < Cfg::kSteps; ++mt) {
      uint32_t a[4];
      ldsm_x4(a, st + v_lane + mt * 16 * (kBulk ? 16 : 2 * 16));
      if constexpr (!Cfg::kFp8) {
        mma_16816<M>(o[mt], a[0], a[1], a[2], a[3], pb0[0], pb1[0]);
      } else {
        uint32_t lo[4], hi[4];
#pragma unroll
        for (int r = 0; r < 4; ++r) e4m3x4_to_f16x4(a[r], lo[r], hi[r]);
        mma_16816<M>(o[mt], lo[0], lo[1], hi[0], hi[1], pb0[0], pb1[0]);
        mma_16816<M>(o[mt], lo[2], lo[3], hi[2], hi[3], pb0[1], pb1[1]);
      }
    }
  }
  cp_async_wait<0>();
  __syncthreads();  // every warp is done with its ring: the partials take its place
  Part& part = *reinterpret_cast<Part*>(smem);
  store_warp_partial(part, warp, o, m, l);
  __syncthreads();
  merge_and_store<T, true>(part, p, w);
}

// ---------------------------------------------------------------------------------------
// paged_flash: CUDA-core kernel

// fp32 q (any cache), or head_dim > 128. kG query heads per block: 1, or 4 for any group > 1
// (a group of 2 or 3 computes unused heads; larger groups take several blocks).
template <class T, class C, int kG>
struct SimtCfg {
  static constexpr int kWarps = 4;
  static constexpr int kThreads = 32 * kWarps;
  // 4 heads x 8 K chunks in flight need more than the 128 registers of 4 blocks per SM.
  static constexpr int kMinBlocks = 3;
  static constexpr int kStep = kThreads;  // keys per block step: one per thread for Sᵀ
  static constexpr int kMaxD = 256;
  static constexpr int kDims = kMaxD / kThreads;  // dims per thread for Oᵀ
  static constexpr int kX = 16 / static_cast<int>(sizeof(C));
  // Tokens per V load: 16 bytes, except 8 for fp8 (a block of 8 tokens is 8 bytes per dim).
  static constexpr int kVT = kIsFp8<C> ? 8 : 16 / static_cast<int>(sizeof(C));
  static constexpr int kVWords = kVT * static_cast<int>(sizeof(C)) / 4;
  static constexpr int kKBatch = 8;  // K chunks a thread has in flight
};

// One block: kG query heads of one (sequence, kv head), keys [begin, end), in steps of 128
// keys. Sᵀ: thread i takes key base + i (its chunks are 16 bytes of consecutive keys' rows:
// coalesced across the warp), q from shared memory; the block max gives the step's running max
// m (the same in every thread), p goes to shared memory; Oᵀ: thread i takes dims i and i + 128
// over the step's tokens, kVT at a time from one dim row of V.
template <class T, class C, int kG>
__global__ void __launch_bounds__(SimtCfg<T, C, kG>::kThreads, SimtCfg<T, C, kG>::kMinBlocks)
    simt_paged_kernel(const Paged p) {
  using Cfg = SimtCfg<T, C, kG>;
  __shared__ __align__(16) float sq[kG][Cfg::kMaxD];
  __shared__ __align__(16) float sp[kG][Cfg::kStep];
  __shared__ float red[Cfg::kWarps][kG];
  __shared__ int stbl[kTable];
  allow_dependents();
  const Work w = block_work<kG>(p);
  if (w.begin >= w.end) return;  // a split past this sequence's context: the combine skips it

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const Table tbl = load_table(stbl, p, w);
  for (int i = threadIdx.x; i < kG * Cfg::kMaxD; i += Cfg::kThreads) {
    const int n = i / Cfg::kMaxD, d = i % Cfg::kMaxD;
    float x = 0.f;
    if (n < w.nheads && d < p.head_dim)
      x = to_float(static_cast<const T*>(p.q)[(int64_t{w.b} * p.heads + w.h0 + n) * p.head_dim + d]);
    sq[n][d] = x;
  }
  __syncthreads();

  const int lbs = p.log2_bs, bmask = p.block_size - 1;
  const C* kc = static_cast<const C*>(p.k) + int64_t{w.kvh} * p.head_stride;
  const C* vc = static_cast<const C*>(p.v) + int64_t{w.kvh} * p.head_stride;
  const uint64_t pol = kv_policy(p.head_tiles == 1);
  const int nch = p.head_dim / Cfg::kX;
  const int kstride = p.block_size * Cfg::kX;  // elements between K chunks of a key
  const int pos = w.ctx - 1;
  float slope[kG], m[kG], lsum[kG], acc[kG][Cfg::kDims];
#pragma unroll
  for (int n = 0; n < kG; ++n) {
    slope[n] = p.alibi ? alibi_slope_log2(w.h0 + n, p.heads) : 0.f;
    m[n] = -INFINITY;
    lsum[n] = 0.f;
#pragma unroll
    for (int j = 0; j < Cfg::kDims; ++j) acc[n][j] = 0.f;
  }

  for (int base = w.begin; base < w.end; base += Cfg::kStep) {
    const int key = base + static_cast<int>(threadIdx.x);
    float sc[kG];
    if (key < w.end) {
      const C* row = kc + int64_t{tbl.block_of(key, lbs)} * p.block_stride + (key & bmask) * Cfg::kX;
      float dot[kG] = {};
      for (int c0 = 0; c0 < nch; c0 += Cfg::kKBatch) {
        uint4 kv[Cfg::kKBatch];
#pragma unroll
        for (int u = 0; u < Cfg::kKBatch; ++u)
          kv[u] = c0 + u < nch ? ld_stream(row + (c0 + u) * kstride, pol) : make_uint4(0, 0, 0, 0);
#pragma unroll
        for (int u = 0; u < Cfg::kKBatch; ++u) {
          if (c0 + u >= nch) break;
          const uint32_t wv[4] = {kv[u].x, kv[u].y, kv[u].z, kv[u].w};
          float kf[Cfg::kX];
          to_floats<C, 4>(wv, kf);
#pragma unroll
          for (int n = 0; n < kG; ++n) {
#pragma unroll
            for (int e = 0; e < Cfg::kX; e += 4) {
              const float4 qv = *reinterpret_cast<const float4*>(&sq[n][(c0 + u) * Cfg::kX + e]);
              dot[n] = fmaf(qv.x, kf[e], dot[n]);
              dot[n] = fmaf(qv.y, kf[e + 1], dot[n]);
              dot[n] = fmaf(qv.z, kf[e + 2], dot[n]);
              dot[n] = fmaf(qv.w, kf[e + 3], dot[n]);
            }
          }
        }
      }
      const float dist = static_cast<float>(key - pos);
#pragma unroll
      for (int n = 0; n < kG; ++n) sc[n] = fmaf(dot[n], p.score_log2, slope[n] * dist);
    } else {
#pragma unroll
      for (int n = 0; n < kG; ++n) sc[n] = -INFINITY;
    }
    // The step's max per head over the block (finite: key base < end is in it).
#pragma unroll
    for (int n = 0; n < kG; ++n) {
      const float x = warp_max(sc[n]);
      if (lane == 0) red[warp][n] = x;
    }
    __syncthreads();
#pragma unroll
    for (int n = 0; n < kG; ++n) {
      float mx = m[n];
#pragma unroll
      for (int i = 0; i < Cfg::kWarps; ++i) mx = fmaxf(mx, red[i][n]);
      const float alpha = exp2_approx(m[n] - mx);  // m = -inf at the start: 0 on l = o = 0
      m[n] = mx;
      const float pr = exp2_approx(sc[n] - mx);
      lsum[n] = fmaf(lsum[n], alpha, pr);
      sp[n][threadIdx.x] = pr;
#pragma unroll
      for (int j = 0; j < Cfg::kDims; ++j) acc[n][j] *= alpha;
    }
    __syncthreads();  // sp is complete, and every thread has read red

    const int ntok = min(Cfg::kStep, w.end - base);
#pragma unroll
    for (int j = 0; j < Cfg::kDims; ++j) {
      const int d = static_cast<int>(threadIdx.x) + Cfg::kThreads * j;
      if (d >= p.head_dim) continue;
      const C* vrow = vc + (d << lbs);
#pragma unroll 4
      for (int tt = 0; tt < ntok; tt += Cfg::kVT) {
        const int tok = base + tt;
        const C* ptr = vrow + int64_t{tbl.block_of(tok, lbs)} * p.block_stride + (tok & bmask);
        uint32_t wv[Cfg::kVWords];
        if constexpr (Cfg::kVWords == 4) {
          const uint4 raw = *reinterpret_cast<const uint4*>(ptr);
          wv[0] = raw.x, wv[1] = raw.y, wv[2] = raw.z, wv[3] = raw.w;
        } else {
          const uint2 raw = *reinterpret_cast<const uint2*>(ptr);
          wv[0] = raw.x, wv[1] = raw.y;
        }
        float vf[Cfg::kVT];
        to_floats<C, Cfg::kVWords>(wv, vf);
        // Tokens past `end` may hold NaN: zeroed, since p = 0 alone would give 0 * NaN.
        if (tt + Cfg::kVT > ntok) {
#pragma unroll
          for (int e = 0; e < Cfg::kVT; ++e) vf[e] = tt + e < ntok ? vf[e] : 0.f;
        }
#pragma unroll
        for (int n = 0; n < kG; ++n) {
#pragma unroll
          for (int e = 0; e < Cfg::kVT; e += 4) {
            const float4 pv = *reinterpret_cast<const float4*>(&sp[n][tt + e]);
            acc[n][j] = fmaf(pv.x, vf[e], acc[n][j]);
            acc[n][j] = fmaf(pv.y, vf[e + 1], acc[n][j]);
            acc[n][j] = fmaf(pv.z, vf[e + 2], acc[n][j]);
            acc[n][j] = fmaf(pv.w, vf[e + 3], acc[n][j]);
          }
        }
      }
    }
    __syncthreads();  // sp is read before the next step writes it
  }

  // l per head: the sum over the block's threads (each held its keys' p).
#pragma unroll
  for (int n = 0; n < kG; ++n) {
    const float x = warp_sum(lsum[n]);
    if (lane == 0) red[warp][n] = x;
  }
  __syncthreads();
#pragma unroll
  for (int n = 0; n < kG; ++n) {
    if (n >= w.nheads) break;
    float l = 0.f;
#pragma unroll
    for (int i = 0; i < Cfg::kWarps; ++i) l += red[i][n];
    const int64_t bh = int64_t{w.b} * p.heads + w.h0 + n;
    const int64_t row = bh * p.splits + w.split;
    // l >= 1: the key at the max contributes exp2(0).
    const float f = p.splits == 1 ? p.v_scale / l : p.v_scale;
#pragma unroll
    for (int j = 0; j < Cfg::kDims; ++j) {
      const int d = static_cast<int>(threadIdx.x) + Cfg::kThreads * j;
      if (d >= p.head_dim) continue;
      if (p.splits == 1)
        static_cast<T*>(p.o)[bh * p.head_dim + d] = from_float<T>(acc[n][j] * f);
      else
        p.part_o[row * p.head_dim + d] = acc[n][j] * f;
    }
    if (p.splits > 1 && threadIdx.x == 0) p.part_ml[row] = make_float2(m[n], l);
  }
}

// ---------------------------------------------------------------------------------------
// reshape_and_cache

// One thread per (token, kv head, K chunk of x dims): reads the x dims (16-byte loads where
// kVec), writes them to K as one 16-byte store and to V as x elements block_size apart. Tokens
// with a negative slot (vLLM's padding) are skipped.
template <class Tin, class C, bool kVec>
__global__ void reshape_and_cache_kernel(const Tin* __restrict__ k, const Tin* __restrict__ v, C* __restrict__ k_cache,
                                         C* __restrict__ v_cache, const int64_t* __restrict__ slot_mapping,
                                         int64_t tokens, int kv_heads, int head_dim, int block_size, float k_scale,
                                         float v_scale) {
  constexpr int kX = 16 / static_cast<int>(sizeof(C));
  const int nch = head_dim / kX;
  const int64_t total = tokens * kv_heads * nch;
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < total; i += stride) {
    const int c = static_cast<int>(i % nch);
    const int64_t th = i / nch;
    const int h = static_cast<int>(th % kv_heads);
    const int64_t tok = th / kv_heads;
    const int64_t slot = slot_mapping[tok];
    if (slot < 0) continue;
    const int64_t blk = slot / block_size;
    const int off = static_cast<int>(slot % block_size);
    const int64_t src = (tok * kv_heads + h) * head_dim + int64_t{c} * kX;
    const int64_t head = blk * kv_heads + h;
    C* kdst = k_cache + ((head * nch + c) * block_size + off) * kX;
    C* vdst = v_cache + (head * head_dim + int64_t{c} * kX) * block_size + off;
#pragma unroll
    for (int which = 0; which < 2; ++which) {
      const Tin* in = (which ? v : k) + src;
      __align__(16) C out[kX];
      if constexpr (std::is_same_v<Tin, C>) {
        if constexpr (kVec) {
          *reinterpret_cast<uint4*>(out) = *reinterpret_cast<const uint4*>(in);
        } else {
#pragma unroll
          for (int e = 0; e < kX; ++e) out[e] = in[e];
        }
      } else {  // fp8: value / scale, rounded to nearest even, saturated at +-448
        const float scale = which ? v_scale : k_scale;
        float f[kX];
        if constexpr (kVec) {
          constexpr int kWords = kX * static_cast<int>(sizeof(Tin)) / 4;
          uint32_t wv[kWords];
#pragma unroll
          for (int u = 0; u < kWords / 4; ++u) {
            const uint4 raw = reinterpret_cast<const uint4*>(in)[u];
            wv[4 * u] = raw.x, wv[4 * u + 1] = raw.y, wv[4 * u + 2] = raw.z, wv[4 * u + 3] = raw.w;
          }
          to_floats<Tin, kWords>(wv, f);
        } else {
#pragma unroll
          for (int e = 0; e < kX; ++e) f[e] = to_float(in[e]);
        }
#pragma unroll
        for (int e = 0; e < kX; ++e)
          out[e].__x = __nv_cvt_float_to_fp8(__fdiv_rn(f[e], scale), __NV_SATFINITE, __NV_E4M3);
      }
      if (which == 0) {
        if constexpr (kVec) {
          *reinterpret_cast<uint4*>(kdst) = *reinterpret_cast<const uint4*>(out);
        } else {
#pragma unroll
          for (int e = 0; e < kX; ++e) kdst[e] = out[e];
        }
      } else {
#pragma unroll
        for (int e = 0; e < kX; ++e) vdst[int64_t{e} * block_size] = out[e];
      }
    }
  }
}

// ---------------------------------------------------------------------------------------
// Launchers

// Calls f(T{}, C{}) with the storage types of q/o and of the cache (supports() has checked them).
template <class F>
void with_types(DType dtype, DType kv_dtype, const char* name, F&& f) {
  auto with_cache = [&](auto tag) {
    using T = decltype(tag);
    if (kv_dtype == DType::fp8_e4m3) return f(T{}, Fp8{});
    return f(T{}, T{});
  };
  switch (dtype) {
    case DType::fp32:
      return with_cache(float{});
    case DType::fp16:
      return with_cache(__half{});
    case DType::bf16:
      return with_cache(__nv_bfloat16{});
    case DType::fp8_e4m3:
      break;
  }
  throw std::invalid_argument(std::string(name) + ": no kernel for dtype " + dtype_name(dtype));
}

int log2_exact(int64_t x) {
  int l = 0;
  while ((int64_t{1} << l) < x) ++l;
  return l;
}

int64_t longest_context(const PagedParams& p) {
  return std::clamp<int64_t>(p.longest_context, 1, p.max_blocks_per_seq * p.block_size);
}

Paged make_paged(const PagedParams& p) {
  Paged d{};
  d.q = p.q;
  d.k = p.k_cache;
  d.v = p.v_cache;
  d.o = p.o;
  d.block_tables = p.block_tables;
  d.context_lens = p.context_lens;
  d.block_stride = p.kv_heads * p.head_dim * p.block_size;
  d.head_stride = static_cast<int>(p.head_dim * p.block_size);
  d.heads = static_cast<int>(p.heads);
  d.kv_heads = static_cast<int>(p.kv_heads);
  d.group = static_cast<int>(p.heads / p.kv_heads);
  d.head_dim = static_cast<int>(p.head_dim);
  d.block_size = static_cast<int>(p.block_size);
  d.log2_bs = log2_exact(p.block_size);
  d.max_blocks = static_cast<int>(p.max_blocks_per_seq);
  d.head_tiles = 1;
  d.splits = 1;
  d.chunk = static_cast<int>(kMaxContext);
  d.partition = static_cast<int>(p.max_blocks_per_seq * p.block_size);
  d.max_parts = 1;
  d.score_log2 = p.scale_log2 * p.k_scale;
  d.v_scale = p.v_scale;
  d.alibi = p.alibi;
  return d;
}

// ---- v1 / v2

int64_t vllm_class(int64_t head_dim) { return head_dim <= 128 ? 128 : 256; }

// v1: one partition of the longest context rounded up to whole blocks.
int64_t v1_tokens(const PagedParams& p) { return ceil_div(longest_context(p), p.block_size) * p.block_size; }
int64_t v2_parts(const PagedParams& p) { return ceil_div(longest_context(p), p.partition_size); }

// Raises the kernel's dynamic shared memory limit once per size it has not been allowed yet.
template <class Kernel>
void allow_smem(Kernel kernel, int64_t bytes, int64_t& allowed, const char* name) {
  if (bytes <= 48 * 1024 || bytes <= allowed) return;
  check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)), name);
  allowed = bytes;
}

template <class T, class C, int kD, int kBS>
void launch_vllm(const PagedParams& p, const LaunchContext& ctx, bool v2) {
  const char* name = v2 ? "paged/v2" : "paged/v1";
  Paged d = make_paged(p);
  int64_t parts = 1;
  if (v2) {
    d.partition = static_cast<int>(p.partition_size);
    parts = v2_parts(p);
    d.max_parts = static_cast<int>(parts);
    if (parts > 1) {
      char* ws = static_cast<char*>(ctx.workspace);
      const int64_t rows = p.batch * p.heads * parts;
      d.tmp_out = reinterpret_cast<float*>(ws);
      d.max_logits = reinterpret_cast<float*>(ws + ceil_div(rows * p.head_dim * 4, 256) * 256);
      d.exp_sums = d.max_logits + rows;
    }
  } else {
    d.partition = static_cast<int>(v1_tokens(p));
  }
  const int64_t smem = int64_t{d.partition} * 4;
  static int64_t allowed = 0;
  auto kernel = vllm_kernel<T, C, kD, kBS>;
  allow_smem(kernel, smem, allowed, name);
  kernel<<<dim3(static_cast<unsigned>(p.heads), static_cast<unsigned>(p.batch), static_cast<unsigned>(parts)),
           kVllmThreads, static_cast<size_t>(smem), ctx.stream>>>(d);
  check_launch(name);
  if (parts == 1) return;
  vllm_reduce_kernel<T><<<dim3(static_cast<unsigned>(p.heads), static_cast<unsigned>(p.batch)), kVllmThreads, 0,
                          ctx.stream>>>(d);
  check_launch(name);
}

void launch_vllm_variant(const PagedParams& p, const LaunchContext& ctx, bool v2) {
  with_types(p.dtype, p.kv_dtype, v2 ? "paged/v2" : "paged/v1", [&](auto t, auto c) {
    using T = decltype(t);
    using C = decltype(c);
    auto by_block = [&](auto dim) {
      constexpr int kD = decltype(dim)::value;
      switch (p.block_size) {
        case 8:
          return launch_vllm<T, C, kD, 8>(p, ctx, v2);
        case 16:
          return launch_vllm<T, C, kD, 16>(p, ctx, v2);
        default:
          return launch_vllm<T, C, kD, 32>(p, ctx, v2);
      }
    };
    if (vllm_class(p.head_dim) == 128) return by_block(std::integral_constant<int, 128>{});
    return by_block(std::integral_constant<int, 256>{});
  });
}

void v1(const PagedParams& p, const LaunchContext& ctx) { launch_vllm_variant(p, ctx, false); }
void v2(const PagedParams& p, const LaunchContext& ctx) { launch_vllm_variant(p, ctx, true); }

// ---- paged_flash

int64_t max_splits_by_slots(const PagedParams& p) {
  const int64_t by_chunk = longest_context(p) / kMinChunk;
  const int64_t by_slots = kMaxSlots / (p.batch * p.kv_heads);
  return std::max<int64_t>(1, std::min(by_chunk, by_slots));
}

// The longest chunk (whole `step`-key steps) whose keys span at most kTable cache blocks
// wherever it starts.
int64_t chunk_cap(const PagedParams& p, int64_t step) {
  return std::max(step, (kTable - 1) * p.block_size / step * step);
}

// The most splits any launch of p uses.
int64_t max_splits(const PagedParams& p) {
  return std::max(max_splits_by_slots(p), ceil_div(longest_context(p), chunk_cap(p, kMaxStep)));
}

// Splits: as many as fill one round of `slots` resident blocks with `units` blocks per split
// (decode.cu's plan_splits), in chunks of whole `step`-key steps, and no chunk longer than
// chunk_cap (the block-table window). One split means none: the kernel writes o.
void plan_splits(Paged& d, const PagedParams& p, int64_t units, int64_t slots, int64_t step) {
  const int64_t longest = longest_context(p);
  const int64_t want = std::min(slots / units, max_splits_by_slots(p));
  int64_t chunk = want > 1 ? ceil_div(ceil_div(longest, want), step) * step : ceil_div(longest, step) * step;
  chunk = std::min(chunk, chunk_cap(p, step));
  const int64_t splits = ceil_div(longest, chunk);
  if (splits <= 1) return;
  d.splits = static_cast<int>(splits);
  d.chunk = static_cast<int>(chunk);
}

// Launches `kernel` (heads_per_block query heads per block, `step` keys per block step) and,
// with splits, the combine.
template <class T, class Kernel>
void launch_fused(const PagedParams& p, const LaunchContext& ctx, Kernel kernel, int threads, int heads_per_block,
                  int step, int blocks_per_sm, int smem_bytes = 0) {
  const char* name = "paged/paged_flash";
  Paged d = make_paged(p);
  d.head_tiles = static_cast<int>(ceil_div(d.group, heads_per_block));
  const int64_t units = p.batch * p.kv_heads * d.head_tiles;
  plan_splits(d, p, units, int64_t{sm_count(ctx, "paged: LaunchContext has no device caps")} * blocks_per_sm, step);
  launch_split<T>(d, p, ctx, kernel, units, threads, name, smem_bytes);
}

template <class T, class C, int kD, bool kBulk>
void launch_mma(const PagedParams& p, const LaunchContext& ctx) {
  using Cfg = PagedMmaCfg<T, C, kD, kBulk>;
  const auto kernel = mma_paged_kernel<T, C, kD, kBulk>;
  static const int blocks_per_sm = resident_blocks(kernel, Cfg::kThreads, Cfg::kSmemBytes, "paged: tensor-core kernel");
  launch_fused<T>(p, ctx, kernel, Cfg::kThreads, Cfg::kHeads, Cfg::kKeys, blocks_per_sm, Cfg::kSmemBytes);
}

template <class T, class C, int kG>
void launch_simt(const PagedParams& p, const LaunchContext& ctx) {
  using Cfg = SimtCfg<T, C, kG>;
  static const int blocks_per_sm = resident_blocks(simt_paged_kernel<T, C, kG>, Cfg::kThreads, 0, "paged: occupancy");
  launch_fused<T>(p, ctx, simt_paged_kernel<T, C, kG>, Cfg::kThreads, kG, Cfg::kStep, blocks_per_sm);
}

void paged_flash(const PagedParams& p, const LaunchContext& ctx) {
  with_types(p.dtype, p.kv_dtype, "paged/paged_flash", [&](auto t, auto c) {
    using T = decltype(t);
    using C = decltype(c);
    if constexpr (!std::is_same_v<T, float>) {
      // A cache block of a kv head whose rows are 16 bytes (fp8 at block 16, 16-bit at 8) is one
      // region of head_dim x 16 bytes, which sm_90 copies whole (see mma_paged_kernel).
      const bool bulk = ctx.caps != nullptr && ctx.caps->arch() >= 90 &&
                        p.block_size * static_cast<int64_t>(sizeof(C)) == 16;
      if (p.head_dim <= 64) return bulk ? launch_mma<T, C, 64, true>(p, ctx) : launch_mma<T, C, 64, false>(p, ctx);
      if (p.head_dim <= 128) return bulk ? launch_mma<T, C, 128, true>(p, ctx) : launch_mma<T, C, 128, false>(p, ctx);
    }
    if (p.heads == p.kv_heads) return launch_simt<T, C, 1>(p, ctx);
    return launch_simt<T, C, 4>(p, ctx);
  });
}

// ---------------------------------------------------------------------------------------
// supports and workspace

bool power_of_two(int64_t x) { return x > 0 && (x & (x - 1)) == 0; }

std::string common_reason(const PagedParams& p, const DeviceCaps& caps) {
  if (p.dtype != DType::fp32 && p.dtype != DType::fp16 && p.dtype != DType::bf16)
    return std::string("dtype ") + dtype_name(p.dtype) + " is not a query/output type (fp32, fp16, bf16)";
  if (p.kv_dtype != p.dtype && p.kv_dtype != DType::fp8_e4m3)
    return std::string("kv_dtype ") + dtype_name(p.kv_dtype) + " must be the query's dtype or fp8_e4m3";
  if (p.batch < 1 || p.heads < 1 || p.kv_heads < 1) return "batch, heads and kv_heads must be >= 1";
  if (p.heads % p.kv_heads != 0) return "heads must be a multiple of kv_heads";
  if (p.head_dim < 8 || p.head_dim > 256 || p.head_dim % 8 != 0) return "head_dim must be a multiple of 8, at most 256";
  if (p.head_dim % paged_x(p.kv_dtype) != 0)
    return "head_dim must be a multiple of x = " + std::to_string(paged_x(p.kv_dtype)) +
           " (16 bytes of the cache's type) for the K layout";
  if (p.num_blocks < 1 || p.max_blocks_per_seq < 1) return "num_blocks and max_blocks_per_seq must be >= 1";
  if (p.longest_context < 1 || p.longest_context > p.max_blocks_per_seq * p.block_size)
    return "longest_context must be in [1, max_blocks_per_seq * block_size]";
  if (p.max_blocks_per_seq * p.block_size >= kMaxContext) return "max_blocks_per_seq * block_size must be < 2^30";
  if (p.batch * p.heads > INT_MAX) return "batch * heads must be < 2^31";
  if (p.kv_dtype == DType::fp8_e4m3 && !(p.k_scale > 0 && p.v_scale > 0 && std::isfinite(p.k_scale) &&
                                         std::isfinite(p.v_scale)))
    return "k_scale and v_scale must be positive and finite";
  if (caps.cc_major != 0 && caps.arch() < 80) return "needs sm_80+";
  if (caps.cc_major != 0 && p.kv_dtype == DType::fp8_e4m3 && caps.arch() < 89)
    return "an fp8 cache needs sm_89+ (cvt e4m3x2 -> f16x2)";
  for (const void* ptr : {p.q, p.k_cache, p.v_cache, static_cast<const void*>(p.o)})
    if (ptr && reinterpret_cast<uintptr_t>(ptr) % 16 != 0) return "q, k_cache, v_cache and o must be 16-byte aligned";
  return {};
}

std::string vllm_reason(const PagedParams& p, const DeviceCaps& caps) {
  std::string r = common_reason(p, caps);
  if (!r.empty()) return r;
  if (p.block_size != 8 && p.block_size != 16 && p.block_size != 32) return "block_size must be 8, 16 or 32 (vLLM's)";
  if (p.batch > 65535) return "batch must be <= 65535 (gridDim.y)";
  return {};
}

// Shared memory a vllm_kernel block asks for with `tokens` logits.
std::string smem_reason(const PagedParams& p, const DeviceCaps& caps, int64_t tokens, const char* what) {
  const int64_t bytes = tokens * 4 + vllm_static_smem(static_cast<int>(vllm_class(p.head_dim)));
  if (caps.smem_per_block_optin != 0 && bytes > static_cast<int64_t>(caps.smem_per_block_optin))
    return std::string(what) + " needs " + std::to_string(bytes) + " bytes of shared memory (" +
           std::to_string(tokens) + " fp32 logits), more than the card's " +
           std::to_string(caps.smem_per_block_optin) + " per block";
  return {};
}

std::string v1_supports(const PagedParams& p, const DeviceCaps& caps) {
  std::string r = vllm_reason(p, caps);
  if (!r.empty()) return r;
  return smem_reason(p, caps, v1_tokens(p), "the longest context");
}

std::string v2_supports(const PagedParams& p, const DeviceCaps& caps) {
  std::string r = vllm_reason(p, caps);
  if (!r.empty()) return r;
  if (p.partition_size < p.block_size || p.partition_size % p.block_size != 0)
    return "partition_size must be a positive multiple of block_size";
  if (p.partition_size >= kMaxContext) return "partition_size must be < 2^30";
  if (v2_parts(p) > 65535) return "more than 65535 partitions (gridDim.z)";
  if (v2_parts(p) * 4 > 48 * 1024) return "more than 12288 partitions (the reduce's shared memory)";
  return smem_reason(p, caps, p.partition_size, "a partition");
}

std::size_t v2_workspace(const PagedParams& p) {
  if (p.partition_size <= 0 || p.block_size <= 0) return 0;
  const int64_t parts = v2_parts(p);
  if (parts <= 1) return 0;
  const int64_t rows = p.batch * p.heads * parts;
  return static_cast<std::size_t>(ceil_div(rows * p.head_dim * 4, 256) * 256 + rows * 8);
}

std::string paged_flash_supports(const PagedParams& p, const DeviceCaps& caps) {
  std::string r = common_reason(p, caps);
  if (!r.empty()) return r;
  if (!power_of_two(p.block_size) || p.block_size < 8 || p.block_size > 256)
    return "block_size must be a power of two from 8 to 256";
  if (max_splits(p) > 65535) return "the context needs more than 65535 splits (gridDim.y)";
  return {};
}

std::size_t paged_flash_workspace(const PagedParams& p) {
  if (p.block_size <= 0 || p.batch < 1 || p.kv_heads < 1) return 0;
  return partials_workspace(p, max_splits(p));
}

}  // namespace

// ---------------------------------------------------------------------------------------
// reshape_and_cache

void reshape_and_cache(const ReshapeAndCacheParams& p, const LaunchContext& ctx) {
  const char* name = "paged/reshape_and_cache";
  if (p.kv_dtype != p.dtype && p.kv_dtype != DType::fp8_e4m3)
    throw std::invalid_argument(std::string(name) + ": kv_dtype must be dtype or fp8_e4m3");
  const int64_t x = paged_x(p.kv_dtype);
  if (p.head_dim < x || p.head_dim % x != 0 || p.block_size < 1 || p.kv_heads < 1)
    throw std::invalid_argument(std::string(name) + ": head_dim must be a multiple of x = " + std::to_string(x) +
                                ", block_size and kv_heads >= 1");
  if (p.tokens <= 0) return;
  bool vec = true;
  for (const void* ptr : {p.k, p.v, static_cast<const void*>(p.k_cache), static_cast<const void*>(p.v_cache)})
    vec = vec && reinterpret_cast<uintptr_t>(ptr) % 16 == 0;
  const int64_t total = p.tokens * p.kv_heads * (p.head_dim / x);
  constexpr int kThreads = 256;
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(ceil_div(total, kThreads), 65535));
  with_types(p.dtype, p.kv_dtype, name, [&](auto t, auto c) {
    using T = decltype(t);
    using C = decltype(c);
    auto launch = [&](auto kernel) {
      kernel<<<blocks, kThreads, 0, ctx.stream>>>(
          static_cast<const T*>(p.k), static_cast<const T*>(p.v), static_cast<C*>(p.k_cache),
          static_cast<C*>(p.v_cache), p.slot_mapping, p.tokens, static_cast<int>(p.kv_heads),
          static_cast<int>(p.head_dim), static_cast<int>(p.block_size), p.k_scale, p.v_scale);
    };
    if (vec)
      launch(reshape_and_cache_kernel<T, C, true>);
    else
      launch(reshape_and_cache_kernel<T, C, false>);
  });
  check_launch(name);
}

// ---------------------------------------------------------------------------------------
// Variant table

const std::vector<Variant<PagedParams>>& paged_variants() {
  static const std::vector<Variant<PagedParams>> table = {
      {"v1",
       "vLLM PagedAttention v1: one block per (sequence, head), whole context, logits in shared memory (the baseline)",
       v1, v1_supports, nullptr},
      {"v2", "vLLM PagedAttention v2: v1 over partition_size-token partitions, fp32 partials, reduce kernel", v2,
       v2_supports, v2_workspace},
      {"paged_flash",
       "one block per (sequence, kv head, split) for its whole GQA group, online softmax, mma.sync for 16-bit q, "
       "block table in shared memory, combine",
       paged_flash, paged_flash_supports, paged_flash_workspace},
  };
  return table;
}

}  // namespace attnbench
