// The tiled backward on tensor cores (FlashAttention-2's algorithm, Dao 2023, Algorithm 2),
// shared by rung 2 (flash_mma: dQ summed by atomics) and rung 3 (flash_mma_det: dQ summed in a
// fixed order): one kernel template, the difference one flag.
//
// Design:
//   - K/V outer loop. A block owns Bc keys of one (batch, kv head): it loads K_j and V_j once
//     and keeps dK_j and dV_j in registers while it walks every query tile that sees one of its
//     keys, for every query head of the kv head's group (GQA: dK and dV summed in registers, no
//     second pass). A 1-D grid of key blocks x kv heads x batches, in row-major order (a head's
//     key blocks adjacent, first first) or, for a small causal grid, key-major (tiles.hpp's
//     block_coord says why): either way the heaviest key blocks of a row start first.
//   - Warps split the keys: warp w owns keys 16w..16w+15 of the block, so every product that
//     accumulates into dK or dV has the warp's keys as its m16 rows and needs no exchange:
//       Sᵀ  = K_w Qᵀ        (m = keys, n = queries, k = head_dim)
//       dPᵀ = V_w dOᵀ
//       Pᵀ  = exp(Zᵀ - LSE), dSᵀ = Pᵀ ∘ (dPᵀ - D) ∘ cap'(Sᵀ)        (elementwise, fp32)
//       dV_w += Pᵀ dO       (k = queries: the C fragments of Sᵀ's n8 tiles, packed to 16-bit
//       dK_w += dSᵀ Q        pairs, are the A fragments, as P is in the forward)
//     Q and dO are [query][d] in shared memory: the B operand of Sᵀ and dPᵀ as the forward reads
//     K (ldmatrix), of dV and dK as it reads V (ldmatrix.trans).
//   - dQ = dS K needs every warp's keys: each warp stores its dSᵀ rows (16-bit, [key][query]) to
//     shared memory, one barrier, and the warps split dQ's Br x D tile (an m16 tile of queries
//     and a range of d each), reading dS with ldmatrix.trans (the A operand from its transpose)
//     and K with ldmatrix.trans. The partial dQ goes to an fp32 accumulator in global memory
//     (the preprocess zeroed it): atomics (rung 2), or, DETERMINISTIC, adds in key-block order:
//     the block waits for its turn on the tile's counter (turn = its key block's index among
//     the key blocks that see the tile), adds with plain loads and stores, and passes the turn
//     on (rung 5, flash_wgmma.cuh, orders its atomics by the turn instead: a round trip to L2
//     less on the turn's path). Blocks wait only for lower key blocks of the same head, which
//     start earlier (both block orders start a row's key blocks in increasing order), so the
//     chain cannot deadlock. Each sum then has one order: dQ, dK and dV are bitwise
//     reproducible.
//   - Q, dO, the tile's LSE (in exp2 units) and D are double-buffered: the copies of the next
//     query tile are issued right after the tile's first barrier. Two barriers a tile (the
//     tile's data is in; dS is in), as FlashAttention-2.
//   - Masks (causal, window, the seq_k tail) and the score terms (ALiBi, soft-capping and its
//     derivative) only in the MASKED kernel and the tail block; padded query rows get LSE =
//     +inf, so their P and dS are exactly 0.
// Precision: as the faithful reference says (reference/attention_backward.cpp): P and dS are
// rounded to the dtype as the operands of their products, D and every sum in fp32.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <climits>
#include <initializer_list>
#include <cstdint>
#include <string>
#include <type_traits>

#include "kernels/backward/preprocess.cuh"
#include "kernels/backward/rungs.hpp"
#include "kernels/backward/tiles.hpp"
#include "kernels/common/copy.cuh"
#include "kernels/common/dispatch.cuh"
#include "kernels/common/mask.cuh"
#include "kernels/common/mma.cuh"
#include "kernels/common/softmax_math.cuh"
#include "kernels/common/storage.cuh"

namespace attnbench::backward_impl {
namespace flash {

// What the kernel reads, in the widths it indexes with.
struct Args {
  const void *q, *k, *v, *d_o;  // dense, BackwardParams' layouts
  const float* lse;             // [batch, heads, seq_q], natural log
  const float* d;               // [batch, heads, seq_q]: the preprocess's rowsum(dO ∘ O)
  float* dq_accum;              // [batch, seq_q, heads, head_dim] fp32, zeroed by the preprocess
  void *dk, *dv;
  int* turns;                   // DETERMINISTIC: [batch, heads, query tiles], zeroed before the launch
  int seq_q, seq_k, heads, kv_heads, group, head_dim;
  int q_tiles;                  // ceil(seq_q / Br)
  int q_offset;                 // query i sits at key position i + q_offset
  int lo_reach, hi_reach;       // a query at position p sees keys [p - lo_reach, p + hi_reach]
  float scale, scale_log2;
  float softcap, inv_softcap;   // score units; 0, 0 = none
  const float* slopes;          // [heads] ALiBi slopes, or null
  int key_major;                // the 1-D grid's block order (tiles.hpp's block_coord)
  int descending;               // deterministic turns from the last key block down (descending_turns)
  int rotated;                  // rung 5: each key block's walk rotated, turns alike (rotated_turns)
};

// Br queries x Bc keys per tile; D the head-dim class; 16 keys a warp.
template <int D_, int WARPS_, int MIN_BLOCKS_>
struct Config {
  static constexpr int D = D_, WARPS = WARPS_, THREADS = 32 * WARPS, MIN_BLOCKS = MIN_BLOCKS_;
  static constexpr int Br = 64, Bc = 16 * WARPS;
  static constexpr int NQ = Br / 8;    // n8 tiles of queries in Sᵀ and dPᵀ
  static constexpr int DT = D / 8;     // n8 tiles of d in dK, dV
  static constexpr int KS = D / 16;    // k16 steps of Sᵀ, dPᵀ
  static constexpr int QK = Br / 16;   // k16 steps of dV, dK
  static constexpr int CG = WARPS / 4; // dQ: warps per m16 tile of queries (column groups)
  static constexpr int DQT = DT / CG;  // dQ: n8 tiles of d a warp
  static constexpr int CH = D / 8;     // 16-byte chunks a row
  static constexpr int RB = D * 2 + 16;   // pitch of the [row][d] tiles (the forward's padding)
  static constexpr int SB = Br * 2 + 16;  // pitch of dS's [key][query] tile
  static constexpr int KV_BYTES = Bc * RB, Q_BYTES = Br * RB, S_BYTES = Bc * SB;
  // K, V; 2 stages of (Q, dO); dS; 2 stages of (LSE, D).
  static constexpr int SMEM_BYTES = 2 * KV_BYTES + 4 * Q_BYTES + S_BYTES + 2 * 2 * Br * 4;
  static_assert(WARPS % 4 == 0 && DQT % 2 == 0, "dQ's Br x D tile splits into m16 x (pairs of n8) per warp");
  static_assert(THREADS % CH == 0 && Br % (THREADS / CH) == 0, "tiles split evenly over the threads");
};
// d64: 4 warps (64 keys), two blocks an SM; d128: 8 warps (128 keys): dK and dV of 16 keys are
// 128 fp32 registers a lane, and the 256 threads of one block an SM have 255 registers each.
template <int D>
using ConfigFor = std::conditional_t<D == 64, Config<64, 4, 2>, Config<128, 8, 1>>;

// The turn passed on as a release (rung 5's): the block's atomics, ordered before it by each
// thread's fence and the barrier, are performed before whoever acquires the new value adds.
__device__ __forceinline__ void red_release(int* p) {
  asm volatile("red.release.gpu.global.add.s32 [%0], 1;\n" ::"l"(p) : "memory");
}

__device__ __forceinline__ int ld_acquire(const int* p) {
  int v;
  asm volatile("ld.acquire.gpu.global.s32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// A block's work list (rungs 2-5): every query head of its kv head's group, and of each the
// query tiles of Br rows that see a key of [n0, n1]; iteration it is head h0 + it / tiles,
// query tile range.first + it % tiles.
struct WorkList {
  TileRange range;
  int tiles, h0, iters;  // iters = 0: no query sees the block's keys
};

__device__ __forceinline__ WorkList work_list(const Args& a, int kvh, int n0, int n1, int Br) {
  const TileRange range = query_tiles(a.seq_q, a.q_offset, a.lo_reach, a.hi_reach, n0, n1, Br);
  const int tiles = range.last - range.first + 1;
  return {range, tiles, kvh * a.group, tiles > 0 ? tiles * a.group : 0};
}

// Query tile m0 of head h's statistics into `stats` (LSE in exp2 units, then D; 2 Br floats),
// by plain loads from threads 0 .. 2 Br - 1 (the caller's next barrier publishes them): padded
// rows get LSE = +inf (P = 0) and D = 0.
template <int Br>
__device__ __forceinline__ void load_stats(const Args& a, float* stats, int b, int h, int m0, int tid) {
  if (tid < 2 * Br) {
    const int r = tid % Br;
    const int64_t stat = (int64_t{b} * a.heads + h) * a.seq_q + m0 + r;
    const bool ok = m0 + r < a.seq_q;
    stats[tid] = tid < Br ? (ok ? a.lse[stat] * kLog2e : INFINITY) : (ok ? a.d[stat] : 0.f);
  }
}

template <class T, class Cfg, bool MASKED, bool DETERMINISTIC>
__global__ __launch_bounds__(Cfg::THREADS, Cfg::MIN_BLOCKS) void flash_bwd_kernel(const __grid_constant__ Args a) {
  constexpr int Br = Cfg::Br, Bc = Cfg::Bc, NQ = Cfg::NQ, DT = Cfg::DT, KS = Cfg::KS, QK = Cfg::QK;
  constexpr int CH = Cfg::CH, RB = Cfg::RB, SB = Cfg::SB, DQT = Cfg::DQT, THREADS = Cfg::THREADS;
  extern __shared__ __align__(128) unsigned char smem[];
  const uint32_t sK = smem_addr(smem), sV = sK + Cfg::KV_BYTES;
  const uint32_t sQ0 = sV + Cfg::KV_BYTES;  // stage s: Q at sQ0 + 2 s Q_BYTES, dO after it
  const uint32_t sS = sQ0 + 4 * Cfg::Q_BYTES;
  float* const stats = reinterpret_cast<float*>(smem + 2 * Cfg::KV_BYTES + 4 * Cfg::Q_BYTES + Cfg::S_BYTES);
  // stage s: LSE·log2 e at stats + 2 s Br, D after it
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int g = lane / 4, t4 = lane % 4;

  const int key_blocks = static_cast<int>(ceil_div(a.seq_k, Bc));
  const BlockCoord at = block_coord(blockIdx.x, key_blocks, gridDim.x / key_blocks, a.key_major,
                                    DETERMINISTIC && a.descending);
  const int n_block = at.n_block, kvh = at.row % a.kv_heads, b = at.row / a.kv_heads;
  const int n0 = n_block * Bc, n1 = min(n0 + Bc, a.seq_k) - 1;
  const T* q = static_cast<const T*>(a.q);
  const T* d_o = static_cast<const T*>(a.d_o);
  const int64_t q_stride = int64_t{a.heads} * a.head_dim, kv_stride = int64_t{a.kv_heads} * a.head_dim;

  // Rows [0, rows) of a [row][head_dim] slab (row stride `stride`) into a padded tile; rows
  // past `rows_left` and chunks past head_dim zero-filled (an empty slot names src, valid).
  auto load_rows = [&](uint32_t dst, const T* src, int64_t stride, int rows_left, auto rows) {
    constexpr int LD_ROWS = THREADS / CH;
    const int r = tid / CH, c = tid % CH;
    const bool c_ok = c * 8 < a.head_dim;
#pragma unroll
    for (int i = 0; i < decltype(rows)::value / LD_ROWS; ++i) {
      const int row = r + i * LD_ROWS;
      const bool ok = c_ok && row < rows_left;
      cp_async_16(dst + row * RB + c * 16, ok ? src + row * stride + c * 8 : src, ok);
    }
  };

  const WorkList work = work_list(a, kvh, n0, n1, Br);
  const TileRange range = work.range;
  const int tiles = work.tiles, h0 = work.h0, iters = work.iters;
  auto load_tile = [&](int it, int stage) {
    const int h = h0 + it / tiles, m0 = (range.first + it % tiles) * Br;
    const int64_t row0 = (int64_t{b} * a.seq_q + m0) * q_stride + int64_t{h} * a.head_dim;
    const uint32_t dst = sQ0 + 2 * stage * Cfg::Q_BYTES;
    load_rows(dst, q + row0, q_stride, a.seq_q - m0, std::integral_constant<int, Br>{});
    load_rows(dst + Cfg::Q_BYTES, d_o + row0, q_stride, a.seq_q - m0, std::integral_constant<int, Br>{});
    load_stats<Br>(a, stats + 2 * stage * Br, b, h, m0, tid);
  };
  // K and V once, with the first query tile; a block that no query sees loads nothing and
  // writes dK = dV = 0.
  if (iters > 0) {
    const int64_t kv0 = (int64_t{b} * a.seq_k + n0) * kv_stride + int64_t{kvh} * a.head_dim;
    load_rows(sK, static_cast<const T*>(a.k) + kv0, kv_stride, a.seq_k - n0, std::integral_constant<int, Bc>{});
    load_rows(sV, static_cast<const T*>(a.v) + kv0, kv_stride, a.seq_k - n0, std::integral_constant<int, Bc>{});
    load_tile(0, 0);
  }
  cp_async_commit();

  // ldmatrix lane addresses (the forward's, flash_mma): qv_frag reads an A operand stored
  // [m][k] (ldmatrix) or a B operand stored [k][n] (.trans); kt_frag a B operand stored [n][k]
  // (ldmatrix) or an A operand stored [k][m] (.trans).
  const uint32_t qv_frag = (lane % 16) * RB + (lane / 16) * 16;
  const uint32_t kt_frag = (lane % 8 + (lane / 16) * 8) * RB + ((lane / 8) % 2) * 16;
  const uint32_t s_frag = (lane % 8 + (lane / 16) * 8) * SB + ((lane / 8) % 2) * 16;
  const uint32_t kw = warp * 16 * RB;  // this warp's 16 keys in K and V

  float acc_dk[DT][4], acc_dv[DT][4];
#pragma unroll
  for (int dt = 0; dt < DT; ++dt)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc_dk[dt][e] = acc_dv[dt][e] = 0.f;

  // The tail block masks its keys past seq_k (they are zero-filled, but exp(0 - LSE) is not 0).
  const bool tail = n0 + Bc > a.seq_k;
  for (int it = 0, stage = 0; it < iters; ++it, stage ^= 1) {
    const int h = h0 + it / tiles, m_tile = range.first + it % tiles, m0 = m_tile * Br;
    cp_async_wait<0>();
    __syncthreads();  // this tile's Q, dO and statistics are in; every warp is done with the last tile's dS
    if (it + 1 < iters) load_tile(it + 1, stage ^ 1);
    cp_async_commit();
    const uint32_t sQ = sQ0 + 2 * stage * Cfg::Q_BYTES, sdO = sQ + Cfg::Q_BYTES;
    const float* lse2 = stats + 2 * stage * Br;
    const float* dd = lse2 + Br;

    // Sᵀ = K_w Qᵀ and dPᵀ = V_w dOᵀ (raw dot products, fp32).
    float acc_s[NQ][4], acc_p[NQ][4];
#pragma unroll
    for (int nt = 0; nt < NQ; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc_s[nt][e] = acc_p[nt][e] = 0.f;
#pragma unroll
    for (int ks = 0; ks < KS; ++ks) {
      uint32_t ka[4], va[4];
      ldsm_x4(ka, sK + kw + qv_frag + ks * 32);
      ldsm_x4(va, sV + kw + qv_frag + ks * 32);
#pragma unroll
      for (int p = 0; p < NQ / 2; ++p) {
        uint32_t qb[4], ob[4];
        ldsm_x4(qb, sQ + kt_frag + ks * 32 + p * 16 * RB);
        ldsm_x4(ob, sdO + kt_frag + ks * 32 + p * 16 * RB);
        mma_16816<T>(acc_s[2 * p], ka, qb[0], qb[1]);
        mma_16816<T>(acc_s[2 * p + 1], ka, qb[2], qb[3]);
        mma_16816<T>(acc_p[2 * p], va, ob[0], ob[1]);
        mma_16816<T>(acc_p[2 * p + 1], va, ob[2], ob[3]);
      }
    }

    // Pᵀ (into acc_s) and dSᵀ (into acc_p). Element e of n8 tile nt: key n0 + 16 warp + g + 8 (e / 2),
    // query m0 + 8 nt + 2 t4 + e % 2.
    const bool general = MASKED || tail;
    const float slope = alibi_slope(MASKED && a.slopes, a.slopes, h, 1.f);  // score units
#pragma unroll
    for (int nt = 0; nt < NQ; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int ql = 8 * nt + 2 * t4 + e % 2;
        float& s = acc_s[nt][e];
        float& dp = acc_p[nt][e];
        float p, dz_ds = 1.f;
        if (general) {
          const int j = n0 + 16 * warp + g + 8 * (e / 2), pos = m0 + ql + a.q_offset;
          float z = s * a.scale;
          if (MASKED && a.softcap > 0.f) {
            const float t = tanh_fast(z * a.inv_softcap);
            z = a.softcap * t;
            dz_ds = 1.f - t * t;
          }
          if (MASKED) z = fmaf(-slope, fabsf(static_cast<float>(pos - j)), z);
          const bool seen = j < a.seq_k && j <= pos + a.hi_reach && j >= pos - a.lo_reach;
          p = seen ? exp2_approx(fmaf(z, kLog2e, -lse2[ql])) : 0.f;
        } else {
          p = exp2_approx(fmaf(s, a.scale_log2, -lse2[ql]));
        }
        s = p;
        dp = p * dz_ds * (dp - dd[ql]);
      }

    // dV_w += Pᵀ dO and dK_w += dSᵀ Q, one k16 slice of queries at a time; the packed dSᵀ
    // fragments also go to shared memory for dQ.
#pragma unroll
    for (int kk = 0; kk < QK; ++kk) {
      const uint32_t pa[4] = {pack2<T>(acc_s[2 * kk][0], acc_s[2 * kk][1]), pack2<T>(acc_s[2 * kk][2], acc_s[2 * kk][3]),
                              pack2<T>(acc_s[2 * kk + 1][0], acc_s[2 * kk + 1][1]),
                              pack2<T>(acc_s[2 * kk + 1][2], acc_s[2 * kk + 1][3])};
      const uint32_t da[4] = {pack2<T>(acc_p[2 * kk][0], acc_p[2 * kk][1]), pack2<T>(acc_p[2 * kk][2], acc_p[2 * kk][3]),
                              pack2<T>(acc_p[2 * kk + 1][0], acc_p[2 * kk + 1][1]),
                              pack2<T>(acc_p[2 * kk + 1][2], acc_p[2 * kk + 1][3])};
#pragma unroll
      for (int j = 0; j < DT / 2; ++j) {
        uint32_t ob[4], qb[4];
        ldsm_x4_trans(ob, sdO + qv_frag + j * 32 + kk * 16 * RB);
        ldsm_x4_trans(qb, sQ + qv_frag + j * 32 + kk * 16 * RB);
        mma_16816<T>(acc_dv[2 * j], pa, ob[0], ob[1]);
        mma_16816<T>(acc_dv[2 * j + 1], pa, ob[2], ob[3]);
        mma_16816<T>(acc_dk[2 * j], da, qb[0], qb[1]);
        mma_16816<T>(acc_dk[2 * j + 1], da, qb[2], qb[3]);
      }
      // dSᵀ rows 16 warp + g (+ 8), query columns 16 kk + 2 t4 (+ 8): [key][query].
      unsigned char* row = smem + (sS - sK) + (16 * warp + g) * SB + (16 * kk + 2 * t4) * 2;
      *reinterpret_cast<uint32_t*>(row) = da[0];
      *reinterpret_cast<uint32_t*>(row + 8 * SB) = da[1];
      *reinterpret_cast<uint32_t*>(row + 16) = da[2];
      *reinterpret_cast<uint32_t*>(row + 8 * SB + 16) = da[3];
    }
    __syncthreads();  // dS is in

    // dQ's partial sum over this block's keys, dS K: warp w takes queries 16 (w % 4).. and the
    // n8 tiles of d [DQT (w / 4), DQT (w / 4 + 1)).
    const int mt = warp % 4, cg = warp / 4;
    float acc_q[DQT][4];
#pragma unroll
    for (int dt = 0; dt < DQT; ++dt)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc_q[dt][e] = 0.f;
#pragma unroll
    for (int kk = 0; kk < Bc / 16; ++kk) {
      uint32_t sa[4];
      ldsm_x4_trans(sa, sS + s_frag + kk * 16 * SB + mt * 32);
#pragma unroll
      for (int j = 0; j < DQT / 2; ++j) {
        uint32_t kb[4];
        ldsm_x4_trans(kb, sK + qv_frag + (cg * DQT / 2 + j) * 32 + kk * 16 * RB);
        mma_16816<T>(acc_q[2 * j], sa, kb[0], kb[1]);
        mma_16816<T>(acc_q[2 * j + 1], sa, kb[2], kb[3]);
      }
    }
    // Into the fp32 accumulator: rows m0 + 16 mt + g (+ 8), columns 8 (cg DQT + dt) + 2 t4.
    int* turn = nullptr;
    if constexpr (DETERMINISTIC) {
      turn = a.turns + (int64_t{b} * a.heads + h) * a.q_tiles + m_tile;
      if (tid == 0) {
        const int mine = a.descending ? last_key_block(a.seq_q, a.seq_k, a.q_offset, a.hi_reach, m_tile, Br, Bc) - n_block
                                      : n_block - first_key_block(a.q_offset, a.lo_reach, m_tile, Br, Bc);
        while (ld_acquire(turn) != mine) __nanosleep(64);  // backs off the L2 line the adds before it use
      }
      __syncthreads();
    }
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const int i = m0 + 16 * mt + g + 8 * hh;
      if (i >= a.seq_q) continue;
      float* dst = a.dq_accum + (int64_t{b} * a.seq_q + i) * q_stride + int64_t{h} * a.head_dim;
#pragma unroll
      for (int dt = 0; dt < DQT; ++dt) {
        const int c = 8 * (cg * DQT + dt) + 2 * t4;
        if (c >= a.head_dim) continue;
        float2* x = reinterpret_cast<float2*>(dst + c);
        const float2 add = make_float2(acc_q[dt][2 * hh], acc_q[dt][2 * hh + 1]);
        if constexpr (DETERMINISTIC) {
          const float2 old = __ldcg(x);
          __stcg(x, make_float2(old.x + add.x, old.y + add.y));
        } else {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
          atomicAdd(x, add);
#else
          atomicAdd(&x->x, add.x);
          atomicAdd(&x->y, add.y);
#endif
        }
      }
    }
    if constexpr (DETERMINISTIC) {
      __threadfence();
      __syncthreads();  // every thread's adds are done (and, with the fence, visible on the GPU)
      if (tid == 0) atomicAdd(turn, 1);
    }
  }

  // dK (times scale) and dV of the warp's keys: rows n0 + 16 warp + g (+ 8), columns 8 dt + 2 t4.
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    const int j = n0 + 16 * warp + g + 8 * hh;
    if (j >= a.seq_k) continue;
    const int64_t row = (int64_t{b} * a.seq_k + j) * kv_stride + int64_t{kvh} * a.head_dim;
#pragma unroll
    for (int dt = 0; dt < DT; ++dt) {
      const int c = 8 * dt + 2 * t4;
      if (c >= a.head_dim) continue;
      *reinterpret_cast<uint32_t*>(static_cast<T*>(a.dk) + row + c) =
          pack2<T>(a.scale * acc_dk[dt][2 * hh], a.scale * acc_dk[dt][2 * hh + 1]);
      *reinterpret_cast<uint32_t*>(static_cast<T*>(a.dv) + row + c) =
          pack2<T>(acc_dv[dt][2 * hh], acc_dv[dt][2 * hh + 1]);
    }
  }
}

// The workspace: D [batch, heads, seq_q] fp32, the dQ accumulator [batch, seq_q, heads,
// head_dim] fp32, and (deterministic) the turn counters [batch, heads, query tiles] int.
struct Workspace {
  std::size_t d, acc, turns;
  std::size_t total() const { return d + acc + turns; }
};
inline Workspace workspace_of(const BackwardParams& p, bool deterministic) {
  const std::size_t rows = static_cast<std::size_t>(p.batch * p.heads * p.seq_q);
  const std::size_t tiles = static_cast<std::size_t>(p.batch * p.heads * ceil_div(p.seq_q, 64));
  return {round_up_256(rows * sizeof(float)), round_up_256(rows * static_cast<std::size_t>(p.head_dim) * sizeof(float)),
          deterministic ? round_up_256(tiles * sizeof(int)) : 0};
}

// The 1-D grid: key blocks of Bc keys x kv heads x batches (supports() keeps it below 2^31).
inline unsigned grid_blocks(const Args& a, int64_t batch, int Bc) {
  return static_cast<unsigned>(ceil_div(a.seq_k, Bc) * a.kv_heads * batch);
}

inline bool is_masked(const BackwardParams& p) {
  return p.causal || p.window > 0 || p.score.alibi || p.score.softcap > 0;
}

template <class T, class Cfg, bool MASKED, bool DETERMINISTIC>
void launch_kernel(const Args& a, int64_t batch, cudaStream_t stream, const char* name) {
  const auto kernel = flash_bwd_kernel<T, Cfg, MASKED, DETERMINISTIC>;
  static const cudaError_t opt_in =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::SMEM_BYTES);
  check_cuda(opt_in, name);
  kernel<<<grid_blocks(a, batch, Cfg::Bc), Cfg::THREADS, Cfg::SMEM_BYTES, stream>>>(a);
  check_launch(name);
}

// The whole backward: preprocess (D, dQ accumulator zeroed), the turn counters zeroed
// (deterministic), the main kernel, dQ converted.
// The kernels' arguments for p over the workspace `ws` laid out as w (the tiled rungs', rung 4's
// included): D first, then the dQ accumulator, then (w.turns > 0) the turn counters.
// Bc and sm_count choose the block order (key_major_order).
inline Args args_of(const BackwardParams& p, char* ws, const Workspace& w, int Bc, int sm_count) {
  Args a{};
  a.q = p.q, a.k = p.k, a.v = p.v, a.d_o = p.d_o, a.lse = p.lse;
  a.d = reinterpret_cast<float*>(ws);
  a.dq_accum = reinterpret_cast<float*>(ws + w.d);
  a.turns = w.turns > 0 ? reinterpret_cast<int*>(ws + w.d + w.acc) : nullptr;
  a.dk = p.dk, a.dv = p.dv;
  a.seq_q = static_cast<int>(p.seq_q), a.seq_k = static_cast<int>(p.seq_k);
  a.heads = static_cast<int>(p.heads), a.kv_heads = static_cast<int>(p.kv_heads);
  a.group = static_cast<int>(p.heads / p.kv_heads), a.head_dim = static_cast<int>(p.head_dim);
  a.q_tiles = static_cast<int>(ceil_div(p.seq_q, 64));
  a.q_offset = static_cast<int>(p.q_offset);
  const Reach reach = key_reach(p.causal, p.window, p.seq_q, p.seq_k);
  a.lo_reach = reach.lo, a.hi_reach = reach.hi;
  a.scale = p.score.scale, a.scale_log2 = p.score.scale_log2;
  a.softcap = p.score.softcap, a.inv_softcap = p.score.softcap > 0 ? 1.f / p.score.softcap : 0.f;
  a.slopes = p.score.alibi ? p.score.alibi_slopes : nullptr;
  a.key_major = key_major_order(p.causal, ceil_div(p.seq_k, Bc) * p.kv_heads * p.batch, sm_count);
  a.descending = descending_turns(w.turns > 0, a.hi_reach, a.seq_q, a.seq_k);
  a.rotated = 0;  // rung 5 sets it (flash_wgmma.cuh's run)
  return a;
}

template <bool DETERMINISTIC>
void run(const BackwardParams& p, const LaunchContext& ctx, const char* name) {
  const Workspace w = workspace_of(p, DETERMINISTIC);
  const int Bc = with_head_dim_class<64, 128>(p.head_dim, [](auto d) { return ConfigFor<decltype(d)::value>::Bc; });
  const Args a = args_of(p, static_cast<char*>(ctx.workspace), w, Bc, ctx.caps ? ctx.caps->sm_count : 0);
  float* d = static_cast<float*>(ctx.workspace);  // D: the workspace's first part (args_of)
  with_16bit(p.dtype, name, [&](auto tag) {
    using T = decltype(tag);
    launch_preprocess(static_cast<const T*>(p.o), static_cast<const T*>(p.d_o), d, a.dq_accum, p.batch, p.seq_q,
                      p.heads, a.head_dim, ctx.stream);
    check_launch(name);
    if (DETERMINISTIC) check_cuda(cudaMemsetAsync(a.turns, 0, w.turns, ctx.stream), name);
    with_head_dim_class<64, 128>(p.head_dim, [&](auto d) {
      using Cfg = ConfigFor<decltype(d)::value>;
      with_bool(is_masked(p), [&](auto masked) { launch_kernel<T, Cfg, masked, DETERMINISTIC>(a, p.batch, ctx.stream, name); });
    });
    launch_dq_convert(a.dq_accum, static_cast<T*>(p.dq), p.batch * p.seq_q * p.heads * p.head_dim, p.score.scale,
                      ctx.stream);
    check_launch(name);
  });
}

// What every tiled rung (2-5) asks of the sizes, options and pointers beyond its own tiles: int
// positions and offsets, no sinks, 16-byte aligned tensors for cp.async ("" = all well).
inline std::string index_reason(const BackwardParams& p) {
  if (p.seq_q >= (int64_t{1} << 29) || p.seq_k >= (int64_t{1} << 29))
    return "seq_q and seq_k must be < 2^29 (positions are int)";
  if (p.heads * p.head_dim >= (int64_t{1} << 31)) return "heads * head_dim must fit in int";
  if (p.window < 0) return "window must be >= 0";
  if (const std::string r = score_reason(p.score); !r.empty()) return r;
  if (p.score.sinks) return "attention sinks: no backward yet";
  for (const void* t : std::initializer_list<const void*>{p.q, p.k, p.v, p.o, p.d_o, p.dq, p.dk, p.dv})
    if (t && !aligned16(t)) return "q, k, v, o, d_o, dq, dk and dv must be 16-byte aligned (cp.async)";
  return {};
}

inline std::string supports(const BackwardParams& p, const DeviceCaps& caps) {
  if (p.dtype != DType::fp16 && p.dtype != DType::bf16) return "fp16/bf16 only (mma.sync on 16-bit inputs)";
  if (caps.arch() < 80) return "needs sm_80+ (mma.sync m16n8k16, ldmatrix, cp.async)";
  if (p.batch < 1 || p.heads < 1 || p.kv_heads < 1 || p.seq_q < 1 || p.seq_k < 1)
    return "batch, heads, kv_heads, seq_q and seq_k must be >= 1";
  if (p.heads % p.kv_heads != 0) return "heads must be a multiple of kv_heads";
  if (ceil_div(p.seq_k, 64) * p.kv_heads * p.batch >= (int64_t{1} << 31))
    return "key blocks x kv_heads x batch must be < 2^31 (the 1-D grid)";
  if (p.head_dim < 8 || p.head_dim % 8 != 0) return "head_dim must be a multiple of 8 (rows move in 16-byte chunks)";
  if (p.head_dim > 128)
    return "head_dim above 128: a warp's dK and dV of 16 keys would need 2 x 128 fp32 registers a lane";
  if (const std::string r = index_reason(p); !r.empty()) return r;
  const int smem = with_head_dim_class<64, 128>(p.head_dim, [](auto d) { return ConfigFor<decltype(d)::value>::SMEM_BYTES; });
  if (caps.smem_per_block_optin < static_cast<std::size_t>(smem))
    return "needs " + std::to_string(smem / 1024) + " KB of shared memory per block";
  return {};
}

}  // namespace flash
}  // namespace attnbench::backward_impl
