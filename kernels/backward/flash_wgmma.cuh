// The backward on Hopper's warpgroup mma, shared by rung 4 (flash_wgmma: dQ summed by atomics)
// and rung 5 (flash_wgmma_det: dQ handed to a writer warp that adds it in key-block order, rung
// 3's turns): one kernel template, the difference two flags (DETERMINISTIC, WRITER), as flash.cuh
// is for rungs 2 and 3. FlashAttention-3's
// backward (Shah et al. 2024) on sm_90a, fp16/bf16, head_dim 64 and 128; fp32 scores,
// statistics and accumulators.
//
// Over rung 2 (flash_mma, flash.cuh): the same algorithm and the same block/tile geometry,
// with every product on wgmma (about 1.5x mma.sync's peak on an H100) and the operands read by
// the tensor cores straight from shared memory, no ldmatrix:
//   - K/V outer loop, as rung 2: a block owns Bc = 128 keys of one (batch, kv head), loads K
//     and V once and keeps dK and dV in registers while it walks every query tile of Br = 64
//     rows that sees one of its keys, for every query head of the group (tiles.hpp's
//     query_tiles; first_key_block's geometry is rung 2's at d128, so the deterministic turn
//     order of rung 3 would carry over). The 1-D grid and block order of rung 2 (tiles.hpp's
//     block_coord: key-major for a small causal grid).
//   - Two warpgroups (256 threads, all of them copying and computing; no producer warpgroup
//     yet). Warpgroup w owns keys 64w..64w+63 of the block: the m64 rows of every product that
//     accumulates into its dK and dV, so those need no exchange:
//       Sᵀ  = K_w Qᵀ     wgmma m64n64k16 ss, K and Q tiles K-major (a row's head_dim is k)
//       dPᵀ = V_w dOᵀ    likewise
//       Pᵀ = exp2(Sᵀ·scale·log2e - LSE·log2e), dSᵀ = Pᵀ ∘ (dPᵀ - D) ∘ cap'   (registers, fp32)
//       dV_w += Pᵀ dO    wgmma m64nDk16 rs: the accumulator fragment of Sᵀ (two adjacent n8
//       dK_w += dSᵀ Q    columns, packed to 16-bit pairs) is the A fragment of a k16 slice of
//                        queries, as P is in the forward; dO and Q N-major (k = queries, the
//                        transpose-B form, as the forward reads V).
//   - dQ = dS K needs both warpgroups' keys: each stores its dSᵀ rows (16-bit, [key][query], one
//     128-byte-swizzled column block of 64 queries) to shared memory, one barrier, then a wgmma
//     m64n64k16 ss with both operands transposed: A = dS read from dSᵀ (M-major: the transpose
//     flag on A, wgmma_m64n64k16_ss_mn), B = K (N-major). d128: warpgroup w takes d columns
//     64w.. over all 128 keys (K's column block w); d64: there is one column block of 64, and
//     an N-major swizzled operand cannot start mid-block, so warpgroup w takes all 64 columns
//     over its own 64 keys, and both add their partial sums (twice the atomics of a d split,
//     the same count a key as rung 2's d64 blocks of 64 keys). The partial dQ goes to the
//     fp32 accumulator by float4 atomics (red.global.add.v4.f32, sm_90: lanes trade pairs so
//     each holds four adjacent columns); the preprocess (D,
//     the zeroed accumulator) and the conversion to the dtype are preprocess.cuh's.
//   - Tiles are [D / 64 column blocks][rows][128 bytes] in the 128-byte swizzle (chunk c of row
//     r at (c ^ r % 8) x 16), 1024-byte aligned, copied by cp.async from every thread (the
//     forward's flash_wgmma), zero-filled past seq_q / seq_k. Q, dO and the tile's LSE (exp2
//     units) and D are double-buffered: the next query tile's copies are issued right after
//     the barrier that publishes the current one. Two barriers a tile (its data is in; dS is
//     in), as rung 2.
//   - Overlap inside a tile: Sᵀ and dPᵀ are issued back to back, one commit group each; P is
//     computed and packed while dPᵀ runs, and dV issued at once; dS is computed and stored to
//     shared memory while dV runs (before dK is issued: PTX forbids touching an A fragment's
//     registers until its product's wait); dK runs while the warpgroups meet at the barrier
//     and issue dQ; one wait for dV, dK and dQ before the atomics. Per tile 5 commit groups,
//     waits wait<1> (Sᵀ), wait<1> (dPᵀ), wait<0>.
//   - Masks (causal, window, the seq_k tail) and the score terms (ALiBi, soft-capping and its
//     derivative) only in the MASKED kernel, and there only on the tiles that need them (a tile
//     every (query, key) pair of which is visible and that has no score terms takes the plain
//     path), and on the tail key block; padded query rows get LSE = +inf, so their P and dS
//     are exactly 0.
// Registers (a consumer thread, d128): dK 64 + dV 64 fp32 accumulators across the whole loop;
// Sᵀ 32 + dPᵀ 32 while they are computed; then P and dS packed (16 + 16) held until their
// products finish, beside dQ's 32: peak about 192 + addresses, under the 255 of one 256-thread
// block an SM (ptxas: no spills, checked with -warn-spills by the build). d64: 32 + 32 + 64.
// Shared memory: K, V (Bc x D each), 2 stages of Q and dO (Br x D each), dSᵀ (Bc x Br), 2
// stages of LSE and D: 145 KB at d128 (+1 KB to align the atoms), 81 KB at d64; one block an SM
// either way (d64's 160 registers a thread do not fit two blocks). WRITER adds two dQ buffers
// (68 KB at d128, 36 KB at d64) and four mbarriers: 214 KB at d128.
// Not here (supports() says so): head_dim 256 (dK and dV of 64 keys x 256 dims are 256 fp32
// registers a thread before Sᵀ and dPᵀ: FlashAttention-3 shrinks the key block to 64 and
// splits differently), other head_dims, attention sinks, other cards.
// Measured (H100, runs 274 and 276): 4.02 ms at b4 h16 s4096 d128 non-causal, 342 TFLOP/s, 0.65x
// cuDNN's SDPA backward; Nsight Compute: tensor pipe 37% busy, no eligible warp 69% of cycles
// (8 warps an SM, each waiting on its own wgmma chain or a barrier), L2 49%, DRAM 4%:
// latency-bound, not memory- or atomic-bound (float4 atomics in place of float2 gained 1%).
// WRITER (rung 5; FA3's dQ path): a third warpgroup, registers traded by setmaxnreg (24 for it,
// 240 for each consumer; with two writers ptxas spills 8 bytes at d128 and 4 at d64), two
// threads of which add the tiles' partial dQ (lane 0 of warps 8 and 9: the even tiles and the
// odd). The consumers store their dQ fragments (fp32) to one of two shared buffers (rows padded
// by 32 bytes: conflict-free float2 stores), fence for the async proxy and arrive on the
// buffer's full mbarrier; the buffer's writer waits for it, then (DETERMINISTIC) for the tile's
// turn, adds the rows by bulk reductions (cp.reduce.async.bulk .add.f32, one of D
// floats a row), waits until they are performed, passes the turn on with a release, and frees
// the buffer (its empty mbarrier). The consumers wait only when both buffers are still being
// added: the turn's wait and the adds' round trip leave their critical path, where rung 5's
// first form had them (the whole block waited for its turn, added by atomics and fenced, once a
// tile: 0.67x rung 4, run 282). A writer's hold of a turn is one tile's adds; with one writer a
// block's next tile waited for the last one's (0.74-0.80x rung 4, runs 290-293), with two, one
// tile's adds are in flight while the other writer waits for its turn (0.73-1.10x, runs 294-296).
// Next steps (FA3's): a TMA producer warpgroup with mbarriers (6_flash_ws.cu's pipeline) so the
// consumers stop copying and overlap more.
// Precision: as rung 2 (the faithful reference): P and dS rounded to the dtype as the operands
// of their products, D and every sum in fp32.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <type_traits>

#include "kernels/backward/flash.cuh"
#include "kernels/backward/preprocess.cuh"
#include "kernels/backward/tiles.hpp"
#include "kernels/common/copy.cuh"
#include "kernels/common/dispatch.cuh"
#include "kernels/common/mask.cuh"
#include "kernels/common/softmax_math.cuh"
#include "kernels/common/storage.cuh"
#include "kernels/common/tma.cuh"
#include "kernels/common/wgmma.cuh"

namespace attnbench::backward_impl {
namespace {

using flash::Args;

template <int D_>
struct WgConfig {
  static constexpr int D = D_, THREADS = 256, Br = 64, Bc = 128;
  static constexpr int KS = D / 16;          // k16 steps of Sᵀ and dPᵀ (head_dim)
  static constexpr int QK = Br / 16;         // k16 steps of dV and dK (queries)
  static constexpr int KV_BLOCK = Bc * 128;  // one 64-dim column block of K or V: 16 KB
  static constexpr int Q_BLOCK = Br * 128;   // of Q or dO: 8 KB
  static constexpr int KV_BYTES = D / 64 * KV_BLOCK, Q_BYTES = D / 64 * Q_BLOCK;
  static constexpr int S_BYTES = Bc * Br * 2;  // dSᵀ [key][query], 16-bit: one column block of 64 queries
  static constexpr int STATS_BYTES = 2 * 2 * Br * 4;  // 2 stages of (LSE·log2 e, D)
  // K, V; 2 stages of (Q, dO); dSᵀ; the statistics; slack to align the base to 1024 bytes.
  static constexpr int SMEM_BYTES = 2 * KV_BYTES + 4 * Q_BYTES + S_BYTES + STATS_BYTES + 1024;
  // dQ: k16 steps a warpgroup (d128: all 128 keys of a 64-column half; d64: its own 64 keys).
  static constexpr int DQ_KS = D == 128 ? Bc / 16 : 64 / 16;
  // The dQ writer (WRITER): two buffers of the tile's fp32 partial dQ, rows 32 bytes apart
  // beyond their D floats (a half-warp's float2 stores of rows g = 0..3 then fall on 32
  // different banks; each row stays 16-byte aligned for the bulk reduction), and their
  // full/empty mbarriers; a third warpgroup, of which one warp reduces.
  static constexpr int DQ_PITCH = D * 4 + 32, DQ_BUF = Br * DQ_PITCH;
  static constexpr int SMEM_WRITER = SMEM_BYTES + 2 * DQ_BUF + 4 * 8;
  static constexpr int WRITER_REGS = 24, CONSUMER_REGS = 240;  // 128 x 24 + 256 x 240 = 384 x 168
  static_assert(D == 64 || D == 128, "head_dim 64 or 128");
  static_assert(THREADS % (D / 8) == 0 && Br % (THREADS / (D / 8)) == 0, "tiles split evenly over the threads");
};

// Byte offset of 16-byte chunk c (8 dims) of row r in a tile whose column blocks are `block`
// bytes apart.
__device__ __forceinline__ uint32_t tile_off(int r, int c, int block) {
  return (c >> 3) * block + r * 128 + (((c & 7) ^ (r & 7)) << 4);
}

// wgmma descriptors (wgmma_desc_sw128): K-major (Sᵀ and dPᵀ: K, V, Q, dO), N-major (dV, dK:
// dO and Q; dQ: K) and M-major (dQ's A, dSᵀ) with `block` bytes between 64-element blocks.
__device__ __forceinline__ uint64_t desc_k(uint32_t addr) { return wgmma_desc_sw128(addr); }
__device__ __forceinline__ uint64_t desc_n(uint32_t addr, int block) {
  return wgmma_desc_sw128(addr, static_cast<uint32_t>(block));
}

// Accumulator fragments (wgmma.cuh): register 4j + e of a thread holds row 16 (warp % 4) +
// lane / 4 (+ 8 when e >= 2) of its warpgroup's 64, column 8j + 2 (lane % 4) + e % 2. In Sᵀ,
// dPᵀ, dK and dV the rows are the warpgroup's keys; in dQ the tile's queries.
template <class T, class Cfg, bool MASKED, bool DETERMINISTIC, bool WRITER>
__global__ __launch_bounds__(WRITER ? Cfg::THREADS + 128 : Cfg::THREADS, 1) void flash_wgmma_bwd_kernel(
    const __grid_constant__ Args a) {
#if !defined(__CUDA_ARCH__) || defined(__CUDA_ARCH_FEAT_SM90_ALL)  // the host pass parses it too
  constexpr int D = Cfg::D, Br = Cfg::Br, Bc = Cfg::Bc, KS = Cfg::KS, QK = Cfg::QK, THREADS = Cfg::THREADS;
  constexpr int KV_BLOCK = Cfg::KV_BLOCK, Q_BLOCK = Cfg::Q_BLOCK, KV_BYTES = Cfg::KV_BYTES, Q_BYTES = Cfg::Q_BYTES;
  extern __shared__ unsigned char smem_raw[];
  const uint32_t raw = smem_addr(smem_raw);
  const uint32_t sK = (raw + 1023u) & ~1023u, sV = sK + KV_BYTES;
  const uint32_t sQ0 = sV + KV_BYTES;  // stage s: Q at sQ0 + 2 s Q_BYTES, dO after it
  const uint32_t sS = sQ0 + 4 * Q_BYTES;
  unsigned char* const dS_ptr = smem_raw + (sS - raw);
  float* const stats = reinterpret_cast<float*>(dS_ptr + Cfg::S_BYTES);  // stage s: LSE·log2 e at 2 s Br, D after it
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, wg = tid / 128;
  const int g = lane / 4, t4 = lane % 4;

  const int key_blocks = static_cast<int>(ceil_div(a.seq_k, Bc));
  const BlockCoord at = block_coord(blockIdx.x, key_blocks, gridDim.x / key_blocks, a.key_major,
                                    DETERMINISTIC && a.descending);
  const int n_block = at.n_block, kvh = at.row % a.kv_heads, b = at.row / a.kv_heads;
  const int n0 = n_block * Bc, n1 = min(n0 + Bc, a.seq_k) - 1;
  const T* q = static_cast<const T*>(a.q);
  const T* d_o = static_cast<const T*>(a.d_o);
  const int64_t q_stride = int64_t{a.heads} * D, kv_stride = int64_t{a.kv_heads} * D;

  // Rows [0, ROWS) of a [row][D] slab (row stride `stride`) into a swizzled tile; rows past
  // `rows_left` zero-filled (an empty slot names src, a valid address).
  auto load_rows = [&](uint32_t dst, const T* src, int64_t stride, int rows_left, auto rows) {
    constexpr int ROWS = decltype(rows)::value, CH = D / 8, LD_ROWS = THREADS / CH;
    const int r0 = tid / CH, c = tid % CH;
#pragma unroll
    for (int i = 0; i < ROWS / LD_ROWS; ++i) {
      const int r = r0 + i * LD_ROWS;
      const bool ok = r < rows_left;
      cp_async_16(dst + tile_off(r, c, ROWS * 128), ok ? src + r * stride + c * 8 : src, ok);
    }
  };

  // The work list and the statistics' loads are rung 2's (flash.cuh).
  const flash::WorkList work = flash::work_list(a, kvh, n0, n1, Br);
  const TileRange range = work.range;
  const int tiles = work.tiles, h0 = work.h0, iters = work.iters;
  // Iteration it's query tile: range.first + it % tiles, or (rotated turns) the same walk
  // started at the block's own tile (tiles.hpp's rotated_start; every block's range is then
  // every tile).
  const int start = DETERMINISTIC && a.rotated ? rotated_start(n_block, tiles, key_blocks) : 0;
  auto tile_of = [&](int it) {
    int t = it % tiles;
    if constexpr (DETERMINISTIC) {
      t += start;
      if (t >= tiles) t -= tiles;
    }
    return range.first + t;
  };

  // WRITER: the consumers (warpgroups 0 and 1) store each tile's partial dQ to a shared buffer
  // and go on to the next tile; one warp of warpgroup 2 adds the buffer into the accumulator
  // by bulk reductions (DETERMINISTIC: in its turn, and passes the turn on once they are
  // complete), then frees the buffer. Below, THREADS and tid count the consumers alone.
  const uint32_t sDq = sS + Cfg::S_BYTES + Cfg::STATS_BYTES;
  const uint32_t bar_full = sDq + 2 * Cfg::DQ_BUF, bar_empty = bar_full + 16;  // two each, 8 bytes apart
  static_assert(!DETERMINISTIC || WRITER, "the deterministic order is the writer's");
  if constexpr (WRITER) {
    if (tid == 0) {
      for (int i = 0; i < 2; ++i) {
        mbar_init(bar_full + 8 * i, THREADS);
        mbar_init(bar_empty + 8 * i, 1);
      }
    }
    __syncthreads();  // the barriers are initialised
    if (wg == 2) {
      setmaxnreg_dec<Cfg::WRITER_REGS>();
      // Two threads, lane 0 of warps 8 and 9, one a buffer: warp 8's the even tiles, warp 9's
      // the odd ones, so that one tile's reductions are in flight while the other thread waits
      // for its turn (in the deterministic order a thread holds a tile's turn until its
      // reductions are performed; one thread alone took the tiles one round trip at a time).
      // One thread a warp: a bulk reduction's addresses are uniform registers, so the lanes of
      // a warp would issue theirs one lane after another anyway.
      if (lane != 0 || warp > 9) return;
      for (int it = warp - 8; it < iters; it += 2) {
        const int buf = it & 1, h = h0 + it / tiles, m_tile = tile_of(it), m0 = m_tile * Br;
        mbar_wait(bar_full + 8 * buf, (it >> 1) & 1);
        int* turn = nullptr;
        if constexpr (DETERMINISTIC) {
          turn = a.turns + (int64_t{b} * a.heads + h) * a.q_tiles + m_tile;
          const int mine = a.rotated ? rotated_turn(m_tile, n_block, tiles, key_blocks)
                           : a.descending
                               ? last_key_block(a.seq_q, a.seq_k, a.q_offset, a.hi_reach, m_tile, Br, Bc) - n_block
                               : n_block - first_key_block(a.q_offset, a.lo_reach, m_tile, Br, Bc);
          while (flash::ld_acquire(turn) != mine) __nanosleep(32);
          fence_proxy_async_global();  // the acquire -> the bulk reductions
        }
        // Row r of the tile: D contiguous floats of the accumulator ([batch][seq_q][heads][D]).
        const int rows = min(Br, a.seq_q - m0);
        for (int r = 0; r < rows; ++r)
          bulk_reduce_add_f32(a.dq_accum + (int64_t{b} * a.seq_q + m0 + r) * q_stride + int64_t{h} * D,
                              sDq + buf * Cfg::DQ_BUF + r * Cfg::DQ_PITCH, D * 4);
        bulk_commit();
        if constexpr (DETERMINISTIC) {
          bulk_wait<0>();              // the adds are performed
          fence_proxy_async_global();  // ... before the release
          flash::red_release(turn);
        } else {
          bulk_wait_read<0>();  // the buffer is read
        }
        mbar_arrive(bar_empty + 8 * buf);
      }
      bulk_wait<0>();  // the last adds are done before the block's shared memory goes
      return;
    }
    setmaxnreg_inc<Cfg::CONSUMER_REGS>();
  }
  // The consumers' block-wide barrier: __syncthreads, or with a writer beside them the named
  // barrier of their 256 threads.
  auto consumers_sync = [] {
    if constexpr (WRITER) named_bar_sync(1, Cfg::THREADS);
    else __syncthreads();
  };
  auto load_tile = [&](int it, int stage) {
    const int h = h0 + it / tiles, m0 = tile_of(it) * Br;
    const int64_t row0 = (int64_t{b} * a.seq_q + m0) * q_stride + int64_t{h} * D;
    const uint32_t dst = sQ0 + 2 * stage * Q_BYTES;
    load_rows(dst, q + row0, q_stride, a.seq_q - m0, std::integral_constant<int, Br>{});
    load_rows(dst + Q_BYTES, d_o + row0, q_stride, a.seq_q - m0, std::integral_constant<int, Br>{});
    flash::load_stats<Br>(a, stats + 2 * stage * Br, b, h, m0, tid);
  };
  // K and V once, with the first query tile; a block that no query sees loads nothing and
  // writes dK = dV = 0.
  if (iters > 0) {
    const int64_t kv0 = (int64_t{b} * a.seq_k + n0) * kv_stride + int64_t{kvh} * D;
    load_rows(sK, static_cast<const T*>(a.k) + kv0, kv_stride, a.seq_k - n0, std::integral_constant<int, Bc>{});
    load_rows(sV, static_cast<const T*>(a.v) + kv0, kv_stride, a.seq_k - n0, std::integral_constant<int, Bc>{});
    load_tile(0, 0);
  }
  cp_async_commit();

  float acc_dk[D / 2], acc_dv[D / 2];
#pragma unroll
  for (int i = 0; i < D / 2; ++i) acc_dk[i] = acc_dv[i] = 0.f;
  const int key_l = 64 * wg + 16 * (warp % 4) + g;  // the block-local key of the thread's fragment rows (and + 8)
  const uint32_t k_wg = sK + wg * 64 * 128, v_wg = sV + wg * 64 * 128;  // the warpgroup's 64 keys, column block 0

  // The tail block masks its keys past seq_k (they are zero-filled, but exp(0 - LSE) is not 0).
  const bool tail = n0 + Bc > a.seq_k;
  for (int it = 0, stage = 0; it < iters; ++it, stage ^= 1) {
    const int h = h0 + it / tiles, m_tile = tile_of(it), m0 = m_tile * Br;
    cp_async_wait<0>();
    fence_proxy_async_shared();  // cp.async's writes -> wgmma's reads
    consumers_sync();  // this tile's Q, dO and statistics are in; both warpgroups are done with the last tile's dS
    if (it + 1 < iters) load_tile(it + 1, stage ^ 1);
    cp_async_commit();
    const uint32_t sQ = sQ0 + 2 * stage * Q_BYTES, sdO = sQ + Q_BYTES;
    // The loop-invariant shared addresses, opaque a tile: else the compiler hoists every K and
    // V descriptor out of the loop, 2 registers each, and d128 spills.
    uint32_t kw = k_wg, vw = v_wg, kb = sK, sb = sS;
    asm volatile("" : "+r"(kw), "+r"(vw), "+r"(kb), "+r"(sb));
    const float* lse2 = stats + 2 * stage * Br;
    const float* dd = lse2 + Br;

    // Sᵀ = K_w Qᵀ and dPᵀ = V_w dOᵀ (raw dot products, fp32), one commit group each. k step
    // ks is dims 16 ks..: column block ks / 4, 32 (ks % 4) bytes into the rows.
    float s[32], dp[32];
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < KS; ++ks) {
      const uint32_t off_k = (ks / 4) * KV_BLOCK + (ks % 4) * 32, off_q = (ks / 4) * Q_BLOCK + (ks % 4) * 32;
      wgmma_m64n64k16_ss<T>(s, desc_k(kw + off_k), desc_k(sQ + off_q), ks);
    }
    wgmma_commit();
#pragma unroll
    for (int ks = 0; ks < KS; ++ks) {
      const uint32_t off_k = (ks / 4) * KV_BLOCK + (ks % 4) * 32, off_q = (ks / 4) * Q_BLOCK + (ks % 4) * 32;
      wgmma_m64n64k16_ss<T>(dp, desc_k(vw + off_k), desc_k(sdO + off_q), ks);
    }
    wgmma_commit();

    // The general path (masks, score terms) where the tile needs it: the tail key block, and in
    // the MASKED kernel ALiBi, soft-capping, and a tile some pair of which the reaches cut
    // (every pair is visible iff the block's last key is within the tile's first query's high
    // reach and its first key within the last query's low reach; int: tiles.hpp's bounds).
    bool general = tail;
    if constexpr (MASKED)
      general = general || a.softcap > 0.f || a.slopes != nullptr || n1 > m0 + a.q_offset + a.hi_reach ||
                n0 < m0 + Br - 1 + a.q_offset - a.lo_reach;
    const float slope = alibi_slope(MASKED && a.slopes, a.slopes, h, 1.f);  // score units

    // Pᵀ while dPᵀ still runs. Element 4j + e: key n0 + key_l + 8 (e / 2), query m0 + 8j +
    // 2 t4 + e % 2. P is packed to 16-bit pairs, the A fragments of the k16 slices of queries
    // (slice kk = the n8 columns 2 kk and 2 kk + 1: words (row, cols 2 t4..), (row + 8, ..),
    // then + 8 columns); s keeps P ∘ cap'(Sᵀ) in fp32 for dS.
    wgmma_wait<1>();
    fence_operands(s);
    uint32_t pa[QK][4];
#pragma unroll
    for (int i = 0; i < 32; i += 2) {
      float p2[2];
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int ql = 8 * (i / 4) + 2 * t4 + e;
        float p, dz_ds = 1.f;
        if (general) {
          const int j = n0 + key_l + 8 * ((i >> 1) & 1), pos = m0 + ql + a.q_offset;
          float z = s[i + e] * a.scale;
          if (MASKED && a.softcap > 0.f) {
            const float t = tanh_fast(z * a.inv_softcap);
            z = a.softcap * t;
            dz_ds = 1.f - t * t;
          }
          if (MASKED) z = fmaf(-slope, fabsf(static_cast<float>(pos - j)), z);
          const bool seen = j < a.seq_k && j <= pos + a.hi_reach && j >= pos - a.lo_reach;
          p = seen ? exp2_approx(fmaf(z, kLog2e, -lse2[ql])) : 0.f;
        } else {
          p = exp2_approx(fmaf(s[i + e], a.scale_log2, -lse2[ql]));
        }
        p2[e] = p;
        s[i + e] = p * dz_ds;
      }
      // i = 8 kk + 2 w: word w of slice kk.
      pa[i / 8][(i / 2) % 4] = pack2<T>(p2[0], p2[1]);
    }

    // dV_w += Pᵀ dO: k step kk is queries 16 kk.., 16 rows of 128 bytes into the N-major dO tile.
    wgmma_fence();  // pa written by ordinary instructions
#pragma unroll
    for (int kk = 0; kk < QK; ++kk) wgmma_rs_nmajor<T, D>(acc_dv, pa[kk], desc_n(sdO + kk * 16 * 128, Q_BLOCK));
    wgmma_commit();

    // dSᵀ = Pᵀ ∘ cap' ∘ (dPᵀ - D), packed as P.
    wgmma_wait<1>();  // dPᵀ (dV may still run)
    fence_operands(dp);
    uint32_t da[QK][4];
#pragma unroll
    for (int i = 0; i < 32; i += 2) {
      const int ql = 8 * (i / 4) + 2 * t4;
      da[i / 8][(i / 2) % 4] = pack2<T>(s[i] * (dp[i] - dd[ql]), s[i + 1] * (dp[i + 1] - dd[ql + 1]));
    }

    // dSᵀ to shared memory for dQ, while dV runs (before dK reads da: PTX leaves an A fragment's
    // registers untouchable until its product's wait): key row r = key_l (r % 8 = g) and r + 8,
    // queries 16 kk + 2 t4 (chunk 2 kk) and + 8 (chunk 2 kk + 1), swizzled.
#pragma unroll
    for (int kk = 0; kk < QK; ++kk) {
      unsigned char* row = dS_ptr + key_l * 128 + 4 * t4;
      *reinterpret_cast<uint32_t*>(row + (((2 * kk) ^ g) << 4)) = da[kk][0];
      *reinterpret_cast<uint32_t*>(row + 8 * 128 + (((2 * kk) ^ g) << 4)) = da[kk][1];
      *reinterpret_cast<uint32_t*>(row + (((2 * kk + 1) ^ g) << 4)) = da[kk][2];
      *reinterpret_cast<uint32_t*>(row + 8 * 128 + (((2 * kk + 1) ^ g) << 4)) = da[kk][3];
    }
    // dK_w += dSᵀ Q (Q N-major, as dO above).
    wgmma_fence();  // da written by ordinary instructions
#pragma unroll
    for (int kk = 0; kk < QK; ++kk) wgmma_rs_nmajor<T, D>(acc_dk, da[kk], desc_n(sQ + kk * 16 * 128, Q_BLOCK));
    wgmma_commit();

    fence_proxy_async_shared();  // the stores -> dQ's wgmma reads
    consumers_sync();            // both warpgroups' dSᵀ is in

    // dQ's partial sum over the block's keys, dS K (A = dSᵀ M-major, B = K N-major); k step kk
    // is 16 keys, 16 rows of 128 bytes. d128: warpgroup w takes d columns 64w.. (K's column
    // block w) over the 128 keys; d64: all 64 columns over its own keys 64w...
    float acc_q[32];
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < Cfg::DQ_KS; ++kk) {
      const int key = (D == 128 ? 0 : 64 * wg) + 16 * kk;
      const uint32_t b_addr = kb + (D == 128 ? wg * KV_BLOCK : 0) + key * 128;
      wgmma_m64n64k16_ss_mn<T>(acc_q, desc_n(sb + key * 128, Cfg::S_BYTES), desc_n(b_addr, KV_BLOCK), kk);
    }
    wgmma_commit();
    wgmma_wait<0>();  // dV, dK and dQ
    fence_operands(acc_q);
    fence_operands(acc_dv);
    fence_operands(acc_dk);
#pragma unroll
    for (int kk = 0; kk < QK; ++kk) {  // P and dS stay in their registers until their products are done
      fence_operands(pa[kk]);
      fence_operands(da[kk]);
    }

    if constexpr (WRITER) {
      // To the writer: the tile's partial dQ into buffer it % 2, once the writer has reduced
      // what the buffer held two tiles ago; then one arrival a thread on its full barrier.
      // Thread fragment: columns c + 8j, +1 of rows r and r + 8. d128's warpgroups fill
      // disjoint columns; at d64 both have all 64 columns (each over its own 64 keys), and
      // warpgroup 1 adds its share to warpgroup 0's after it (named barrier 2): one order, so
      // the sum the writer adds is the same every run.
      const int buf = it & 1;
      if (it >= 2) mbar_wait(bar_empty + 8 * buf, ((it >> 1) - 1) & 1);
      unsigned char* const dq_buf = smem_raw + (sDq - raw) + buf * Cfg::DQ_BUF;
      const int r = 16 * (warp % 4) + g, c = (D == 128 ? 64 * wg : 0) + 2 * t4;
      constexpr bool kSum = D == 64;
      if (kSum && wg == 1) named_bar_sync(2, THREADS);  // warpgroup 0's share is in
#pragma unroll
      for (int j = 0; j < 8; ++j)
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
          float2* const at_rc = reinterpret_cast<float2*>(dq_buf + (r + 8 * hh) * Cfg::DQ_PITCH + (c + 8 * j) * 4);
          float2 v = make_float2(acc_q[4 * j + 2 * hh], acc_q[4 * j + 2 * hh + 1]);
          if (kSum && wg == 1) {
            const float2 w0 = *at_rc;
            v = make_float2(w0.x + v.x, w0.y + v.y);
          }
          *at_rc = v;
        }
      if (kSum && wg == 0) named_bar_arrive(2, THREADS);
      fence_proxy_async_shared();  // the stores -> the bulk reductions' reads
      mbar_arrive(bar_full + 8 * buf);
    } else {
      // Into the fp32 accumulator by float4 atomics (red.global.add.v4.f32, sm_90): half the
      // atomic operations of the float2 pairs the fragment holds (this tile's dQ is 32 KB of
      // atomics a block, the whole card's about 4 GB at b4 h16 s4096 d128). A thread holds
      // columns 8j + 2 t4, +1 of rows g and g + 8; lanes t4 and t4 ^ 1 trade a pair, so the even
      // lane adds columns 8j + 2 t4 .. +3 of row g and the odd one columns 8j + 2 (t4 - 1) .. +3
      // of row g + 8: 16-byte aligned (head_dim and c0 are multiples of 64). At d64 both
      // warpgroups add to every element, each over its own 64 keys.
      const int c0 = D == 128 ? 64 * wg : 0;
      const bool odd = t4 & 1;
      const int i = m0 + 16 * (warp % 4) + g + (odd ? 8 : 0);
      float* dst = a.dq_accum + (int64_t{b} * a.seq_q + i) * q_stride + int64_t{h} * D + c0 + 2 * (t4 & 2);
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const float* f = acc_q + 4 * j;  // f[0], f[1]: row g; f[2], f[3]: row g + 8
        const float give0 = odd ? f[0] : f[2], give1 = odd ? f[1] : f[3];
        const float got0 = __shfl_xor_sync(0xffffffffu, give0, 1), got1 = __shfl_xor_sync(0xffffffffu, give1, 1);
        const float4 add = odd ? make_float4(got0, got1, f[2], f[3]) : make_float4(f[0], f[1], got0, got1);
        if (i < a.seq_q) atomicAdd(reinterpret_cast<float4*>(dst + 8 * j), add);
      }
    }
  }
  cp_async_wait<0>();

  // dK (times scale) and dV of the thread's keys: rows n0 + key_l (+ 8), columns 8j + 2 t4.
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    const int j = n0 + key_l + 8 * hh;
    if (j >= a.seq_k) continue;
    const int64_t row = (int64_t{b} * a.seq_k + j) * kv_stride + int64_t{kvh} * D;
#pragma unroll
    for (int jt = 0; jt < D / 8; ++jt) {
      const int c = 8 * jt + 2 * t4;
      *reinterpret_cast<uint32_t*>(static_cast<T*>(a.dk) + row + c) =
          pack2<T>(a.scale * acc_dk[4 * jt + 2 * hh], a.scale * acc_dk[4 * jt + 2 * hh + 1]);
      *reinterpret_cast<uint32_t*>(static_cast<T*>(a.dv) + row + c) =
          pack2<T>(acc_dv[4 * jt + 2 * hh], acc_dv[4 * jt + 2 * hh + 1]);
    }
  }
#else
  __trap();  // built without sm_90a: supports() refuses other cards
#endif
}

template <class T, class Cfg, bool MASKED, bool DETERMINISTIC, bool WRITER>
void launch_wgmma_kernel(const Args& a, int64_t batch, cudaStream_t stream, const char* name) {
  const auto kernel = flash_wgmma_bwd_kernel<T, Cfg, MASKED, DETERMINISTIC, WRITER>;
  constexpr int smem = WRITER ? Cfg::SMEM_WRITER : Cfg::SMEM_BYTES;
  static const cudaError_t opt_in = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  check_cuda(opt_in, name);
  kernel<<<flash::grid_blocks(a, batch, Cfg::Bc), WRITER ? Cfg::THREADS + 128 : Cfg::THREADS, smem, stream>>>(a);
  check_launch(name);
}

inline int smem_for(int64_t head_dim, bool writer) {
  return head_dim == 64 ? (writer ? WgConfig<64>::SMEM_WRITER : WgConfig<64>::SMEM_BYTES)
                        : (writer ? WgConfig<128>::SMEM_WRITER : WgConfig<128>::SMEM_BYTES);
}

// The whole backward: preprocess (D, the dQ accumulator zeroed; DETERMINISTIC: the turn
// counters zeroed), the main kernel, dQ converted.
template <bool DETERMINISTIC, bool WRITER>
void run(const BackwardParams& p, const LaunchContext& ctx, const char* kName) {
  const flash::Workspace w = flash::workspace_of(p, DETERMINISTIC);
  const int sm_count = ctx.caps ? ctx.caps->sm_count : 0;
  Args a = flash::args_of(p, static_cast<char*>(ctx.workspace), w, WgConfig<128>::Bc, sm_count);
  a.rotated = rotated_turns(DETERMINISTIC, a.lo_reach, a.hi_reach, a.seq_q, a.seq_k,
                            ceil_div(p.seq_k, WgConfig<128>::Bc), sm_count);
  float* d = static_cast<float*>(ctx.workspace);  // D: the workspace's first part (args_of)
  with_16bit(p.dtype, kName, [&](auto tag) {
    using T = decltype(tag);
    launch_preprocess(static_cast<const T*>(p.o), static_cast<const T*>(p.d_o), d, a.dq_accum, p.batch, p.seq_q,
                      p.heads, a.head_dim, ctx.stream);
    check_launch(kName);
    if (DETERMINISTIC) check_cuda(cudaMemsetAsync(a.turns, 0, w.turns, ctx.stream), kName);
    with_head_dim_class<64, 128>(p.head_dim, [&](auto dim) {
      using Cfg = WgConfig<decltype(dim)::value>;
      with_bool(flash::is_masked(p),
                [&](auto masked) { launch_wgmma_kernel<T, Cfg, masked, DETERMINISTIC, WRITER>(a, p.batch, ctx.stream, kName); });
    });
    launch_dq_convert(a.dq_accum, static_cast<T*>(p.dq), p.batch * p.seq_q * p.heads * p.head_dim, p.score.scale,
                      ctx.stream);
    check_launch(kName);
  });
}

inline std::string supports(const BackwardParams& p, const DeviceCaps& caps, bool writer) {
  if (p.dtype != DType::fp16 && p.dtype != DType::bf16) return "fp16/bf16 only (wgmma on 16-bit inputs)";
  if (caps.cc_major != 9) return "needs sm_90 (wgmma; the binary's sm_90a build)";
  if (p.batch < 1 || p.heads < 1 || p.kv_heads < 1 || p.seq_q < 1 || p.seq_k < 1)
    return "batch, heads, kv_heads, seq_q and seq_k must be >= 1";
  if (p.heads % p.kv_heads != 0) return "heads must be a multiple of kv_heads";
  if (ceil_div(p.seq_k, WgConfig<128>::Bc) * p.kv_heads * p.batch >= (int64_t{1} << 31))
    return "key blocks x kv_heads x batch must be < 2^31 (the 1-D grid)";
  if (p.head_dim == 256)
    return "head_dim 256: dK and dV of a warpgroup's 64 keys would need 2 x 128 fp32 registers a thread besides "
           "Sᵀ and dPᵀ (the naive rung takes it)";
  if (p.head_dim != 64 && p.head_dim != 128) return "head_dim 64 or 128 only (flash_mma takes multiples of 8 to 128)";
  if (const std::string r = flash::index_reason(p); !r.empty()) return r;
  const int smem = smem_for(p.head_dim, writer);
  if (caps.smem_per_block_optin < static_cast<std::size_t>(smem))
    return "needs " + std::to_string(smem / 1024) + " KB of shared memory per block";
  return {};
}

}  // namespace
}  // namespace attnbench::backward_impl
