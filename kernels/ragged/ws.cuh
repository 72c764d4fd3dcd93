// The ragged op's Hopper kernel, shared by rung 5 (5_ws.cu: every key row copied by cp.async
// through the block table) and rung 6 (6_ws_tma.cu: whole pages by TMA): one kernel template,
// the difference one flag (kTmaPages) in the producer; the consumers are the same code. The
// design, the tiling and the measurements are in 5_ws.cu's header, rung 6's change in its own.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>

#include "kernels/attention/wgmma_rows.cuh"
#include "kernels/common/copy.cuh"
#include "kernels/common/dispatch.cuh"
#include "kernels/common/rope.cuh"
#include "kernels/common/softmax_math.cuh"
#include "kernels/common/storage.cuh"
#include "kernels/common/tma.cuh"
#include "kernels/common/wgmma.cuh"
#include "kernels/ragged/rungs.hpp"
#include "kernels/ragged/varlen.cuh"

namespace attnbench::ragged_impl {
namespace {

using attention_impl::lazy_row_max;

// 128 rows x 128 keys a tile, kWsStages stages of K and V (below). Tiles are [D / 64 column blocks][rows][128
// bytes] in the 128-byte swizzle (chunk c of row r at column block c / 8, (c % 8 ^ r % 8) x 16
// into the row). Registers: the block is launched with 65536 / 384 = 170 a thread (168 usable);
// the producer gives back down to 40, the consumers take 232 (S 64 + P 32 + O up to 64).
template <int D_, bool kFp8_, int STAGES_ = 2>
struct WsTiling {
  static constexpr int D = D_, BR = 128, BC = 128, STAGES = STAGES_, THREADS = 384;
  static constexpr int PRODUCER_REGS = 40, CONSUMER_REGS = 232;
  static constexpr int CH = D / 8;  // 16-byte chunks of a row
  static constexpr int Q_BLOCK = BR * 128, KV_BLOCK = BC * 128;
  static constexpr int Q_BYTES = (D / 64) * Q_BLOCK, KV_BYTES = (D / 64) * KV_BLOCK;
  // An fp8 cache: each K and V tile's codes land first in raw stages of their own ([K, V][BC
  // rows][D bytes], unpadded: only the thread that copied a chunk reads it back), D / 16 copies
  // of 16 codes a row; 225 KB at d128, within sm_90's 227 (+ slack for the 1024-byte atoms).
  static constexpr int RAW_BYTES = BC * D;
  static constexpr int SMEM = Q_BYTES + 2 * STAGES * KV_BYTES + 1024 + (kFp8_ ? 2 * STAGES * RAW_BYTES : 0);
  static_assert(D == 64 || D == 128, "head_dim 64 or 128");
  static_assert(BC == 128, "one producer thread looks up each key row of a tile");
  static_assert(SMEM <= 227 * 1024 - 2048, "sm_90's shared memory a block, the barriers and slots beside");
  static_assert(128 * PRODUCER_REGS + 256 * CONSUMER_REGS <= THREADS * (65536 / THREADS / 8 * 8),
                "more registers than launched");
};

template <int STAGES>
struct WsBars {
  uint64_t q_full, k_full[STAGES], k_empty[STAGES], v_full[STAGES], v_empty[STAGES];
};

// The ring's stages: three, as flash_ws' d128 ring, in 225 KB at d128. Rung 6's TMA pages: run
// 288 (H100) all-prefill 0.77 -> 0.62 ms, the serving mix 0.55 -> 0.42. Rung 5's cp.async
// producer: run 290 (H100, a build carried beside) all-prefill 0.8592 -> 0.7320 ms, the mix
// 0.6277 -> 0.5106, all-decode 0.4180 -> 0.3614 (a third stage slowed it 7-14% in run 281,
// when K and V were waited for apart). An fp8 cache keeps two: its raw stages leave no room.
// (kTmaPages: rung 6 never takes an fp8 cache.)
template <bool kTmaPages, bool kFp8 = false>
constexpr int kWsStages = kFp8 ? 2 : 3;

// A block's shared memory, the ring's and the barriers'.
template <int D, bool kFp8, int STAGES = 2>
constexpr std::size_t ws_smem() {
  return WsTiling<D, kFp8, STAGES>::SMEM + sizeof(WsBars<STAGES>);
}

// Named barriers: consumer w's turn at the tensor cores is barrier 1 + w (flash_ws' ping-pong);
// 3 + w: consumer w's own 128 threads, its rows turned (RoPE).
// 5: the producer warpgroup's own 128 threads, a tile's slots published.
constexpr int kTurnBar = 1, kTurnThreads = 256, kProducerBar = 5;

template <int BLOCK>
__device__ __forceinline__ uint32_t swizzled(int r, int c) {
  return (c >> 3) * BLOCK + r * 128 + (((c & 7) ^ (r & 7)) << 4);
}

// kTerms: soft-capping or ALiBi, a term on every score (every tile takes the mask path).
// Cache: the cache's elements, T or Fp8.
template <class T, class Cache, int D, bool kTerms, bool kTmaPages>
__global__ __launch_bounds__(384, 1) void ragged_ws_kernel(const __grid_constant__ RaggedParams p, int group,
                                                           int per_tile, Splits sp,
                                                           const __grid_constant__ CUtensorMap tk,
                                                           const __grid_constant__ CUtensorMap tv) {
#if !defined(__CUDA_ARCH__) || defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr bool kFp8 = kIsFp8<Cache>;
  static_assert(!(kTmaPages && kFp8), "rung 6 copies a 16-bit cache's pages as they are");
  using L = WsTiling<D, kFp8, kWsStages<kTmaPages, kFp8>>;
  constexpr int BC = L::BC, STAGES = L::STAGES, CH = L::CH;
  extern __shared__ unsigned char smem_raw[];
  __shared__ WsBars<STAGES> bars;
  __shared__ int slots[2][BC];  // the producer's look-ups of key rows, a tile ahead
  const uint32_t sq = (smem_addr(smem_raw) + 1023u) & ~1023u;
  const uint32_t sk = sq + L::Q_BYTES, sv = sk + STAGES * L::KV_BYTES;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  // Row tiles in reverse launch order: a sequence's last tile (under a causal mask the one that
  // reads the most keys) starts first and its short first tiles fill the end of the grid, as
  // flash_mma's and flash_ws' causal query blocks do (run 282: all-prefill's tail). Run 283 saw
  // no change from it on all-prefill (0.7641 ms against 0.7639): the tail is not what costs there.
  // A row tile's splits are adjacent in the grid (blockIdx.x = reversed row tile x max_splits +
  // split): a long decode's later splits start beside its first, not after every row tile's
  // first split has been handed out (the grid's z did that: the serving mix's 32k decodes ran
  // their second halves last).
  const int kvh = blockIdx.y, x = static_cast<int>(gridDim.x / sp.max_splits - 1 - blockIdx.x / sp.max_splits);
  auto bar = [](const uint64_t& b) { return smem_addr(&b); };

  // The block's work, as rung 3 finds it (the whole block takes the same exits).
  Block w;
  if (!find_block(p, x, per_tile, w)) return;  // a number past the sequence's last tile
  const int shift = w.ctx - w.q_len;  // token t sits at position shift + t
  const int rows = w.tokens * group;
  const KeyRange kr = key_range(shift, w.t0, w.tokens, p.window);  // 64-key tiles
  const int split = static_cast<int>(blockIdx.x % sp.max_splits), splits = splits_of(kr.tiles, rows, sp);
  if (split >= splits) return;
  // This split's keys [k_lo, k_hi): 64-key tiles [split · chunk, (split + 1) · chunk), chunk even.
  const int chunk = splits > 1 ? chunk_of(rows, sp) : kr.tiles;
  const int k_lo = kr.begin + 64 * split * chunk;
  const int k_hi = min(kr.end, kr.begin + 64 * min(kr.tiles, (split + 1) * chunk));
  const int tiles = (k_hi - k_lo + BC - 1) / BC;  // >= 1
  // A row tile of at most 64 rows (a decode's or a short verification's group) is consumer 0's
  // alone: consumer 1's rows would all be past the block's, its products and softmax spent on
  // zeros and its turns a wait for consumer 0. Consumer 1 leaves; consumer 0 runs without turns
  // and alone hands stages back.
  const bool solo = rows <= 64;
  const int consumers = solo ? 128 : 256;

  if (tid == 0) {
    mbar_init(bar(bars.q_full), 128);
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(bar(bars.k_full[s]), kTmaPages ? 33 : 128);  // rung 6: warp 0's lanes and lane 0's expect_tx
      mbar_init(bar(bars.v_full[s]), kTmaPages ? 33 : 128);
      mbar_init(bar(bars.k_empty[s]), consumers);
      mbar_init(bar(bars.v_empty[s]), consumers);
    }
  }
  __syncthreads();

  if (warp < 4) {  // ---- producer warpgroup: 128 threads copy ----
    setmaxnreg_dec<L::PRODUCER_REGS>();
    const T* q = static_cast<const T*>(p.q);
    // Q: row r is token t0 + r / group, query head kvh · group + r % group; rows past the
    // block's and chunks past head_dim zero-filled. Thread t copies chunk t % CH of rows
    // t / CH + (128 / CH) i.
    {
      const int c = tid % CH;
      for (int r = tid / CH; r < L::BR; r += 128 / CH) {
        const bool ok = r < rows;
        const T* src = q + ((int64_t{w.first_q} + w.t0 + r / group) * p.heads + int64_t{kvh} * group + r % group) * D + 8 * c;
        cp_async_16(sq + swizzled<L::Q_BLOCK>(r, c), ok ? src : q, ok);
      }
      cp_async_mbar_arrive(bar(bars.q_full));
    }
    // K and V tile n: keys k_lo + BC n + r through the block table, zeros from k_hi on.
    const Cache* kc = static_cast<const Cache*>(p.k_cache);
    const Cache* vc = static_cast<const Cache*>(p.v_cache);
    const int32_t* table = p.block_tables + int64_t{w.b} * p.max_blocks_per_seq;
    const int bs = static_cast<int>(p.block_size);
    const int64_t kv_row = p.kv_heads * p.head_dim;
    // Each key row's slot in the cache (block · block_size + offset; -1 past the split's keys),
    // looked up once a tile by the one producer thread of that row (BC == 128 threads), a tile
    // ahead, into a double buffer the copies read. Before, the CH threads that copy a row each
    // divided by block_size and waited for the row's table entry, one row after the next (the
    // asm's memory clobbers keep the loads from being hoisted): run 280's profile had the
    // consumers waiting for full stages in 46% of their samples, the producer on those loads.
    // A thread's load is issued a whole tile before its value is stored (fetch, then publish).
    struct Slot {
      int page, in_page;  // page -1: past the split's keys
    };
    auto fetch = [&](int n) {
      const int j = k_lo + BC * n + tid;
      Slot sl{-1, 0};
      if (j < k_hi) sl = Slot{__ldg(table + j / bs), j % bs};
      return sl;
    };
    // Stores tile n's slots; buffer n % 2 was last read for tile n - 2, before every producer
    // thread's barrier of tile n - 1.
    auto publish = [&](int n, Slot sl) {
      slots[n % 2][tid] = sl.page < 0 ? -1 : sl.page * bs + sl.in_page;
      named_bar_sync(kProducerBar, 128);
    };
    // Chunk `chunk` (16 bytes) of tile n's key row r: its offset in the cache, 0 where none.
    auto offset = [&](int n, int r, int chunk_bytes) -> int64_t {
      const int slot = slots[n % 2][r];
      return slot < 0 ? -1 : int64_t{slot} * kv_row + int64_t{kvh} * D + chunk_bytes / int{sizeof(Cache)};
    };
    if constexpr (kFp8) {
      // The codes by cp.async into raw stage n % 2, one tile ahead; once this thread's own
      // copies of tile n have landed it widens exactly those chunks (16 codes -> 2 chunks of the
      // 16-bit tile, exact: every e4m3 value is an fp16 and a bf16 value) into stage n % 2 of
      // the tiles the consumers read, orders its writes for wgmma (fence.proxy.async) and
      // arrives. No thread reads another's chunks, so the producers need no barrier for them.
      const uint32_t raw = sv + STAGES * L::KV_BYTES;  // [stage][K, V][BC][D]
      constexpr int RAW_CH = D / 16;
      const int c8 = tid % RAW_CH;
      auto copy_raw = [&](int n) {
        const uint32_t dst = raw + (n % 2) * 2 * L::RAW_BYTES;
        for (int r = tid / RAW_CH; r < BC; r += 128 / RAW_CH) {
          const int64_t off = offset(n, r, 16 * c8);
          const bool ok = off >= 0;
          cp_async_16(dst + r * D + 16 * c8, kc + (ok ? off : 0), ok);
          cp_async_16(dst + L::RAW_BYTES + r * D + 16 * c8, vc + (ok ? off : 0), ok);
        }
        cp_async_commit();
      };
      publish(0, fetch(0));
      copy_raw(0);
      Slot next = tiles > 1 ? fetch(1) : Slot{-1, 0};
      for (int n = 0; n < tiles; ++n) {
        const int s = n % STAGES, parity = ((n / STAGES) & 1) ^ 1;
        if (n + 1 < tiles) {
          publish(n + 1, next);
          copy_raw(n + 1);
          if (n + 2 < tiles) next = fetch(n + 2);
        } else {
          cp_async_commit();  // an empty group: the wait below counts the same
        }
        cp_async_wait<1>();      // this thread's copies of tile n
        mbar_wait(bar(bars.k_empty[s]), parity);
        mbar_wait(bar(bars.v_empty[s]), parity);
        const unsigned char* src = smem_raw + (raw - smem_addr(smem_raw)) + (n % 2) * 2 * L::RAW_BYTES;
        for (int r = tid / RAW_CH; r < BC; r += 128 / RAW_CH)
#pragma unroll
          for (int kv = 0; kv < 2; ++kv) {
            const uint4 codes = *reinterpret_cast<const uint4*>(src + kv * L::RAW_BYTES + r * D + 16 * c8);
            uint4 lo, hi;
            e4m3x4_to<T>(codes.x, lo.x, lo.y);
            e4m3x4_to<T>(codes.y, lo.z, lo.w);
            e4m3x4_to<T>(codes.z, hi.x, hi.y);
            e4m3x4_to<T>(codes.w, hi.z, hi.w);
            const uint32_t dst = (kv ? sv : sk) + s * L::KV_BYTES;
            asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"r"(dst + swizzled<L::KV_BLOCK>(r, 2 * c8)),
                         "r"(lo.x), "r"(lo.y), "r"(lo.z), "r"(lo.w));
            asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"r"(dst + swizzled<L::KV_BLOCK>(r, 2 * c8 + 1)),
                         "r"(hi.x), "r"(hi.y), "r"(hi.z), "r"(hi.w));
          }
        fence_proxy_async_shared();  // the widened tiles -> wgmma's reads
        mbar_arrive(bar(bars.k_full[s]));
        mbar_arrive(bar(bars.v_full[s]));
      }
      return;
    }
    if constexpr (kTmaPages) {
      // Rung 6: a page (block_size keys of this kv head, D / 64 boxes of 64 columns) that lies
      // whole before the split's end is one TMA box, landing in the tile's 128-byte swizzle at
      // its rows (block_size >= 8: a 1024-byte aligned start); lane t of warp 0 issues page t's
      // (at most 16 pages a tile), its table entry loaded a tile ahead. The rows after the whole
      // pages (the split's last tile: a page the end cuts, pages past it) go by warp 0's cp.async
      // as rung 5's, zeros from k_hi on, so no slot past a context is read. k_full/v_full count
      // 33 arrivals: each lane's cp.async arrival and lane 0's expect_tx of the tile's TMA bytes.
      // Warps 1-3 leave once their share of Q is copied (as flash_ws' idle producer warps): all
      // 128 threads in the tile loop each spun on the stages' empty barriers beside the
      // consumers' warps (run 287's profile: all-prefill at 38% more instructions than flash_ws'
      // on the same work). Alone, that changed no time (run 288); the third stage did.
      if (warp != 0) {
        cp_async_wait<0>();
        return;
      }
      const int bs_log2 = __ffs(bs) - 1, pages = BC >> bs_log2;
      const int c = lane % CH;
      auto page_of = [&](int n) {  // page `lane` of tile n: its block, or -1 (not whole, or none)
        const int j0 = k_lo + BC * n + (lane << bs_log2);
        return lane < pages && j0 + bs <= k_hi ? __ldg(table + (j0 >> bs_log2)) : -1;
      };
      int page = page_of(0);
      for (int n = 0; n < tiles; ++n) {
        const int s = n % STAGES, parity = ((n / STAGES) & 1) ^ 1;
        const int key0 = k_lo + BC * n;
        const int whole = min(pages, (k_hi - key0) >> bs_log2);  // the tile's whole pages, first ones
        const int next = n + 1 < tiles ? page_of(n + 1) : -1;
        mbar_wait(bar(bars.k_empty[s]), parity);
        mbar_wait(bar(bars.v_empty[s]), parity);
        if (lane == 0) {
          mbar_expect_tx(bar(bars.k_full[s]), whole * bs * D * 2);
          mbar_expect_tx(bar(bars.v_full[s]), whole * bs * D * 2);
        }
        if (page >= 0) {
          const uint32_t rows_at = static_cast<uint32_t>(lane << bs_log2) * 128;
#pragma unroll
          for (int cb = 0; cb < D / 64; ++cb) {
            tma_load_4d(sk + s * L::KV_BYTES + cb * L::KV_BLOCK + rows_at, tk, 64 * cb, kvh, 0, page, bar(bars.k_full[s]));
            tma_load_4d(sv + s * L::KV_BYTES + cb * L::KV_BLOCK + rows_at, tv, 64 * cb, kvh, 0, page, bar(bars.v_full[s]));
          }
        }
        for (int r = (whole << bs_log2) + lane / CH; r < BC; r += 32 / CH) {
          const int j = key0 + r;
          const bool ok = j < k_hi;
          const int64_t off =
              ok ? (int64_t{__ldg(table + (j >> bs_log2))} * bs + (j & (bs - 1))) * kv_row + int64_t{kvh} * D + 8 * c : 0;
          const uint32_t dst = s * L::KV_BYTES + swizzled<L::KV_BLOCK>(r, c);
          cp_async_16(sk + dst, kc + off, ok);
          cp_async_16(sv + dst, vc + off, ok);
        }
        cp_async_mbar_arrive(bar(bars.k_full[s]));
        cp_async_mbar_arrive(bar(bars.v_full[s]));
        page = next;
      }
    } else {
      // Both of a stage's buffers at once: a third stage, with K and V waited for apart, was 7-14%
      // slower on the serving mix and its prefill part once the look-ups were fixed (run 281), and
      // no faster before (run 280: the producer, not the ring, held the consumers).
      const int c = tid % CH;
      Slot next = fetch(0);
      for (int n = 0; n < tiles; ++n) {
        const int s = n % STAGES, parity = ((n / STAGES) & 1) ^ 1;
        publish(n, next);
        if (n + 1 < tiles) next = fetch(n + 1);
        mbar_wait(bar(bars.k_empty[s]), parity);
        mbar_wait(bar(bars.v_empty[s]), parity);
        for (int r = tid / CH; r < BC; r += 128 / CH) {
          const int64_t off = offset(n, r, 16 * c);
          const bool ok = off >= 0;
          const uint32_t dst = s * L::KV_BYTES + swizzled<L::KV_BLOCK>(r, c);
          cp_async_16(sk + dst, kc + (ok ? off : 0), ok);
          cp_async_16(sv + dst, vc + (ok ? off : 0), ok);
        }
        cp_async_mbar_arrive(bar(bars.k_full[s]));
        cp_async_mbar_arrive(bar(bars.v_full[s]));
      }
    }
    cp_async_wait<0>();  // nothing in flight past the thread's end
    return;
  }

  // ---- consumer warpgroups ----
  setmaxnreg_inc<L::CONSUMER_REGS>();
  const int wg = warp / 4 - 1, t4 = lane % 4;
  if (solo && wg == 1) return;
  const uint32_t q_wg = sq + wg * 64 * 128;  // this warpgroup's 64 rows in each column block
  float o[D / 2], s[BC / 2], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
  uint32_t pk[BC / 16][4];
#pragma unroll
  for (int i = 0; i < D / 2; ++i) o[i] = 0.f;

  // Raw scores are q·k of the tiles as loaded: an fp8 cache's codes, whose k_scale joins the
  // softmax scale; v_scale multiplies O once after the loop (rung 3's way).
  const float qk_scale = kFp8 ? p.score.scale * p.k_scale : p.score.scale;
  // This thread's rows r and r + 8: token, position, query head, ALiBi slope (raw score units).
  const int r0 = wg * 64 + 16 * (warp % 4) + lane / 4;
  int pos[2], head[2];
  bool live[2];
  float slope[2];
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    const int r = r0 + 8 * hh;
    live[hh] = r < rows;
    pos[hh] = shift + w.t0 + r / group;
    head[hh] = kvh * group + r % group;
    slope[hh] = alibi_slope(p.score.alibi && live[hh], p.score.alibi_slopes, head[hh], 1.f / qk_scale);
  }
  const float cap = p.score.softcap > 0 ? p.score.softcap / qk_scale : 0.f;  // raw units
  const float inv_cap = p.score.softcap > 0 ? qk_scale / p.score.softcap : 0.f;
  const float scale_log2 = kFp8 ? p.score.scale_log2 * p.k_scale : p.score.scale_log2;
  // A tile every row of the block sees whole: below the first token's position, inside the
  // split, and (window) above the last token's reach.
  const int first_pos = shift + w.t0, last_pos = shift + w.t0 + w.tokens - 1;

  // Ping-pong (flash_ws): consumer 0 takes its first turn unasked, and each hands the turn on.
  bool issued = false;
  auto turn_begin = [&] {
    if (!solo && (issued || wg != 0)) named_bar_sync(kTurnBar + wg, kTurnThreads);
    issued = true;
  };
  auto turn_end = [&] {
    if (!solo) named_bar_arrive(kTurnBar + (wg ^ 1), kTurnThreads);
  };
  auto release = [&](const uint64_t& empty) { mbar_arrive(bar(empty)); };
  auto issue_s = [&](int n) {
    const int st = n % STAGES;
    mbar_wait(bar(bars.k_full[st]), (n / STAGES) & 1);
    fence_proxy_async_shared();  // the copies' generic-proxy writes -> wgmma's reads
    const uint32_t kt = sk + st * L::KV_BYTES;
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks) {
      const uint32_t step = (ks % 4) * 32;
      wgmma_ss_kmajor<T, BC>(s, wgmma_desc_sw128(q_wg + (ks / 4) * L::Q_BLOCK + step),
                             wgmma_desc_sw128(kt + (ks / 4) * L::KV_BLOCK + step), ks);
    }
    wgmma_commit();
  };
  auto issue_pv = [&](int n) {
    const int st = n % STAGES;
    mbar_wait(bar(bars.v_full[st]), (n / STAGES) & 1);
    fence_proxy_async_shared();
    const uint32_t vt = sv + st * L::KV_BYTES;
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BC / 16; ++kk) wgmma_rs_nmajor<T, D>(o, pk[kk], wgmma_desc_sw128(vt + kk * 16 * 128, L::KV_BLOCK));
    wgmma_commit();
  };
  // Tile n's masks (raw scores), then the lazy online softmax (exp2 units): s becomes
  // exp2(s · scale_log2 - base), l the new sums; corr scales O when m moved (the return).
  auto softmax = [&](int n, float(&corr)[2]) {
    const int key0 = k_lo + BC * n;
    const bool whole = key0 + BC - 1 <= first_pos && key0 + BC <= k_hi &&
                       (p.window == 0 || key0 > last_pos - static_cast<int>(p.window));
    if (kTerms || !whole) {
#pragma unroll
      for (int j = 0; j < BC / 8; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int key = key0 + 8 * j + 2 * t4 + (e & 1), hh = e >> 1;
          float x = s[4 * j + e];
          if (kTerms) {
            if (cap > 0.f) x = soft_cap_sfu(x, cap, inv_cap);
            x = fmaf(-slope[hh], static_cast<float>(pos[hh] - key), x);  // ALiBi: key <= position where seen
          }
          const bool seen = key <= pos[hh] && key < k_hi && (p.window == 0 || key > pos[hh] - p.window);
          s[4 * j + e] = seen ? x : -INFINITY;
        }
    }
    float base[2];
    const bool moved = lazy_row_max<BC>(s, scale_log2, m, l, base, corr);
#pragma unroll
    for (int i = 0; i < BC / 2; ++i) {
      const int r = (i % 4) / 2;
      s[i] = exp2_approx(fmaf(s[i], scale_log2, -base[r]));
      l[r] += s[i];
    }
    return moved;
  };
  // P (16-bit): the accumulator fragment of n8 tiles 2 kk and 2 kk + 1 is the A fragment of k
  // step kk. Only once the last P V that read pk is done.
  auto pack_p = [&] {
#pragma unroll
    for (int kk = 0; kk < BC / 16; ++kk)
#pragma unroll
      for (int w4 = 0; w4 < 4; ++w4) pk[kk][w4] = pack2<T>(s[8 * kk + 2 * w4], s[8 * kk + 2 * w4 + 1]);
  };

  mbar_wait(bar(bars.q_full), 0);
  if (p.rope.style != RopeTable::none) {
    // RoPE on this warpgroup's 64 query rows in shared memory (flash_ws' way), each at its
    // token's position (a token's GQA heads share it); the cache holds keys turned when stored.
    const int first = wg * 64;
    rope_shared_rows<T, 64, 128, 4>(
        [q_wg](int r, int c) { return q_wg + (c >> 3) * L::Q_BLOCK + r * 128 + (((c & 7) ^ (r & 7)) << 4); },
        rows - first, [pos0 = shift + w.t0, first, group](int r) { return pos0 + (first + r) / group; }, p.rope,
        tid % 128);
    fence_proxy_async_shared();  // the turned rows -> the S products' reads
    named_bar_sync(kTurnBar + 2 + wg, 128);
  }
  fence_proxy_async_shared();
  float corr[2];
  // The first key tile: S alone (O is 0: nothing to rescale).
  turn_begin();
  issue_s(0);
  turn_end();
  wgmma_wait<0>();
  fence_operands(s);
  release(bars.k_empty[0]);
  softmax(0, corr);
  pack_p();
  // Tile n's S beside tile n - 1's P V; the softmax of n under that P V, the rescale of O and
  // the new P after it.
  for (int n = 1; n < tiles; ++n) {
    turn_begin();
    issue_s(n);
    issue_pv(n - 1);
    turn_end();
    wgmma_wait<1>();  // S; P V may still run
    fence_operands(s);
    release(bars.k_empty[n % STAGES]);
    const bool moved = softmax(n, corr);
    wgmma_wait<0>();
    fence_operands(o);
    release(bars.v_empty[(n - 1) % STAGES]);
    if (moved)
#pragma unroll
      for (int i = 0; i < D / 2; ++i) o[i] *= corr[(i % 4) / 2];
    pack_p();
  }
  // The last P V.
  turn_begin();
  issue_pv(tiles - 1);
  turn_end();
  wgmma_wait<0>();
  fence_operands(o);
  release(bars.v_empty[(tiles - 1) % STAGES]);
  if (wg == 0 && !solo) named_bar_sync(kTurnBar, kTurnThreads);  // the other consumer's last hand-over
  if constexpr (kFp8)
#pragma unroll
    for (int i = 0; i < D / 2; ++i) o[i] *= p.v_scale;  // before the partials too: the combine merges them as they are

  // The rows out: one split, O / l with the sink into the row's token and head; several, the
  // unnormalised O and (m, l) into the row's partial slot (the combine adds the sink).
  T* out = static_cast<T*>(p.o);
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    float sum = allreduce_sum<4, XorOrder::low_first>(l[hh]);
    if (!live[hh]) continue;
    const int r = r0 + 8 * hh;
    const int64_t row = (int64_t{w.first_q} + w.t0 + r / group) * p.heads + head[hh];
    if (splits > 1) {
      const int64_t slot = row * sp.max_splits + split;
      float* dst = sp.part_o + slot * D;
#pragma unroll
      for (int j = 0; j < D / 8; ++j)
        *reinterpret_cast<float2*>(dst + 8 * j + 2 * t4) = make_float2(o[4 * j + 2 * hh], o[4 * j + 2 * hh + 1]);
      if (t4 == 0) sp.part_ml[slot] = make_float2(m[hh], sum);
      continue;
    }
    sum = plus_sink(sum, m[hh], sink_log2(p.score.sinks ? p.score.sink_logits : nullptr, head[hh]));
    const float inv = sum > 0.f ? 1.f / sum : 0.f;
    T* dst = out + row * D;
#pragma unroll
    for (int j = 0; j < D / 8; ++j)
      *reinterpret_cast<uint32_t*>(dst + 8 * j + 2 * t4) = pack2<T>(o[4 * j + 2 * hh] * inv, o[4 * j + 2 * hh + 1] * inv);
  }
#else
  __trap();  // built without sm_90a: supports() refuses other cards
#endif
}

// One block an SM: the planner spreads the batch's key tiles over 132 blocks, on 128-key edges.
// Row tiles of at most 64 rows (consumer 0's alone) plan as small ones.
Splits ws_plan(const RaggedParams& p) {
  return plan_splits(p, static_cast<int>(128 / (p.heads / p.kv_heads)), kAssumedSms, 2, 64);
}

// tk, tv: the cache's tensor maps (ws_tma_map) when kTmaPages, else unused.
template <class T, class Cache, int D, bool kTerms, bool kTmaPages>
void launch_ws(const RaggedParams& p, const LaunchContext& ctx, Splits sp, const CUtensorMap& tk,
               const CUtensorMap& tv) {
  using L = WsTiling<D, kIsFp8<Cache>, kWsStages<kTmaPages, kIsFp8<Cache>>>;
  const auto kernel = ragged_ws_kernel<T, Cache, D, kTerms, kTmaPages>;
  constexpr int smem = L::SMEM;
  static const cudaError_t opt_in = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  check_cuda(opt_in, "ragged/ws");
  const int group = static_cast<int>(p.heads / p.kv_heads), per_tile = 128 / group;
  const dim3 grid(static_cast<unsigned>((p.total_queries / per_tile + p.batch) * sp.max_splits),
                  static_cast<unsigned>(p.kv_heads));
  kernel<<<grid, L::THREADS, smem, ctx.stream>>>(p, group, per_tile, sp, tk, tv);
  check_launch("ragged/ws");
  if (sp.max_splits > 1) {
    varlen_combine_kernel<T><<<static_cast<unsigned>(ceil_div(p.total_queries * p.heads, int64_t{4})), 128, 0,
                               ctx.stream>>>(p, per_tile, sp);
    check_launch("ragged/ws combine");
  }
}

}  // namespace
}  // namespace attnbench::ragged_impl
