// attention rung 4, flash_mma: FlashAttention-2 forward on tensor cores (mma.sync, sm_80+),
// fp16/bf16 storage, fp32 scores, softmax statistics and O accumulators: rung 3's algorithm
// with the two products on tensor cores and P kept in registers, every head_dim, window,
// ALiBi, causal, GQA.
// H200, run 36: bf16 b4 s4096 d128 1.4460 ms (~380 TFLOP/s), 1.10x PyTorch's FA2 (run 6: 1.13x,
// 423x rung 1, 7.4x rung 2); causal 0.8332 ms.
//
// Design (FlashAttention-2, Dao 2023; the paper's names: Br x Bc tiles, row max m, row sum l):
//   - One block owns Br query rows of one (batch, head) and walks the key tiles of Bc keys from
//     the last one its rows can see down to the first, keeping S = Q Kᵀ, P and O in registers.
//   - Warps split the rows: warp w owns Br / warps consecutive rows (whole m16 tiles), so a
//     row's max and sum live in one quad of lanes and reduce with two __shfl_xor; warps meet
//     only at the one barrier per key tile.
//   - mma.sync m16n8k16, fp32 accumulators. Q and K fragments come from ldmatrix, V fragments
//     from ldmatrix.trans (V is [key][d], the B operand of P V with k = key). P never touches
//     shared memory: the C fragments of two adjacent n8 tiles of S, packed to 16-bit pairs,
//     are exactly the A fragment of one k16 slice of P V.
//   - Q is copied once (cp.async); K and V are double-buffered: the copies of tile n - 1 are
//     issued right after the barrier of tile n, so they have a whole tile of compute to land.
//     A whole tile (every one but a seq_k tail, when head_dim is the class width) is copied
//     without bounds checks or predicates.
//   - Shared rows are padded by 16 bytes (pitch D * 2 + 16), which makes ldmatrix and the
//     cp.async writes bank-conflict-free like an XOR swizzle would, with fragment addresses
//     that are a per-lane offset plus constants (see tile_offset for why not the swizzle).
//   - Lazy online softmax (the rescale threshold of FlashAttention-4): a row's m is not its
//     running max but a bound that moves only when a score passes m + 8 (exp2 units; see
//     kLazyLog2). Whether any score does is a test of the lane's own scores and one warp vote,
//     so the common key tile has no row-max shuffle, no exp2 of a correction and no rescale
//     of O and l; only a tile that raises some row's max (the first ones, mostly) pays them,
//     for all rows of the warp. Against the eager form (the exact max and a rescale on every
//     tile: one FMUL per O accumulator, 128 per thread at d128, and register pressure that
//     spilled), the common d128 tile issues 40% fewer non-mma instructions; the lazy kernel
//     timed faster at every shape.
//   - Exponents in the exp2 domain with scale_log2 folded into one FFMA per score,
//     exp2(s * scale_log2 - m), and the exp2 of each k16 slice of P interleaved with that
//     slice's P V mma.
//   - Masks (seq_k tail, causal, window) and the ALiBi bias run only on the key tiles that
//     need them (a block-uniform branch); causal and window blocks visit only the key tiles
//     [n_min, n_max) that some row of theirs can see.
//   - Epilogue: O / l, packed to 16-bit pairs, staged in the warp's own rows of the Q tile,
//     written with 16-byte stores; rows past seq_q and dims past head_dim are skipped.
// Tiles per head-dim class (64, 128, 256) and mask kind, and why: see the configs. A head_dim
// below its class (any multiple of 8) runs zero-filled in the class kernel. The tuning
// history (eager vs lazy softmax, tile shapes, persistent blocks, ping-pong warps) lives in
// the run records, docs/bench/runs/.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "kernels/attention/flash_args.cuh"
#include "kernels/attention/rungs.hpp"
#include "kernels/common/copy.cuh"
#include "kernels/common/dispatch.cuh"
#include "kernels/common/mask.cuh"
#include "kernels/common/mma.cuh"
#include "kernels/common/reduce.cuh"
#include "kernels/common/rope.cuh"
#include "kernels/common/softmax_math.cuh"
#include "kernels/common/storage.cuh"

namespace attnbench::attention_impl {
namespace {

// Special registers read through volatile asm. The compiler cannot hoist such a read out of
// the key loop, so what the tile copies and the mask derive from them (copy slots, row
// positions) is recomputed where it is used, in a few integer ops per tile, instead of
// holding registers across the whole loop: the d64 and d128 kernels have none to spare.
__device__ __forceinline__ int sreg_tid() {
  int r;
  asm volatile("mov.u32 %0, %%tid.x;\n" : "=r"(r));
  return r;
}

// Shared tiles are [rows][D] with a row pitch of D * 2 + 16 bytes. ldmatrix reads one 16-byte
// chunk column of 8 consecutive rows; at a pitch of D * 2 bytes every row starts in bank 0 (an
// 8-way conflict), while the extra 16 bytes shift each row by 4 banks, so the 8 rows cover all
// 32. This is the padding alternative to an XOR swizzle: just as conflict-free, and every
// fragment address becomes one per-lane offset plus a compile-time constant (k step, m16 / n16
// tile), where a swizzle (chunk ^ row % 8) needs one live register per k step and operand
// (24 for d128), which the 255-register budget of a 2-block d128 kernel does not have.
template <int PITCH>
__device__ __forceinline__ uint32_t tile_offset(int row, int chunk) {
  return row * PITCH + chunk * 16;
}

// The lazy softmax moves a row's m only when a score passes m + kLazyLog2 (exp2 units), so
// every p is <= 2^kLazyLog2: far from overflowing fp16 (65504), a row sum of at most
// 2^8 * seq_k < 2^37 in fp32, and no more rounding than with the exact max (16-bit P keeps
// its relative precision at any scale, and larger p flush to zero less). FlashAttention-4
// uses the same threshold.
constexpr float kLazyLog2 = 8.f;

// One tile configuration. D: head-dim class (D * 2 bytes of data per shared row); Br x Bc: query
// rows x keys per block tile; WARPS split Br into WM = Br / WARPS rows each (MT m16 tiles);
// MIN_BLOCKS is the __launch_bounds__ occupancy (caps registers at 65536 / (MIN_BLOCKS *
// threads)).
template <int D_, int Br_, int Bc_, int WARPS_, int MIN_BLOCKS_>
struct Config {
  static constexpr int D = D_, Br = Br_, Bc = Bc_, WARPS = WARPS_, THREADS = 32 * WARPS_;
  static constexpr int MIN_BLOCKS = MIN_BLOCKS_;
  static constexpr int WM = Br / WARPS;         // query rows per warp
  static constexpr int MT = WM / 16;            // m16 tiles per warp
  static constexpr int NT = Bc / 8;             // n8 tiles of S per warp (all Bc keys)
  static constexpr int DT = D / 8;              // n8 tiles of O per warp (all D dims)
  static constexpr int KS = D / 16;             // k16 steps of S = Q Kᵀ
  static constexpr int PK = Bc / 16;            // k16 steps of O += P V
  static constexpr int CH = D / 8;              // 16-byte chunks per shared row
  static constexpr int PITCH = D * 2 + 16;      // shared row pitch in bytes (see tile_offset)
  static constexpr int LD_ROWS = THREADS / CH;  // rows one cp.async pass covers
  static constexpr int Q_BYTES = Br * PITCH, KV_BYTES = Bc * PITCH, STAGE_BYTES = 2 * KV_BYTES;
  static constexpr int SMEM_BYTES = Q_BYTES + 2 * STAGE_BYTES;  // Q, then 2 stages of (K, V)
  static_assert(D == 64 || D == 128 || D == 256, "head-dim classes 64, 128, 256");
  static_assert(WM % 16 == 0 && MT >= 1, "each warp owns whole m16 tiles");
  static_assert(Bc % 16 == 0, "key tiles of whole k16 slices (P V) and n16 pairs (Q Kᵀ)");
  static_assert(LD_ROWS >= 1 && Br % LD_ROWS == 0 && Bc % LD_ROWS == 0, "tiles split evenly over threads");
  static_assert(WM * CH % 32 == 0, "the epilogue copies a warp's rows in whole 32-lane passes");
};

// Branch-free bounds: a compiler that sees causal / window branches here duplicates the
// whole masking code per combination, and the copies cost registers.
__device__ __forceinline__ int key_hi(const Args& a, int pos) { return min(pos + a.hi_reach, a.seq_k - 1); }
__device__ __forceinline__ int key_lo(const Args& a, int pos) { return max(pos - a.lo_reach, 0); }

// MASKED: causal, window, ALiBi or soft-capping (the general path); without it the only mask is the seq_k
// tail of the last key tile. ROPE: the Q tile is rotated in shared memory once it lands (one
// extra barrier per block); the plain kernels carry none of it. SPARSE (block-sparse, on the
// MASKED path): the block visits only the key tiles of its query block's live key blocks. The arguments are
// __grid_constant__, read in place from the constant bank where they are used: as a plain by-value parameter (128
// bytes) the compiler loads every field at entry, and the 256-row d128 loop comes out 31 instructions longer.
template <class T, class Cfg, bool MASKED, bool ROPE, bool SPARSE>
__global__ __launch_bounds__(Cfg::THREADS, Cfg::MIN_BLOCKS) void flash_fwd_kernel(const __grid_constant__ Args a) {
  constexpr int Br = Cfg::Br, Bc = Cfg::Bc, WM = Cfg::WM, MT = Cfg::MT, NT = Cfg::NT, DT = Cfg::DT;
  constexpr int KS = Cfg::KS, PK = Cfg::PK, CH = Cfg::CH, RB = Cfg::PITCH, LD_ROWS = Cfg::LD_ROWS;
  extern __shared__ __align__(128) unsigned char smem[];  // Q [Br][D], then 2 x {K [Bc][D], V [Bc][D]}
  const uint32_t sQ = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  const uint32_t sKV = sQ + Cfg::Q_BYTES;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int g = lane / 4, t4 = lane % 4;  // mma fragment row group and column pair

  // Grid (row blocks, heads, batches), as FlashAttention-2: the row blocks of one head are
  // adjacent in launch order, so the blocks resident together share that head's K and V in
  // L2; within a head the last row block (the longest causal rows) starts first, so the short
  // ones fill the tail of the grid.
  // SPARSE: query block by query block across all heads instead, first blocks first: with
  // sparse_global the first query blocks see every key block, and as the last blocks of each
  // head they would start after most of the grid and run alone at its end.
  int m_block = static_cast<int>(gridDim.x - 1 - blockIdx.x), h = static_cast<int>(blockIdx.y);
  if constexpr (SPARSE) {
    const int linear = static_cast<int>(blockIdx.y * gridDim.x + blockIdx.x);
    m_block = linear / static_cast<int>(gridDim.y);
    h = linear % static_cast<int>(gridDim.y);
  }
  const int b = a.batch_offset + static_cast<int>(blockIdx.z);
  const int m0 = m_block * Br;
  const int shift = a.q_offset;  // query i sits at key position i + shift

  // Key tiles this block visits, [n_min, n_max). hi_first / lo_last bound what the block's
  // first and last real rows see: a tile inside [lo_last, hi_first] needs no mask.
  int n_min = 0, n_max = (a.seq_k + Bc - 1) / Bc, hi_first = a.seq_k - 1, lo_last = 0;
  if constexpr (MASKED) {
    const int last = min(m0 + Br, a.seq_q) - 1;
    const int hi_last = key_hi(a, last + shift);
    n_max = hi_last < 0 ? 0 : min(n_max, hi_last / Bc + 1);
    n_min = key_lo(a, m0 + shift) / Bc;
    hi_first = key_hi(a, m0 + shift);
    lo_last = key_lo(a, last + shift);
  }
  // Visit v (from v_max - 1 down to v_min) loads key tile tile_of(v): tile v, or with SPARSE
  // (query tiles of exactly one query block, sparse.block = Br) the v-th tile of the live key
  // blocks' tiles, of those in [n_min, n_max), whose lists are ascending.
  int v_min = n_min, v_max = n_max;
  const int32_t* live = nullptr;
  constexpr int kTilesPerBlock = Br / Bc;
  if constexpr (SPARSE) {
    const int64_t q_block = static_cast<int64_t>(h) * a.sparse.q_blocks + m_block;
    live = a.sparse.idx + q_block * a.sparse.k_blocks;
    const int count = a.sparse.num[q_block];
    v_min = v_max = 0;
    for (int c = 0; c < count; ++c)
      for (int t = 0; t < kTilesPerBlock; ++t) {
        const int tile = __ldg(live + c) * kTilesPerBlock + t;
        v_min += tile < n_min;
        v_max += tile < n_max;
      }
  }
  auto tile_of = [&](int v) {
    if constexpr (SPARSE)
      return __ldg(live + v / kTilesPerBlock) * kTilesPerBlock + v % kTilesPerBlock;
    else
      return v;
  };

  // cp.async slots: thread t copies chunk t % CH of rows t / CH + i * LD_ROWS. src is this
  // thread's first slot and walks by a fixed row stride: per-slot 64-bit addresses would be
  // loop-invariant, and the compiler would hoist all of them into registers that the
  // accumulators need. An empty slot (row past the end, chunk past head_dim) reads nothing
  // but still names a valid address, the tensor's base. rows_left: source rows from the
  // tile's first row on.
  auto load_tile = [&](uint32_t dst, const T* src, const T* base, int64_t row_stride, int rows_left, auto rows) {
    const int t = sreg_tid(), ld_row = t / CH, ld_chunk = t % CH;
    const bool chunk_ok = ld_chunk * 8 < a.head_dim;
    dst += tile_offset<RB>(ld_row, ld_chunk);
#pragma unroll
    for (int i = 0; i < decltype(rows)::value / LD_ROWS; ++i, src += LD_ROWS * row_stride) {
      const bool ok = chunk_ok && ld_row + i * LD_ROWS < rows_left;
      cp_async_16(dst + i * LD_ROWS * RB, ok ? src : base, ok);
    }
  };
  // This thread's next K/V slot, as an element offset from the tensors' bases (the same for
  // K and V). Tiles are loaded from n_max - 1 down, so it starts there (set with the first
  // copies below) and steps back one tile per load: one register pair carried through the
  // loop.
  int64_t kv_slot = 0;
  int slot_tile = 0;  // SPARSE: the tile kv_slot is at (tiles are not consecutive)
  auto load_kv = [&](int stage, int n) {
    const T *k = static_cast<const T*>(a.k), *v = static_cast<const T*>(a.v);
    if constexpr (SPARSE) {
      kv_slot += static_cast<int64_t>(n - slot_tile) * Bc * a.kv_row_stride;
      slot_tile = n - 1;
    }
    const uint32_t dst = sKV + stage * Cfg::STAGE_BYTES;
    if ((n + 1) * Bc <= a.seq_k && a.head_dim == Cfg::D) {
      // A whole tile of whole rows (every tile but a seq_k tail, when head_dim is the class
      // width): no bounds, no predicates, one pointer step per slot.
      const int t = sreg_tid();
      const uint32_t d = dst + tile_offset<RB>(t / CH, t % CH);
      const T *ks = k + kv_slot, *vs = v + kv_slot;
      const int64_t step = LD_ROWS * a.kv_row_stride;
#pragma unroll
      for (int i = 0; i < Bc / LD_ROWS; ++i, ks += step, vs += step) {
        cp_async_16(d + i * LD_ROWS * RB, ks);
        cp_async_16(d + Cfg::KV_BYTES + i * LD_ROWS * RB, vs);
      }
    } else {
      load_tile(dst, k + kv_slot, k, a.kv_row_stride, a.seq_k - n * Bc, std::integral_constant<int, Bc>{});
      load_tile(dst + Cfg::KV_BYTES, v + kv_slot, v, a.kv_row_stride, a.seq_k - n * Bc,
                std::integral_constant<int, Bc>{});
    }
    kv_slot -= Bc * a.kv_row_stride;
  };

  // ldmatrix lane addresses of a 16x16 block (lanes 8i..8i+7 name the rows of matrix i); the
  // block's position (k step, m16 / n16 tile, stage) is a constant or a uniform register
  // added to them. The matrices must land in the registers in the order the mma takes them:
  // HMMA reads its A fragment and each b0 b1 pair from consecutive registers, and any other
  // order costs a MOV per use.
  //   Q, A operand: matrices (rows 0-7, chunk 0), (8-15, 0), (0-7, 1), (8-15, 1) = a0 a1 a2 a3.
  //   V, B operand of O (V is [key][d], read with .trans): the same lane pattern gives
  //     (keys 0-7, d chunk 0), (8-15, 0), (0-7, 1), (8-15, 1) = b0 b1 of d tile 2j, b0 b1 of 2j+1.
  //   K, B operand of S (K is [key][d], i.e. Kᵀ column-major): matrices (keys 0-7, chunk 0),
  //     (0-7, 1), (8-15, 0), (8-15, 1) = b0 b1 of n8 tile 2p, b0 b1 of tile 2p+1.
  const uint32_t qv_frag = tile_offset<RB>(lane % 16, lane / 16);
  const uint32_t k_frag = tile_offset<RB>(lane % 8 + (lane / 16) * 8, (lane / 8) % 2);
  const uint32_t q_frag = sQ + warp * WM * RB + qv_frag;

  // The Q tile and the first K/V tile, in one commit group. A block whose rows see no key
  // loads nothing and writes zeros.
  if (v_max > v_min) {
    const T* q = static_cast<const T*>(a.q);
    const int64_t q_slot =
        b * a.q_batch_stride + static_cast<int64_t>(h) * a.head_dim + (m0 + tid / CH) * a.q_row_stride + tid % CH * 8;
    load_tile(sQ, q + q_slot, q, a.q_row_stride, a.seq_q - m0, std::integral_constant<int, Br>{});
    const int kvh = static_cast<int>((static_cast<uint64_t>(h) * a.group_rcp) >> 32);  // see Args::group_rcp
    kv_slot = b * a.kv_batch_stride + static_cast<int64_t>(kvh) * a.head_dim +
              static_cast<int64_t>(tile_of(v_max - 1)) * Bc * a.kv_row_stride + (tid / CH) * a.kv_row_stride +
              tid % CH * 8;
    slot_tile = tile_of(v_max - 1);
    load_kv(0, tile_of(v_max - 1));
  }
  cp_async_commit();
  if constexpr (ROPE) {
    // RoPE on the queries in the load path: once Q has landed the block turns it in place (row
    // r at position m0 + r + shift), before the accumulators hold registers; the key loop's
    // first barrier publishes it. The keys arrive turned (flash_mma's launch turns K once).
    if (v_max > v_min) {
      cp_async_wait<0>();
      __syncthreads();
      rope_shared_tile<T, Br, Cfg::THREADS, RB, 4>(sQ, a.seq_q - m0, m0 + shift, a.rope, sreg_tid());
    }
  }

  float acc_o[MT][DT][4];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int dt = 0; dt < DT; ++dt)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc_o[mt][dt][e] = 0.f;
  // Rows g and g + 8 of each m16 tile: row_m, the m subtracted in exp2 units (0 until the
  // row sees a key); row_thr, the raw score past which m must move (-inf until the row sees
  // a key); row_l, this lane's share of the running sum l (its columns only; the quad adds
  // the shares at the end).
  float row_m[MT][2], row_l[MT][2], row_thr[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) row_m[mt][hh] = 0.f, row_l[mt][hh] = 0.f, row_thr[mt][hh] = -INFINITY;

  int stage = 0;
  for (int v = v_max - 1; v >= v_min; --v, stage ^= 1) {
    const int n = tile_of(v);
    // One barrier per key tile: it publishes tile n (each thread waited for its own copies)
    // and certifies that every warp finished tile n + 1, whose stage the copies of tile
    // n - 1 now overwrite.
    cp_async_wait<0>();
    __syncthreads();
    if (v > v_min) load_kv(stage ^ 1, tile_of(v - 1));
    cp_async_commit();
    const uint32_t sK = sKV + stage * Cfg::STAGE_BYTES, sV = sK + Cfg::KV_BYTES;
    // S = Q Kᵀ (raw scores, fp32).
    float acc_s[MT][NT][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc_s[mt][nt][e] = 0.f;
#pragma unroll
    for (int ks = 0; ks < KS; ++ks) {
      uint32_t qa[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) ldsm_x4(qa[mt], q_frag + ks * 32 + mt * 16 * RB);
#pragma unroll
      for (int p = 0; p < NT / 2; ++p) {
        uint32_t kb[4];
        ldsm_x4(kb, sK + k_frag + ks * 32 + p * 16 * RB);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          mma_16816<T>(acc_s[mt][2 * p], qa[mt], kb[0], kb[1]);
          mma_16816<T>(acc_s[mt][2 * p + 1], qa[mt], kb[2], kb[3]);
        }
      }
    }

    // Soft-capping of every score, before bias and masks (raw units; a uniform branch).
    if constexpr (MASKED) {
      if (a.score.cap > 0.f) {
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
          for (int nt = 0; nt < NT; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc_s[mt][nt][e] = soft_cap_sfu(acc_s[mt][nt][e], a.score.cap, a.score.inv_cap);
      }
    }

    // Masks and bias, only on the tiles that cross a boundary (uniform across the block).
    const int n0 = n * Bc;
    bool need_mask = n0 + Bc > a.seq_k;
    if constexpr (MASKED) need_mask = need_mask || a.score.alibi || hi_first < n0 + Bc - 1 || lo_last > n0;
    if (need_mask) {
      // This lane's elements are rows row0 + dr (row0 = m0 + warp * WM + g, dr = mt * 16 +
      // hh * 8: C fragment c0 c1 are row g of the m16 tile, c2 c3 row g + 8) and keys first + c
      // (first = n0 + 2 t4, c = nt * 8 + e). In that frame each bound is one value plus a
      // compile-time constant, so the mask keeps three values live instead of two per row:
      //   key > seq_k - 1              <=>  c > tail
      //   key > position + hi_reach    <=>  c - dr > rel + hi_reach   (causal; window above)
      //   key < position - lo_reach    <=>  c - dr < rel - lo_reach   (window below)
      // with rel = position(row0) - first. Keys are never < 0, so no clamp is needed.
      const int t = sreg_tid();
      const int first = n0 + 2 * (t % 4);
      const int tail = a.seq_k - 1 - first;
      const int row0 = m0 + (t / 32) * WM + (t % 32) / 4;
      const int rel = row0 + shift - first;
      // ALiBi slope in raw score units; 0 without ALiBi, and the bias term vanishes.
      const float slope = alibi_slope(MASKED && a.score.alibi, a.score.slopes, h, a.alibi_scale);
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
          const int dr = mt * 16 + hh * 8;
#pragma unroll
          for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              const int c = nt * 8 + e;
              float& s = acc_s[mt][nt][2 * hh + e];
              bool out = c > tail;
              if constexpr (MASKED) {
                s = fmaf(-slope, fabsf(static_cast<float>(rel) + static_cast<float>(dr - c)), s);  // |position - key|
                out = out || c - dr > rel + a.hi_reach || c - dr < rel - a.lo_reach;
              }
              s = out ? -INFINITY : s;
            }
          }
        }
      }
    }

    // The lazy softmax's test and (rarely) its rescale; afterwards every score s of the tile
    // has s * scale_log2 - row_m <= kLazyLog2. A lane's share of a row passes the threshold
    // iff some score of it does, so the test needs no shuffle; a warp that passes it
    // anywhere recomputes the exact max of all its rows (quad shuffles) and moves them all.
    // The max is taken over raw scores (scale > 0 keeps the argmax); the scale folds into
    // the exponent's FFMA.
    {
      float m_lane[MT][2];
      bool grow = false;
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
          // A tree, not a chain: the vote waits on its depth (log2(2 NT) instead of NT + 1).
          float m[NT];
#pragma unroll
          for (int nt = 0; nt < NT; ++nt) m[nt] = fmaxf(acc_s[mt][nt][2 * hh], acc_s[mt][nt][2 * hh + 1]);
#pragma unroll
          for (int w = 1; w < NT; w *= 2)
#pragma unroll
            for (int i = 0; i + w < NT; i += 2 * w) m[i] = fmaxf(m[i], m[i + w]);
          m_lane[mt][hh] = m[0];
          grow = grow || m[0] > row_thr[mt][hh];
        }
      if (__any_sync(0xffffffffu, grow)) {
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
          for (int hh = 0; hh < 2; ++hh) {
            float m = m_lane[mt][hh];
            // The 4 lanes of a quad hold the row's 2 * NT columns between them.
            m = allreduce_max<4, XorOrder::low_first>(m);
            // m_old = -inf for a row that has seen no key yet: its O and l are 0 and its
            // correction exp2(-inf) = 0 keeps them so. A row that still sees none (m_new =
            // -inf) keeps row_m = 0, so its exponents are exp2(-inf - 0) = 0, never NaN.
            const float m_old = row_thr[mt][hh] == -INFINITY ? -INFINITY : row_m[mt][hh];
            const float m_new = fmaxf(m_old, m * a.scale_log2);
            const bool none = m_new == -INFINITY;
            const float corr = none ? 1.f : exp2_approx(m_old - m_new);
            row_m[mt][hh] = none ? 0.f : m_new;
            row_thr[mt][hh] = none ? -INFINITY : (m_new + kLazyLog2) * a.inv_scale_log2;
            row_l[mt][hh] *= corr;
#pragma unroll
            for (int dt = 0; dt < DT; ++dt) {
              acc_o[mt][dt][2 * hh] *= corr;
              acc_o[mt][dt][2 * hh + 1] *= corr;
            }
          }
      }
    }

    // One k16 slice of keys at a time: p = exp2(s * scale_log2 - m), summed into l, rounded
    // to the storage type as the A fragment of O += P V, and that slice's mma. Slice by
    // slice, the fp32 p of a slice die as soon as they are packed and summed (all of them at
    // once would need 2 * MT * NT more live registers during P V), and the exp2 of slice
    // kk + 1 can issue while the mma of slice kk run.
    // Why packing is all it takes: the C fragment of n8 tile 2 kk holds (row g, keys 16 kk +
    // 2 t4 + {0,1}) in c0 c1 and (row g + 8, same keys) in c2 c3; tile 2 kk + 1 the same 8
    // keys further. The A fragment of k16 slice kk wants a0 = (g, 2 t4 + {0,1}), a1 = (g + 8,
    // 2 t4 + {0,1}), a2 = (g, 8 + 2 t4 + {0,1}), a3 = (g + 8, 8 + 2 t4 + {0,1}): the same
    // lanes own the same elements.
#pragma unroll
    for (int kk = 0; kk < PK; ++kk) {
      uint32_t pa[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          float(&c)[4] = acc_s[mt][2 * kk + half];
#pragma unroll
          for (int e = 0; e < 4; ++e) c[e] = exp2_approx(fmaf(c[e], a.scale_log2, -row_m[mt][e / 2]));
          row_l[mt][0] += c[0] + c[1];
          row_l[mt][1] += c[2] + c[3];
          pa[mt][2 * half] = pack2<T>(c[0], c[1]);
          pa[mt][2 * half + 1] = pack2<T>(c[2], c[3]);
        }
      }
#pragma unroll
      for (int j = 0; j < DT / 2; ++j) {
        uint32_t vb[4];
        ldsm_x4_trans(vb, sV + qv_frag + j * 32 + kk * 16 * RB);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          mma_16816<T>(acc_o[mt][2 * j], pa[mt], vb[0], vb[1]);
          mma_16816<T>(acc_o[mt][2 * j + 1], pa[mt], vb[2], vb[3]);
        }
      }
    }
  }

  // Epilogue: O / l in the storage type, staged in this warp's own rows of the Q tile (only
  // this warp ever read them, so no block barrier), then 16-byte stores of whole rows.
  __syncwarp();
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      float l = row_l[mt][hh];
      l = plus_sink(allreduce_sum<4, XorOrder::low_first>(l), row_m[mt][hh], sink_log2(a.score.sinks, h));
      // l >= 1 once a row has seen a key (the score that set its m contributes exp2(0));
      // l = 0 means it saw none, and its O (all zeros) stays 0 (with a sink too: l is then the
      // sink's weight relative to row_m = 0).
      const float inv_l = l > 0.f ? __fdividef(1.f, l) : 0.f;
      const int r = warp * WM + mt * 16 + hh * 8 + g;
#pragma unroll
      for (int dt = 0; dt < DT; ++dt) {
        *reinterpret_cast<uint32_t*>(smem + tile_offset<RB>(r, dt) + 4 * t4) =
            pack2<T>(acc_o[mt][dt][2 * hh] * inv_l, acc_o[mt][dt][2 * hh + 1] * inv_l);
      }
    }
  }
  __syncwarp();
  // Lane and warp read again from %tid (volatile), so that the compiler cannot compute these
  // row addresses before the tile loop and hold them through it.
  const int t = sreg_tid(), lane_o = t % 32, warp_o = t / 32;
  T* o = static_cast<T*>(a.o) + b * a.o_batch_stride + static_cast<int64_t>(h) * a.head_dim;
#pragma unroll
  for (int i = 0; i < WM * CH / 32; ++i) {
    const int idx = i * 32 + lane_o;
    const int r = warp_o * WM + idx / CH, c = idx % CH;
    const int4 val = *reinterpret_cast<const int4*>(smem + tile_offset<RB>(r, c));
    if (m0 + r < a.seq_q && c * 8 < a.head_dim)
      *reinterpret_cast<int4*>(o + static_cast<int64_t>(m0 + r) * a.q_row_stride + c * 8) = val;
  }
}

// ---------------------------------------------------------------- configs

// Tiles per head-dim class and mask kind (the timings behind them: docs/bench/runs/):
//   d64: 128x128, 4 warps of 32 rows (S takes 128 registers, O 64), 2 blocks per SM.
//   d128 with masks: 128x64, 4 warps (O takes 128 registers, S 64; 32 rows per warp, so each
//     K and V fragment feeds two m16 tiles), 2 blocks per SM.
//   d128 without: 256x64, 8 warps, 1 block per SM: the same warp tile, with each K/V tile
//     copied for twice the rows (half the L2->SM bytes and copy work per flop). With masks
//     the 256-row blocks lose: the diagonal tiles mask twice the work and the grid has half
//     the blocks.
//   d256: 128x64, 8 warps of 16 rows (O is 128 registers per 16 rows), 198 KB of shared
//     memory, 1 block per SM, with or without masks.
template <class Plain, class Masked>
struct Tiles {
  using plain = Plain;    // no causal, window or ALiBi
  using masked = Masked;  // any of them
};
using Tiles64 = Tiles<Config<64, 128, 128, 4, 2>, Config<64, 128, 128, 4, 2>>;
using Tiles128 = Tiles<Config<128, 256, 64, 8, 1>, Config<128, 128, 64, 4, 2>>;
using Tiles256 = Tiles<Config<256, 128, 64, 8, 1>, Config<256, 128, 64, 8, 1>>;
// The tiles of head-dim class D.
template <int D>
using TilesFor = std::conditional_t<D == 64, Tiles64, std::conditional_t<D == 128, Tiles128, Tiles256>>;

template <class T, class Cfg, bool MASKED, bool ROPE, bool SPARSE = false>
void launch_kernel(const AttentionParams& p, const LaunchContext& ctx) {
  const auto kernel = flash_fwd_kernel<T, Cfg, MASKED, ROPE, SPARSE>;
  constexpr int smem = Cfg::SMEM_BYTES;
  // More than 48 KB of dynamic shared memory needs an opt-in, once per kernel; the carveout
  // asks for the shared-memory-heavy split so two blocks fit per SM.
  static const cudaError_t opt_in = [&] {
    const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    return e != cudaSuccess ? e
                            : cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                                   cudaSharedmemCarveoutMaxShared);
  }();
  check_cuda(opt_in, "flash_mma");
  launch_per_batch_chunk(p, kernel, make_args(p), Cfg::Br, Cfg::THREADS, smem, ctx, "flash_mma");
}

// The switches on mask kind and RoPE; each head-dim class has a tile config per mask kind.
template <class T, class Tl>
void launch_type(const AttentionParams& p, const LaunchContext& ctx) {
  using Plain = typename Tl::plain;
  using Masked = typename Tl::masked;
  if (p.sparse.on()) return launch_kernel<T, Masked, true, false, true>(p, ctx);
  with_bool(is_masked(p), [&](auto masked) {
    with_bool(p.rope.on(), [&](auto rope) {
      launch_kernel<T, std::conditional_t<masked, Masked, Plain>, masked, rope>(p, ctx);
    });
  });
}

// The one switch on dtype.
template <class Tl>
void launch_dtype(const AttentionParams& p, const LaunchContext& ctx) {
  with_16bit(p.dtype, "attention/flash_mma", [&](auto tag) { launch_type<decltype(tag), Tl>(p, ctx); });
}

// The one switch on the head-dim class.
}  // namespace

// RoPE: the keys are turned once, by a pass into the workspace (rope_rows), and the kernel
// turns its queries as it loads them. Turning each K tile in the load path instead costs
// every query block the same work again (16 to 32 times over at seq 4096): measured at
// 0.47-0.69x the kernel without RoPE, against 0.9x for this split (docs/bench/runs/2026-11-27.md,
// runs 55-56).
void flash_mma(const AttentionParams& p, const LaunchContext& ctx) {
  AttentionParams r = p;
  if (p.rope.on()) {
    RopeRows k = rope_pass_k(p);
    k.dst = ctx.workspace;
    rope_rows(k, p.rope, ctx.stream);
    check_launch("attention/flash_mma (rope_rows of k)");
    r.k = ctx.workspace;
  }
  with_head_dim_class<64, 128, 256>(p.head_dim, [&](auto d) { launch_dtype<TilesFor<decltype(d)::value>>(r, ctx); });
}

std::size_t flash_mma_workspace(const AttentionParams& p) { return p.rope.on() ? rope_pass_k(p).bytes() : 0; }

// Shared memory per block of the config launch_dtype picks.
namespace {

template <class Tl>
std::string shape_reason(const AttentionParams& p, const DeviceCaps& caps) {
  const int smem = is_masked(p) ? Tl::masked::SMEM_BYTES : Tl::plain::SMEM_BYTES;
  if (caps.smem_per_block_optin < static_cast<std::size_t>(smem))
    return "head_dim " + std::to_string(p.head_dim) + " needs " + std::to_string(smem / 1024) +
           " KB of shared memory per block";
  return {};
}

}  // namespace

std::string flash_mma_supports(const AttentionParams& p, const DeviceCaps& caps) {
  if (p.dtype != DType::fp16 && p.dtype != DType::bf16) return "fp16/bf16 only (mma.sync on 16-bit inputs)";
  if (caps.arch() < 80) return "needs sm_80+ (mma.sync m16n8k16, ldmatrix, cp.async)";
  if (p.batch < 1 || p.heads < 1 || p.kv_heads < 1 || p.seq_q < 1 || p.seq_k < 1)
    return "batch, heads, kv_heads, seq_q and seq_k must be >= 1";
  if (p.heads % p.kv_heads != 0) return "heads must be a multiple of kv_heads";
  if (p.heads > kMaxGridYZ) return "heads must be <= 65535 (heads is gridDim.y)";
  if (p.batch > INT_MAX) return "batch must fit in int";
  if (p.head_dim < 8 || p.head_dim > 256 || p.head_dim % 8 != 0)
    return "head_dim must be a multiple of 8 in [8, 256] (rows move in 16-byte chunks; classes 64/128/256)";
  if (p.seq_q >= (int64_t{1} << 29) || p.seq_k >= (int64_t{1} << 29))
    return "seq_q and seq_k must be < 2^29 (key positions are int)";
  if (!(p.score.scale > 0.f)) return "scale must be positive (the row max is taken over unscaled scores)";
  if (p.q_batch_stride % 8 != 0 || p.kv_batch_stride % 8 != 0 || p.o_batch_stride % 8 != 0)
    return "batch strides must be multiples of 8 elements (16-byte rows)";
  if ((p.q && !aligned16(p.q)) || (p.k && !aligned16(p.k)) || (p.v && !aligned16(p.v)) || (p.o && !aligned16(p.o)))
    return "q, k, v and o must be 16-byte aligned (cp.async and 16-byte stores)";
  if (p.rope.on())
    if (const std::string why = rope_in_q_load_supports(p); !why.empty()) return why;
  if (p.sparse.on() && p.rope.on()) return "block-sparse with RoPE: flash_mma_rope_first runs it";
  if (p.sparse.on() && p.sparse.block != 128)
    return "block-sparse needs sparse_block 128 (one query block per 128-row query tile; naive and cublas take 64)";
  return with_head_dim_class<64, 128, 256>(p.head_dim,
                                           [&](auto d) { return shape_reason<TilesFor<decltype(d)::value>>(p, caps); });
}

}  // namespace attnbench::attention_impl
