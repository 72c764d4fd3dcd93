// The ragged ladder's tensor-core kernel (3_varlen.cu's story), shared with 4_split_kv.cu, which
// runs it with a row tile's keys split over several blocks and merges the splits with
// varlen_combine_kernel. Included by those two rung files only.
//
// An fp8 e4m3 cache (value / scale, one k_scale and one v_scale a tensor) is the same kernel
// with the cache type Fp8 (kFp8): its 64-key tiles are copied by cp.async as they lie, 16 codes a
// copy, into raw stages of their own, and once a tile has landed the block widens it into the
// 16-bit K and V tiles that the loop reads, in the query's dtype T. The widening is exact (every
// e4m3 value is an fp16 and a bf16 value), so the mma loop is the 16-bit cache's, on the codes:
// k_scale joins the softmax scale (the scores are q·code), and v_scale multiplies O once after
// the loop (Σ p·(code·v_scale) = v_scale·Σ p·code). Rounding: q and P in T, the cache's values
// exactly, fp32 everywhere else, as the op's one dtype-faithful reference (app/ops/ragged.cpp:
// q in the dtype, K and V as code × scale, P rounded to the dtype) and as with a 16-bit cache:
// rung 2's gather, which rounds code · v_scale to the dtype, rounds once more than this does.
// The 16-bit cache's instantiations compile as before (everything fp8 is under if constexpr).
#pragma once
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

#include "kernels/common/copy.cuh"
#include "kernels/common/dispatch.cuh"
#include "kernels/common/mask.cuh"
#include "kernels/common/mma.cuh"
#include "kernels/common/reduce.cuh"
#include "kernels/common/rope.cuh"
#include "kernels/common/softmax_math.cuh"
#include "kernels/common/storage.cuh"
#include "kernels/ragged/ragged.hpp"
#include "kernels/ragged/sequence.cuh"

namespace attnbench::ragged_impl {

// A block: 4 warps of 16 rows each, 64-key tiles; D is the head-dim class (head_dim padded up
// to it with zeros in shared memory, which add nothing to q·k and nothing is stored of them).
template <int D_>
struct Tile {
  static constexpr int D = D_, ROWS = 64, KEYS = 64, WARPS = 4, THREADS = 32 * WARPS;
  static constexpr int CH = D / 8;                   // 16-byte chunks of a row
  static constexpr int PITCH = D * 2 + 16;           // bytes: 16 more than a row, ldmatrix without conflicts
  static constexpr int LD_ROWS = THREADS / CH;       // rows one pass of the copy covers
  static constexpr int Q_BYTES = ROWS * PITCH, KV_BYTES = KEYS * PITCH;
  static constexpr int SMEM_BYTES = Q_BYTES + 4 * KV_BYTES;  // Q, then 2 stages of (K, V)
  static constexpr int NT = KEYS / 8, DT = D / 8, KS = D / 16, PK = KEYS / 16;
  // An fp8 cache: a key row's D codes are D bytes, RAW_CH 16-byte copies (rows one pass of the
  // copy covers: RAW_LD_ROWS), unpadded (only the widening reads them, 8 bytes a thread in
  // order: no bank conflicts). Q, then one (K, V) of the widened 16-bit tiles the loop reads,
  // then 2 raw stages of (K, V) codes: less than the 16-bit cache's SMEM_BYTES at every D.
  static constexpr int RAW_CH = D / 16, RAW_LD_ROWS = THREADS / RAW_CH, RAW_BYTES = KEYS * D;
  static constexpr int FP8_SMEM_BYTES = Q_BYTES + 2 * KV_BYTES + 4 * RAW_BYTES;
  static_assert(D == 64 || D == 128 || D == 256, "head-dim classes 64, 128, 256");
  static_assert(FP8_SMEM_BYTES <= SMEM_BYTES, "the fp8 layout fits wherever the 16-bit one does");
};

__device__ __forceinline__ uint32_t tile_offset(int row, int chunk, int pitch) { return row * pitch + chunk * 16; }

// What a block computes: rows of sequence b, tokens [t0, t0 + tokens) of its query_len, of kv
// head kvh; its tile's first keys and how far its rows see.
struct Block {
  int b, t0, tokens, q_len, ctx, first_q;  // first_q: sequence b's first row in q and o
};

// How the keys of a row tile are split over blocks (4_split_kv.cu): each split walks at most
// chunk_tiles 64-key tiles and, when its tile has more than one split, writes its unnormalised
// o and (m, l) to the partials, row (token · heads + head), slot split; chunk_tiles = INT_MAX is
// one split (3_varlen.cu), writing o itself.
// A planner may give the row tiles of at most small_rows rows (rung 5's decodes and short
// verifications: memory-bound, their K/V read for few rows) a chunk of their own, chunk_small.
struct Splits {
  int chunk_tiles = INT_MAX, max_splits = 1;
  int chunk_small = INT_MAX, small_rows = 0;
  float* part_o = nullptr;     // [total_queries · heads, max_splits, head_dim]
  float2* part_ml = nullptr;   // [total_queries · heads, max_splits]: m (exp2 units), l
};

// The chunk of a row tile of `rows` rows, and the splits its `tiles` key tiles take (a chunk
// may be INT_MAX: no overflow).
__host__ __device__ __forceinline__ int chunk_of(int rows, const Splits& sp) {
  return rows <= sp.small_rows ? sp.chunk_small : sp.chunk_tiles;
}
__host__ __device__ __forceinline__ int splits_of(int tiles, int rows, const Splits& sp) {
  const int chunk = chunk_of(rows, sp);
  return tiles <= chunk ? 1 : (tiles - 1) / chunk + 1;
}

// A row tile's key range: from the first key its first token sees (window: rounded down to a
// tile) to one past its last token's position.
struct KeyRange {
  int begin, end, tiles;
};
__host__ __device__ __forceinline__ KeyRange key_range(int shift, int t0, int tokens, int64_t window) {
  KeyRange k;
  k.end = shift + t0 + tokens;
  k.begin = window > 0 ? max(0, shift + t0 - static_cast<int>(window) + 1) / 64 * 64 : 0;
  k.tiles = (k.end - k.begin + 63) / 64;
  return k;
}

// The sequence of row tile x: the last b with start(b) = cu_seqlens_q[b] / per_tile + b <= x.
__device__ __forceinline__ int find_sequence(const int32_t* cu, int batch, int x, int per_tile) {
  return last_at_most(batch, x, [cu, per_tile](int b) { return __ldg(cu + b) / per_tile + b; });
}

// Row tile x's sequence, first token and tokens, and its context (rows of per_tile tokens);
// false for a number past its sequence's last tile, whose block exits.
__device__ __forceinline__ bool find_block(const RaggedParams& p, int x, int per_tile, Block& w) {
  w.b = find_sequence(p.cu_seqlens_q, static_cast<int>(p.batch), x, per_tile);
  w.first_q = p.cu_seqlens_q[w.b];
  w.q_len = p.cu_seqlens_q[w.b + 1] - w.first_q;
  w.t0 = (x - (w.first_q / per_tile + w.b)) * per_tile;
  if (w.t0 >= w.q_len) return false;
  w.tokens = min(per_tile, w.q_len - w.t0);
  w.ctx = p.context_lens[w.b];
  return true;
}

// Four e4m3 codes, the lowest byte first, as two words of T pairs (dims 0, 1 in lo, 2, 3 in hi,
// the lower dim in the lower half, as a 16-bit cache holds them). Exact: e4m3's values (3
// mantissa bits, 2^-9 to 448) are all fp16 and bf16 values. fp16 is one cvt per pair; bf16 has
// no cvt from e4m3 on sm_90, so it goes through fp32 (exact both ways).
template <class T>
__device__ __forceinline__ void e4m3x4_to(uint32_t codes, uint32_t& lo, uint32_t& hi) {
  if constexpr (std::is_same_v<T, __half>) {
    e4m3x4_to_f16x4(codes, lo, hi);
  } else {
    float f[4];
    to_floats<Fp8, 1>(&codes, f);
    lo = pack2<T>(f[0], f[1]);
    hi = pack2<T>(f[2], f[3]);
  }
}

// An fp8 cache's raw stage at `raw` (K's codes, then V's RAW_BYTES on; rows of D bytes) widened
// into the 16-bit K and V tiles at `out` (KV_BYTES apart, rows PITCH apart), as a 16-bit cache's
// copies would have left them: thread tid takes dims 8c .. 8c + 7 (c = tid % CH) of rows
// tid / CH + LD_ROWS·i (i < KEYS / LD_ROWS: every row once), 8 bytes of codes into one 16-byte
// chunk. The zeros the copies wrote (keys past the range, dims past head_dim) widen to zeros.
template <class T, int D>
__device__ __forceinline__ void widen_e4m3(const unsigned char* raw, unsigned char* out, int tid) {
  using C = Tile<D>;
  static_assert(C::KEYS % C::LD_ROWS == 0, "whole passes");
  const int c = tid % C::CH;
#pragma unroll
  for (int i = 0; i < C::KEYS / C::LD_ROWS; ++i) {
    const int r = tid / C::CH + C::LD_ROWS * i;
#pragma unroll
    for (int kv = 0; kv < 2; ++kv) {
      const uint2 codes = *reinterpret_cast<const uint2*>(raw + kv * C::RAW_BYTES + r * D + 8 * c);
      uint4 x;
      e4m3x4_to<T>(codes.x, x.x, x.y);  // dims 8c .. 8c + 3
      e4m3x4_to<T>(codes.y, x.z, x.w);  // dims 8c + 4 .. 8c + 7
      *reinterpret_cast<uint4*>(out + kv * C::KV_BYTES + tile_offset(r, c, C::PITCH)) = x;
    }
  }
}

// T: q and o (fp16 or bf16); Cache: the cache's elements, T or Fp8 (the header's fp8 path).
template <class T, class Cache, int D>
__global__ void __launch_bounds__(Tile<D>::THREADS, 1) varlen_kernel(const __grid_constant__ RaggedParams p,
                                                                      int group, int per_tile, Splits sp) {
  using C = Tile<D>;
  constexpr int RB = C::PITCH, CH = C::CH, NT = C::NT, DT = C::DT, KS = C::KS, PK = C::PK;
  constexpr bool kFp8 = kIsFp8<Cache>;
  static_assert(kFp8 || std::is_same_v<Cache, T>, "a cache in q's type, or fp8");
  extern __shared__ __align__(128) unsigned char smem[];
  const uint32_t sQ = static_cast<uint32_t>(__cvta_generic_to_shared(smem)), sKV = sQ + C::Q_BYTES;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, g = lane / 4, t4 = lane % 4;
  const int kvh = blockIdx.y, x = blockIdx.x;

  Block w;
  if (!find_block(p, x, per_tile, w)) return;  // a number past the sequence's last tile
  const int shift = w.ctx - w.q_len;  // token t sits at position shift + t
  const int rows = w.tokens * group;
  // Keys the tile's rows read, and this split's share of them: tiles [n_begin, n_end).
  const KeyRange kr = key_range(shift, w.t0, w.tokens, p.window);
  const int key_begin = kr.begin, key_end = kr.end, tiles = kr.tiles;
  const int split = blockIdx.z, splits = splits_of(tiles, rows, sp);
  if (split >= splits) return;  // this tile's keys take fewer splits
  const int chunk = chunk_of(rows, sp);
  const int n_begin = split * chunk, n_end = min(tiles, n_begin + chunk);
  const int64_t kv_row = p.kv_heads * p.head_dim;  // elements between a block's token slots
  const int chunks = static_cast<int>(p.head_dim / 8);
  // The cache's copies: 16 bytes are 8 elements of a 16-bit cache (a chunk of the tile the loop
  // reads) or 16 fp8 codes (a chunk of a raw row of D bytes; head_dim % 16 == 0, supports'), so
  // a key row is CH or RAW_CH copies; a stage's K tile is KV_BYTES or RAW_BYTES, V's after it.
  constexpr int kElems = 16 / static_cast<int>(sizeof(Cache));
  constexpr int kCopies = kFp8 ? C::RAW_CH : CH, kCopyRows = kFp8 ? C::RAW_LD_ROWS : C::LD_ROWS;
  constexpr int kRowBytes = kFp8 ? D : RB, kStageBytes = kFp8 ? C::RAW_BYTES : C::KV_BYTES;
  const int kv_chunks = kFp8 ? static_cast<int>(p.head_dim / kElems) : chunks;
  // 16-bit: 2 stages of (K, V) tiles at sKV. fp8: one (K, V) of widened tiles at sKV, then the
  // 2 raw stages.
  const uint32_t sStages = kFp8 ? sKV + 2 * C::KV_BYTES : sKV;

  // The Q tile: row r is token t0 + r / group, query head kvh·group + r % group; rows past the
  // block's and chunks past head_dim are zeros.
  {
    const T* q = static_cast<const T*>(p.q);
    for (int i = tid; i < C::ROWS * CH; i += C::THREADS) {
      const int r = i / CH, c = i % CH;
      const bool ok = r < rows && c < chunks;
      const int64_t h = int64_t{kvh} * group + r % group;
      const T* src = q + ((int64_t{w.first_q} + w.t0 + r / group) * p.heads + h) * p.head_dim + 8 * c;
      cp_async_16(sQ + tile_offset(r, c, RB), ok ? src : q, ok);
    }
  }
  // Key tile n (keys key_begin + 64 n ...) into stage s, each key row through the block table;
  // rows at or past key_end are zeros (never the cache's slots beyond the context).
  const int32_t* table = p.block_tables + int64_t{w.b} * p.max_blocks_per_seq;
  const int bs = static_cast<int>(p.block_size);
  const int log2_bs = (bs & (bs - 1)) == 0 ? __ffs(bs) - 1 : -1;
  // The thread's rows of a tile: tid / kCopies + kCopyRows i; their table entries loaded kBatch
  // at a time (all of them but at head_dim 256, whose kernel has no registers to spare: 250 of
  // 255, and 8 more spilled).
  constexpr int kRowsEach = C::KEYS / kCopyRows, kBatch = D >= 256 ? 1 : kRowsEach;
  static_assert(C::KEYS % kCopyRows == 0, "whole passes");
  const auto load_kv = [&](int s, int n) {
    const Cache* k = static_cast<const Cache*>(p.k_cache);
    const Cache* v = static_cast<const Cache*>(p.v_cache);
    const uint32_t dst = sStages + s * 2 * kStageBytes;
    const int c = tid % kCopies, r0 = tid / kCopies, j0 = key_begin + n * C::KEYS + r0;
    // A batch of rows' table entries first, their loads in flight at once: the cp.async asm's
    // memory clobbers would otherwise keep each load behind the previous row's copies, one L1
    // or L2 round trip a row (ragged ws lost 40% to the same pattern, runs 280-281). The slot
    // in the entry: a shift and a mask for the usual power-of-two block sizes (a division by a
    // runtime int is ~20 instructions, per row and tile).
#pragma unroll(kBatch > 1 ? kRowsEach / kBatch : 1)
    for (int i0 = 0; i0 < kRowsEach; i0 += kBatch) {
      int entry[kBatch];
#pragma unroll
      for (int i = 0; i < kBatch; ++i) {
        const int j = j0 + kCopyRows * (i0 + i);
        entry[i] = j < key_end && c < kv_chunks ? __ldg(table + (log2_bs >= 0 ? j >> log2_bs : j / bs)) : 0;
      }
#pragma unroll
      for (int i = 0; i < kBatch; ++i) {
        const int r = r0 + kCopyRows * (i0 + i), j = j0 + kCopyRows * (i0 + i);
        const bool ok = j < key_end && c < kv_chunks;
        const int in = log2_bs >= 0 ? j & (bs - 1) : j % bs;
        const int64_t off = ok ? ((int64_t{entry[i]} * bs + in) * kv_row) + int64_t{kvh} * p.head_dim + kElems * c : 0;
        cp_async_16(dst + tile_offset(r, c, kRowBytes), k + off, ok);
        cp_async_16(dst + kStageBytes + tile_offset(r, c, kRowBytes), v + off, ok);
      }
    }
  };
  load_kv(0, n_begin);
  cp_async_commit();
  if (p.rope.style != RopeTable::none) {
    // RoPE on the queries once they land: row r at its token's position (its GQA heads share
    // it); the cache's keys were turned when they were stored. The loop's first barrier
    // publishes the turned rows.
    cp_async_wait<0>();
    __syncthreads();
    rope_shared_rows<T, C::ROWS, C::THREADS, 4>([sQ](int r, int c) { return sQ + tile_offset(r, c, RB); }, rows,
                                                [pos0 = shift + w.t0, group](int r) { return pos0 + r / group; },
                                                p.rope, tid);
  }

  // This lane's two rows (g and g + 8 of the warp's 16): their position, head, ALiBi slope and
  // sink; a row past the block's sees no key.
  int pos[2], head[2];
  float slope[2];
  bool live[2];
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    const int r = warp * 16 + g + 8 * hh;
    live[hh] = r < rows;
    pos[hh] = live[hh] ? shift + w.t0 + r / group : -1;
    head[hh] = kvh * group + r % group;
    slope[hh] = alibi_slope(p.score.alibi && live[hh], p.score.alibi_slopes, head[hh], kLog2e);
  }
  // The scores the mma gives are q·k of the tiles as loaded, an fp8 cache's K codes: its
  // k_scale joins the softmax scale ("raw units": those of q·k as loaded).
  const float qk_scale = kFp8 ? p.score.scale * p.k_scale : p.score.scale;
  const float qk_scale_log2 = kFp8 ? p.score.scale_log2 * p.k_scale : p.score.scale_log2;
  const float cap = p.score.softcap > 0 ? p.score.softcap / qk_scale : 0.f;  // raw units
  const float inv_cap = p.score.softcap > 0 ? qk_scale / p.score.softcap : 0.f;
  const bool terms = p.score.alibi || cap > 0.f;  // a term on every score: every tile takes the mask path

  float acc_o[DT][4];
#pragma unroll
  for (int dt = 0; dt < DT; ++dt)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc_o[dt][e] = 0.f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};  // exp2 units; l: this lane's share

  const uint32_t qv_frag = tile_offset(lane % 16, lane / 16, RB);
  const uint32_t k_frag = tile_offset(lane % 8 + (lane / 16) * 8, (lane / 8) % 2, RB);
  const uint32_t q_frag = sQ + warp * 16 * RB + qv_frag;
  const bool warp_live = warp * 16 < rows;
  for (int n = n_begin; n < n_end; ++n) {
    const int s = (n - n_begin) % 2;
    // One barrier a tile (two with an fp8 cache): tile n has landed everywhere, and every warp
    // is done with tile n - 1, whose stage the copies of tile n + 1 now overwrite.
    cp_async_wait<0>();
    __syncthreads();
    if (n + 1 < n_end) load_kv(s ^ 1, n + 1);
    cp_async_commit();
    if constexpr (kFp8) {
      // Tile n's codes widened into the tiles the loop reads (every warp is done with tile
      // n - 1's: the barrier above), and a second barrier before any warp reads them. The
      // copies of tile n + 1 run under this and the products.
      widen_e4m3<T, D>(smem + C::Q_BYTES + 2 * C::KV_BYTES + s * 2 * C::RAW_BYTES, smem + C::Q_BYTES, tid);
      __syncthreads();
    }
    // A warp whose 16 rows are all past the block's (a decode's group fills 1-8 rows of 64)
    // has nothing to compute: it takes part in the barriers and the copies only. All-decode
    // spent 3 of its 4 warps' tensor-core and exp2 work on zero rows (run 282: 0.94x
    // paged_flash, whose blocks hold only a group's rows). Run 283: 0.3695 ms, 0.95x paged_flash.
    if (!warp_live) continue;
    const uint32_t sK = kFp8 ? sKV : sKV + s * 2 * C::KV_BYTES, sV = sK + C::KV_BYTES;

    float acc_s[NT][4];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc_s[nt][e] = 0.f;
#pragma unroll
    for (int ks = 0; ks < KS; ++ks) {
      uint32_t qa[4];
      ldsm_x4(qa, q_frag + ks * 32);
#pragma unroll
      for (int pr = 0; pr < NT / 2; ++pr) {
        uint32_t kb[4];
        ldsm_x4(kb, sK + k_frag + ks * 32 + pr * 16 * RB);
        mma_16816<T>(acc_s[2 * pr], qa, kb[0], kb[1]);
        mma_16816<T>(acc_s[2 * pr + 1], qa, kb[2], kb[3]);
      }
    }

    // Scores in exp2 units. C fragment element e of n8 tile nt is row g + 8 (e / 2), key
    // key_begin + 64 n + 8 nt + 2 t4 + e % 2. Only a tile that some row does not see whole
    // (the causal diagonal, a window's edge) and the options with a term per score take the
    // per-element path; the rows past the block's (zero queries) are never stored, so the
    // interior tiles leave their scores as they are.
    const int k0 = key_begin + n * C::KEYS, j0 = k0 + 2 * t4;
    const bool whole = k0 + C::KEYS - 1 <= shift + w.t0 && (p.window == 0 || k0 > key_end - 1 - p.window);
    float mx[2] = {-INFINITY, -INFINITY};
    if (whole && !terms) {
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          acc_s[nt][e] *= qk_scale_log2;
          mx[e / 2] = fmaxf(mx[e / 2], acc_s[nt][e]);
        }
    } else {
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int hh = e / 2, j = j0 + 8 * nt + e % 2;
          float x = acc_s[nt][e];
          if (cap > 0.f) x = soft_cap_sfu(x, cap, inv_cap);
          x = fmaf(x, qk_scale_log2, -slope[hh] * static_cast<float>(pos[hh] - j));
          const bool sees = j <= pos[hh] && (p.window == 0 || j > pos[hh] - p.window);
          acc_s[nt][e] = sees ? x : -INFINITY;
          mx[hh] = fmaxf(mx[hh], acc_s[nt][e]);
        }
    }
    float base[2];
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      mx[hh] = allreduce_max<4, XorOrder::low_first>(mx[hh]);  // the quad holds the row's 64 keys
      const float m_new = fmaxf(m[hh], mx[hh]);
      base[hh] = m_new == -INFINITY ? 0.f : m_new;  // a row that has seen no key yet: exp2(-inf) = 0
      const float corr = exp2_approx(m[hh] - base[hh]);
      m[hh] = m_new;
      l[hh] *= corr;
#pragma unroll
      for (int dt = 0; dt < DT; ++dt) {
        acc_o[dt][2 * hh] *= corr;
        acc_o[dt][2 * hh + 1] *= corr;
      }
    }
    // O += P V, one k16 slice of keys at a time (4_flash_mma.cu: S's C fragments of n8 tiles
    // 2 kk and 2 kk + 1 are the A fragment of slice kk).
#pragma unroll
    for (int kk = 0; kk < PK; ++kk) {
      uint32_t pa[4];
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        float(&c)[4] = acc_s[2 * kk + half];
#pragma unroll
        for (int e = 0; e < 4; ++e) c[e] = exp2_approx(c[e] - base[e / 2]);
        l[0] += c[0] + c[1];
        l[1] += c[2] + c[3];
        pa[2 * half] = pack2<T>(c[0], c[1]);
        pa[2 * half + 1] = pack2<T>(c[2], c[3]);
      }
#pragma unroll
      for (int j = 0; j < DT / 2; ++j) {
        uint32_t vb[4];
        ldsm_x4_trans(vb, sV + qv_frag + j * 32 + kk * 16 * RB);
        mma_16816<T>(acc_o[2 * j], pa, vb[0], vb[1]);
        mma_16816<T>(acc_o[2 * j + 1], pa, vb[2], vb[3]);
      }
    }
  }
  cp_async_wait<0>();
  if constexpr (kFp8) {
    // V went through the products as its codes: O = Σ p·(code·v_scale) = v_scale·Σ p·code, in
    // fp32, before the rows are normalised or written as partials (which the combine merges as
    // they are).
#pragma unroll
    for (int dt = 0; dt < DT; ++dt)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc_o[dt][e] *= p.v_scale;
  }

  // One split: O / l (the sink joining l) into each live row's token and head, pairs of dims a
  // lane. Several: the unnormalised O and (m, l) into the row's partial slot; the combine adds
  // the sink once.
  T* o = static_cast<T*>(p.o);
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    float sum = allreduce_sum<4, XorOrder::low_first>(l[hh]);
    if (!live[hh]) continue;
    const int r = warp * 16 + g + 8 * hh;
    const int64_t row = (int64_t{w.first_q} + w.t0 + r / group) * p.heads + head[hh];
    if (splits > 1) {
      const int64_t slot = row * sp.max_splits + split;
      float* dst = sp.part_o + slot * p.head_dim;
#pragma unroll
      for (int dt = 0; dt < DT; ++dt) {
        const int d = 8 * dt + 2 * t4;
        if (d < p.head_dim) *reinterpret_cast<float2*>(dst + d) = make_float2(acc_o[dt][2 * hh], acc_o[dt][2 * hh + 1]);
      }
      if (t4 == 0) sp.part_ml[slot] = make_float2(m[hh], sum);
      continue;
    }
    sum = plus_sink(sum, m[hh], sink_log2(p.score.sinks ? p.score.sink_logits : nullptr, head[hh]));
    const float inv = sum > 0.f ? 1.f / sum : 0.f;
    T* dst = o + row * p.head_dim;
#pragma unroll
    for (int dt = 0; dt < DT; ++dt) {
      const int d = 8 * dt + 2 * t4;
      if (d < p.head_dim)
        *reinterpret_cast<uint32_t*>(dst + d) = pack2<T>(acc_o[dt][2 * hh] * inv, acc_o[dt][2 * hh + 1] * inv);
    }
  }
}

// The splits of the rows whose tile took more than one: one warp a row (token · heads + head),
// each lane 8 of head_dim's dims at most: M = max m_s, L = sum_s exp2(m_s - M) l_s plus the sink,
// o = sum_s exp2(m_s - M) o_s / L. A split whose rows saw no key of its range has m = -inf and
// weight 0 (merge_mlo skips it).
template <class T>
__global__ void __launch_bounds__(128) varlen_combine_kernel(const __grid_constant__ RaggedParams p, int per_tile,
                                                             Splits sp) {
  const int64_t row = int64_t{blockIdx.x} * 4 + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= p.total_queries * p.heads) return;
  const int token = static_cast<int>(row / p.heads), h = static_cast<int>(row % p.heads);
  // The token's sequence and row tile, to know how many splits its tile took.
  const int lo = last_at_most(static_cast<int>(p.batch), token, [&p](int b) { return __ldg(p.cu_seqlens_q + b); });
  const int first = p.cu_seqlens_q[lo], q_len = p.cu_seqlens_q[lo + 1] - first;
  const int t0 = (token - first) / per_tile * per_tile;
  const int tokens = min(per_tile, q_len - t0);
  const KeyRange kr = key_range(p.context_lens[lo] - q_len, t0, tokens, p.window);
  const int splits = splits_of(kr.tiles, tokens * static_cast<int>(p.heads / p.kv_heads), sp);
  if (splits <= 1) return;  // the main kernel wrote this row
  float m = -INFINITY, l = 0.f;
  float4 acc[2] = {make_float4(0.f, 0.f, 0.f, 0.f), make_float4(0.f, 0.f, 0.f, 0.f)};
  const int d0 = 8 * lane;
  for (int s = 0; s < splits; ++s) {
    const int64_t slot = row * sp.max_splits + s;
    const float2 ml = sp.part_ml[slot];
    float4 x[2] = {make_float4(0.f, 0.f, 0.f, 0.f), make_float4(0.f, 0.f, 0.f, 0.f)};
    if (d0 < p.head_dim) {
      x[0] = *reinterpret_cast<const float4*>(sp.part_o + slot * p.head_dim + d0);
      x[1] = *reinterpret_cast<const float4*>(sp.part_o + slot * p.head_dim + d0 + 4);
    }
    float m1 = m, l1 = l;
    merge_mlo(m, l, acc[0], ml.x, ml.y, x[0]);
    merge_mlo(m1, l1, acc[1], ml.x, ml.y, x[1]);
  }
  l = plus_sink(l, m, sink_log2(p.score.sinks ? p.score.sink_logits : nullptr, h));
  if (d0 >= p.head_dim) return;
  const float inv = l > 0.f ? 1.f / l : 0.f;
  const float out[8] = {acc[0].x * inv, acc[0].y * inv, acc[0].z * inv, acc[0].w * inv,
                        acc[1].x * inv, acc[1].y * inv, acc[1].z * inv, acc[1].w * inv};
  store_n<T, 8>(static_cast<T*>(p.o) + row * p.head_dim + d0, out);
}


// Query tokens a row tile holds: 64 rows of (token, head of the group).
inline int tokens_per_tile(const RaggedParams& p) { return static_cast<int>(64 / (p.heads / p.kv_heads)); }

// Split planning (4_split_kv.cu, 5_ws.cu), from the lengths the host has (a serving engine's
// scheduler has them): the 64-key tiles of every row tile of per_tile tokens added up (per kv
// head) and divided over `blocks` blocks, at least kMinChunkTiles (1024 keys) a split and a
// multiple of `align` tiles (a kernel with wider key tiles splits on their edges). A row tile
// with more tiles than that takes several splits. chunk_tiles and max_splits of the result;
// one split everywhere (chunk_tiles INT_MAX) when no row tile needs more.
// small_rows > 0 (rung 5): the row tiles of at most that many rows cost kSmallTileCost times a
// full tile's a key tile (their K/V come from memory for few rows; a full tile's rows share
// theirs through L2): the tiles are weighed so, divided over the blocks, and the small row
// tiles split in chunks of that share over their cost, the others of that share. A batch of one
// kind plans as before; a mix no longer gives its long decodes splits as long as a whole SM's
// share (run 290's serving mix: 0.4277 ms where its two parts apart took 0.2231 + 0.1164).
constexpr int64_t kAssumedSms = 132, kMinChunkTiles = 16;
// A small row tile's key tile against a full one's, 7/5: H100, run 290, ws_tma, the mix's decode
// part at 2.86 us a 128-key tile an SM (all-decode: 0.3556 ms for 2048 of them on 132 SMs)
// against its prefill part's 2.06.
constexpr int64_t kSmallTileCost5 = 7, kFullTileCost5 = 5;
inline Splits plan_splits(const RaggedParams& p, int per_tile, int64_t blocks, int align = 1, int small_rows = 0) {
  Splits sp;
  const int group = static_cast<int>(p.heads / p.kv_heads);
  // Key tiles of the full and the small row tiles over the batch (one kv head), the longest of each.
  int64_t steps[2] = {0, 0}, longest[2] = {0, 0};
  for (int64_t b = 0; b < p.batch; ++b) {
    const int q = p.host_cu_seqlens_q[b + 1] - p.host_cu_seqlens_q[b], ctx = p.host_context_lens[b];
    for (int t0 = 0; t0 < q; t0 += per_tile) {
      const int tokens = std::min(per_tile, q - t0);
      const KeyRange k = key_range(ctx - q, t0, tokens, p.window);
      const int small = tokens * group <= small_rows ? 1 : 0;
      steps[small] += k.tiles;
      longest[small] = std::max<int64_t>(longest[small], k.tiles);
    }
  }
  // A block's share of the weighed tiles, in fifths of a full tile.
  const int64_t share5 = ceil_div((kFullTileCost5 * steps[0] + kSmallTileCost5 * steps[1]) * p.kv_heads, blocks);
  auto chunk_for = [&](int64_t cost5) {
    const int64_t chunk = std::max(kMinChunkTiles, ceil_div(share5, cost5));
    return ceil_div(chunk, int64_t{align}) * align;
  };
  const int64_t chunk = chunk_for(kFullTileCost5), chunk_small = small_rows > 0 ? chunk_for(kSmallTileCost5) : chunk;
  if (chunk >= longest[0] && chunk_small >= longest[1]) return sp;  // every row tile is one split: rung 3's launch
  sp.chunk_tiles = static_cast<int>(chunk);
  sp.chunk_small = static_cast<int>(chunk_small);
  sp.small_rows = small_rows;
  sp.max_splits = static_cast<int>(std::max(ceil_div(longest[0], chunk), ceil_div(longest[1], chunk_small)));
  return sp;
}

// The partials' workspace of a plan: O [rows, max_splits, head_dim] fp32, then (m, l); none for
// one split. attach_partials points sp at it.
inline std::size_t partial_o_bytes(const RaggedParams& p, const Splits& sp) {
  return static_cast<std::size_t>(ceil_div(p.total_queries * p.heads * sp.max_splits * p.head_dim * 4, 256) * 256);
}
inline std::size_t partials_bytes(const RaggedParams& p, const Splits& sp) {
  if (sp.max_splits <= 1) return 0;
  return partial_o_bytes(p, sp) + static_cast<std::size_t>(p.total_queries * p.heads * sp.max_splits * 8);
}
inline void attach_partials(const RaggedParams& p, Splits& sp, void* workspace) {
  if (sp.max_splits <= 1) return;
  sp.part_o = static_cast<float*>(workspace);
  sp.part_ml = reinterpret_cast<float2*>(static_cast<unsigned char*>(workspace) + partial_o_bytes(p, sp));
}

// The main kernel over every row tile, kv head and split (sp.max_splits of them: blocks past a
// tile's splits exit), then the combine where any tile took several (the partials are O times
// v_scale already: one combine for both caches).
template <class T, class Cache, int D>
void launch_varlen(const RaggedParams& p, const LaunchContext& ctx, const Splits& sp) {
  const auto kernel = varlen_kernel<T, Cache, D>;
  constexpr int smem = kIsFp8<Cache> ? Tile<D>::FP8_SMEM_BYTES : Tile<D>::SMEM_BYTES;
  static const cudaError_t opt_in = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  check_cuda(opt_in, "ragged/varlen");
  const int per_tile = tokens_per_tile(p);
  const int group = static_cast<int>(p.heads / p.kv_heads);
  const dim3 grid(static_cast<unsigned>(p.total_queries / per_tile + p.batch), static_cast<unsigned>(p.kv_heads),
                  static_cast<unsigned>(sp.max_splits));
  kernel<<<grid, Tile<D>::THREADS, smem, ctx.stream>>>(p, group, per_tile, sp);
  check_launch("ragged/varlen");
  if (sp.max_splits > 1) {
    varlen_combine_kernel<T><<<static_cast<unsigned>(ceil_div(p.total_queries * p.heads, int64_t{4})), 128, 0,
                               ctx.stream>>>(p, per_tile, sp);
    check_launch("ragged/split_kv combine");
  }
}

inline int head_dim_class(int64_t head_dim) { return head_dim <= 64 ? 64 : head_dim <= 128 ? 128 : 256; }

// Both rungs' launch: f(T{}, Cache{}, std::integral_constant<int, D>{}) for q/o's 16-bit type
// T, the cache's (T, or Fp8 for an fp8 cache) and p's head-dim class D.
template <class F>
void with_varlen_kernel(const RaggedParams& p, const char* name, F&& f) {
  with_16bit(p.dtype, name, [&](auto t) {
    using T = decltype(t);
    with_value<64, 128, 256>(head_dim_class(p.head_dim), name, "head_dim class", [&](auto d) {
      if (p.kv_dtype == DType::fp8_e4m3) f(T{}, Fp8{}, d);
      else if (p.kv_dtype == p.dtype) f(T{}, T{}, d);
      else throw std::invalid_argument(std::string(name) + ": no kernel for a " + dtype_name(p.kv_dtype) + " cache");
    });
  });
}

// The shared memory p's kernel takes (supports' check against the card's).
inline int varlen_smem_bytes(const RaggedParams& p) {
  return with_value<64, 128, 256>(head_dim_class(p.head_dim), "ragged/varlen", "head_dim class", [&](auto d) {
    using C = Tile<decltype(d)::value>;
    return p.kv_dtype == DType::fp8_e4m3 ? C::FP8_SMEM_BYTES : C::SMEM_BYTES;
  });
}


}  // namespace attnbench::ragged_impl
