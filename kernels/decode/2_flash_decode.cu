// decode rung 2, flash_decode: one pass with the online softmax (running max m, sum l,
// unnormalised o, rescaled by exp2(m_old - m_new) when m grows), one block per (sequence, kv
// head) computing every query head of its GQA group, so each K/V byte is read once where rung
// 1 reads it once per query head and three times over.
//
// Groups above 8 heads take one block per 8 heads, side by side in the grid so that they
// share the bytes through L2. fp16/bf16 with head_dim <= 128 run the dot products on tensor
// cores (mma.sync m16n8k16, fp32 accumulators): Sᵀ = K Qᵀ takes 16 keys as M and the group's
// heads as N, Oᵀ += Vᵀ Pᵀ takes the dims as M, so that one n8 covers a group of up to 8 heads.
// Each warp streams its 16-key tiles of K and V through a 3-stage cp.async ring in shared
// memory (whole rows per copy instruction; 2 tiles, 16 KB, in flight per warp while it computes
// one) and takes the mma fragments with ldmatrix (see mma_decode_kernel). Blocks of 2 warps, 4
// per SM: 8 warps, 128 KB in flight. That is ~30 instructions per key and warp (ncu counts 485
// per 16-key tile in paged_flash's twin, d128), where a CUDA-core loop with a row's 16-byte
// chunks on 16 lanes needs ~97 for a group of 4 (dots, shuffle reductions and exps per head):
// ~70% of an H200 SM's issue slots at 4 TB/s. fp32 (tf32 would miss the fp32 tolerance) and
// head_dim > 128 run that CUDA-core loop: up to 32 lanes per row, 4 rows (8 loads) in flight per
// thread, 256-thread blocks. Warps (row groups) merge their (m, l, o) through shared memory at
// the end. No split: grid = batch x kv heads (x head tiles). Given the step's new K/V rows
// (DecodeParams::k_new, the pipeline's step), the tensor-core kernel's block that reads row
// context - 1 stores them there first (append_row): the step is one launch, not an append
// and a decode (H200, run 198: the pipeline's TBT -9%).
// H200, run 19: bf16 b64 kv8 ctx4096 3983 GB/s (88% of read: one block per kv head fills the
// card); b1 kv8 ctx131072 only 179 GB/s (8 blocks: rung 3 splits the context).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "kernels/common/copy.cuh"
#include "kernels/common/dispatch.cuh"
#include "kernels/common/mask.cuh"
#include "kernels/common/mma.cuh"
#include "kernels/common/reduce.cuh"
#include "kernels/common/softmax_math.cuh"
#include "kernels/common/split_kv.cuh"
#include "kernels/common/storage.cuh"
#include "kernels/decode/args.hpp"
#include "kernels/decode/rungs.hpp"

namespace attnbench::decode_impl {
namespace {

// A raw score q·k soft-capped when the kernel is built with kCap (softcap > 0): the other
// instantiations keep the loop they had without soft-capping.
template <bool kCap>
__device__ __forceinline__ float capped(const Decode& p, float s) {
  if constexpr (kCap) return soft_cap(s, p.score.cap, p.score.inv_cap);
  return s;
}

// The step's new K and V rows of kv head w.kvh (p.k_new, p.v_new) stored at cache row
// w.ctx - 1, the key turned at that position with RoPE as cache_append would store it: the
// pipeline's append, done by the block that reads the row, before its barrier that precedes
// its first copy. Each head tile of a group above kHeads writes the same bytes for itself.
template <class T>
__device__ __forceinline__ void append_row(const Decode& p, const Work& w) {
  constexpr int kVec = 16 / sizeof(T);
  const int chunks = p.head_dim / kVec;
  const int64_t from = (int64_t{w.b} * p.kv_heads + w.kvh) * p.head_dim;
  const int64_t to = int64_t{w.b} * p.seq_stride + int64_t{w.ctx - 1} * p.row_stride + int64_t{w.kvh} * p.head_dim;
  for (int i = threadIdx.x; i < 2 * chunks; i += blockDim.x) {
    const bool is_v = i >= chunks;
    const int c = is_v ? i - chunks : i;
    const T* row = static_cast<const T*>(is_v ? p.v_new : p.k_new) + from;
    uint4 x = *reinterpret_cast<const uint4*>(row + kVec * c);
    if (!is_v && p.rope.on()) {
      float f[kVec];
      unpack<T>(x, f);
      rope_row_part<T, kVec>(row, kVec * c, f, w.ctx - 1, p.rope);
      x = pack<T>(f);
    }
    // The cache is the caller's to write when it hands new rows (DecodeParams::k_new).
    T* cache = static_cast<T*>(const_cast<void*>(is_v ? p.v : p.k));
    *reinterpret_cast<uint4*>(cache + to + kVec * c) = x;
  }
}

// The tensor-core kernel's shape. kD: head_dim class (64 or 128; a smaller head_dim runs
// zero-filled). Each warp owns a ring of kStages tile buffers in shared memory (K and V of 16
// keys: 8 KB at d128) and keeps kStages - 1 tiles in flight while it computes one. 2 warps x 3
// stages: 48 KB of rings, 4 blocks per SM (8 warps, 128 KB in flight), so that batch 64 x 8
// kv heads runs in one round of 528 blocks (paged_flash's kernel timed 3 x 2 the same, 4 x 2 and
// 2 x 4, at 3 blocks per SM, 15-30% slower: bench notes, run 14).
template <int kD>
struct MmaCfg {
  static constexpr int kWarps = 2;
  static constexpr int kStages = 3;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kKeys = 16;                      // keys per tile: M of Sᵀ, K of Oᵀ
  static constexpr int kHeads = 8;                      // query heads per block: N of both products
  static constexpr int kSteps = kD / 16;                // k16 steps of Sᵀ = m16 tiles of Oᵀ
  static constexpr int kChunks = kD / 8;                // 16-byte chunks of a K/V row
  static constexpr int kTileBytes = kKeys * kD * 2;     // K (or V) of one tile
  static constexpr int kStageBytes = 2 * kTileBytes;    // K then V
  static constexpr int kCopies = kTileBytes / 16 / 32;  // 16-byte copies per lane for K, and for V
  static constexpr int kRowsPerCopy = 32 / kChunks;     // keys one copy instruction of the warp covers
  static constexpr int kQWords = kD / 2;                // 32-bit words of a Q row
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
template <class T, int kD, bool kCap>
__global__ void __launch_bounds__(MmaCfg<kD>::kThreads) mma_decode_kernel(const Decode p) {
  using C = MmaCfg<kD>;
  using Part = Partials<C::kWarps, C::kHeads, kD>;
  static_assert(sizeof(Part) <= C::kRingBytes, "the partials reuse the rings");
  extern __shared__ __align__(16) unsigned char smem[];
  uint32_t* sq = reinterpret_cast<uint32_t*>(smem + C::kRingBytes);  // [8][kQWords]
  allow_dependents();
  wait_for_primary();  // launched early (launch_split): nothing read before the kernels ahead end
  const Work w = block_work<C::kHeads>(p);
  if (w.begin >= w.end) return;  // a split past this sequence's context: the combine skips it
  // The block that reads row ctx - 1 stores the step's new row there first.
  if (p.k_new && w.end == w.ctx) append_row<T>(p, w);

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  // Q's tile: heads past the group and dims past head_dim are 0.
  const int nq = p.head_dim / 8;
  for (int i = threadIdx.x; i < C::kHeads * C::kChunks; i += C::kThreads) {
    const int n = i / C::kChunks, c = i % C::kChunks;
    uint4 x = make_uint4(0, 0, 0, 0);
    if (n < w.nheads && c < nq) {
      const T* row = static_cast<const T*>(p.q) + (int64_t{w.b} * p.heads + w.h0 + n) * p.head_dim;
      x = *reinterpret_cast<const uint4*>(row + 8 * c);
      if (p.rope.on()) {  // the query at its position, context - 1
        float f[8];
        unpack<T>(x, f);
        rope_row_part<T, 8>(row, 8 * c, f, w.ctx - 1, p.rope);
        x = pack<T>(f);
      }
    }
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
        // No L2 policy: a streamed K/V byte has no reuse, but an evict-first hint here cost
        // 16 µs more than none after a write flush (bench notes, run 16).
        cp_async_16(dst, ok ? kh + off : kh, ok ? 16 : 0);
        cp_async_16(dst + C::kTileBytes, ok ? vh + off : vh, ok ? 16 : 0);
      }
    }
    cp_async_commit();
  };

  const int pos = w.ctx - 1;
  float slope[2], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
#pragma unroll
  for (int jj = 0; jj < 2; ++jj) slope[jj] = head_slope_log2(p, w.h0 + 2 * t + jj);
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
        x[0][2 * r + jj] =
            sees(w, key) ? fmaf(capped<kCap>(p, s[2 * r + jj]), p.scale_log2, slope[jj] * dist) : -INFINITY;
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
template <class T, int kD, int kG, bool kCap>
__global__ void __launch_bounds__(SimtCfg<T, kD, kG>::kThreads, SimtCfg<T, kD, kG>::kMinBlocks)
    simt_decode_kernel(const Decode p) {
  using C = SimtCfg<T, kD, kG>;
  __shared__ Partials<C::kGroups, kG, kD> part;
  allow_dependents();
  wait_for_primary();  // launched early (launch_split): nothing read before the kernels ahead end
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
      if (p.rope.on() && n < w.nheads && chunk_ok[c])  // the query at its position, context - 1
        rope_row_part<T, C::kVec>(qn, (li + C::kLanes * c) * C::kVec, &q[n][c * C::kVec], w.ctx - 1, p.rope);
    }
    slope[n] = head_slope_log2(p, w.h0 + n);
  }

  const int64_t head_offset = int64_t{w.b} * p.seq_stride + int64_t{w.kvh} * p.head_dim + li * C::kVec;
  const T* kbase = static_cast<const T*>(p.k) + head_offset;
  const T* vbase = static_cast<const T*>(p.v) + head_offset;
  // Evict-first when head_tiles == 1: no other block reads a K/V byte. Head tiles (group
  // above the block's heads) reuse each other's bytes through L2: evict-normal.
  const uint64_t pol = l2_policy(p.head_tiles == 1);
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
    allreduce<C::kLanes>(s, SumOp{});
    // Scores in exp2 units with the bias; rows past `end` are -inf.
#pragma unroll
    for (int u = 0; u < C::kRows; ++u) {
      const int key = base + grp + C::kGroups * u;
      const float dist = static_cast<float>(key - pos);
#pragma unroll
      for (int n = 0; n < kG; ++n)
        s[u][n] = sees(w, key) ? fmaf(capped<kCap>(p, s[u][n]), p.scale_log2, slope[n] * dist) : -INFINITY;
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

// Launches `kernel` (heads_per_block query heads per block, `step` keys per block step) and,
// with splits, the combine.
template <class T, class Kernel>
void launch_fused(const DecodeParams& p, const LaunchContext& ctx, const Policy& policy, Kernel kernel, int threads,
                  int heads_per_block, int step, int blocks_per_sm, int smem_bytes = 0) {
  Decode d = make_decode(p);
  d.head_tiles = static_cast<int>(ceil_div(d.group, heads_per_block));
  d.key_align = step;  // a window starts on a whole step: the block's first step holds a key it sees
  const int64_t units = p.batch * p.kv_heads * d.head_tiles;
  if (policy.plan)
    policy.plan(d, p, units, int64_t{sm_count(ctx, "decode: LaunchContext has no device caps")} * blocks_per_sm, step);
  launch_split<T>(d, p, ctx, kernel, units, threads, policy.name, smem_bytes);
}

template <class T, int kD, bool kCap>
void launch_mma(const DecodeParams& p, const LaunchContext& ctx, const Policy& policy) {
  using C = MmaCfg<kD>;
  const auto kernel = mma_decode_kernel<T, kD, kCap>;
  static const int blocks_per_sm = resident_blocks(kernel, C::kThreads, C::kSmemBytes, "decode: tensor-core kernel");
  launch_fused<T>(p, ctx, policy, kernel, C::kThreads, C::kHeads, C::kKeys, blocks_per_sm, C::kSmemBytes);
}

template <class T, int kD, int kG, bool kCap>
void launch_simt(const DecodeParams& p, const LaunchContext& ctx, const Policy& policy) {
  // Its K/V loads take the read-only path, which need not see rows stored in the same launch.
  if (p.k_new) throw std::invalid_argument(std::string(policy.name) + ": the CUDA-core kernel does not append rows");
  using C = SimtCfg<T, kD, kG>;
  const auto kernel = simt_decode_kernel<T, kD, kG, kCap>;
  static const int blocks_per_sm = resident_blocks(kernel, C::kThreads, 0, "decode: occupancy");
  launch_fused<T>(p, ctx, policy, kernel, C::kThreads, kG, C::kStep, blocks_per_sm);
}

// Which kernel a point runs: the tensor-core one for 16-bit storage at head_dim <= 128, else
// the CUDA-core loop. launch_class picks by it, and fused_appends asks it (only the
// tensor-core kernel stores the step's new rows).
constexpr bool on_tensor_cores(bool fp32_storage, int64_t head_dim) { return !fp32_storage && head_dim <= 128; }

template <class T, int kD, bool kCap>
void launch_class(const DecodeParams& p, const LaunchContext& ctx, const Policy& policy) {
  if constexpr (on_tensor_cores(std::is_same_v<T, float>, kD)) {
    launch_mma<T, kD, kCap>(p, ctx, policy);
  } else if (p.heads == p.kv_heads) {
    launch_simt<T, kD, 1, kCap>(p, ctx, policy);
  } else {
    launch_simt<T, kD, 4, kCap>(p, ctx, policy);
  }
}

}  // namespace

void launch_fused_variant(const DecodeParams& p, const LaunchContext& ctx, const Policy& policy) {
  with_storage(p.dtype, policy.name, [&](auto tag) {
    using T = decltype(tag);
    with_head_dim_class<64, 128, 256>(p.head_dim, [&](auto d) {
      constexpr int kD = decltype(d)::value;
      if (p.score.softcap > 0)
        launch_class<T, kD, true>(p, ctx, policy);
      else
        launch_class<T, kD, false>(p, ctx, policy);
    });
  });
}

void flash_decode(const DecodeParams& p, const LaunchContext& ctx) {
  launch_fused_variant(p, ctx, {"decode/flash_decode", nullptr});
}

bool fused_appends(const DecodeParams& p) {
  return (p.dtype == DType::fp16 || p.dtype == DType::bf16) && on_tensor_cores(false, p.head_dim);
}

std::string fused_supports(const DecodeParams& p, const DeviceCaps& caps) {
  std::string r = common_reason(p);
  if (!r.empty()) return r;
  // Zero caps (a device not chosen yet) are not refused.
  if (caps.cc_major != 0 && caps.arch() < 80) return "needs sm_80+ (mma.sync with bf16)";
  for (const void* ptr : {p.q, p.k_cache, p.v_cache, static_cast<const void*>(p.o), p.k_new, p.v_new})
    if (ptr && !aligned16(ptr)) return "q, k_cache, v_cache, o, k_new and v_new must be 16-byte aligned";
  return {};
}

}  // namespace attnbench::decode_impl
