// attention rung 6, flash_ws: FlashAttention-3's forward design on Hopper (sm_90a): warp
// specialization, TMA, an mbarrier pipeline, register reallocation, ping-pong warpgroups and
// softmax overlapped with the next tile's products. fp16/bf16, head_dim 64, 128 and 256, fp32
// scores, statistics and accumulators.
//
// Design (what rung 5, flash_wgmma, does not have; its notes explain the wgmma fragments):
//   - Persistent blocks, one per SM, of three or four warpgroups. Warpgroup 0 is the producer:
//     after giving back its registers (setmaxnreg) one thread claims work tiles (query block,
//     head, batch; see Schedule) and issues every copy as TMA tensor-map bulk copies (a tile's
//     Q, then each key tile's K and V) into a STAGES-deep ring of buffers, each buffer with a
//     "full" mbarrier (the copy's bytes land) and an "empty" one (every consumer is done
//     with it). The next tile's Q and first K and V load while the consumers finish a tile.
//   - The other warpgroups are the consumers, two (128 query rows a tile) or three (192 at
//     d64 without masks; see consumers_for): each owns 64 of the tile's rows and walks the
//     same key tiles.
//   - Intra-warpgroup overlap: at key tile n a consumer issues S_n = Q K_nᵀ and O += P_{n-1}
//     V_{n-1} back to back, waits only for S_n, and computes tile n's masks and exponentials
//     while the tensor cores still run the P V product; the rescale of O waits for that product.
//   - Ping-pong: named barriers let the consumers issue their products in turn, round the
//     ring, so that one warpgroup's softmax runs under the others' products.
//   - Half key tiles (head_dim 128 under the causal mask or the reaches): a warpgroup whose
//     rows see none of its last key tile's upper 64 keys runs that tile on 64 (kHalves).
//   - RoPE (head_dim 64 and 128, plain or causal): a pass turns the keys into the workspace
//     before the kernel, and each consumer turns its query rows in shared memory.
//   - fp8 e4m3 inputs (head_dim 128, plain or causal), FlashAttention-3's fp8 path: S = Q Kᵀ
//     in m64n128k32 e4m3 steps; P rounded to e4m3 in registers; 8-bit wgmma reads B only
//     K-major, so a pass first writes V transposed, [kv head][dim][keys], with each 32 keys in
//     the order P's register fragment holds them (no shuffles of P); bf16 output.
// Not here (supports() says so): block-sparse masks, RoPE with the other options (the unfused
// baseline flash_ws_rope_first turns Q and K first), other head_dims, other cards.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>
#include <type_traits>

#include "kernels/attention/flash_args.cuh"
#include "kernels/attention/rungs.hpp"
#include "kernels/attention/wgmma_rows.cuh"
#include "kernels/common/copy.cuh"
#include "kernels/common/dispatch.cuh"
#include "kernels/common/rope.cuh"
#include "kernels/common/softmax_math.cuh"
#include "kernels/common/storage.cuh"
#include "kernels/common/tma.cuh"
#include "kernels/common/wgmma.cuh"

namespace attnbench::attention_impl {
namespace {

// Named barriers: consumer w's turn to issue its products is barrier 1 + w; each turn's
// barrier joins two warpgroups, the one whose turn it is and the one before it. Then, past
// the turns, barrier 1 + consumers + w: consumer w's own 128 threads, its rows turned (RoPE).
constexpr int SCHED_BAR = 1, TURN_THREADS = 256;

// The tiling of each head_dim: key tiles of BC rows, a ring of STAGES K and V buffers. Tiles
// are [D / 64 column blocks][rows][128 bytes] in the 128-byte swizzle, as TMA writes a box of
// 64 dims x rows; registers per consumer thread: S (BC / 2), P (BC / 4), O (D / 2). kWide: 176
// keys at d128 and 80 at d256, FlashAttention-3's shapes, 3-6% faster than 128 and 64 without
// masks (bench notes run 109). Under the causal mask, whose diagonal tiles waste more of a
// wide tile, 80 keys still beat 64 at d256 (0.90-0.98x the time, run 118); 176 keys at d128
// measured the same as 128 at seq 4096 and spilled with soft-capping (runs 118-119). d256 holds
// S 40 + P 20 + O 128 registers. fp8 (EB = 1 byte an element): d128 rows are one column block,
// and V's tile, transposed, is [D rows][BC bytes], as large as K's with BC = D = 128.
//
// Consumers: two warpgroups of 64 query rows each, or three (FlashAttention-3's 192-row tiles
// at d64). With two, one warpgroup's softmax must fit under the other's products; at d64 a
// 128-key tile's products take half as long as at d128, and the tensor cores waited: three
// took 0.94x the time of two without masks. Not under the causal mask (1.14x: a 192-row
// tile's diagonal wastes more), nor in fp8 (1.26x: its S and O spilled in 160 registers), nor
// with the reach masks (spills); bench notes runs 165-167.
// Registers per thread after setmaxnreg: the block is launched with 65536 / THREADS (rounded
// down to 8), and the warpgroups can only trade what it was given (a request beyond that total
// waits forever). The producer's tile loop needs 40 to run unspilled, 32 at d64.
constexpr int consumers_for(int d, int element_bytes, bool causal, bool reach) {
  return d == 64 && element_bytes == 2 && !causal && !reach ? 3 : 2;
}

template <int D, bool kWide, int EB = 2, int kConsumers = 2>
struct Tiling {
  static constexpr int BC = D == 256 ? (kWide ? 80 : 64) : D == 128 && kWide ? 176 : 128;
  static constexpr int STAGES = D == 256 || kWide ? 2 : 3;       // d128 narrow: 3 stages 3-4% over 2 (run 105)
  static constexpr int CONSUMERS = kConsumers;
  static constexpr int BR = 64 * CONSUMERS, THREADS = 128 * (CONSUMERS + 1), CONSUMER_THREADS = 128 * CONSUMERS;
  static constexpr int PRODUCER_REGS = CONSUMERS == 2 ? 40 : 32, CONSUMER_REGS = CONSUMERS == 2 ? 232 : 160;
  static_assert(128 * PRODUCER_REGS + CONSUMER_THREADS * CONSUMER_REGS <= THREADS * (65536 / THREADS / 8 * 8),
                "more registers than launched");
  static constexpr int EPB = 128 / EB;                           // elements of a row in one column block
  static constexpr int Q_BLOCK = BR * 128, KV_BLOCK = BC * 128;  // bytes of one column block
  static constexpr int Q_BYTES = (D / EPB) * Q_BLOCK, KV_BYTES = (D / EPB) * KV_BLOCK;
  static_assert(EB == 2 || (D == 128 && BC == 128), "fp8: head_dim 128, key tiles of 128");
  static constexpr int SMEM = Q_BYTES + 2 * STAGES * KV_BYTES + 1024;  // + slack for 1024-byte atoms
};

// The persistent schedule: one block per SM takes work tiles (query block, head, batch) in
// order, tile blockIdx.x first and then the next unclaimed one from a counter in global
// memory, as a block finishes its loads. The order has query blocks fastest, so that the
// tiles in flight share their heads' K and V in L2, and causal query blocks reversed, the
// longest (the last query rows) first, so that short tiles fill the end. Claiming tiles as
// blocks free up keeps the tiles in flight together when their costs differ (a fixed stride
// of tiles per block let causal blocks drift over many heads at once: 1.4-1.6x slower at
// seq 16384, bench notes run 105).
struct Schedule {
  int m_blocks, heads;
  int tiles;     // m_blocks * heads * batch (supports() keeps it below 2^31)
  int* claimed;  // tiles claimed past the first gridDim.x; zeroed before each launch
};

template <int BR, bool kCausal>
__device__ __forceinline__ void work_tile(const Schedule& w, int t, int& q0, int& h, int& b) {
  const int bh = t / w.m_blocks, mb = t - bh * w.m_blocks;
  q0 = (kCausal ? w.m_blocks - 1 - mb : mb) * BR;
  h = bh % w.heads;
  b = bh / w.heads;
}

// Shared memory: Q, then STAGES K buffers, then STAGES V buffers; the mbarriers apart.
template <int STAGES>
struct Bars {
  uint64_t tile_full[2], tile_empty[2];  // the producer hands each work tile's index to the consumers
  uint64_t q_full, q_empty, k_full[STAGES], k_empty[STAGES], v_full[STAGES], v_empty[STAGES];
};

// Wide key tiles at d256, and at d128 where no causal mask cuts them (FA3's choices). Not
// under a window or ALiBi (not measured wide), nor at d64 (FA3's 128 there too), nor with
// soft-capping at d128: its two special-function ops a score kept 176 keys 3% slower than
// 128 (bench notes run 171).
template <int D, bool kCausal, bool kCap, bool kReach>
constexpr bool kWideTiles = !kReach && (D == 256 || (D == 128 && !kCausal && !kCap));

// The keys of a key tile whose S fragment (m64nN: N / 2 floats a thread) has type A (an array
// reference, as the consumer's steps take it).
template <class A>
constexpr int kKeysOf = 2 * static_cast<int>(std::extent_v<std::remove_cv_t<std::remove_reference_t<A>>>);

template <class T, int D, bool kCausal, bool kCap, bool kReach>
using TilingOf = Tiling<D, !kIsFp8<T> && kWideTiles<D, kCausal, kCap, kReach>, sizeof(T),
                        consumers_for(D, sizeof(T), kCausal, kReach)>;

// kRope: each consumer turns its 64 query rows in shared memory once their TMA copy lands
// (the keys come turned by a pass before the kernel, as flash_mma's do).
template <class T, int D, bool kCausal, bool kCap, bool kReach, bool kRope,
          class L = TilingOf<T, D, kCausal, kCap, kReach>>
__global__ __launch_bounds__(L::THREADS, 1) void flash_ws_kernel(const __grid_constant__ Args a, const Schedule w,
                                                                 const __grid_constant__ CUtensorMap tq,
                                                                 const __grid_constant__ CUtensorMap tk,
                                                                 const __grid_constant__ CUtensorMap tv) {
#if !defined(__CUDA_ARCH__) || defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr bool kFp8 = kIsFp8<T>;
  constexpr int BC = L::BC, STAGES = L::STAGES, BR = L::BR, CONSUMERS = L::CONSUMERS;
  constexpr int CONSUMER_THREADS = L::CONSUMER_THREADS, ROPE_BAR = SCHED_BAR + CONSUMERS;
  extern __shared__ unsigned char smem_raw[];
  __shared__ Bars<STAGES> bars;
  __shared__ int tile_slot[2];
  const uint32_t sq = (smem_addr(smem_raw) + 1023u) & ~1023u;
  const uint32_t sk = sq + L::Q_BYTES, sv = sk + STAGES * L::KV_BYTES;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  auto bar = [](const uint64_t& x) { return smem_addr(&x); };
  if (tid == 0) {
    for (int s = 0; s < 2; ++s) {
      mbar_init(bar(bars.tile_full[s]), 1);
      mbar_init(bar(bars.tile_empty[s]), CONSUMER_THREADS);
    }
    mbar_init(bar(bars.q_full), 1);
    mbar_init(bar(bars.q_empty), CONSUMER_THREADS);
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(bar(bars.k_full[s]), 1);
      mbar_init(bar(bars.v_full[s]), 1);
      mbar_init(bar(bars.k_empty[s]), CONSUMER_THREADS);
      mbar_init(bar(bars.v_empty[s]), CONSUMER_THREADS);
    }
  }
  __syncthreads();

  // Both sides count the query tiles (qn) and key tiles (it) that went through the buffers:
  // buffer it % STAGES, its use (it / STAGES) & 1 is the phase parity; a fresh barrier passes
  // parity 1, so the producer's first waits on "empty" return at once. A work tile whose rows
  // see no key moves nothing.
  if (warp < 4) {  // ---- producer warpgroup: one thread issues every copy ----
    setmaxnreg_dec<L::PRODUCER_REGS>();
    if (warp == 0 && lane == 0) {
      tma_prefetch_map(tq);
      tma_prefetch_map(tk);
      tma_prefetch_map(tv);
      int it = 0, qn = 0;
      for (int t = blockIdx.x, j = 0;; ++j) {
        // Hand tile t (-1: none left) to the consumers through a slot of two.
        mbar_wait(bar(bars.tile_empty[j & 1]), ((j >> 1) & 1) ^ 1);
        tile_slot[j & 1] = t < w.tiles ? t : -1;
        mbar_arrive(bar(bars.tile_full[j & 1]));
        if (t >= w.tiles) break;
        int q0, h, b, n_begin, n_end;
        work_tile<BR, kCausal>(w, t, q0, h, b);
        visible_key_tiles<BR, BC, kCausal, kReach>(a, q0, n_begin, n_end);
        if (n_end != n_begin) {
          const int kvh = static_cast<int>((static_cast<uint64_t>(h) * a.group_rcp) >> 32);
          // The next tile's Q as soon as the consumers' last S of this one is done: its load runs
          // under their last P V and their stores.
          mbar_wait(bar(bars.q_empty), (qn++ & 1) ^ 1);
          mbar_expect_tx(bar(bars.q_full), L::Q_BYTES);
          for (int c = 0; c < D / L::EPB; ++c)
            tma_load_4d(sq + c * L::Q_BLOCK, tq, L::EPB * c, q0, h, b, bar(bars.q_full));
          for (int n = n_begin; n < n_end; ++n, ++it) {
            const int s = it % STAGES, parity = ((it / STAGES) & 1) ^ 1;
            mbar_wait(bar(bars.k_empty[s]), parity);
            mbar_expect_tx(bar(bars.k_full[s]), L::KV_BYTES);
            for (int c = 0; c < D / L::EPB; ++c)
              tma_load_4d(sk + s * L::KV_BYTES + c * L::KV_BLOCK, tk, L::EPB * c, n * BC, kvh, b, bar(bars.k_full[s]));
            mbar_wait(bar(bars.v_empty[s]), parity);
            mbar_expect_tx(bar(bars.v_full[s]), L::KV_BYTES);
            if constexpr (kFp8)  // the transposed V: D rows of this tile's BC keys
              tma_load_4d(sv + s * L::KV_BYTES, tv, n * BC, 0, kvh, b, bar(bars.v_full[s]));
            else
              for (int c = 0; c < D / 64; ++c)
                tma_load_4d(sv + s * L::KV_BYTES + c * L::KV_BLOCK, tv, 64 * c, n * BC, kvh, b, bar(bars.v_full[s]));
          }
        }
        // The next tile is claimed once this one's last copy is issued, a few key tiles before
        // the consumers finish it.
        t = static_cast<int>(gridDim.x) + atomicAdd(w.claimed, 1);
      }
    }
    return;
  }

  // ---- consumer warpgroups ----
  setmaxnreg_inc<L::CONSUMER_REGS>();
  const int wg = warp / 4 - 1, t4 = lane % 4;
  const uint32_t q_wg = sq + wg * 64 * 128;  // this warpgroup's 64 rows in each column block
  float o[D / 2], s[BC / 2], m[2], l[2];
  uint32_t p[BC / 16][4];

  // Ping-pong: wait for this warpgroup's turn, issue, hand the turn to the next one round the
  // ring, in one chain over all of the block's work tiles (every consumer takes the same number
  // of turns a tile). Consumer 0 takes its very first turn unasked and waits once more at the
  // end for the last consumer's last hand-over, so that every barrier's arrivals and waits
  // balance and no warpgroup hands over twice before the next has taken the turn.
  bool issued = false;
  auto turn_begin = [&] {
    if (issued || wg != 0) named_bar_sync(SCHED_BAR + wg, TURN_THREADS);
    issued = true;
  };
  // (wg ^ 1 with two consumers: the same as the ring's next, and their code as before.)
  auto turn_end = [&] { named_bar_arrive(SCHED_BAR + (CONSUMERS == 2 ? wg ^ 1 : (wg + 1) % CONSUMERS), TURN_THREADS); };
  // Half key tiles (head_dim 128, 16-bit, under the causal mask or the reaches): a warpgroup
  // whose rows see none of a work tile's last 64 keys (the first warpgroup on the causal
  // diagonal) runs that tile's products, masks and exponentials on its first 64 keys only:
  // 3% less time at b16 s1024 causal, 1-2% at s4096. At d64 and in fp8, whose warpgroups wait
  // on their own chains of products and exponentials more than on the tensor pipe, the same
  // cost 1.5-2.5% (bench notes run 189). The steps below take the tile's S fragment `acc`,
  // whose size gives the keys they run (NK): with_scores(half, f) calls f with S (BC keys) or,
  // for a half, a fragment of BC / 2 keys of its own. Each branch on `half` holds a whole
  // stage, from the products' issue to the wait for them, on a fragment of its own: otherwise
  // ptxas serializes every wgmma of the kernel (registers defined two ways while a wgmma runs).
  constexpr bool kHalves = BC == 128 && D == 128 && !kFp8 && (kCausal || kReach);
  auto with_scores = [&](bool half, auto&& f) {
    if constexpr (kHalves)
      if (half) {
        float sh[BC / 4];
        return f(sh);
      }
    return f(s);
  };
  // S = Q K_itᵀ (k step ks: column block ks / 4, 32 bytes a step into its rows, 16 elements or
  // fp8's 32; both K-major).
  auto issue_s = [&](auto& acc, int it) {
    constexpr int NK = kKeysOf<decltype(acc)>;
    const int st = it % STAGES;
    mbar_wait(bar(bars.k_full[st]), (it / STAGES) & 1);
    const uint32_t kt = sk + st * L::KV_BYTES;
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < D * static_cast<int>(sizeof(T)) / 32; ++ks) {
      const uint32_t step = (ks % 4) * 32;
      wgmma_ss_kmajor<T, NK>(acc, wgmma_desc_sw128(q_wg + (ks / 4) * L::Q_BLOCK + step),
                             wgmma_desc_sw128(kt + (ks / 4) * L::KV_BLOCK + step), ks);
    }
    wgmma_commit();
  };
  // O += P V_it (k step kk: keys 16 kk.., 16 rows of 128 bytes into V's column blocks; V is
  // N-major, a column block of BC rows between its 64-dim blocks).
  auto issue_pv = [&](auto& acc, int it) {  // over the keys of acc's tile
    constexpr int NK = kKeysOf<decltype(acc)>;
    const int st = it % STAGES;
    mbar_wait(bar(bars.v_full[st]), (it / STAGES) & 1);
    const uint32_t vt = sv + st * L::KV_BYTES;
    wgmma_fence();
    if constexpr (kFp8) {  // V transposed: K-major, 32 keys (bytes) a step
#pragma unroll
      for (int kk = 0; kk < NK / 32; ++kk) wgmma_m64n128k32_rs_e4m3(o, p[kk], wgmma_desc_sw128(vt + kk * 32));
    } else {
#pragma unroll
      for (int kk = 0; kk < NK / 16; ++kk)
        wgmma_rs_nmajor<T, D>(o, p[kk], wgmma_desc_sw128(vt + kk * 16 * 128, L::KV_BLOCK));
    }
    wgmma_commit();
  };
  auto release = [&](const uint64_t& empty) { mbar_arrive(bar(empty)); };

  int it = 0, qn = 0;
  for (int j = 0;; ++j) {
    mbar_wait(bar(bars.tile_full[j & 1]), (j >> 1) & 1);
    const int t = tile_slot[j & 1];
    mbar_arrive(bar(bars.tile_empty[j & 1]));
    if (t < 0) break;
    int q0, h, b, n_begin, n_end;
    work_tile<BR, kCausal>(w, t, q0, h, b);
    visible_key_tiles<BR, BC, kCausal, kReach>(a, q0, n_begin, n_end);
    const int tiles = n_end - n_begin;
    const int row = q0 + wg * 64 + 16 * (warp % 4) + lane / 4;  // and row + 8
    // The last key this warpgroup's rows see: in the first half of the last key tile, that tile
    // is a half one.
    int last_key = a.seq_k - 1;
    if constexpr (kHalves) {
      const int last_pos = min(q0 + wg * 64 + 64, a.seq_q) - 1 + a.q_offset;
      last_key = min(last_key, kReach ? last_pos + a.hi_reach : last_pos);
    }
    // (Read from lane 0, so that the compiler knows the branch on it is warp-uniform: without,
    // ptxas serializes every wgmma of the kernel around the divergent path it assumes.)
    const bool half_last = kHalves && __shfl_sync(0xffffffffu, last_key < (n_end - 1) * BC + BC / 2, 0);
#pragma unroll
    for (int i = 0; i < D / 2; ++i) o[i] = 0.f;
    m[0] = m[1] = -INFINITY;
    l[0] = l[1] = 0.f;
    // Tile n's masks, then the lazy online softmax: s becomes exp2(s · scale_log2 - m), l the
    // new sums; when m moved (the return), corr is what O must be scaled by. Then P (16-bit):
    // the accumulator fragment of n8 tiles 2 kk and 2 kk + 1 is the A fragment of k step kk.
    auto softmax = [&](auto& acc, int n, float(&corr)[2]) {
      constexpr int NK = kKeysOf<decltype(acc)>;
      mask_scores<BR, NK, kCausal, kCap, kReach>(acc, a, h, q0, n * BC, row, t4);
      float base[2];
      const bool moved = lazy_row_max<NK>(acc, a.scale_log2, m, l, base, corr);
#pragma unroll
      for (int i = 0; i < NK / 2; ++i) {
        const int r = (i % 4) / 2;
        acc[i] = exp2_approx(fmaf(acc[i], a.scale_log2, -base[r]));
        l[r] += acc[i];
      }
      return moved;
    };
    // fp8: k step kk (32 keys, n8 tiles 4 kk .. 4 kk + 3) takes this thread's two columns of
    // each tile in order, row by row: its A register 0 holds keys 2 t4, 2 t4 + 1, 8 + 2 t4,
    // 9 + 2 t4 of row r in the places of keys 4 t4 .. 4 t4 + 3, and so on. The transposed V
    // has its keys in that same order (fp8_transpose_v), so the sum over keys is unchanged.
    auto pack_p = [&](const auto& acc) {
      constexpr int NK = kKeysOf<decltype(acc)>;
      if constexpr (kFp8) {
#pragma unroll
        for (int kk = 0; kk < NK / 32; ++kk)
#pragma unroll
          for (int w4 = 0; w4 < 4; ++w4) {
            const int i = 16 * kk + 8 * (w4 / 2) + 2 * (w4 % 2);  // tile 4 kk + 2 (w4 / 2), row half w4 % 2
            p[kk][w4] = pack4_e4m3(acc[i], acc[i + 1], acc[i + 4], acc[i + 5]);
          }
      } else {
#pragma unroll
        for (int kk = 0; kk < NK / 16; ++kk)
#pragma unroll
          for (int w4 = 0; w4 < 4; ++w4) p[kk][w4] = pack2<T>(acc[8 * kk + 2 * w4], acc[8 * kk + 2 * w4 + 1]);
      }
    };

    // A warpgroup whose 64 rows all lie past seq_q (the spare ones of the last query block)
    // computes nothing: it takes its turns and hands each buffer back once it has landed, so
    // that every barrier's count balances. Only with three consumers: with two, the branch
    // alone made the d128 kernel 3-4% slower (bench notes run 165).
    if constexpr (CONSUMERS == 3) {
      if (tiles > 0 && q0 + wg * 64 >= a.seq_q) {
        mbar_wait(bar(bars.q_full), qn++ & 1);
        for (int n = 0; n < tiles; ++n) {
          turn_begin();
          turn_end();
          const int st = (it + n) % STAGES, parity = ((it + n) / STAGES) & 1;
          mbar_wait(bar(bars.k_full[st]), parity);
          release(bars.k_empty[st]);
          if (n == tiles - 1) release(bars.q_empty);
          mbar_wait(bar(bars.v_full[st]), parity);
          release(bars.v_empty[st]);
        }
        turn_begin();  // the turn of the last P V
        turn_end();
        it += tiles;
        continue;
      }
    }
    if (tiles > 0) {
      mbar_wait(bar(bars.q_full), qn++ & 1);
      if constexpr (kRope) {  // rows q0 + 64 wg + r at positions + q_offset; 16-byte chunk c of a row
        const int first = q0 + wg * 64;
        rope_shared_rows<T, 64, 128, 4>(
            [q_wg](int r, int c) { return q_wg + (c >> 3) * L::Q_BLOCK + r * 128 + (((c & 7) ^ (r & 7)) << 4); },
            a.seq_q - first, [pos0 = first + a.q_offset](int r) { return pos0 + r; }, a.rope, tid % 128);
        fence_proxy_async_shared();  // the turned rows -> the S products' reads
        named_bar_sync(ROPE_BAR + wg, 128);
      }
      float corr[2];
      with_scores(half_last && tiles == 1, [&](auto& acc) {  // the first key tile: S alone
        turn_begin();
        issue_s(acc, it);
        turn_end();
        wgmma_wait<0>();
        fence_operands(acc);
        release(bars.k_empty[it % STAGES]);
        if (tiles == 1) release(bars.q_empty);
        softmax(acc, n_begin, corr);
        pack_p(acc);
      });
      // Key tile j's S beside tile j - 1's P V (whole: only the last tile is ever a half).
      auto step = [&](auto& acc, int j) {
        turn_begin();
        issue_s(acc, it + j);
        issue_pv(s, it + j - 1);
        turn_end();
        wgmma_wait<1>();  // S; P V may still run
        fence_operands(acc);
        release(bars.k_empty[(it + j) % STAGES]);
        if (j == tiles - 1) release(bars.q_empty);
        const bool moved = softmax(acc, n_begin + j, corr);
        wgmma_wait<0>();
        fence_operands(o);
        release(bars.v_empty[(it + j - 1) % STAGES]);
        if (moved)
#pragma unroll
          for (int i = 0; i < D / 2; ++i) o[i] *= corr[(i % 4) / 2];
        pack_p(acc);
      };
      if constexpr (kHalves) {
        for (int j = 1; j < tiles - 1; ++j) step(s, j);
        if (tiles > 1) with_scores(half_last, [&](auto& acc) { step(acc, tiles - 1); });
      } else {
        for (int j = 1; j < tiles; ++j) step(s, j);
      }
      with_scores(half_last, [&](auto& acc) {  // the last P V, over the keys of the last S
        turn_begin();
        issue_pv(acc, it + tiles - 1);
        turn_end();
        wgmma_wait<0>();
        fence_operands(o);
      });
      release(bars.v_empty[(it + tiles - 1) % STAGES]);
      it += tiles;
    }
    using TO = std::conditional_t<kFp8, __nv_bfloat16, T>;  // fp8 writes bf16
    TO* out = static_cast<TO*>(a.o) + int64_t{b} * a.o_batch_stride + int64_t{h} * D;
    const float sink = sink_log2(a.score.sinks, h);
    if constexpr (kFp8)
      store_rows<TO, D>(o, l, m, sink, out, a.q_row_stride, row, a.seq_q, t4, a.descale_v);
    else
      store_rows<TO, D>(o, l, m, sink, out, a.q_row_stride, row, a.seq_q, t4);
  }
  if (issued && wg == 0) named_bar_sync(SCHED_BAR, TURN_THREADS);  // the last consumer's last hand-over
#else
  __trap();  // built without sm_90a: supports() refuses other cards
#endif
}

// Shared memory a head_dim's kernels may ask for: its larger tiling, the deepest ring's
// barriers and the tile slots.
template <int D>
constexpr std::size_t smem_of() {
  constexpr int consumers = consumers_for(D, 2, false, false);  // the most a head_dim takes
  return std::max({Tiling<D, false>::SMEM, Tiling<D, true>::SMEM, Tiling<D, false, 2, consumers>::SMEM}) +
         sizeof(Bars<3>) + 2 * sizeof(int);
}

// Window and ALiBi take the reach masks, which then carry the causal mask too; plain causal
// attention does not.
bool reaches(const AttentionParams& p) { return effective_window(p.window, p.seq_q, p.seq_k) > 0 || p.score.alibi; }

// Query rows of p's work tiles: 64 a consumer warpgroup.
int block_rows(const AttentionParams& p) {
  const int d = static_cast<int>(p.head_dim), bytes = static_cast<int>(dtype_bytes(p.dtype));
  return 64 * consumers_for(d, bytes, p.causal, reaches(p));
}

// Work tiles (query block, head, batch) of p.
int64_t work_tiles(const AttentionParams& p) { return ceil_div(p.seq_q, block_rows(p)) * p.heads * p.batch; }

std::string work_tiles_too_many(const AttentionParams& p) {
  return "ceil(seq_q / " + std::to_string(block_rows(p)) + ") * heads * batch must be < 2^31 (work tiles are int)";
}

// [batch, seq, heads, head_dim] as a 4-d tensor map (dims: dim, row, head, batch), boxes of
// 128 bytes of dims (64 16-bit ones, 128 fp8 ones) x rows rows of one head.
template <class T, int D>
CUtensorMap map_of(const void* base, int64_t batch, int64_t seq, int64_t heads, int64_t batch_stride, int rows) {
  constexpr uint64_t e = sizeof(T);
  const uint64_t dims[4] = {D, static_cast<uint64_t>(seq), static_cast<uint64_t>(heads), static_cast<uint64_t>(batch)};
  const uint64_t strides[3] = {static_cast<uint64_t>(heads) * D * e, D * e, static_cast<uint64_t>(batch_stride) * e};
  const uint32_t box[4] = {128 / e, static_cast<uint32_t>(rows), 1, 1};
  return make_tensor_map_sw128(base, 4, dims, strides, box, tensor_map_type<T>(), "attention/flash_ws");
}

// fp8's V, transposed: 8-bit wgmma reads its B operand K-major only, so P V needs V as
// [batch, kv_heads, head_dim, keys] (keys contiguous, padded to a multiple of 32 with zeros).
// Within each 32 keys the order is the one P's register fragment holds (pack_p): place
// 16 u + 4 c + i holds key 16 u + 2 c + i % 2 + 8 (i / 2).
int64_t padded_keys(int64_t seq_k) { return ceil_div(seq_k, 32) * 32; }

__global__ void fp8_transpose_v_kernel(const uint8_t* __restrict__ v, uint8_t* __restrict__ vt, int seq_k, int pad,
                                       int kv_heads, int64_t kv_batch_stride) {
  constexpr int D = 128;
  __shared__ uint8_t tile[32][D];  // 32 keys of one head
  const int chunk = blockIdx.x, g = blockIdx.y, b = blockIdx.z, t = threadIdx.x;  // 256 threads
  const int key = t / 8, col = (t % 8) * 16;
  const int j = chunk * 32 + key;
  uint4 x = make_uint4(0, 0, 0, 0);
  if (j < seq_k)
    x = *reinterpret_cast<const uint4*>(v + b * kv_batch_stride + (int64_t{j} * kv_heads + g) * D + col);
  *reinterpret_cast<uint4*>(&tile[key][col]) = x;
  __syncthreads();
  const int d = t / 2, half = t % 2;  // 16 places of row d
  uint32_t w[4];
#pragma unroll
  for (int c = 0; c < 4; ++c) {
    uint32_t word = 0;
#pragma unroll
    for (int i = 0; i < 4; ++i) word |= uint32_t{tile[16 * half + 2 * c + i % 2 + 8 * (i / 2)][d]} << (8 * i);
    w[c] = word;
  }
  uint8_t* dst = vt + ((int64_t{b} * kv_heads + g) * D + d) * pad + chunk * 32 + 16 * half;
  *reinterpret_cast<uint4*>(dst) = make_uint4(w[0], w[1], w[2], w[3]);
}

std::size_t fp8_vt_bytes(const AttentionParams& p) {
  return static_cast<std::size_t>(p.batch * p.kv_heads * p.head_dim * padded_keys(p.seq_k));
}

// The transposed V's map: dims (keys, dim, kv head, batch), boxes of `keys` keys x all D dims.
CUtensorMap fp8_vt_map(const void* vt, const AttentionParams& p, int keys) {
  const uint64_t pad = static_cast<uint64_t>(padded_keys(p.seq_k)), D = static_cast<uint64_t>(p.head_dim);
  const uint64_t dims[4] = {pad, D, static_cast<uint64_t>(p.kv_heads), static_cast<uint64_t>(p.batch)};
  const uint64_t strides[3] = {pad, D * pad, static_cast<uint64_t>(p.kv_heads) * D * pad};
  const uint32_t box[4] = {static_cast<uint32_t>(keys), static_cast<uint32_t>(D), 1, 1};
  return make_tensor_map_sw128(vt, 4, dims, strides, box, CU_TENSOR_MAP_DATA_TYPE_UINT8, "attention/flash_ws (fp8 V)");
}

template <class T, int D, bool kCausal, bool kCap, bool kReach = false, bool kRope = false>
void launch_kernel(const AttentionParams& p, const LaunchContext& ctx, const void* vt = nullptr) {
  using L = TilingOf<T, D, kCausal, kCap, kReach>;
  const auto k = flash_ws_kernel<T, D, kCausal, kCap, kReach, kRope>;
  static const cudaError_t opt_in = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, L::SMEM);
  check_cuda(opt_in, "attention/flash_ws");
  const CUtensorMap tq = map_of<T, D>(p.q, p.batch, p.seq_q, p.heads, p.q_batch_stride, L::BR);
  const CUtensorMap tk = map_of<T, D>(p.k, p.batch, p.seq_k, p.kv_heads, p.kv_batch_stride, L::BC);
  const CUtensorMap tv = kIsFp8<T> ? fp8_vt_map(vt, p, L::BC)
                                   : map_of<T, D>(p.v, p.batch, p.seq_k, p.kv_heads, p.kv_batch_stride, L::BC);
  Schedule w;
  w.m_blocks = static_cast<int>(ceil_div(p.seq_q, L::BR));
  w.heads = static_cast<int>(p.heads);
  w.tiles = static_cast<int>(work_tiles(p));
  int sms = ctx.caps ? ctx.caps->sm_count : 0;
  if (sms <= 0) check_cuda(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), "attention/flash_ws");
  const unsigned grid = static_cast<unsigned>(std::min(w.tiles, sms));
  w.claimed = static_cast<int*>(ctx.workspace);
  check_cuda(cudaMemsetAsync(w.claimed, 0, sizeof(int), ctx.stream), "attention/flash_ws (tile counter)");
  k<<<grid, L::THREADS, L::SMEM, ctx.stream>>>(make_args(p), w, tq, tk, tv);
  check_launch("attention/flash_ws");
}

// The one switch on head_dim, causal, soft-capping and the reach masks.
template <class T, int D>
void launch_options(const AttentionParams& p, const LaunchContext& ctx) {
  const bool cap = p.score.softcap > 0;
  if (reaches(p))  // causal is in the reaches
    return with_bool(cap, [&](auto c) { launch_kernel<T, D, false, c, true>(p, ctx); });
  if constexpr (D != 256)  // RoPE: plain and causal at head_dim 64 and 128 (supports() says so)
    if (!cap && p.rope.on())
      return with_bool(p.causal, [&](auto causal) { launch_kernel<T, D, causal, false, false, true>(p, ctx); });
  with_bool(p.causal, [&](auto causal) {
    with_bool(cap, [&](auto c) { launch_kernel<T, D, causal, c>(p, ctx); });
  });
}

template <class T>
void launch_dtype(const AttentionParams& p, const LaunchContext& ctx) {
  with_value<64, 128, 256>(static_cast<int>(p.head_dim), "attention/flash_ws", "head_dim",
                           [&](auto d) { launch_options<T, d>(p, ctx); });
}

constexpr bool claimed_head_dim(int64_t d) { return d == 64 || d == 128 || d == 256; }

}  // namespace

// RoPE: the keys are turned once by a pass into the workspace (after the tile counter), the
// queries in the kernel (kRope). fp8: V is transposed into the workspace first.
void flash_ws(const AttentionParams& p, const LaunchContext& ctx) {
  if (p.dtype == DType::fp8_e4m3) {
    void* vt = static_cast<char*>(ctx.workspace) + 256;
    const int pad = static_cast<int>(padded_keys(p.seq_k));
    fp8_transpose_v_kernel<<<dim3(static_cast<unsigned>(pad / 32), static_cast<unsigned>(p.kv_heads),
                                  static_cast<unsigned>(p.batch)),
                             256, 0, ctx.stream>>>(static_cast<const uint8_t*>(p.v), static_cast<uint8_t*>(vt),
                                                   static_cast<int>(p.seq_k), pad, static_cast<int>(p.kv_heads),
                                                   p.kv_batch_stride);
    check_launch("attention/flash_ws (fp8 V transposed)");
    return with_bool(p.causal, [&](auto causal) { launch_kernel<Fp8, 128, causal, false>(p, ctx, vt); });
  }
  AttentionParams r = p;
  if (p.rope.on()) {
    RopeRows k = rope_pass_k(p);
    k.dst = static_cast<char*>(ctx.workspace) + 256;
    rope_rows(k, p.rope, ctx.stream);
    check_launch("attention/flash_ws (rope_rows of k)");
    r.k = k.dst;
  }
  with_16bit(p.dtype, "attention/flash_ws", [&](auto tag) { launch_dtype<decltype(tag)>(r, ctx); });
}

// The tile counter, then the turned keys.
std::size_t flash_ws_workspace(const AttentionParams& p) {
  if (p.dtype == DType::fp8_e4m3) return 256 + round_up_256(fp8_vt_bytes(p));
  return 256 + (p.rope.on() ? round_up_256(rope_pass_k(p).bytes()) : 0);
}

std::string flash_ws_supports(const AttentionParams& p, const DeviceCaps& caps) {
  if (!claimed_head_dim(p.head_dim)) return "head_dim 64, 128 or 256 only (flash_mma takes every head_dim)";
  if (const std::string why = wgmma_prefill_supports(p, caps, "TMA", true); !why.empty()) return why;
  if (p.dtype == DType::fp8_e4m3) {
    if (p.head_dim != 128) return "fp8: head_dim 128 only";
    if (p.score.softcap > 0 || p.score.alibi || effective_window(p.window, p.seq_q, p.seq_k) > 0 || p.rope.on())
      return "fp8: plain or causal attention only (no softcap, ALiBi, window or RoPE)";
    if (work_tiles(p) >= INT_MAX - 1024) return work_tiles_too_many(p);
    if (p.batch > kMaxGridYZ || p.kv_heads > kMaxGridYZ) return "fp8: batch and kv_heads must be <= 65535 (V's transpose grid)";
    if (caps.smem_per_block_optin < Tiling<128, false, 1>::SMEM + sizeof(Bars<3>) + 2 * sizeof(int))
      return "needs more shared memory per block";
    return {};
  }
  if (p.rope.on()) {
    if (p.head_dim == 256 || p.score.softcap > 0 || p.score.alibi || effective_window(p.window, p.seq_q, p.seq_k) > 0)
      return "RoPE at head_dim 64 and 128 without softcap, window or ALiBi (flash_ws_rope_first runs the rest)";
    if (const std::string why = rope_in_q_load_supports(p); !why.empty()) return why;
  }
  if (work_tiles(p) >= INT_MAX - 1024) return work_tiles_too_many(p);
  const std::size_t smem = p.head_dim == 64 ? smem_of<64>() : p.head_dim == 128 ? smem_of<128>() : smem_of<256>();
  if (caps.smem_per_block_optin < smem)
    return "needs " + std::to_string((smem + 1023) / 1024) + " KB of shared memory per block";
  return {};
}

}  // namespace attnbench::attention_impl
