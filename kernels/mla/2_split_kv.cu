// mla rung 2, split_kv: one read of the latent cache for all of a sequence's query rows, on
// tensor cores, the context split over the SMs. What rung 1 lacks is MLA's point: every head and
// query token of a sequence reads the same latent rows, so the head loop belongs inside the
// block. Here a block takes (sequence, group of up to 64 query rows, split of the context): its
// rows are the sequence's (query token t, head h) pairs, row t · heads + h of the sequence, as
// o lays them out; a sequence of heads · s_q <= 64 rows is one group (row classes 16, 32 and 64:
// the fewest that hold them), so each cached token crosses the memory bus once. More rows take
// several groups of 64, each reading the cache again (adjacent blocks, mostly from L2): that is
// the compute-bound regime, the Hopper rung's.
//
// The block streams its split of the context in tiles of 32 keys (half a FlashMLA block of
// 64), and per tile computes, as FlashAttention-2 does with the roles of warps changed:
//   S = Q Kᵀ over k = 576 (mma.sync m16n8k16, fp32 accumulators): Q is the group's rows in
//     shared memory (copied once), K the tile's rows; warp (rw, kw) takes rows of row slice rw
//     (16 or 32) and the 8 keys kw (of 4), two accumulator chains over the even and odd k16
//     steps so that 36 dependent mma do not serialise.
//   the online softmax of each row over the 4 key warps: each writes its keys' row max to
//     shared memory, a barrier, and all four take the same max of the four (the same values in
//     the same order: bit-equal m in every warp of a row), so they rescale alike; exp2 units,
//     rescale only when some row's max grew. P is rounded to the 16-bit type (the faithful
//     reference's rounding) and written to shared memory; l sums the unrounded p.
//   O += P V after a second barrier: warp (rw, kw) now takes value dims kw · 128 .. + 128 of
//     its rows over all 32 keys, V = the first 512 columns of the very rows K was (no second
//     read of anything). O stays in registers for the whole split (64 or 128 per thread).
// Tiles reach shared memory by bulk copies (sm_90's TMA unit, completed through one mbarrier
// per stage): lane i of warp 0 copies key i's whole row (1152 bytes, or 656 of fp8) through the
// block table into a row of pitch 1152 + 16 bytes (ldmatrix conflict-free, as flash_mma's
// padding), so any block_size works and a FlashMLA block of 64 is two tiles. Three stages: the
// copies of tile n + 2 go out at the first barrier of tile n (every warp has then finished tile
// n - 1, whose stage they reuse), so two tiles are in flight while one is computed; the table
// entries of each copy are loaded one tile ahead, off the copy's critical path. Keys past the
// split's end are never read: their lanes copy the split's last key again, finite, and the mask
// gives them p = 0 (the pool's spare slots hold NaN, and 0 · NaN would not be 0).
// The fp8 cache (FlashMLA's 656-byte token: 512 e4m3 codes, four fp32 scales, 64 bf16 RoPE
// values) is copied raw (3 stages of 21 KB) and dequantised into a 16-bit tile (2 of them, so
// that the warps of a tile never wait for the previous tile's P V): each key warp converts its
// own 8 keys (code -> f16 exact, times the tile's power-of-two scale -> the queries' type,
// exact for bf16, and for fp16 while the values stay inside fp16's range), so S needs only a
// warp (or 2-warp) barrier. The faithful reference reads the cache as code · scale in fp32 and
// rounds nothing else, so the kernel's K and V are the reference's, bit for bit, with bf16
// queries; fp16 queries get the RoPE values rounded from bf16 to fp16 (exact but below 2^-14).
// Causal speculative tokens: row t · heads + h sees keys <= context - s_q + t; the mask is one
// compare per score against the row's bound (min(bound, split end - 1)).
// Splits: plan_split_kv (split_plan.hpp) takes the host's context lengths (FlashMLA's
// get_mla_metadata does the same) and cuts the contexts into the shortest chunks of whole tiles
// (at least 256 keys) whose blocks holding keys fit one round of the card's resident blocks; a
// batch that fills the card alone runs one split, which normalises and writes o itself. With
// splits, each block writes its unnormalised O and (m, l) as an fp32 partial, and the shared
// combine (common/split_kv.cuh, the decode and paged rungs') merges them, launched as a
// programmatic dependent launch; its "heads" are the sequence's s_q · heads rows.
// Limits: fp16/bf16 queries (fp32 runs naive), latent_dim 512 and rope_dim 64 (the kernel is
// specialised to DeepSeek's dims), sm_90 (bulk copies). Verified on an H100 (run 274: every mla
// case, compute-sanitizer clean) and timed: b64 h16 s1 ctx16384 0.5659 ms, 68% of the read
// bandwidth; its fp8 twin 0.8441 ms, slower than bf16. Rung 3 (3_split_kv_reg.cu) says why.
#include <cstdint>
#include <string>
#include <type_traits>

#include "kernels/mla/split_kv.cuh"

namespace attnbench::mla_impl {
namespace {

// One configuration. kRows: the row class; kMT m16 tiles per warp, kRowWarps row slices; 4 key
// warps per slice (8 keys of a tile each in S, 128 value dims each in O). Shared memory: Q
// [kRows][kPitch], the 16-bit tiles (16-bit cache: the kStages copy stages themselves; fp8: 2
// dequantised tiles, then kStages raw stages), P [kRows][32 keys] (pitch 80 bytes: ldmatrix
// and the 32-bit stores conflict-free), the key warps' row maxima and sums, an mbarrier per stage.
// 16-bit: 131 KB at 16 rows, 190 KB at 64; fp8: 215 KB at 64.
template <class T, class C, int kRows>
struct Cfg {
  static constexpr bool kFp8 = kIsFp8<C>;
  static constexpr int kTile = static_cast<int>(kSplitTile);
  static constexpr int kStages = 3;
  static constexpr int kMT = kRows >= 32 ? 2 : 1;
  static constexpr int kRowWarps = kRows / (16 * kMT);
  static constexpr int kKeyWarps = 4;
  static constexpr int kWarps = kRowWarps * kKeyWarps, kThreads = 32 * kWarps;
  static constexpr int kWarpKeys = kTile / kKeyWarps;      // 8: one n8 tile of S
  static constexpr int kWarpDims = kLatent / kKeyWarps;    // 128: 16 n8 tiles of O
  static constexpr int kDimTiles = kWarpDims / 8;
  static constexpr int kPitch = kWidth * 2 + 16;           // 1168 bytes
  static constexpr int kPPitch = kTile * 2 + 16;           // 80 bytes
  static constexpr int kTokenBytes = kFp8 ? kFp8TokenBytes : kWidth * 2;
  static constexpr int kQBytes = kRows * kPitch;
  static constexpr int kTileBytes = kTile * kPitch;
  static constexpr int kRawBytes = kTile * kTokenBytes;   // one stage as copied
  static constexpr int kKvOff = kQBytes;
  static constexpr int kKvBytes = (kFp8 ? 2 : kStages) * kTileBytes;
  static constexpr int kRawOff = kKvOff + kKvBytes;
  static constexpr int kPOff = kRawOff + (kFp8 ? kStages * kRawBytes : 0);
  static constexpr int kRedOff = kPOff + kRows * kPPitch;
  static constexpr int kRedFloats = kKeyWarps * kRows;
  static constexpr int kBarOff = kRedOff + 2 * 4 * kRedFloats;
  static constexpr int kSmemBytes = kBarOff + 8 * kStages;
  static_assert(kRowWarps * kMT * 16 == kRows, "row slices of whole m16 tiles");
  static_assert(kWarpKeys == 8 && kTile == 32, "S: one n8 tile per key warp; O: two k16 steps per tile");
  static_assert(kTokenBytes % 16 == 0 && kPitch % 16 == 0 && kRawBytes % 16 == 0, "bulk copies of 16-byte multiples");
  static_assert(kRedOff % 16 == 0 && kBarOff % 8 == 0, "aligned shared regions");
  static_assert(kWarpKeys % kRowWarps == 0, "fp8: the row slices of a key warp share its keys' dequantisation");
};

// Named barrier `id` over `threads` threads (ids 1.. : __syncthreads is 0).
__device__ __forceinline__ void bar_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// fp8: key `row` of a raw stage (656 bytes) -> row `row` of a 16-bit tile, by the 32 lanes of a
// warp: two passes of 8 codes a lane (dims 256 i + 8 lane, scale (256 i + 8 lane) / 128), each
// an 8-byte load and one 16-byte store; then lanes 0-7 the 64 RoPE values, 16 bytes each.
template <class T>
__device__ __forceinline__ void dequantize_row(const unsigned char* raw, unsigned char* dst, int lane) {
  const float* scales = reinterpret_cast<const float*>(raw + kLatent);
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int d = 256 * i + 8 * lane;
    const uint2 codes = *reinterpret_cast<const uint2*>(raw + d);
    const float s = scales[d / 128];
    uint32_t h[4];
    e4m3x4_to_f16x4(codes.x, h[0], h[1]);
    e4m3x4_to_f16x4(codes.y, h[2], h[3]);
    uint32_t w[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&h[k]));
      w[k] = pack2<T>(f.x * s, f.y * s);
    }
    *reinterpret_cast<uint4*>(dst + 2 * d) = make_uint4(w[0], w[1], w[2], w[3]);
  }
  if (lane < kRope / 8) {
    uint4 r = *reinterpret_cast<const uint4*>(raw + kLatent + 4 * (kLatent / 128) + 16 * lane);
    if constexpr (std::is_same_v<T, __half>) {
      float f[8];
      unpack<__nv_bfloat16>(r, f);
      r = pack<__half>(f);
    }
    *reinterpret_cast<uint4*>(dst + 2 * kLatent + 16 * lane) = r;
  }
}

// T: q and o (fp16/bf16, the mma's type); C: the cache (T, or Fp8). Grid (batch · groups, splits);
// blockIdx.x = b · groups + group. See the header for the scheme.
// Lane = 4 g + t4. m16n8k16 fragments (common/mma.cuh): A rows {g, g + 8} x k {2t4.., 2t4 + 8..};
// B k {2t4.., 2t4 + 8..} x col g; C rows {g, g + 8} x cols {2t4, 2t4 + 1}.
template <class T, class C, int kRows>
__global__ void __launch_bounds__(Cfg<T, C, kRows>::kThreads, 1) split_kv_kernel(const __grid_constant__ MlaSplit p) {
  using G = Cfg<T, C, kRows>;
  constexpr int kTile = G::kTile, kStages = G::kStages, kMT = G::kMT, kPitch = G::kPitch, kPPitch = G::kPPitch;
  extern __shared__ __align__(128) unsigned char smem[];
  const uint32_t s_base = smem_addr(smem);
  const uint32_t sQ = s_base, sKv = s_base + G::kKvOff, sP = s_base + G::kPOff, sBar = s_base + G::kBarOff;
  float* red_max = reinterpret_cast<float*>(smem + G::kRedOff);  // [key warp][row]
  float* red_l = red_max + G::kRedFloats;                          // [key warp][row]
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
    if (lane == 0) mbar_expect_tx(bar, G::kRawBytes);
    __syncwarp();
    const int key = key_of(n);
    const uint8_t* src = p.cache + (static_cast<int64_t>(block) * bs + key % bs) * G::kTokenBytes;
    const uint32_t dst = G::kFp8 ? s_base + G::kRawOff + stage * G::kRawBytes + lane * G::kTokenBytes
                                 : sKv + stage * G::kTileBytes + lane * kPitch;
    bulk_copy(dst, src, G::kTokenBytes, bar);
  };
  int next_block = 0;  // warp 0: its lane's table entry for tile n + kStages - 1, loaded a tile ahead
  if (warp == 0) {
    if (lane == 0)
      for (int s = 0; s < kStages; ++s) mbar_init(sBar + 8 * s, 1);
    __syncwarp();
    for (int n = 0; n < kStages - 1 && n < ntiles; ++n) issue(n, block_of(n));
    next_block = block_of(kStages - 1);
  }

  // The group's query rows, once (cp.async; rows past the sequence's are zeros).
  {
    const T* q = static_cast<const T*>(p.q) + (int64_t{b} * rows + r0) * kWidth;
    constexpr int kChunks = kWidth / 8;  // 72 16-byte chunks a row
    for (int i = tid; i < kRows * kChunks; i += G::kThreads) {
      const int r = i / kChunks, c = i % kChunks;
      const bool ok = r < nrows;
      cp_async_16(sQ + r * kPitch + c * 16, ok ? static_cast<const void*>(q + r * kWidth + c * 8) : p.q, ok);
    }
    cp_async_commit();
    cp_async_wait<0>();
  }
  __syncthreads();  // Q landed; the mbarriers are initialised

  // This lane's rows: local row lr(mt, hh) = rw · 16 kMT + 16 mt + 8 hh + g; each sees keys
  // <= lim (causal: context - s_q + t for row t · heads + h; all keys without; never past the
  // split's end).
  int lim[kMT][2];
  float m[kMT][2], l[kMT][2];
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const int r = r0 + rw * 16 * kMT + 16 * mt + 8 * hh + g;
      const int last = p.causal ? ctx - p.s_q + r / p.q_heads : ctx - 1;
      lim[mt][hh] = min(last, end - 1);
      m[mt][hh] = -INFINITY;
      l[mt][hh] = 0.f;
    }
  float o[kMT][G::kDimTiles][4];
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
    for (int j = 0; j < G::kDimTiles; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[mt][j][e] = 0.f;

  // ldmatrix lane offsets (flash_mma's patterns). Q and P, A operands: matrices (rows 0-7, chunk
  // 0), (8-15, 0), (0-7, 1), (8-15, 1) = a0..a3. K, B of S: 8 keys x 4 chunks = b0 b1 of two k16
  // steps. V, B of O (V is [key][dim], .trans): (keys 0-7, dims 0-7), (8-15, 0-7), (0-7, 8-15),
  // (8-15, 8-15) = b0 b1 of n8 tile 2j, b0 b1 of 2j + 1.
  const uint32_t q_frag = sQ + (rw * 16 * kMT + lane % 16) * kPitch + (lane / 16) * 16;
  const uint32_t k_frag = (kw * G::kWarpKeys + lane % 8) * kPitch + (lane / 8) * 16;
  const uint32_t p_frag = sP + (rw * 16 * kMT + lane % 16) * kPPitch + (lane / 16) * 16;
  const uint32_t v_frag = (lane % 16) * kPitch + (lane / 16) * 16 + kw * G::kWarpDims * 2;

  for (int n = 0; n < ntiles; ++n) {
    const int stage = n % kStages;
    mbar_wait(sBar + 8 * stage, (n / kStages) & 1);
    uint32_t sTile;
    if constexpr (G::kFp8) {
      // This key warp's 8 keys, split over its row slices; tile n % 2 was last read by the P V
      // of tile n - 2, which every warp finished before the first barrier of tile n - 1.
      sTile = sKv + (n & 1) * G::kTileBytes;
      constexpr int kPer = G::kWarpKeys / G::kRowWarps;
      const unsigned char* raw = smem + G::kRawOff + stage * G::kRawBytes;
      unsigned char* dst = smem + G::kKvOff + (n & 1) * G::kTileBytes;
#pragma unroll 1
      for (int i = 0; i < kPer; ++i) {
        const int key = kw * G::kWarpKeys + rw * kPer + i;
        dequantize_row<T>(raw + key * G::kTokenBytes, dst + key * kPitch, lane);
      }
      if constexpr (G::kRowWarps == 1)
        __syncwarp();
      else
        bar_sync(1 + kw, 32 * G::kRowWarps);  // the warps of key warp kw: ids 1-4
    } else {
      sTile = sKv + stage * G::kTileBytes;
    }

    // S = Q Kᵀ for this warp's rows and 8 keys, two chains (even and odd k16 steps).
    float acc[2][kMT][4];
#pragma unroll
    for (int c = 0; c < 2; ++c)
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[c][mt][e] = 0.f;
#pragma unroll
    for (int kp = 0; kp < kWidth / 32; ++kp) {
      uint32_t kb[4];
      ldsm_x4(kb, sTile + k_frag + kp * 64);
#pragma unroll
      for (int c = 0; c < 2; ++c)
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt) {
          uint32_t qa[4];
          ldsm_x4(qa, q_frag + mt * 16 * kPitch + (2 * kp + c) * 32);
          mma_16816<T>(acc[c][mt], qa, kb[2 * c], kb[2 * c + 1]);
        }
    }
    // Scores in exp2 units, -inf where the row does not see the key; this warp's row maxima.
    const int key0 = begin + n * kTile + kw * G::kWarpKeys + 2 * t4;
    float s[kMT][4];
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float x = (acc[0][mt][e] + acc[1][mt][e]) * p.scale_log2;
        s[mt][e] = key0 + (e & 1) <= lim[mt][e / 2] ? x : -INFINITY;
      }
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        const float mx = allreduce_max<4, XorOrder::low_first>(fmaxf(s[mt][2 * hh], s[mt][2 * hh + 1]));
        if (t4 == 0) red_max[kw * kRows + rw * 16 * kMT + 16 * mt + 8 * hh + g] = mx;
      }
    }
    __syncthreads();  // B1: the maxima are written; every warp has finished tile n - 1
    if (warp == 0 && n + kStages - 1 < ntiles) {
      issue(n + kStages - 1, next_block);  // into tile n - 1's stage
      next_block = block_of(n + kStages);
    }

    // The rows' new maxima (the 4 key warps' in one order: the same m in each), p, l, P.
    float alpha[kMT][2];
    bool grew = false;
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        const int lr = rw * 16 * kMT + 16 * mt + 8 * hh + g;
        float mx = red_max[lr];
#pragma unroll
        for (int k = 1; k < G::kKeyWarps; ++k) mx = fmaxf(mx, red_max[k * kRows + lr]);
        const float m_new = fmaxf(m[mt][hh], mx);
        // m = -inf until the row sees a key: alpha = exp2(-inf) = 0 on o = l = 0, and never
        // -inf - -inf; a row that still sees none subtracts 0 (p = exp2(-inf) = 0).
        alpha[mt][hh] = m_new == -INFINITY ? 1.f : exp2_approx(m[mt][hh] - m_new);
        grew = grew || m_new > m[mt][hh];
        m[mt][hh] = m_new;
        l[mt][hh] *= alpha[mt][hh];
        const float sub = m_new == -INFINITY ? 0.f : m_new;
        const float p0 = exp2_approx(s[mt][2 * hh] - sub), p1 = exp2_approx(s[mt][2 * hh + 1] - sub);
        l[mt][hh] += p0 + p1;
        *reinterpret_cast<uint32_t*>(smem + G::kPOff + lr * kPPitch + (kw * G::kWarpKeys + 2 * t4) * 2) =
            pack2<T>(p0, p1);
      }
    __syncthreads();  // B2: P is written

    if (__any_sync(0xffffffffu, grew)) {
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
        for (int j = 0; j < G::kDimTiles; ++j) {
          o[mt][j][0] *= alpha[mt][0];
          o[mt][j][1] *= alpha[mt][0];
          o[mt][j][2] *= alpha[mt][1];
          o[mt][j][3] *= alpha[mt][1];
        }
    }
    // O += P V: this warp's rows, its 128 dims, the tile's 32 keys (two k16 steps).
#pragma unroll
    for (int kk = 0; kk < kTile / 16; ++kk) {
      uint32_t pa[kMT][4];
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) ldsm_x4(pa[mt], p_frag + mt * 16 * kPPitch + kk * 32);
#pragma unroll
      for (int j = 0; j < G::kDimTiles / 2; ++j) {
        uint32_t vb[4];
        ldsm_x4_trans(vb, sTile + v_frag + j * 32 + kk * 16 * kPitch);
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt) {
          mma_16816<T>(o[mt][2 * j], pa[mt], vb[0], vb[1]);
          mma_16816<T>(o[mt][2 * j + 1], pa[mt], vb[2], vb[3]);
        }
      }
    }
  }
  allow_dependents();  // the combine may launch; it waits for this grid's partials

  // l over the 4 key warps (each summed its own keys' p): quads, then shared memory.
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const float x = allreduce_sum<4, XorOrder::low_first>(l[mt][hh]);
      if (t4 == 0) red_l[kw * kRows + rw * 16 * kMT + 16 * mt + 8 * hh + g] = x;
    }
  __syncthreads();
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const int lr = rw * 16 * kMT + 16 * mt + 8 * hh + g;
      if (lr >= nrows) continue;
      float sum = red_l[lr];
#pragma unroll
      for (int k = 1; k < G::kKeyWarps; ++k) sum += red_l[k * kRows + lr];
      const int64_t bh = int64_t{b} * rows + r0 + lr;  // o's row
      const int d0 = kw * G::kWarpDims + 2 * t4;
      if (p.splits == 1) {
        // l >= 1: the key at the row's max contributes exp2(0), and every row sees key 0.
        const float inv = 1.f / sum;
        T* out = static_cast<T*>(p.o) + bh * kLatent + d0;
#pragma unroll
        for (int j = 0; j < G::kDimTiles; ++j)
          *reinterpret_cast<uint32_t*>(out + 8 * j) = pack2<T>(o[mt][j][2 * hh] * inv, o[mt][j][2 * hh + 1] * inv);
      } else {
        // A row that saw no key of this split (a speculative token's last split) writes m = -inf,
        // l = 0, o = 0: the combine skips it.
        const int64_t row = bh * p.splits + split;
        float* out = p.part_o + row * kLatent + d0;
#pragma unroll
        for (int j = 0; j < G::kDimTiles; ++j)
          *reinterpret_cast<float2*>(out + 8 * j) = make_float2(o[mt][j][2 * hh], o[mt][j][2 * hh + 1]);
        if (kw == 0 && t4 == 0) p.part_ml[row] = make_float2(m[mt][hh], sum);
      }
    }
}

template <class T, class C, int kRows>
void launch(const MlaParams& p, const LaunchContext& ctx) {
  using G = Cfg<T, C, kRows>;
  constexpr const char* kName = "mla/split_kv";
  const auto kernel = split_kv_kernel<T, C, kRows>;
  static const int per_sm = splitkv::resident_blocks(kernel, G::kThreads, G::kSmemBytes, kName);
  const int slots = splitkv::sm_count(ctx, "mla/split_kv: needs the device's SM count (LaunchContext::caps)") * per_sm;
  const SplitPlan plan =
      plan_split_kv(p.host_context_lens, p.batch, p.longest_context, p.s_q * p.heads, slots, kSplitKvMaxRows);
  MlaSplit d = split_args(p, plan);
  const MlaSplitHost h = host_of(p);
  splitkv::launch_split<T>(d, h, ctx, kernel, p.batch * plan.groups, G::kThreads, kName, G::kSmemBytes);
}

// The launch's configuration, as f(T{}, C{}, integral_constant<int, kRows>{}).
template <class F>
decltype(auto) with_config(const MlaParams& p, F&& f) {
  return with_split_config<kSplitKvMaxRows, 16, 32, 64>(p, "mla/split_kv", std::forward<F>(f));
}

}  // namespace

void split_kv(const MlaParams& p, const LaunchContext& ctx) {
  with_config(p, [&](auto t, auto c, auto rows) { launch<decltype(t), decltype(c), decltype(rows)::value>(p, ctx); });
}

std::size_t split_kv_workspace(const MlaParams& p) { return split_workspace(p, kSplitKvMaxRows); }

std::string split_kv_supports(const MlaParams& p, const DeviceCaps& caps) {
  if (const std::string r = split_reason(p, caps, kSplitKvMaxRows); !r.empty()) return r;
  return smem_reason(caps, with_config(p, [](auto t, auto c, auto r) {
    return Cfg<decltype(t), decltype(c), decltype(r)::value>::kSmemBytes;
  }));
}

}  // namespace attnbench::mla_impl
