// paged rung 3, paged_flash (ours): decode's split_kv on the paged layout. One block per
// (sequence, kv head, split) computes every query head of its GQA group (up to 8; larger groups
// take side-by-side head tiles that share bytes through L2), so each cache byte is read once;
// online softmax (running max in log2 units, lazy rescale); splits fill SMs x occupancy in one
// round (plan_splits), fp32 partials and a combine launched with programmatic dependent launch
// on sm_90 (the partial layout, the combine, its launch and the device helpers are
// common/split_kv.cuh's, shared with decode). The block's block-table entries are copied to
// shared memory before the key loop, so a key's address is one shared load and two integer ops
// whatever the block size. fp16/bf16 queries with head_dim <= 128 run on tensor cores (mma.sync
// m16n8k16, fp32 accumulators), as decode's flash_decode kernel does: 2 warps per block, each
// streaming its key tiles through a 3-stage cp.async ring in shared memory, copied whole lines
// at a time into the layouts ldmatrix wants whatever the block size (see mma_paged_kernel):
//   Sᵀ = K Qᵀ takes 16 keys as M, the group's heads as N: a 16-byte K chunk is x dims of one
//   key, so the ring holds K as [chunk][key] and ldmatrix hands out A fragments directly.
//   Oᵀ += Vᵀ Pᵀ takes 16 dims as M: a V row of the layout is a row of Vᵀ, so the ring holds V as
//   [dim][tokens] and ldmatrix (not .trans) gives A.
// Where a kv head's cache block is one region of head_dim x 16 bytes (fp8 at block 16, fp16/bf16
// at block 8: 2 KB at d128), sm_90 fills the ring with bulk copies of whole regions instead (the
// TMA unit, one mbarrier per stage), which are already in those layouts: cp.async moved 2 KB
// regions at ~70% of the read bandwidth, bulk copies at ~91%, as fast as 4 KB regions (bench
// notes, run 23). An fp8 cache runs the mma in fp16 (e4m3 -> fp16 is exact, one cvt per 2
// values; bf16 queries are rounded to fp16 once, in shared memory): a tile is 32 keys (two Sᵀ
// sub-tiles), so that a stage holds the same 8 KB as with bf16. fp32 (tf32 would miss the fp32
// tolerance) and head_dim > 128 run a CUDA-core kernel: one thread per key for Sᵀ (consecutive
// keys are consecutive 16-byte chunks of the K layout), one thread per dim for Oᵀ, 128-key
// steps, 4 heads per block (1 for MHA). Limits: block_size a power of two from 8 to 256; bf16
// queries over an fp8 cache are rounded to fp16, so |q| must stay below 65504.
// H200, run 36: bf16 block 16 b64 / b8 0.2483 / 0.2504 ms, 98.2 / 97.3% of read bandwidth,
// 2.84x / 2.83x rung 2 and 0.97x dense decode split_kv; fp8 cache 93.1 / 91.7%, 1.89x bf16.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
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
#include "kernels/paged/args.hpp"
#include "kernels/paged/rungs.hpp"

namespace attnbench::paged_impl {
namespace {

// A loaded code's q·k soft-capped (a uniform branch: off unless the case sets softcap).
__device__ __forceinline__ float capped(const Paged& p, float s) {
  return p.score.cap > 0.f ? soft_cap(s, p.score.cap, p.score.inv_cap) : s;
}

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
  static constexpr int kSub = kFp8 ? 2 : 1;                    // 16-key Sᵀ tiles per tile (k16 steps of Oᵀ)
  static constexpr int kKeys = 16 * kSub;                      // keys per tile
  static constexpr int kHalf = kKeys / 2;                      // tokens per 16-byte V copy
  static constexpr int kHeads = 8;                             // query heads per block: N of both products
  static constexpr int kX = 16 / static_cast<int>(sizeof(C));  // dims per 16-byte K chunk
  static constexpr int kSteps = kD / 16;                       // k16 steps of Sᵀ = m16 tiles of Oᵀ
  static constexpr int kTileBytes = kKeys * kD * static_cast<int>(sizeof(C));  // K (or V) of a tile
  static constexpr int kStageBytes = 2 * kTileBytes;                           // K then V
  static constexpr int kCopies = kTileBytes / 16 / 32;  // 16-byte copies per lane for K, and for V
  static constexpr int kQWords = kD / 2;                // 32-bit words of a Q row (fp16/bf16)
  static constexpr int kRingBytes = kWarps * kStages * kStageBytes;
  // Bulk copies (see mma_paged_kernel): the ring holds K and V region by region, 2 cache blocks
  // of kHalf tokens per tile, so a chunk (K) or a dim (V) of a block is 16 bytes, ...
  static constexpr int kRegion = kD * 16;                           // ... and a block's K (or V) kD x 16 B
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
//     fragment packed to 16 bits and transposed by movmatrix, as in decode's flash_decode.
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
  wait_for_primary();  // launched early (launch_split): nothing read before the kernels ahead end
  const Work w = block_work<Cfg::kHeads>(p);
  if (w.begin >= w.end) return;  // a split past this sequence's context: the combine skips it

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const Table tbl = load_table(stbl, p, w);
  const uint32_t bars =
      static_cast<uint32_t>(__cvta_generic_to_shared(smem + Cfg::kBarOffset)) + warp * Cfg::kStages * 8;
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
      const T* row = static_cast<const T*>(p.q) + (int64_t{w.b} * p.heads + w.h0 + n) * p.head_dim;
      x = *reinterpret_cast<const uint4*>(row + 8 * c);
      if (!std::is_same_v<M, T> || p.rope.on()) {
        const uint32_t wv[4] = {x.x, x.y, x.z, x.w};
        float f[8];
        to_floats<T, 4>(wv, f);
        if (p.rope.on()) rope_row_part<T, 8>(row, 8 * c, f, w.ctx - 1, p.rope);  // at position context - 1
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
  const int kchunks = p.head_dim / Cfg::kX;  // K chunks within head_dim
  const uint32_t k_dst = (kc0 * Cfg::kKeys + k_slot<Cfg::kFp8>(kk)) * 16;
  const int vd0 = lane >> 1, vhalf = lane & 1;  // V copies: dims vd0 + 16j, half vhalf
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
        cp_async_16(st + k_dst + j * kChunkStep * Cfg::kKeys * 16, ok ? ks + ((kChunkStep * j) << lbs) * Cfg::kX : kh,
                    ok ? 16 : 0);
      }
      const int tok = key0 + Cfg::kHalf * vhalf;    // whole 8-token runs lie in one cache block
      const int nv = min(Cfg::kHalf, w.end - tok);  // tokens within `end`; the rest read as 0
      if (!v_split) {
        const C* vs = vh;
        if (nv > 0) vs += int64_t{tbl.block_of(tok, lbs)} * p.block_stride + (vd0 << lbs) + (tok & bmask);
#pragma unroll
        for (int j = 0; j < Cfg::kCopies; ++j) {
          const bool ok = nv > 0 && vd0 + 16 * j < p.head_dim;
          cp_async_16(st + v_dst + j * 512, ok ? vs + ((16 * j) << lbs) : vh,
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
            cp_async_8(st + v_dst + j * 512 + 8 * h, ok ? vs + ((16 * j) << lbs) : vh,
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
  for (int jj = 0; jj < 2; ++jj) slope[jj] = head_slope_log2(p, w.h0 + 2 * t + jj);
  float o[Cfg::kSteps][4] = {};
  // ldmatrix lane addresses within a stage. K: row (lane % 8) + 8 ((lane / 8) % 2) of the
  // sub-tile (its key by key_of_row), chunk + lane / 16. V: dim (lane % 8) + 8 ((lane / 8) % 2)
  // of the m tile, half lane / 16 (swizzled).
  // Bulk copies: K as [block][chunk][key] and V as [block = half][dim], unswizzled.
  const int krow = (lane & 7) + 8 * ((lane >> 3) & 1), kkey = key_of_row<Cfg::kFp8>(krow);
  const uint32_t k_lane = kBulk
                              ? (kkey / Cfg::kHalf) * Cfg::kRegion + ((lane >> 4) * Cfg::kHalf + kkey % Cfg::kHalf) * 16
                              : ((lane >> 4) * Cfg::kKeys + k_slot<Cfg::kFp8>(kkey)) * 16;
  const uint32_t v_lane =
      Cfg::kTileBytes + (kBulk ? ((lane >> 4) * kD + krow) * 16 : (krow * 2 + ((lane >> 4) ^ ((lane >> 2) & 1))) * 16);

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
          constexpr int kSubBytes = kBulk ? Cfg::kRegion : 16 * 16;           // between Sᵀ sub-tiles
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
        const bool ok = sees(w, key);
        const float dist = static_cast<float>(key - pos);
#pragma unroll
        for (int jj = 0; jj < 2; ++jj)
          x[sub][2 * r + jj] = ok ? fmaf(capped(p, s[sub][2 * r + jj]), p.score_log2, slope[jj] * dist) : -INFINITY;
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
  wait_for_primary();  // launched early (launch_split): nothing read before the kernels ahead end
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
  if (p.rope.on()) {  // the queries at their position, context - 1
    for (int n = 0; n < kG; ++n) rope_shared_floats(sq[n], w.ctx - 1, p.rope, threadIdx.x, Cfg::kThreads);
    __syncthreads();
  }

  const int lbs = p.log2_bs, bmask = p.block_size - 1;
  const C* kc = static_cast<const C*>(p.k) + int64_t{w.kvh} * p.head_stride;
  const C* vc = static_cast<const C*>(p.v) + int64_t{w.kvh} * p.head_stride;
  // Evict-first when head_tiles == 1: no other block reads a cache byte. Head tiles share
  // theirs through L2: evict-normal.
  const uint64_t pol = l2_policy(p.head_tiles == 1);
  const int nch = p.head_dim / Cfg::kX;
  const int kstride = p.block_size * Cfg::kX;  // elements between K chunks of a key
  const int pos = w.ctx - 1;
  float slope[kG], m[kG], lsum[kG], acc[kG][Cfg::kDims];
#pragma unroll
  for (int n = 0; n < kG; ++n) {
    slope[n] = head_slope_log2(p, w.h0 + n);
    m[n] = -INFINITY;
    lsum[n] = 0.f;
#pragma unroll
    for (int j = 0; j < Cfg::kDims; ++j) acc[n][j] = 0.f;
  }

  for (int base = w.begin; base < w.end; base += Cfg::kStep) {
    const int key = base + static_cast<int>(threadIdx.x);
    float sc[kG];
    if (sees(w, key)) {
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
      for (int n = 0; n < kG; ++n) sc[n] = fmaf(capped(p, dot[n]), p.score_log2, slope[n] * dist);
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
    // l >= 1: the key at the max contributes exp2(0). The sink joins it here with one split,
    // in the combine with several.
    if (p.splits == 1) l = plus_sink(l, m[n], sink_log2(p.score.sinks, w.h0 + n));
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

int64_t max_splits_by_slots(const PagedParams& p) {
  return splitkv::max_splits_by_slots(longest_context(p, kMaxStep), p.head_dim, p.batch, p.kv_heads);
}

// The longest chunk (whole `step`-key steps) whose keys span at most kTable cache blocks
// wherever it starts.
int64_t chunk_cap(const PagedParams& p, int64_t step) {
  return std::max(step, (kTable - 1) * p.block_size / step * step);
}

// The most splits any launch of p uses.
int64_t max_splits(const PagedParams& p) {
  return std::max(max_splits_by_slots(p), ceil_div(longest_context(p, kMaxStep), chunk_cap(p, kMaxStep)));
}

// Splits: as many as fill one round of `slots` resident blocks with `units` blocks per split
// (decode's plan_splits), in chunks of whole `step`-key steps, and no chunk longer than
// chunk_cap (the block-table window). One split means none: the kernel writes o.
void plan_splits(Paged& d, const PagedParams& p, int64_t units, int64_t slots, int64_t step) {
  const int64_t longest = longest_context(p, d.key_align);
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
  // A window starts on a whole step (a warp's tile, or the CUDA-core kernel's step): the block's
  // first step holds a key it sees (a tile of none would give the softmax -inf - -inf). Bulk
  // tiles are whole cache blocks, so their steps are multiples of the block size already.
  d.key_align = step;
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

}  // namespace

void paged_flash(const PagedParams& p, const LaunchContext& ctx) {
  with_types(p.dtype, p.kv_dtype, "paged/paged_flash", [&](auto t, auto c) {
    using T = decltype(t);
    using C = decltype(c);
    if constexpr (!std::is_same_v<T, float>) {
      // A cache block of a kv head whose rows are 16 bytes (fp8 at block 16, 16-bit at 8) is one
      // region of head_dim x 16 bytes, which sm_90 copies whole (see mma_paged_kernel).
      const bool bulk =
          ctx.caps != nullptr && ctx.caps->arch() >= 90 && p.block_size * static_cast<int64_t>(sizeof(C)) == 16;
      if (p.head_dim <= 128)
        return with_head_dim_class<64, 128>(p.head_dim, [&](auto d) {
          with_bool(bulk, [&](auto b) { launch_mma<T, C, d, b>(p, ctx); });
        });
    }
    if (p.heads == p.kv_heads) return launch_simt<T, C, 1>(p, ctx);
    return launch_simt<T, C, 4>(p, ctx);
  });
}

namespace {

bool power_of_two(int64_t x) { return x > 0 && (x & (x - 1)) == 0; }

}  // namespace

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

}  // namespace attnbench::paged_impl
