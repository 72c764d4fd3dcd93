// decode family: one new query token per sequence attends to its KV cache (DecodeParams,
// decode.hpp: per-sequence context_lens, GQA, ALiBi), and cache_append. Storage fp32/fp16/bf16;
// scores, softmax statistics and accumulators fp32. A decode step moves every cached K/V byte
// once and does ~2·group FLOPs per byte: it is bound by memory bandwidth, so every variant
// past the baseline is about bytes in flight and reading each byte once.
//
//   naive         the course's kernel: one block per (sequence, query head). Scores q·k_j for
//                 the whole context go to memory (workspace, fp32), one thread per key walking
//                 its own K row (uncoalesced); the block's max and sum turn them into p_j in
//                 place; then one thread per dim sums p_j v_j / l. Three passes, and K/V are
//                 read once per query head: `group` times per byte under GQA. The baseline.
//   flash_decode  one pass with the online softmax (running max m, sum l, unnormalised o,
//                 rescaled by exp2(m_old - m_new) when m grows), one block per (sequence, kv
//                 head) computing every query head of its GQA group, so each K/V byte is read
//                 once (groups above 8 heads take one block per 8 heads, side by side in the
//                 grid so that they share the bytes through L2). fp16/bf16 with head_dim <= 128
//                 run the dot products on tensor cores (mma.sync m16n8k16, fp32 accumulators):
//                 Sᵀ = K Qᵀ takes 16 keys as M and the group's heads as N, Oᵀ += Vᵀ Pᵀ takes the
//                 dims as M, so that one n8 covers a group of up to 8 heads. Each warp streams
//                 its 16-key tiles of K and V through a 3-stage cp.async ring in shared memory
//                 (whole rows per copy instruction; 2 tiles, 16 KB, in flight per warp while it
//                 computes one) and takes the mma fragments with ldmatrix (see
//                 mma_decode_kernel). Blocks of 2 warps, 4 per SM: 8 warps, 128 KB in flight.
//                 That is ~30 instructions per key and warp (ncu counts 485 per 16-key tile
//                 in paged.cu's twin, d128), where a CUDA-core loop with a row's 16-byte
//                 chunks on 16 lanes needs ~97 for a group of 4 (dots, shuffle reductions and
//                 exps per head): ~70% of an H200 SM's issue slots at 4 TB/s. fp32 (tf32 would
//                 miss the fp32 tolerance) and head_dim > 128 run that CUDA-core loop: up to 32 lanes per
//                 row, 4 rows (8 loads) in flight per thread, 256-thread blocks. Warps (row
//                 groups) merge their (m, l, o) through shared memory at the end. No split:
//                 grid = batch x kv heads (x head tiles).
//   split_kv      Flash-Decoding (Dao et al., 2023): the same kernel, with the context cut into
//                 `splits` chunks of keys, one block each, when batch x kv heads would leave SMs
//                 idle; each block writes its unnormalised o and (m, l) as an fp32 partial, and a
//                 combine kernel merges them: o = sum_s exp2(m_s - M) o_s / sum_s exp2(m_s - M) l_s.
//                 Splits fill the card's resident blocks (SMs x occupancy) in one round, as
//                 exactly as whole key steps of the kernel allow (plan_splits): batch 1 x 8 kv
//                 heads takes 66 splits = 528 blocks on 132 SMs x 4; chunks of at least kMinChunk
//                 keys; 1 split means no partials and no combine, the flash_decode launch itself.
//                 The combine is a programmatic dependent launch on sm_90 (its blocks are
//                 resident and its launch done before the main kernel ends), and it reads the
//                 partials in one round of loads per thread. The partial layout, the combine,
//                 its launch and the device helpers are split_kv.cuh's, shared with paged.cu.
//
// cache_append writes new K/V rows at positions[b] + t: one launch for K and V, 16-byte copies.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
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
#include "kernels/decode.hpp"
#include "kernels/split_kv.cuh"

namespace attnbench {
namespace {

using namespace splitkv;

// ---------------------------------------------------------------------------------------
// Helpers

// Everything a kernel reads, derived once on the host from DecodeParams.
struct Decode {
  const void* q;                // [batch, heads, head_dim]
  const void* k;                // [batch, max_context, kv_heads, head_dim]
  const void* v;                // [batch, max_context, kv_heads, head_dim]
  void* o;                      // [batch, heads, head_dim]
  const int32_t* context_lens;  // [batch]
  float* part_o;                // [batch, heads, splits, head_dim] unnormalised o per split (splits > 1)
  float2* part_ml;              // [batch, heads, splits] (m, l) per split, m in log2 units
  int64_t seq_stride;           // elements between sequences of the cache: max_context·kv_heads·head_dim
  int64_t row_stride;           // elements between keys: kv_heads·head_dim
  int heads, kv_heads, group, head_dim;
  int head_tiles;  // blocks per (sequence, kv head) side by side, each taking kHeads of the group
  int splits;      // blocks along the context; 1: the block writes o itself
  int chunk;       // keys per split
  float scale, scale_log2;
  bool alibi;
};

// One 16-byte vector of T <-> 16 / sizeof(T) floats. bf16 -> fp32 is a shift or a mask.
template <class T>
__device__ __forceinline__ void unpack(const uint4& u, float* f) {
  const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    if constexpr (std::is_same_v<T, float>) {
      f[i] = __uint_as_float(w[i]);
    } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
      f[2 * i] = __uint_as_float(w[i] << 16);
      f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
    } else {
      const float2 h = __half22float2(*reinterpret_cast<const __half2*>(&w[i]));
      f[2 * i] = h.x;
      f[2 * i + 1] = h.y;
    }
  }
}

// ---------------------------------------------------------------------------------------
// Kernels

constexpr int kNaiveThreads = 128;

// Block max or sum of v (every thread gets it). The barrier after the read lets `red` be reused,
// and orders the global writes before it for every thread of the block.
template <bool kMax>
__device__ __forceinline__ float block_reduce(float v, float (&red)[kNaiveThreads / 32]) {
  v = kMax ? warp_max(v) : warp_sum(v);
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = v;
  __syncthreads();
  float r = red[0];
#pragma unroll
  for (int i = 1; i < kNaiveThreads / 32; ++i) r = kMax ? fmaxf(r, red[i]) : r + red[i];
  __syncthreads();
  return r;
}

// scores: [batch, heads, max_context] fp32. Block b·heads + h owns query head h of sequence b.
template <class T>
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

  // The query sits at position ctx - 1: key j is ctx - 1 - j behind it.
  const float slope = p.alibi ? exp2f(-8.f * static_cast<float>(h + 1) / static_cast<float>(p.heads)) : 0.f;
  float m = -INFINITY;
  for (int j = threadIdx.x; j < ctx; j += kNaiveThreads) {
    const T* kj = k + j * p.row_stride;
    float dot = 0.f;
    for (int d = 0; d < p.head_dim; ++d) dot = fmaf(sq[d], to_float(kj[d]), dot);
    const float x = dot * p.scale - slope * static_cast<float>(ctx - 1 - j);
    s[j] = x;
    m = fmaxf(m, x);
  }
  m = block_reduce<true>(m, red);  // finite: ctx >= 1

  float l = 0.f;
  for (int j = threadIdx.x; j < ctx; j += kNaiveThreads) {
    const float e = expf(s[j] - m);
    s[j] = e;
    l += e;
  }
  l = block_reduce<false>(l, red);  // its barriers also publish every p_j to the block

  T* o = static_cast<T*>(p.o) + int64_t{bh} * p.head_dim;
  for (int d = threadIdx.x; d < p.head_dim; d += kNaiveThreads) {
    float acc = 0.f;
    for (int j = 0; j < ctx; ++j) acc = fmaf(s[j], to_float(v[j * p.row_stride + d]), acc);
    o[d] = from_float<T>(acc / l);
  }
}

// The tensor-core kernel's shape. kD: head_dim class (64 or 128; a smaller head_dim runs
// zero-filled). Each warp owns a ring of kStages tile buffers in shared memory (K and V of 16
// keys: 8 KB at d128) and keeps kStages - 1 tiles in flight while it computes one. 2 warps x 3
// stages: 48 KB of rings, 4 blocks per SM (8 warps, 128 KB in flight), so that batch 64 x 8
// kv heads runs in one round of 528 blocks (paged.cu's kernel timed 3 x 2 the same, 4 x 2 and
// 2 x 4, at 3 blocks per SM, 15-30% slower: bench notes, run 14).
template <int kD>
struct MmaCfg {
  static constexpr int kWarps = 2;
  static constexpr int kStages = 3;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kKeys = 16;                    // keys per tile: M of Sᵀ, K of Oᵀ
  static constexpr int kHeads = 8;                    // query heads per block: N of both products
  static constexpr int kSteps = kD / 16;              // k16 steps of Sᵀ = m16 tiles of Oᵀ
  static constexpr int kChunks = kD / 8;              // 16-byte chunks of a K/V row
  static constexpr int kTileBytes = kKeys * kD * 2;   // K (or V) of one tile
  static constexpr int kStageBytes = 2 * kTileBytes;  // K then V
  static constexpr int kCopies = kTileBytes / 16 / 32;  // 16-byte copies per lane for K, and for V
  static constexpr int kRowsPerCopy = 32 / kChunks;   // keys one copy instruction of the warp covers
  static constexpr int kQWords = kD / 2;              // 32-bit words of a Q row
  static constexpr int kRingBytes = kWarps * kStages * kStageBytes;
  static constexpr int kSmemBytes = kRingBytes + kHeads * kQWords * 4;
};

// fp16/bf16, head_dim <= kD in {64, 128}. One block: up to 8 query heads of one (sequence, kv
// head), keys [begin, end); warp w takes 16-key tiles w, w + kWarps, ... Lane = 4 g + t.
// m16n8k16 fragments (PTX ISA): A (16x16, row) {a0, a1, a2, a3} = rows {g, g + 8, g, g + 8} x
// cols {2t.., 2t.., 2t + 8.., 2t + 8..}; B (16x8, col) {b0, b1} = rows {2t.., 2t + 8..} x col
// g; C (16x8) = rows {g, g, g + 8, g + 8} x cols {2t, 2t + 1, 2t, 2t + 1}.
//   Copies: cp.async, 16 bytes, zero-filled past `end` and head_dim; a lane copies chunk
//     lane % kChunks of keys lane / kChunks + kRowsPerCopy j, so that each copy instruction
//     of the warp reads whole rows (512 bytes of 2 keys at d128). The ring holds K and V as
//     [key][chunk] x 16 B with the chunk XOR-swizzled by key % 8: the 8 rows of an ldmatrix
//     matrix (8 keys, one chunk) hit 8 distinct bank groups.
//   Sᵀ = K Qᵀ (16 keys x 8 heads, k = dims): A by ldmatrix.x4 of (keys 0-7 | 8-15) x (chunk
//     2ks | 2ks + 1); Qᵀ's B fragments (head g, dims 16ks + 2t.., 16ks + 8 + 2t..) stay in
//     registers for the whole loop.
//   Oᵀ += Vᵀ Pᵀ (16 dims x 8 heads per m tile, k = the 16 keys): A by ldmatrix.x4.trans of
//     (keys 0-7 | 8-15) x (chunk 2mt | 2mt + 1), which hands each lane (dim g, keys 2t, 2t + 1)
//     of the transpose; Pᵀ by softmax_tile (split_kv.cuh).
//   Oᵀ's C fragment: dims 16mt + g (+ 8) of heads 2t, 2t + 1.
// The kernel it replaced fed the mma fragments straight from 16-byte register loads (L2
// evict-first): as fast with L2 flushed by a read pass, but 20-27 µs slower after a write
// flush, whose dirty lines are written back during the kernel (bench notes, runs 16-17).
template <class T, int kD>
__global__ void __launch_bounds__(MmaCfg<kD>::kThreads) mma_decode_kernel(const Decode p) {
  using C = MmaCfg<kD>;
  using Part = Partials<C::kWarps, C::kHeads, kD>;
  static_assert(sizeof(Part) <= C::kRingBytes, "the partials reuse the rings");
  extern __shared__ __align__(16) unsigned char smem[];
  uint32_t* sq = reinterpret_cast<uint32_t*>(smem + C::kRingBytes);  // [8][kQWords]
  allow_dependents();
  const Work w = block_work<C::kHeads>(p);
  if (w.begin >= w.end) return;  // a split past this sequence's context: the combine skips it

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  // Q's tile: heads past the group and dims past head_dim are 0.
  const int nq = p.head_dim / 8;
  for (int i = threadIdx.x; i < C::kHeads * C::kChunks; i += C::kThreads) {
    const int n = i / C::kChunks, c = i % C::kChunks;
    uint4 x = make_uint4(0, 0, 0, 0);
    if (n < w.nheads && c < nq)
      x = *reinterpret_cast<const uint4*>(static_cast<const T*>(p.q) +
                                          (int64_t{w.b} * p.heads + w.h0 + n) * p.head_dim + 8 * c);
    reinterpret_cast<uint4*>(sq)[i] = x;
  }
  __syncthreads();
  uint32_t qf[C::kSteps][2];
#pragma unroll
  for (int ks = 0; ks < C::kSteps; ++ks) {
    qf[ks][0] = sq[g * C::kQWords + 8 * ks + t];
    qf[ks][1] = sq[g * C::kQWords + 8 * ks + 4 + t];
  }

  const int64_t head_offset = int64_t{w.b} * p.seq_stride + int64_t{w.kvh} * p.head_dim;
  const T* kh = static_cast<const T*>(p.k) + head_offset;
  const T* vh = static_cast<const T*>(p.v) + head_offset;
  const int cc = lane % C::kChunks, ck0 = lane / C::kChunks;
  const bool c_ok = cc < nq;
  const uint32_t ring = static_cast<uint32_t>(__cvta_generic_to_shared(smem)) + warp * C::kStages * C::kStageBytes;
  const int ntiles = (w.end - w.begin + C::kKeys - 1) / C::kKeys;

  // Tile `warp + n·kWarps` into stage n % kStages, one commit group per call (empty past the
  // last tile, so that the wait count below stays exact).
  auto issue = [&](int n) {
    const int tile = warp + n * C::kWarps;
    if (tile < ntiles) {
      const int key0 = w.begin + tile * C::kKeys;
      const uint32_t st = ring + (n % C::kStages) * C::kStageBytes;
#pragma unroll
      for (int j = 0; j < C::kCopies; ++j) {
        const int kk = ck0 + C::kRowsPerCopy * j;
        const bool ok = c_ok && key0 + kk < w.end;
        const int64_t off = int64_t{key0 + kk} * p.row_stride + 8 * cc;
        const uint32_t dst = st + (kk * C::kChunks + (cc ^ (kk & 7))) * 16;
        cp_async_16z(dst, ok ? kh + off : kh, ok ? 16 : 0);
        cp_async_16z(dst + C::kTileBytes, ok ? vh + off : vh, ok ? 16 : 0);
      }
    }
    cp_async_commit();
  };

  const int pos = w.ctx - 1;
  float slope[2], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
#pragma unroll
  for (int jj = 0; jj < 2; ++jj) slope[jj] = p.alibi ? alibi_slope_log2(w.h0 + 2 * t + jj, p.heads) : 0.f;
  float o[C::kSteps][4] = {};
  // ldmatrix rows: K, key (lane % 8) + 8 ((lane / 8) % 2) of chunk 2ks + lane / 16; V (.trans),
  // key (lane % 8) + 8 (lane / 16) of chunk 2mt + (lane / 8) % 2.
  const int kkey = (lane & 7) + 8 * ((lane >> 3) & 1), kc = lane >> 4;
  const int vkey = (lane & 7) + 8 * (lane >> 4), vc = (lane >> 3) & 1;

#pragma unroll
  for (int s = 0; s < C::kStages - 1; ++s) issue(s);
  for (int n = 0; warp + n * C::kWarps < ntiles; ++n) {
    __syncwarp();  // every lane is done with the stage the next copies overwrite
    issue(n + C::kStages - 1);
    cp_async_wait<C::kStages - 1>();
    __syncwarp();  // tile n's copies, from every lane, are visible to the warp
    const uint32_t st = ring + (n % C::kStages) * C::kStageBytes;
    const int key0 = w.begin + (warp + n * C::kWarps) * C::kKeys;

    float s[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (int ks = 0; ks < C::kSteps; ++ks) {
      uint32_t a[4];
      ldsm_x4(a, st + (kkey * C::kChunks + ((2 * ks + kc) ^ (kkey & 7))) * 16);
      mma_16816<T>(s, a[0], a[1], a[2], a[3], qf[ks][0], qf[ks][1]);
    }
    // s = {key g: head 2t, 2t + 1; key g + 8: head 2t, 2t + 1}, in exp2 units with the bias.
    float x[1][4];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int key = key0 + g + 8 * r;
      const float dist = static_cast<float>(key - pos);
#pragma unroll
      for (int jj = 0; jj < 2; ++jj)
        x[0][2 * r + jj] = key < w.end ? fmaf(s[2 * r + jj], p.scale_log2, slope[jj] * dist) : -INFINITY;
    }
    uint32_t pb0[1], pb1[1];
    softmax_tile<T>(x, m, l, o, pb0, pb1);
#pragma unroll
    for (int mt = 0; mt < C::kSteps; ++mt) {
      uint32_t a[4];
      ldsm_x4_trans(a, st + C::kTileBytes + (vkey * C::kChunks + ((2 * mt + vc) ^ (vkey & 7))) * 16);
      mma_16816<T>(o[mt], a[0], a[1], a[2], a[3], pb0[0], pb1[0]);
    }
  }
  cp_async_wait<0>();
  __syncthreads();  // every warp is done with its ring: the partials take its place
  Part& part = *reinterpret_cast<Part*>(smem);
  store_warp_partial(part, warp, o, m, l);
  __syncthreads();
  merge_and_store<T, false>(part, p, w);
}

// The CUDA-core kernel's shape: fp32 (any head_dim), fp16/bf16 above 128. kG query heads per
// block: 1, or 4 for any group > 1 (a group of 2 or 3 computes unused heads; larger groups
// take several blocks).
template <class T, int kD, int kG>
struct SimtCfg {
  static constexpr int kThreads = 256;
  static constexpr int kMinBlocks = 2;
  static constexpr int kVec = 16 / static_cast<int>(sizeof(T));  // elements per 16-byte chunk
  static constexpr int kChunks = kD / kVec;                      // chunks per row
  static constexpr int kLanes = kChunks < 32 ? kChunks : 32;     // lanes per row: a row group
  static constexpr int kCpt = kChunks / kLanes;                  // chunks per thread: lane + kLanes·c
  static constexpr int kElems = kCpt * kVec;                     // dims per thread
  static constexpr int kGroups = kThreads / kLanes;              // row groups per block
  static constexpr int kRows = 4 / kCpt;                         // rows per thread per step: 8 loads
  static constexpr int kStep = kGroups * kRows;                  // keys per block step
};

// One block: kG query heads of one (sequence, kv head), keys [begin, end). Row group r of the
// block takes keys begin + step·kStep + r + kGroups·u (u < kRows): a warp's lanes read whole
// consecutive rows, and every thread issues its kRows·kCpt K and V loads before using one.
template <class T, int kD, int kG>
__global__ void __launch_bounds__(SimtCfg<T, kD, kG>::kThreads, SimtCfg<T, kD, kG>::kMinBlocks)
    simt_decode_kernel(const Decode p) {
  using C = SimtCfg<T, kD, kG>;
  __shared__ Partials<C::kGroups, kG, kD> part;
  allow_dependents();
  const Work w = block_work<kG>(p);
  if (w.begin >= w.end) return;  // a split past this sequence's context: the combine skips it

  const int li = threadIdx.x % C::kLanes, grp = threadIdx.x / C::kLanes;
  const int nvec = p.head_dim / C::kVec;  // 16-byte chunks within head_dim
  bool chunk_ok[C::kCpt];
#pragma unroll
  for (int c = 0; c < C::kCpt; ++c) chunk_ok[c] = li + C::kLanes * c < nvec;

  // This thread's dims of every head, fp32; heads past the group and dims past head_dim are 0.
  float q[kG][C::kElems];
  float slope[kG];
#pragma unroll
  for (int n = 0; n < kG; ++n) {
    const T* qn = static_cast<const T*>(p.q) + (int64_t{w.b} * p.heads + w.h0 + n) * p.head_dim;
#pragma unroll
    for (int c = 0; c < C::kCpt; ++c) {
      uint4 x = make_uint4(0, 0, 0, 0);
      if (n < w.nheads && chunk_ok[c]) x = *reinterpret_cast<const uint4*>(qn + (li + C::kLanes * c) * C::kVec);
      unpack<T>(x, &q[n][c * C::kVec]);
    }
    slope[n] = p.alibi ? alibi_slope_log2(w.h0 + n, p.heads) : 0.f;
  }

  const int64_t head_offset = int64_t{w.b} * p.seq_stride + int64_t{w.kvh} * p.head_dim + li * C::kVec;
  const T* kbase = static_cast<const T*>(p.k) + head_offset;
  const T* vbase = static_cast<const T*>(p.v) + head_offset;
  const uint64_t pol = kv_policy(p.head_tiles == 1);
  const int pos = w.ctx - 1;
  float o[kG][C::kElems] = {}, m[kG], l[kG] = {};
#pragma unroll
  for (int n = 0; n < kG; ++n) m[n] = -INFINITY;

  // Every thread runs every step (the bounds are the block's), so the shuffles see full warps.
  for (int base = w.begin; base < w.end; base += C::kStep) {
    uint4 kr[C::kRows][C::kCpt], vr[C::kRows][C::kCpt];
#pragma unroll
    for (int u = 0; u < C::kRows; ++u) {
      const int key = base + grp + C::kGroups * u;
#pragma unroll
      for (int c = 0; c < C::kCpt; ++c) {
        kr[u][c] = vr[u][c] = make_uint4(0, 0, 0, 0);
        if (key < w.end && chunk_ok[c]) {
          kr[u][c] = ld_stream(kbase + key * p.row_stride + C::kLanes * C::kVec * c, pol);
          vr[u][c] = ld_stream(vbase + key * p.row_stride + C::kLanes * C::kVec * c, pol);
        }
      }
    }
    float s[C::kRows][kG];
#pragma unroll
    for (int u = 0; u < C::kRows; ++u) {
      float kf[C::kElems];
#pragma unroll
      for (int c = 0; c < C::kCpt; ++c) unpack<T>(kr[u][c], &kf[c * C::kVec]);
#pragma unroll
      for (int n = 0; n < kG; ++n) {
        float dot = 0.f;
#pragma unroll
        for (int e = 0; e < C::kElems; ++e) dot = fmaf(q[n][e], kf[e], dot);
        s[u][n] = dot;
      }
    }
#pragma unroll
    for (int off = C::kLanes / 2; off > 0; off >>= 1) {
#pragma unroll
      for (int u = 0; u < C::kRows; ++u) {
#pragma unroll
        for (int n = 0; n < kG; ++n) s[u][n] += __shfl_xor_sync(0xffffffffu, s[u][n], off);
      }
    }
    // Scores in exp2 units with the bias; rows past `end` are -inf.
#pragma unroll
    for (int u = 0; u < C::kRows; ++u) {
      const int key = base + grp + C::kGroups * u;
      const float dist = static_cast<float>(key - pos);
#pragma unroll
      for (int n = 0; n < kG; ++n) s[u][n] = key < w.end ? fmaf(s[u][n], p.scale_log2, slope[n] * dist) : -INFINITY;
    }
    // A group whose rows all lie past `end` keeps m = -inf; ms = 0 then stands in for it in
    // the exponents (exp2(-inf - 0) = 0), since -inf - -inf would be NaN.
    float ms[kG];
#pragma unroll
    for (int n = 0; n < kG; ++n) {
      float mx = m[n];
#pragma unroll
      for (int u = 0; u < C::kRows; ++u) mx = fmaxf(mx, s[u][n]);
      ms[n] = mx == -INFINITY ? 0.f : mx;
      const float alpha = exp2_approx(m[n] - ms[n]);
      m[n] = mx;
      l[n] *= alpha;
#pragma unroll
      for (int e = 0; e < C::kElems; ++e) o[n][e] *= alpha;
    }
#pragma unroll
    for (int u = 0; u < C::kRows; ++u) {
      float vf[C::kElems];
#pragma unroll
      for (int c = 0; c < C::kCpt; ++c) unpack<T>(vr[u][c], &vf[c * C::kVec]);
#pragma unroll
      for (int n = 0; n < kG; ++n) {
        const float pr = exp2_approx(s[u][n] - ms[n]);
        l[n] += pr;
#pragma unroll
        for (int e = 0; e < C::kElems; ++e) o[n][e] = fmaf(pr, vf[e], o[n][e]);
      }
    }
  }

#pragma unroll
  for (int n = 0; n < kG; ++n) {
#pragma unroll
    for (int c = 0; c < C::kCpt; ++c) {
      float* dst = &part.o[grp][n][(li + C::kLanes * c) * C::kVec];
#pragma unroll
      for (int e = 0; e < C::kVec; e += 4) {
        const float* src = &o[n][c * C::kVec + e];
        *reinterpret_cast<float4*>(dst + e) = make_float4(src[0], src[1], src[2], src[3]);
      }
    }
    if (li == 0) {
      part.m[grp][n] = m[n];
      part.l[grp][n] = l[n];
    }
  }
  __syncthreads();
  merge_and_store<T, false>(part, p, w);
}

// k_cache, v_cache: [batch, max_context, row]; k_new, v_new: [batch, tokens, row]; row counted
// in units W (16 bytes, or one element when rows or pointers are not 16-byte aligned). Threads
// take the units of K, then those of V, so one launch writes both.
template <class W>
__global__ void cache_append_kernel(W* __restrict__ k_cache, W* __restrict__ v_cache, const W* __restrict__ k_new,
                                    const W* __restrict__ v_new, const int32_t* __restrict__ positions, int64_t tokens,
                                    int64_t row, int64_t max_context, int64_t per_tensor) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < 2 * per_tensor; i += stride) {
    const bool is_v = i >= per_tensor;
    const int64_t j = is_v ? i - per_tensor : i;
    const int64_t e = j % row, bt = j / row;
    const int64_t b = bt / tokens, pos = positions[b] + bt % tokens;
    if (pos < 0 || pos >= max_context) continue;  // outside the cache: never written out of bounds
    (is_v ? v_cache : k_cache)[(b * max_context + pos) * row + e] = (is_v ? v_new : k_new)[j];
  }
}

// ---------------------------------------------------------------------------------------
// Launchers

// Calls f(T{}) with the storage type T of dtype (supports() has checked it).
template <class F>
void with_storage(DType dtype, const char* name, F&& f) {
  switch (dtype) {
    case DType::fp32:
      return f(float{});
    case DType::fp16:
      return f(__half{});
    case DType::bf16:
      return f(__nv_bfloat16{});
    case DType::fp8_e4m3:
      break;
  }
  throw std::invalid_argument(std::string(name) + ": no kernel for dtype " + dtype_name(dtype));
}

int padded_dim(int64_t head_dim) { return head_dim <= 64 ? 64 : head_dim <= 128 ? 128 : 256; }

Decode make_decode(const DecodeParams& p) {
  Decode d{};
  d.q = p.q;
  d.k = p.k_cache;
  d.v = p.v_cache;
  d.o = p.o;
  d.context_lens = p.context_lens;
  d.row_stride = p.kv_heads * p.head_dim;
  d.seq_stride = p.max_context * d.row_stride;
  d.heads = static_cast<int>(p.heads);
  d.kv_heads = static_cast<int>(p.kv_heads);
  d.group = static_cast<int>(p.heads / p.kv_heads);
  d.head_dim = static_cast<int>(p.head_dim);
  d.head_tiles = 1;
  d.splits = 1;
  d.chunk = static_cast<int>(p.max_context);
  d.scale = p.scale;
  d.scale_log2 = p.scale_log2;
  d.alibi = p.alibi;
  return d;
}

void naive(const DecodeParams& p, const LaunchContext& ctx) {
  const Decode d = make_decode(p);
  with_storage(p.dtype, "decode/naive", [&](auto tag) {
    using T = decltype(tag);
    naive_kernel<T><<<static_cast<unsigned>(p.batch * p.heads), kNaiveThreads, 0, ctx.stream>>>(
        d, static_cast<float*>(ctx.workspace), p.max_context);
  });
  check_launch("decode/naive");
}

int64_t longest_context(const DecodeParams& p) { return std::clamp<int64_t>(p.longest_context, 1, p.max_context); }

// The most splits any launch of p uses: chunks of at least kMinChunk keys, and no more than
// kMaxSlots blocks over the fewest blocks per split (one per kv head).
int64_t max_splits(const DecodeParams& p) {
  const int64_t by_chunk = longest_context(p) / kMinChunk;
  const int64_t by_slots = kMaxSlots / (p.batch * p.kv_heads);
  return std::max<int64_t>(1, std::min(by_chunk, by_slots));
}

std::size_t split_workspace(const DecodeParams& p) { return partials_workspace(p, max_splits(p)); }

// How a fused launch spreads over the card.
struct Policy {
  bool split;  // false: flash_decode, one block per (sequence, kv head, head tile)
  const char* name;
};

// Splits: at most as many as fill one round of `slots` resident blocks with `units` blocks per
// split (and max_splits). The chunk is the fewest whole `step`-key steps of the kernel (its
// 16-key tiles, or the CUDA-core kernel's block step) that cover the longest context in that
// many splits, and the splits are the fewest of that chunk: the longest block as short as the
// steps allow. Batch 1 x 8 kv heads x 131072 keys on 132 SMs x 4: 66 splits of 2000 keys (the
// last 1072), 528 blocks; 64-key chunks gave 64 of 2048, 512 blocks. One split means none:
// the kernel writes o and no combine runs.
void plan_splits(Decode& d, const DecodeParams& p, int64_t units, int64_t slots, int64_t step) {
  const int64_t want = std::min(slots / units, max_splits(p));
  if (want <= 1) return;
  const int64_t longest = longest_context(p);
  const int64_t chunk = ceil_div(ceil_div(longest, want), step) * step;
  const int64_t splits = ceil_div(longest, chunk);
  if (splits <= 1) return;
  d.splits = static_cast<int>(splits);
  d.chunk = static_cast<int>(chunk);
}

// Launches `kernel` (heads_per_block query heads per block, `step` keys per block step) and,
// with splits, the combine.
template <class T, class Kernel>
void launch_fused(const DecodeParams& p, const LaunchContext& ctx, const Policy& policy, Kernel kernel, int threads,
                  int heads_per_block, int step, int blocks_per_sm, int smem_bytes = 0) {
  Decode d = make_decode(p);
  d.head_tiles = static_cast<int>(ceil_div(d.group, heads_per_block));
  const int64_t units = p.batch * p.kv_heads * d.head_tiles;
  if (policy.split)
    plan_splits(d, p, units, int64_t{sm_count(ctx, "decode: LaunchContext has no device caps")} * blocks_per_sm, step);
  launch_split<T>(d, p, ctx, kernel, units, threads, policy.name, smem_bytes);
}

template <class T, int kD>
void launch_mma(const DecodeParams& p, const LaunchContext& ctx, const Policy& policy) {
  using C = MmaCfg<kD>;
  const auto kernel = mma_decode_kernel<T, kD>;
  static const int blocks_per_sm = resident_blocks(kernel, C::kThreads, C::kSmemBytes, "decode: tensor-core kernel");
  launch_fused<T>(p, ctx, policy, kernel, C::kThreads, C::kHeads, C::kKeys, blocks_per_sm, C::kSmemBytes);
}

template <class T, int kD, int kG>
void launch_simt(const DecodeParams& p, const LaunchContext& ctx, const Policy& policy) {
  using C = SimtCfg<T, kD, kG>;
  static const int blocks_per_sm = resident_blocks(simt_decode_kernel<T, kD, kG>, C::kThreads, 0, "decode: occupancy");
  launch_fused<T>(p, ctx, policy, simt_decode_kernel<T, kD, kG>, C::kThreads, kG, C::kStep, blocks_per_sm);
}

template <class T, int kD>
void launch_class(const DecodeParams& p, const LaunchContext& ctx, const Policy& policy) {
  if constexpr (!std::is_same_v<T, float> && kD <= 128) {
    launch_mma<T, kD>(p, ctx, policy);
  } else if (p.heads == p.kv_heads) {
    launch_simt<T, kD, 1>(p, ctx, policy);
  } else {
    launch_simt<T, kD, 4>(p, ctx, policy);
  }
}

void launch_fused_variant(const DecodeParams& p, const LaunchContext& ctx, const Policy& policy) {
  with_storage(p.dtype, policy.name, [&](auto tag) {
    using T = decltype(tag);
    switch (padded_dim(p.head_dim)) {
      case 64:
        return launch_class<T, 64>(p, ctx, policy);
      case 128:
        return launch_class<T, 128>(p, ctx, policy);
      default:
        return launch_class<T, 256>(p, ctx, policy);
    }
  });
}

void flash_decode(const DecodeParams& p, const LaunchContext& ctx) {
  launch_fused_variant(p, ctx, {false, "decode/flash_decode"});
}
void split_kv(const DecodeParams& p, const LaunchContext& ctx) { launch_fused_variant(p, ctx, {true, "decode/split_kv"}); }

// ---------------------------------------------------------------------------------------
// supports and workspace

std::string common_reason(const DecodeParams& p) {
  if (p.dtype != DType::fp32 && p.dtype != DType::fp16 && p.dtype != DType::bf16)
    return std::string("dtype ") + dtype_name(p.dtype) +
           " is not a decode storage type (fp32, fp16, bf16; an fp8 cache needs a dequantisation scale)";
  if (p.batch < 1 || p.heads < 1 || p.kv_heads < 1 || p.max_context < 1)
    return "batch, heads, kv_heads and max_context must be >= 1";
  if (p.heads % p.kv_heads != 0) return "heads must be a multiple of kv_heads";
  if (p.head_dim < 8 || p.head_dim > 256 || p.head_dim % 8 != 0) return "head_dim must be a multiple of 8, at most 256";
  if (p.max_context >= kMaxContext) return "max_context must be < 2^30";
  if (p.longest_context < 1 || p.longest_context > p.max_context) return "longest_context must be in [1, max_context]";
  if (p.batch * p.heads > INT_MAX) return "batch * heads must be < 2^31 (blocks in gridDim.x)";
  return {};
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

std::string fused_supports(const DecodeParams& p, const DeviceCaps& caps) {
  std::string r = common_reason(p);
  if (!r.empty()) return r;
  // Zero caps (a device not chosen yet) are not refused.
  if (caps.cc_major != 0 && caps.arch() < 80) return "needs sm_80+ (mma.sync with bf16)";
  for (const void* ptr : {p.q, p.k_cache, p.v_cache, static_cast<const void*>(p.o)})
    if (ptr && reinterpret_cast<uintptr_t>(ptr) % 16 != 0) return "q, k_cache, v_cache and o must be 16-byte aligned";
  return {};
}

}  // namespace

// ---------------------------------------------------------------------------------------
// cache_append

void cache_append(const CacheAppendParams& p, const LaunchContext& ctx) {
  const int64_t es = static_cast<int64_t>(dtype_bytes(p.dtype));
  const int64_t row_bytes = p.kv_heads * p.head_dim * es;
  bool vec16 = row_bytes % 16 == 0;
  for (const void* ptr : {static_cast<const void*>(p.k_cache), static_cast<const void*>(p.v_cache), p.k_new, p.v_new})
    vec16 = vec16 && reinterpret_cast<uintptr_t>(ptr) % 16 == 0;
  auto launch = [&](auto unit) {
    using W = decltype(unit);
    const int64_t row = row_bytes / static_cast<int64_t>(sizeof(W));
    const int64_t per_tensor = p.batch * p.tokens * row;
    if (per_tensor == 0) return;
    constexpr int kThreads = 256;
    const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(ceil_div(2 * per_tensor, kThreads), 65535));
    cache_append_kernel<W><<<blocks, kThreads, 0, ctx.stream>>>(
        static_cast<W*>(p.k_cache), static_cast<W*>(p.v_cache), static_cast<const W*>(p.k_new),
        static_cast<const W*>(p.v_new), p.positions, p.tokens, row, p.max_context, per_tensor);
  };
  if (vec16) {
    launch(uint4{});
  } else {
    switch (es) {
      case 4:
        launch(uint32_t{});
        break;
      case 2:
        launch(uint16_t{});
        break;
      default:
        launch(uint8_t{});
        break;
    }
  }
  check_launch("decode/cache_append");
}

// ---------------------------------------------------------------------------------------
// Variant table

const std::vector<Variant<DecodeParams>>& decode_variants() {
  static const std::vector<Variant<DecodeParams>> table = {
      {"naive", "one block per (sequence, head): fp32 scores to memory, max, sum, then P V (the baseline)", naive,
       naive_supports, naive_workspace},
      {"flash_decode",
       "one pass, online softmax, one block per (sequence, kv head) for its whole GQA group; mma.sync for fp16/bf16",
       flash_decode, fused_supports, nullptr},
      {"split_kv", "Flash-Decoding: flash_decode with the context split to fill the SMs, fp32 partials, combine",
       split_kv, fused_supports, split_workspace},
  };
  return table;
}

}  // namespace attnbench
