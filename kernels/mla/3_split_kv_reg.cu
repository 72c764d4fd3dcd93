// mla rung 3, split_kv_reg: rung 2 (split_kv, 2_split_kv.cu) with its tile's work re-laid out in
// registers. Same blocks (sequence, group of query rows, split of the context), same TMA tiles of
// 32 keys, same host plan (split_plan.hpp) and combine; what changes is how the 4 warps of a
// 16-row slice share a tile, because rung 2, verified and timed on an H100 (run 274), reached
// only 68% of the read bandwidth and its fp8 cache ran slower than bf16.
//
// Why rung 2 stops at 68% (H100 80GB HBM3, read bandwidth 3075 GB/s, cold L2): b64 h16 s1
// ctx16384 ran 0.5659 ms, 2139 GB/s; its fp8 twin 0.8441 ms. Bytes in flight were not the
// limit: 128 blocks (2 splits of 8192 on 132 SMs) each had one or two 36.9 KB tiles in flight
// (37-74 KB an SM; Little's law wants ~16-24 KB an SM for 3 TB/s at 0.6-0.8 us), and the
// combine moves 4 MB beside 1.2 GB. The time was the block's own: 2.2 us a 32-key tile
// (0.5659 ms / 256 tiles) where the bytes need 1.5 us (36.9 KB at 3075 / 128 GB/s an SM), with
// one warp per SM sub-partition to hide nothing. Rung 2 splits S = Q Kᵀ by keys (4 key warps x
// 8 keys over the full k = 576), so every warp re-reads the whole Q of its rows by ldmatrix each
// tile (54 ldmatrix.x4 a warp; Q alone, 18 KB, read four times a tile: 74 KB of shared reads for
// 37 KB of cache), its 36 mma run as two dependent chains of 18, and the softmax's row maxima and
// P cross shared memory between two block barriers a tile. Its fp8 dequantisation (code -> 16
// bits into a second shared tile, 8 rows a warp, one after another) is latency-bound and adds
// 37 KB of shared traffic: 3.3 us a tile.
//
// What this rung changes, per tile, with 4 warps per 16 rows ("key warps" kw = 0..3; 32 rows:
// two row slices of 4):
//   S = Q Kᵀ split over k: warp kw takes k = its 128 latent columns 128 kw .. + 128 and 16 RoPE
//     columns 512 + 16 kw .. + 16 (9 k16 steps of mma.sync m16n8k16) for all 32 keys (4 n8
//     tiles: 8 independent accumulator chains of depth 4-5). Its Q fragments (36 registers) are
//     loaded once from global memory and stay in registers for the whole split: no Q traffic.
//   the warp's partial S (16 rows x 32 keys, fp32) goes to shared memory (double-buffered), one
//     barrier, and every key warp sums the four partials in the same order: each holds the
//     whole S of its rows, bit-equal in the four, so the online softmax (row max over the quad,
//     exp2 units, rescale only when a max grew) needs no further barrier and gives every warp
//     the same m and l. P, rounded to the 16-bit type (the faithful reference's rounding; l sums
//     the unrounded p), becomes the A fragments of P V in registers (an S C fragment pair is a
//     P A fragment): P never touches shared memory.
//   O += P V: warp kw takes value dims 128 kw .. + 128 of its rows over the 32 keys, V = the
//     first 512 columns of the very rows K was (ldmatrix.trans). O stays in registers (64 a
//     thread).
// One barrier a tile where rung 2 has two. The price: Q's 36 and P's registers leave no room for
// 32 rows a warp, so the row classes are 16 and 32 (kSplitKvRegMaxRows), not rung 2's 16, 32
// and 64: 48 or 64 rows take two groups, the second reading the cache from L2 right after the
// first (the memory-bound shapes, heads · s_q <= 32, are one group either way).
// Tiles reach shared memory by bulk copies (sm_90's TMA unit, completed through one mbarrier
// per stage): lane i of warp 0 copies key i's whole row (1152 bytes, or 656 of fp8) through the
// block table, so any block_size works and a FlashMLA block of 64 is two tiles. Three stages,
// issued at tile n's barrier: 16-bit, tile n + 2 (into tile n - 1's stage: its P V ended before
// this barrier); fp8, tile n + 3 (into tile n's own raw stage: only S reads it, before the
// barrier). The table entries of each copy are loaded one tile ahead. Keys past the split's end
// are never read: their lanes copy the split's last key again, finite, and the mask gives them
// p = 0 (the pool's spare slots hold NaN, and 0 · NaN would not be 0).
// The fp8 cache (FlashMLA's 656-byte token: 512 e4m3 codes, four fp32 scales, 64 bf16 RoPE
// values) is dequantised in registers, as FlashMLA's fp8 kernel does, not in shared memory as
// rung 2 does: S permutes k (free: Q's fragments are loaded once, in the same order), so that
// lane (g, t4) reads 32 consecutive codes of key g (two 16-byte loads, conflict-free at the
// 656-byte pitch) and each 4-code word is one k16 step's B fragment after two
// cvt.f16x2.e4m3x2 (exact; bf16 queries: f16 -> f32 -> bf16, exact). Warp kw's 128 latent
// columns are exactly scale chunk kw, so the code sums get the key's power-of-two scale once, on
// the fp32 accumulator (exact), and the RoPE step is added after. For P V the same converted
// codes are stored once as a 16-bit V tile (512 wide, double-buffered, 16-byte chunks swizzled
// so that the stores are conflict-free as well as the ldmatrix.trans reads) and the scale moves
// onto P: warp kw's dims are chunk kw, so P's column for key j is multiplied by scale[j][kw] (a
// power of two: exact after the rounding of P). The faithful reference reads the cache as
// code · scale in fp32: the kernel's products are its products, bit for bit, with bf16
// queries; fp16 queries get the RoPE values rounded from bf16 to fp16 (exact but below 2^-14).
// Causal speculative tokens: row t · heads + h sees keys <= context - s_q + t; the mask is one
// compare per score against the row's bound (min(bound, split end - 1)).
// Splits: plan_split_kv (split_plan.hpp, with this rung's row classes) as rung 2: the shortest
// chunks of whole tiles (at least 256 keys) whose blocks holding keys fit one round of the
// card's resident blocks; with splits, fp32 partials merged by the shared combine
// (common/split_kv.cuh), launched as a programmatic dependent launch.
// Predicted, against rung 2's run 274: no Q traffic, 8 chains of depth 4-5, one barrier, P in
// registers; fp8 two 16-byte loads and 16 cvt a key-tile row in registers. b64 h16 s1
// ctx16384 bf16 ~0.43-0.45 ms (~2700-2800 GB/s, ~88-91%), fp8 ~0.26-0.30 ms (1.9-2.2x faster
// than rung 2's bf16, 1.5-1.7x this bf16).
// Verified on an H100 (run 277: smoke/mla and cases/mla, every rung, 226 passed, 0 failed;
// memcheck clean). Timed (H100 80GB HBM3, run 277, cold L2, rung 2 in the same call): b64 h16
// s1 ctx16384 bf16 0.4709 ms, 2570 GB/s, 81.6% of the measured read bandwidth (rung 2 0.5625
// ms, 68.3%): faster, but short of the prediction. fp8 0.5644 ms (rung 2 0.8684): faster than
// rung 2's fp8 yet still slower than this bf16 (0.83x its speed): the fp8 prediction failed and
// issue 49's 1.7x is not met. Compute-bound b64 h128 s1 ctx4096 bf16: 0.4900 ms, 149.0 TFLOP/s
// against rung 2's 0.4725 ms, 154.5 (issue 49's 600 TFLOP/s not met: the Hopper rung's job).
// Limits: fp16/bf16 queries (fp32 runs naive), latent_dim 512 and rope_dim 64 (the kernel is
// specialised to DeepSeek's dims), sm_90 (bulk copies).
#include <cstdint>
#include <string>
#include <type_traits>

#include "kernels/mla/split_kv.cuh"

namespace attnbench::mla_impl {
namespace {

// One configuration. kRows: the row class (16 or 32); kRowWarps row slices of 16 rows, 4 key
// warps each (k chunk kw of S, value dims 128 kw .. + 128 of O). Shared memory: kStages copy
// stages (16-bit: the tile itself, rows of pitch 1152 + 16 bytes, ldmatrix conflict-free; fp8:
// the raw 656-byte rows), fp8's two 16-bit V tiles (512 wide, pitch 1024 + 16), the two
// partial-S buffers ([row][key warp][32 keys] fp32, row pitch 136 floats: the float2 stores and
// loads of a quarter warp, 4 rows x 4 lanes, fall in distinct banks), an mbarrier per stage.
// 16-bit: 127 KB at 16 rows, 144 KB at 32; fp8: 144 KB at 16, 161 KB at 32.
template <class T, class C, int kRows>
struct Cfg {
  static constexpr bool kFp8 = kIsFp8<C>;
  static constexpr int kTile = static_cast<int>(kSplitTile);
  static constexpr int kStages = 3;
  // Tiles in flight ahead of the one computed: fp8 frees its raw stage at the tile's barrier.
  static constexpr int kAhead = kFp8 ? kStages : kStages - 1;
  static constexpr int kRowWarps = kRows / 16;
  static constexpr int kKeyWarps = 4;
  static constexpr int kWarps = kRowWarps * kKeyWarps, kThreads = 32 * kWarps;
  static constexpr int kNTiles = kTile / 8;                // 4 n8 tiles of keys in S
  static constexpr int kSteps = kLatent / kKeyWarps / 16 + 1;  // 8 latent + 1 RoPE k16 steps
  static constexpr int kWarpDims = kLatent / kKeyWarps;    // 128: 16 n8 tiles of O
  static constexpr int kDimTiles = kWarpDims / 8;
  static constexpr int kPitch = kWidth * 2 + 16;           // 1168 bytes: 16-bit stage rows
  static constexpr int kVPitch = kLatent * 2 + 16;         // 1040 bytes: fp8's V tile rows
  static constexpr int kTokenBytes = kFp8 ? kFp8TokenBytes : kWidth * 2;
  static constexpr int kRowBytes = kFp8 ? kFp8TokenBytes : kPitch;  // a stage row
  static constexpr int kStageBytes = kTile * kRowBytes;
  static constexpr int kVTileBytes = kTile * kVPitch;
  static constexpr int kSPitch = kKeyWarps * kTile + 8;    // 136 floats
  static constexpr int kSBufBytes = kRows * kSPitch * 4;
  static constexpr int kStageOff = 0;
  static constexpr int kVOff = kStageOff + kStages * kStageBytes;
  static constexpr int kSOff = kVOff + (kFp8 ? 2 * kVTileBytes : 0);
  static constexpr int kBarOff = kSOff + 2 * kSBufBytes;
  static constexpr int kSmemBytes = kBarOff + 8 * kStages;
  static_assert(kRows == 16 || kRows == 32, "row classes of one or two 16-row slices");
  static_assert(kSteps == 9 && kTile == 32, "S: 8 latent + 1 RoPE k16 steps a key warp; O: two k16 steps a tile");
  static_assert(kTokenBytes % 16 == 0 && kRowBytes % 16 == 0 && kStageBytes % 16 == 0, "bulk copies of 16 bytes");
  static_assert(kVOff % 16 == 0 && kSOff % 16 == 0 && kBarOff % 8 == 0, "aligned shared regions");
};

__device__ __forceinline__ uint32_t lds32(uint32_t addr) {
  uint32_t v;
  asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(v) : "r"(addr) : "memory");
  return v;
}
__device__ __forceinline__ uint2 lds64(uint32_t addr) {
  uint2 v;
  asm volatile("ld.shared.v2.b32 {%0, %1}, [%2];\n" : "=r"(v.x), "=r"(v.y) : "r"(addr) : "memory");
  return v;
}
__device__ __forceinline__ uint4 lds128(uint32_t addr) {
  uint4 v;
  asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(addr)
               : "memory");
  return v;
}
__device__ __forceinline__ void sts64(uint32_t addr, float x, float y) {
  asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(addr), "f"(x), "f"(y) : "memory");
}
__device__ __forceinline__ void sts128(uint32_t addr, uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
  asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(a), "r"(b), "r"(c), "r"(d) : "memory");
}

// Two e4m3 codes (a 16-bit pair of a word: the f16x2 of e4m3x4_to_f16x4) as T x 2. Exact.
template <class T>
__device__ __forceinline__ uint32_t f16x2_to(uint32_t h) {
  if constexpr (std::is_same_v<T, __half>) {
    return h;
  } else {
    const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&h));
    return pack2<T>(f.x, f.y);
  }
}
// Two bf16 RoPE values as T x 2 (fp16: rounded, as the header says).
template <class T>
__device__ __forceinline__ uint32_t bf16x2_to(uint32_t w) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return w;
  } else {
    return pack2<T>(__uint_as_float(w << 16), __uint_as_float(w & 0xffff0000u));
  }
}

// fp8's V tile: 16-byte chunk c of a row (dims 8c .. + 8) lives at chunk c ^ 2 where bit 3 of c
// is set. Its rows' pitch (1040 bytes) already puts the 8 rows of an ldmatrix in distinct banks;
// the swizzle does the same for the register stores, whose quarter warp (2 keys x 4 lanes t4)
// writes chunks 4 t4 + c: without it t4 = 0 and 2 (chunks 8 apart) share banks.
__host__ __device__ constexpr int v_swizzle(int c) { return c ^ (((c >> 3) & 1) << 1); }

// Q's element pair (dims d, d + 1) of row r as a 32-bit fragment register; 0 past the rows.
template <class T>
__device__ __forceinline__ uint32_t q_pair(const T* qrow, bool ok, int d) {
  return ok ? __ldg(reinterpret_cast<const unsigned int*>(qrow + d)) : 0u;
}

// T: q and o (fp16/bf16, the mma's type); C: the cache (T, or Fp8). Grid (batch · groups, splits);
// blockIdx.x = b · groups + group. See the header for the scheme.
// Lane = 4 g + t4. m16n8k16 fragments (common/mma.cuh): A rows {g, g + 8} x k {2t4.., 2t4 + 8..};
// B k {2t4.., 2t4 + 8..} x col g; C rows {g, g + 8} x cols {2t4, 2t4 + 1}.
template <class T, class C, int kRows>
__global__ void __launch_bounds__(Cfg<T, C, kRows>::kThreads, 1) split_kv_reg_kernel(const __grid_constant__ MlaSplit p) {
  using G = Cfg<T, C, kRows>;
  constexpr int kTile = G::kTile, kStages = G::kStages, kAhead = G::kAhead, kSteps = G::kSteps;
  constexpr int kNT = G::kNTiles, kSPitch = G::kSPitch;
  extern __shared__ __align__(128) unsigned char smem[];
  const uint32_t s_base = smem_addr(smem);
  const uint32_t sStage = s_base + G::kStageOff, sV = s_base + G::kVOff, sS = s_base + G::kSOff;
  const uint32_t sBar = s_base + G::kBarOff;
  const int tid = static_cast<int>(threadIdx.x), lane = tid % 32, warp = tid / 32;
  const int kw = warp % G::kKeyWarps, rw = warp / G::kKeyWarps;
  const int g = lane / 4, t4 = lane % 4;

  const int group = static_cast<int>(blockIdx.x) % p.groups, b = static_cast<int>(blockIdx.x) / p.groups;
  const int split = static_cast<int>(blockIdx.y);
  const int ctx = p.context_lens[b];
  int64_t begin64, end64;
  // A split past this context holds no key: the whole block leaves (no barrier yet), and the
  // combine never reads its partial.
  if (!split_range(p.splits, p.chunk, split, ctx, begin64, end64)) return;
  const int begin = static_cast<int>(begin64), end = static_cast<int>(end64);
  const int ntiles = (end - begin + kTile - 1) / kTile;
  const int rows = p.heads;  // s_q · heads
  const int r0 = group * kRows, nrows = min(kRows, rows - r0);

  // Copies of tile n into stage n % kStages by warp 0: lane i copies key begin + n · kTile + i,
  // or the split's last key where that is past the end (finite: never a spare slot's NaN).
  const int32_t* table = p.block_tables + int64_t{b} * p.max_blocks;
  const int bs = p.block_size;
  const auto key_of = [&](int n) { return min(begin + n * kTile + lane, end - 1); };
  const auto block_of = [&](int n) { return n < ntiles ? __ldg(table + key_of(n) / bs) : 0; };
  const auto issue = [&](int n, int block) {
    const int stage = n % kStages;
    const uint32_t bar = sBar + 8 * stage;
    if (lane == 0) mbar_expect_tx(bar, kTile * G::kTokenBytes);
    __syncwarp();
    const int key = key_of(n);
    const uint8_t* src = p.cache + (static_cast<int64_t>(block) * bs + key % bs) * G::kTokenBytes;
    bulk_copy(sStage + stage * G::kStageBytes + lane * G::kRowBytes, src, G::kTokenBytes, bar);
  };
  int next_block = 0;  // warp 0: its lane's table entry for tile n + kAhead, loaded a tile ahead
  if (warp == 0) {
    if (lane == 0)
      for (int s = 0; s < kStages; ++s) mbar_init(sBar + 8 * s, 1);
    __syncwarp();
    for (int n = 0; n < kAhead && n < ntiles; ++n) issue(n, block_of(n));
    next_block = block_of(kAhead);
  }

  // This warp's Q fragments, once, in registers: rows rw · 16 + {g, g + 8} of the group, k
  // steps 0-7 over latent chunk kw, step 8 over RoPE dims 16 kw .. + 16. 16-bit cache: the
  // fragment layout's own k order (ldmatrix B fragments); fp8: k permuted so that lane t4's
  // step i covers latent dims 32 t4 + 4i .. + 4 of the chunk (4t4 .. + 4 of the RoPE slice):
  // a0/a1 the first pair, a2/a3 the second, as its B fragment holds the key's codes.
  uint32_t qa[kSteps][4];
  {
    const int ra = rw * 16 + g, rb = ra + 8;
    const T* q = static_cast<const T*>(p.q) + (int64_t{b} * rows + r0) * kWidth;
    const T* qra = q + ra * kWidth;
    const T* qrb = q + rb * kWidth;
    const bool oka = ra < nrows, okb = rb < nrows;
#pragma unroll
    for (int i = 0; i < kSteps; ++i) {
      int d0, d1;  // the dims of a0/a1 and of a2/a3
      if constexpr (G::kFp8) {
        d0 = i < kSteps - 1 ? G::kWarpDims * kw + 32 * t4 + 4 * i : kLatent + 16 * kw + 4 * t4;
        d1 = d0 + 2;
      } else {
        d0 = (i < kSteps - 1 ? G::kWarpDims * kw + 16 * i : kLatent + 16 * kw) + 2 * t4;
        d1 = d0 + 8;
      }
      qa[i][0] = q_pair(qra, oka, d0);
      qa[i][1] = q_pair(qrb, okb, d0);
      qa[i][2] = q_pair(qra, oka, d1);
      qa[i][3] = q_pair(qrb, okb, d1);
    }
  }
  __syncthreads();  // the mbarriers are initialised

  // This lane's rows hh = 0, 1: local row rw · 16 + 8 hh + g; each sees keys <= lim (causal:
  // context - s_q + t for row t · heads + h; all keys without; never past the split's end).
  int lim[2];
  float m[2], l[2];
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    const int r = r0 + rw * 16 + 8 * hh + g;
    const int last = p.causal ? ctx - p.s_q + r / p.q_heads : ctx - 1;
    lim[hh] = min(last, end - 1);
    m[hh] = -INFINITY;
    l[hh] = 0.f;
  }
  float o[G::kDimTiles][4];
#pragma unroll
  for (int j = 0; j < G::kDimTiles; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) o[j][e] = 0.f;

  // Partial S: this lane's C fragment (rows 8 hh + g, keys 8 j + 2 t4, + 1) of key warp k at
  // [row][k][key] of a buffer.
  const uint32_t s_frag = (rw * 16 + g) * kSPitch * 4 + 2 * t4 * 4;
  // V, B of O (V is [key][dim], .trans): (keys 0-7, dims 0-7), (8-15, 0-7), (0-7, 8-15), (8-15,
  // 8-15) = b0 b1 of n8 tile 2j, b0 b1 of 2j + 1.
  constexpr int kVRow = G::kFp8 ? G::kVPitch : G::kPitch;
  const uint32_t v_frag = (lane % 16) * kVRow + (lane / 16) * 16 + kw * G::kWarpDims * 2;

  for (int n = 0; n < ntiles; ++n) {
    const int stage = n % kStages;
    const uint32_t sTile = sStage + stage * G::kStageBytes;
    mbar_wait(sBar + 8 * stage, (n / kStages) & 1);

    // This warp's part of S = Q Kᵀ: k chunk kw, all 32 keys.
    float part[kNT][4];
    float pscale[kNT][2];  // fp8: the scale of chunk kw of keys 8j + 2t4, + 1 (P's columns)
    if constexpr (G::kFp8) {
      const uint32_t sVn = sV + (n & 1) * G::kVTileBytes;
#pragma unroll
      for (int j = 0; j < kNT; ++j) {
        const uint32_t row = sTile + (8 * j + g) * G::kRowBytes;
        const uint4 c0 = lds128(row + G::kWarpDims * kw + 32 * t4);
        const uint4 c1 = lds128(row + G::kWarpDims * kw + 32 * t4 + 16);
        const uint2 rope = lds64(row + kRopeOff + 32 * kw + 8 * t4);
        const uint32_t words[8] = {c0.x, c0.y, c0.z, c0.w, c1.x, c1.y, c1.z, c1.w};
        float acc[2][4] = {}, accr[4] = {};
        uint32_t v[16];  // the key's 32 values of this lane as T x 2, in dim order
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          uint32_t lo, hi;
          e4m3x4_to_f16x4(words[i], lo, hi);
          v[2 * i] = f16x2_to<T>(lo);
          v[2 * i + 1] = f16x2_to<T>(hi);
          mma_16816<T>(acc[i & 1], qa[i], v[2 * i], v[2 * i + 1]);
        }
        mma_16816<T>(accr, qa[kSteps - 1], bf16x2_to<T>(rope.x), bf16x2_to<T>(rope.y));
        // The unscaled codes as the V tile's row (key 8j + g, dims 128 kw + 32 t4 .. + 32: its
        // 16-byte chunks 4 t4 + c of the warp's 16), stored by one row slice (the other holds
        // the same values), swizzled (v_swizzle).
        if (j % G::kRowWarps == rw) {
          const uint32_t dst = sVn + (8 * j + g) * G::kVPitch + 2 * (G::kWarpDims * kw + 32 * t4);
#pragma unroll
          for (int c = 0; c < 4; ++c)
            sts128(dst + 16 * (c ^ (t4 & 2)), v[4 * c], v[4 * c + 1], v[4 * c + 2], v[4 * c + 3]);
        }
        const uint32_t key_row = sTile + (8 * j + 2 * t4) * G::kRowBytes + kScaleOff + 4 * kw;
        pscale[j][0] = __uint_as_float(lds32(key_row));
        pscale[j][1] = __uint_as_float(lds32(key_row + G::kRowBytes));
#pragma unroll
        for (int e = 0; e < 4; ++e) part[j][e] = fmaf(acc[0][e] + acc[1][e], pscale[j][e & 1], accr[e]);
      }
    } else {
      // B fragments by ldmatrix: 8 keys x 4 chunks of 8 dims = b0 b1 of two k16 steps; the
      // RoPE step of n8 tiles j and j + 1 in one x4 (keys 8j.., 8(j+1).. x 2 chunks).
      float acc[kNT][2][4] = {};
#pragma unroll
      for (int j = 0; j < kNT; ++j)
#pragma unroll
        for (int i = 0; i < kSteps / 2; ++i) {
          uint32_t kb[4];
          ldsm_x4(kb, sTile + (8 * j + lane % 8) * G::kPitch + 2 * (G::kWarpDims * kw + 32 * i) + (lane / 8) * 16);
          mma_16816<T>(acc[j][0], qa[2 * i], kb[0], kb[1]);
          mma_16816<T>(acc[j][1], qa[2 * i + 1], kb[2], kb[3]);
        }
#pragma unroll
      for (int j = 0; j < kNT; j += 2) {
        uint32_t kb[4];
        ldsm_x4(kb, sTile + (8 * (j + lane / 16) + lane % 8) * G::kPitch + 2 * (kLatent + 16 * kw) +
                        ((lane / 8) % 2) * 16);
        mma_16816<T>(acc[j][0], qa[kSteps - 1], kb[0], kb[1]);
        mma_16816<T>(acc[j + 1][0], qa[kSteps - 1], kb[2], kb[3]);
      }
#pragma unroll
      for (int j = 0; j < kNT; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) part[j][e] = acc[j][0][e] + acc[j][1][e];
    }
    const uint32_t sSn = sS + (n & 1) * G::kSBufBytes + s_frag;
#pragma unroll
    for (int j = 0; j < kNT; ++j) {
      sts64(sSn + (kw * kTile + 8 * j) * 4, part[j][0], part[j][1]);
      sts64(sSn + 8 * kSPitch * 4 + (kw * kTile + 8 * j) * 4, part[j][2], part[j][3]);
    }
    __syncthreads();  // the partial S (and fp8's V tile) written; every warp finished tile n - 1
    if (warp == 0 && n + kAhead < ntiles) {
      issue(n + kAhead, next_block);  // 16-bit: tile n - 1's stage; fp8: tile n's raw stage
      next_block = block_of(n + kAhead + 1);
    }

    // The whole S of this warp's rows, the four partials summed in one order (bit-equal in the
    // four key warps), in exp2 units, -inf where the row does not see the key.
    float s[kNT][4];
#pragma unroll
    for (int j = 0; j < kNT; ++j) {
      float x[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
      for (int k = 0; k < G::kKeyWarps; ++k) {
        const uint2 a = lds64(sSn + (k * kTile + 8 * j) * 4);
        const uint2 c = lds64(sSn + 8 * kSPitch * 4 + (k * kTile + 8 * j) * 4);
        x[0] += __uint_as_float(a.x);
        x[1] += __uint_as_float(a.y);
        x[2] += __uint_as_float(c.x);
        x[3] += __uint_as_float(c.y);
      }
      const int key0 = begin + n * kTile + 8 * j + 2 * t4;
#pragma unroll
      for (int e = 0; e < 4; ++e) s[j][e] = key0 + (e & 1) <= lim[e / 2] ? x[e] * p.scale_log2 : -INFINITY;
    }

    // Online softmax over the tile's 32 keys: row max over the quad, p, l, P as A fragments.
    float alpha[2];
    bool grew = false;
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      float mx = -INFINITY;
#pragma unroll
      for (int j = 0; j < kNT; ++j) mx = fmaxf(mx, fmaxf(s[j][2 * hh], s[j][2 * hh + 1]));
      mx = allreduce_max<4, XorOrder::low_first>(mx);
      const float m_new = fmaxf(m[hh], mx);
      // m = -inf until the row sees a key: alpha = exp2(-inf) = 0 on o = l = 0, and never
      // -inf - -inf; a row that still sees none subtracts 0 (p = exp2(-inf) = 0).
      alpha[hh] = m_new == -INFINITY ? 1.f : exp2_approx(m[hh] - m_new);
      grew = grew || m_new > m[hh];
      m[hh] = m_new;
      l[hh] *= alpha[hh];
      const float sub = m_new == -INFINITY ? 0.f : m_new;
#pragma unroll
      for (int j = 0; j < kNT; ++j) {
        s[j][2 * hh] = exp2_approx(s[j][2 * hh] - sub);
        s[j][2 * hh + 1] = exp2_approx(s[j][2 * hh + 1] - sub);
        l[hh] += s[j][2 * hh] + s[j][2 * hh + 1];
      }
    }
    // P's A fragments of k16 step kk: n8 tiles 2kk (a0 row g, a1 row g + 8) and 2kk + 1 (a2, a3);
    // fp8: times the keys' scales of chunk kw (powers of two: exact after P's rounding).
    uint32_t pa[kTile / 16][4];
#pragma unroll
    for (int kk = 0; kk < kTile / 16; ++kk)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int j = 2 * kk + h;
        float c0 = 1.f, c1 = 1.f;
        if constexpr (G::kFp8) {
          c0 = pscale[j][0];
          c1 = pscale[j][1];
        }
        pa[kk][2 * h] = pack2<T>(s[j][0] * c0, s[j][1] * c1);
        pa[kk][2 * h + 1] = pack2<T>(s[j][2] * c0, s[j][3] * c1);
      }

    if (__any_sync(0xffffffffu, grew)) {
#pragma unroll
      for (int j = 0; j < G::kDimTiles; ++j) {
        o[j][0] *= alpha[0];
        o[j][1] *= alpha[0];
        o[j][2] *= alpha[1];
        o[j][3] *= alpha[1];
      }
    }
    // O += P V: this warp's rows, its 128 dims, the tile's 32 keys (two k16 steps).
    const uint32_t vTile = G::kFp8 ? sV + (n & 1) * G::kVTileBytes : sTile;
#pragma unroll
    for (int kk = 0; kk < kTile / 16; ++kk)
#pragma unroll
      for (int j = 0; j < G::kDimTiles / 2; ++j) {
        uint32_t vb[4];
        ldsm_x4_trans(vb, vTile + v_frag + 16 * (G::kFp8 ? v_swizzle(2 * j) : 2 * j) + kk * 16 * kVRow);
        mma_16816<T>(o[2 * j], pa[kk], vb[0], vb[1]);
        mma_16816<T>(o[2 * j + 1], pa[kk], vb[2], vb[3]);
      }
  }
  allow_dependents();  // the combine may launch; it waits for this grid's partials

  // l over the quad (each lane summed its own keys' p); the same in the four key warps.
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    const float sum = allreduce_sum<4, XorOrder::low_first>(l[hh]);
    const int lr = rw * 16 + 8 * hh + g;
    if (lr >= nrows) continue;
    const int64_t bh = int64_t{b} * rows + r0 + lr;  // o's row
    const int d0 = kw * G::kWarpDims + 2 * t4;
    if (p.splits == 1) {
      // l >= 1: the key at the row's max contributes exp2(0), and every row sees key 0.
      const float inv = 1.f / sum;
      T* out = static_cast<T*>(p.o) + bh * kLatent + d0;
#pragma unroll
      for (int j = 0; j < G::kDimTiles; ++j)
        *reinterpret_cast<uint32_t*>(out + 8 * j) = pack2<T>(o[j][2 * hh] * inv, o[j][2 * hh + 1] * inv);
    } else {
      // A row that saw no key of this split (a speculative token's last split) writes m = -inf,
      // l = 0, o = 0: the combine skips it.
      const int64_t row = bh * p.splits + split;
      float* out = p.part_o + row * kLatent + d0;
#pragma unroll
      for (int j = 0; j < G::kDimTiles; ++j)
        *reinterpret_cast<float2*>(out + 8 * j) = make_float2(o[j][2 * hh], o[j][2 * hh + 1]);
      if (kw == 0 && t4 == 0) p.part_ml[row] = make_float2(m[hh], sum);
    }
  }
}

template <class T, class C, int kRows>
void launch(const MlaParams& p, const LaunchContext& ctx) {
  using G = Cfg<T, C, kRows>;
  constexpr const char* kName = "mla/split_kv_reg";
  const auto kernel = split_kv_reg_kernel<T, C, kRows>;
  static const int per_sm = splitkv::resident_blocks(kernel, G::kThreads, G::kSmemBytes, kName);
  const int slots =
      splitkv::sm_count(ctx, "mla/split_kv_reg: needs the device's SM count (LaunchContext::caps)") * per_sm;
  const SplitPlan plan =
      plan_split_kv(p.host_context_lens, p.batch, p.longest_context, p.s_q * p.heads, slots, kSplitKvRegMaxRows);
  MlaSplit d = split_args(p, plan);
  const MlaSplitHost h = host_of(p);
  splitkv::launch_split<T>(d, h, ctx, kernel, p.batch * plan.groups, G::kThreads, kName, G::kSmemBytes);
}

// The launch's configuration, as f(T{}, C{}, integral_constant<int, kRows>{}).
template <class F>
decltype(auto) with_config(const MlaParams& p, F&& f) {
  return with_split_config<kSplitKvRegMaxRows, 16, 32>(p, "mla/split_kv_reg", std::forward<F>(f));
}

}  // namespace

void split_kv_reg(const MlaParams& p, const LaunchContext& ctx) {
  with_config(p, [&](auto t, auto c, auto rows) { launch<decltype(t), decltype(c), decltype(rows)::value>(p, ctx); });
}

std::size_t split_kv_reg_workspace(const MlaParams& p) { return split_workspace(p, kSplitKvRegMaxRows); }

std::string split_kv_reg_supports(const MlaParams& p, const DeviceCaps& caps) {
  if (const std::string r = split_reason(p, caps, kSplitKvRegMaxRows); !r.empty()) return r;
  return smem_reason(caps, with_config(p, [](auto t, auto c, auto r) {
    return Cfg<decltype(t), decltype(c), decltype(r)::value>::kSmemBytes;
  }));
}

}  // namespace attnbench::mla_impl
