// mla rung 4, split_kv_wgmma: the Hopper rung for the compute-bound shapes (heads · s_q >= 64 in
// groups of 64 rows: issue 49's h128, 600 TFLOP/s on an H100). Rung 3 (3_split_kv_reg.cu) keeps
// mma.sync, 16 or 32 rows a block and 32-key tiles: at b64 h128 s1 ctx4096 it ran 149 TFLOP/s
// (run 277), rung 2 154.5; their products are mma.sync's, at most two thirds of the wgmma peak,
// and a 32-row block reads each latent tile for 32 rows where 64 share it here.
//
// Design (FlashMLA's shape, in the plainest form that fits the shared memory):
//   - A block is (sequence, group of 64 query rows, split of the context), as rungs 2 and 3
//     (split_plan.hpp with 64-row groups; h128 s1 is two groups reading the same latent rows,
//     the second from L2), with the same fp32 partials and combine.
//   - Two warpgroups, all threads copying (cp.async, 16 bytes a copy, through the block table:
//     any block_size) and computing. Q's 64 rows x 576 once into shared memory; the 64-key tiles
//     of the cache (576 wide, K and V at once: V is the first 512 columns of K's rows) in two
//     stages. Tiles are [9 column blocks of 64][64 rows][128 bytes] in the 128-byte swizzle.
//   - S = Q Kᵀ: warpgroup w takes keys 32w .. + 32 of the tile, all 64 rows, over the whole
//     k = 576 (36 wgmma m64n32k16, both operands K-major in shared memory). Their row maxima meet
//     in shared memory (64 floats a warpgroup, one barrier), so both warpgroups run the online
//     softmax with the same m; each sums l over its own keys.
//   - P (16-bit) of both halves into one shared tile [64 rows][64 keys], one barrier, and each
//     warpgroup O_w += P V_w over its 256 value dims 256 w .. (4 wgmma m64n256k16, P K-major, V
//     N-major: the tile's column blocks 4w .. 4w + 3). O is 128 fp32 registers a thread.
//   - Three barriers a tile: the tile is in (and the last one's P V and reads are done), the
//     maxima, P. The next tile's copies are issued right after the first.
// Shared memory: Q 72 KB, 2 stages of 72 KB, P 8 KB, 512 bytes of maxima: 225 KB + 1 KB to
// align the atoms; one block an SM.
// Not here (supports() says so): fp8 caches (split_kv_reg dequantises them), heads · s_q not a
// multiple of 64, fp32.
// Measured (H100, run 294, one process with rungs 2 and 3): b64 h128 s1 ctx4096 bf16 0.2836 ms,
// 257.5 TFLOP/s (rung 2 0.4805, 151.9; rung 3 0.5018): 1.69x rung 2, 43% of the 600 the issue
// asks for; b32 h128 s2 ctx8192 0.5478 ms, 266.6 TFLOP/s (1.68x rung 2). Predicted 300-400;
// not profiled yet. The suspects: three barriers a tile and its serial S -> softmax -> P -> PV
// chain with no second tile in flight, every thread copying as well. Verified: smoke/mla-wgmma and cases/mla 89 passed, 0 failed (with rung 3);
// memcheck and racecheck clean on the smoke case; `verify all` 8418/0 (run 295).
// Next, FlashMLA's Hopper schedule (read in its sm90 dense decode kernel, not copied): the two
// warpgroups take alternate 64-key tiles, each the whole 64 x 64 S of its own tile (m64n64, the
// shared-memory reads of an m64n32 step are 1.5x its math), its P kept in registers for its own
// half of O (an RS product) and stored for the other warpgroup's half (an SS product), the row
// maxima passed through shared memory from one tile to the next, so that one warpgroup's softmax
// runs under the other's products; the cache tile's nine 64-column blocks loaded by TMA with a
// barrier each, so S starts on the first block while the rest arrive; Q's ninth block in
// registers, to leave shared memory for the second P. The profile (tools/gpu_session.sh pending
// 13) comes first.
#include <cstdint>
#include <string>

#include "kernels/common/wgmma.cuh"
#include "kernels/mla/split_kv.cuh"

namespace attnbench::mla_impl {
namespace {

constexpr int kWRows = 64, kWTile = 64, kWThreads = 256;
constexpr int kColBlocks = kWidth / 64;               // 9 column blocks of 64 elements
constexpr int kBlockBytes = 64 * 128;                 // one column block: 64 rows x 128 bytes
constexpr int kTileBytes = kColBlocks * kBlockBytes;  // 72 KB: Q, or a stage of 64 keys
constexpr int kChunks = kWidth / 8;                   // 72 16-byte chunks a row
constexpr int kQOff = 0, kStageOff = kTileBytes, kPOff = 3 * kTileBytes, kXOff = kPOff + kBlockBytes;
constexpr int kSmemBytes = kXOff + 2 * kWRows * 4 + 1024;  // + slack to align the base to 1024 bytes
constexpr int kSteps = kWidth / 16;                        // 36 k16 steps of S
static_assert(kWidth == 9 * 64 && kLatent == 8 * 64, "512 + 64: nine column blocks, V the first eight");

// Byte offset of 16-byte chunk c (8 elements) of row r in a tile.
__device__ __forceinline__ uint32_t sw_off(int r, int c) {
  return (c >> 3) * kBlockBytes + r * 128 + (((c & 7) ^ (r & 7)) << 4);
}

// Accumulator fragments (wgmma.cuh): register 4j + e of a thread holds row 16 (warp % 4) +
// lane / 4 (+ 8 when e >= 2) of the 64, column 8j + 2 (lane % 4) + e % 2: S's keys (of the
// warpgroup's 32), O's dims (of its 256).
template <class T>
__global__ void __launch_bounds__(kWThreads, 1) split_kv_wgmma_kernel(const __grid_constant__ MlaSplit p) {
#if !defined(__CUDA_ARCH__) || defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ unsigned char smem_raw[];
  const uint32_t raw = smem_addr(smem_raw);
  const uint32_t base = (raw + 1023u) & ~1023u;
  const uint32_t sQ = base + kQOff, sK0 = base + kStageOff, sP = base + kPOff;
  unsigned char* const p_tile = smem_raw + (base - raw) + kPOff;
  float* const xch = reinterpret_cast<float*>(smem_raw + (base - raw) + kXOff);  // [2 warpgroups][64 rows]
  const int tid = static_cast<int>(threadIdx.x), lane = tid % 32, warp = tid / 32, wg = tid / 128;
  const int g = lane / 4, t4 = lane % 4;

  const int group = static_cast<int>(blockIdx.x) % p.groups, b = static_cast<int>(blockIdx.x) / p.groups;
  const int split = static_cast<int>(blockIdx.y);
  const int ctx = p.context_lens[b];
  int64_t begin64, end64;
  // A split past this context holds no key: the block leaves, and the combine never reads it.
  if (!split_range(p.splits, p.chunk, split, ctx, begin64, end64)) return;
  const int begin = static_cast<int>(begin64), end = static_cast<int>(end64);
  const int ntiles = (end - begin + kWTile - 1) / kWTile;
  const int rows = p.heads;  // s_q · heads, a multiple of 64 (supports)
  const int r0 = group * kWRows;
  const T* cache = reinterpret_cast<const T*>(p.cache);
  const int32_t* table = p.block_tables + int64_t{b} * p.max_blocks;
  const int bs = p.block_size;

  // Q's 64 rows, once.
  {
    const T* q = static_cast<const T*>(p.q) + (int64_t{b} * rows + r0) * kWidth;
    for (int i = tid; i < kWRows * kChunks; i += kWThreads) {
      const int r = i / kChunks, c = i % kChunks;
      cp_async_16(sQ + sw_off(r, c), q + int64_t{r} * kWidth + 8 * c);
    }
  }
  // Keys begin + 64 n .. of the split into stage s: row r is key begin + 64 n + r through the
  // block table; rows past the split's end are zero-filled from a valid address (never read
  // past a context: the NaN of spare slots stays out) and masked below.
  auto load_tile = [&](int n, int stage) {
    const uint32_t dst = sK0 + stage * kTileBytes;
    for (int i = tid; i < kWTile * kChunks; i += kWThreads) {
      const int r = i / kChunks, c = i % kChunks;
      const int key = begin + n * kWTile + r;
      const bool ok = key < end;
      const int k = ok ? key : begin;
      const T* src = cache + (int64_t{__ldg(table + k / bs)} * bs + k % bs) * kWidth + 8 * c;
      cp_async_16(dst + sw_off(r, c), src, ok);
    }
  };
  load_tile(0, 0);
  cp_async_commit();

  // This thread's rows hh = 0, 1: local row 16 (warp % 4) + g + 8 hh; each sees keys <= lim
  // (causal: context - s_q + t for row t · heads + h; never past the split's end).
  int lim[2], lrow[2];
  float m[2], l[2];
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    lrow[hh] = 16 * (warp % 4) + g + 8 * hh;
    const int r = r0 + lrow[hh];
    const int last = p.causal ? ctx - p.s_q + r / p.q_heads : ctx - 1;
    lim[hh] = min(last, end - 1);
    m[hh] = -INFINITY;
    l[hh] = 0.f;
  }
  float o[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) o[i] = 0.f;
  fence_operands(o);  // zeroed here, not sunk into the first tile's S chain (ptxas would serialize every wgmma)

  for (int n = 0; n < ntiles; ++n) {
    const int stage = n & 1;
    wgmma_wait<0>();  // the last tile's P V: its P and stage are read, O is this thread's again
    fence_operands(o);
    cp_async_wait<0>();
    fence_proxy_async_shared();  // cp.async's writes -> wgmma's reads
    __syncthreads();             // tile n (and Q) are in; both warpgroups are done with tile n - 1
    if (n + 1 < ntiles) load_tile(n + 1, stage ^ 1);
    cp_async_commit();
    const uint32_t sK = sK0 + stage * kTileBytes;

    // S for this warpgroup's 32 keys: k step ks is dims 16 ks.., column block ks / 4, 32 (ks % 4)
    // bytes into the rows; the keys are rows 32 wg .. of every column block.
    float s[16];
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < kSteps; ++ks) {
      const uint32_t off = (ks / 4) * kBlockBytes + (ks % 4) * 32;
      wgmma_m64n32k16_ss<T>(s, wgmma_desc_sw128(sQ + off), wgmma_desc_sw128(sK + off + wg * 32 * 128), ks);
    }
    wgmma_commit();
    wgmma_wait<0>();
    fence_operands(s);

    // Scores in exp2 units, masked past each row's last key; the row maxima of both halves.
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = begin + n * kWTile + 32 * wg + 8 * j + 2 * t4 + (e & 1);
        float& z = s[4 * j + e];
        z = key <= lim[e >> 1] ? z * p.scale_log2 : -INFINITY;
        mx[e >> 1] = fmaxf(mx[e >> 1], z);
      }
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      mx[hh] = allreduce_max<4, XorOrder::low_first>(mx[hh]);
      if (t4 == 0) xch[wg * kWRows + lrow[hh]] = mx[hh];
    }
    __syncthreads();  // both warpgroups' maxima
    float alpha[2];
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      // The same m in both warpgroups: max is exact and commutes.
      const float m_new = fmaxf(m[hh], fmaxf(mx[hh], xch[(wg ^ 1) * kWRows + lrow[hh]]));
      alpha[hh] = m_new == -INFINITY ? 1.f : exp2_approx(m[hh] - m_new);
      m[hh] = m_new;
      l[hh] *= alpha[hh];
      const float sub = m_new == -INFINITY ? 0.f : m_new;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        s[4 * j + 2 * hh] = exp2_approx(s[4 * j + 2 * hh] - sub);
        s[4 * j + 2 * hh + 1] = exp2_approx(s[4 * j + 2 * hh + 1] - sub);
        l[hh] += s[4 * j + 2 * hh] + s[4 * j + 2 * hh + 1];
      }
    }
#pragma unroll
    for (int j = 0; j < 32; ++j) {
      o[4 * j] *= alpha[0];
      o[4 * j + 1] *= alpha[0];
      o[4 * j + 2] *= alpha[1];
      o[4 * j + 3] *= alpha[1];
    }
    fence_operands(o);  // the rescale stays before the wgmma fence below (else it sinks into the P V chain)
    // P (rounded to T: the faithful reference's rounding; l sums the unrounded p) into the P
    // tile: key 32 wg + 8j + 2 t4 of row lrow is chunk 4 wg + j, 4 t4 bytes in, swizzled.
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        const int r = lrow[hh], c = 4 * wg + j;
        *reinterpret_cast<uint32_t*>(p_tile + r * 128 + ((c ^ (r & 7)) << 4) + 4 * t4) =
            pack2<T>(s[4 * j + 2 * hh], s[4 * j + 2 * hh + 1]);
      }
    fence_proxy_async_shared();  // the stores -> wgmma's reads
    __syncthreads();             // both halves of P are in

    // O_w += P V_w: k step kk is keys 16 kk.. (P: 32 bytes into its rows; V: 16 rows of 128
    // bytes), V's column blocks 4 wg .. 4 wg + 3 (dims 256 wg ..), 8 KB apart.
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kWTile / 16; ++kk)
      wgmma_m64n256k16_ss<T, 1>(o, wgmma_desc_sw128(sP + kk * 32),
                                wgmma_desc_sw128(sK + 4 * wg * kBlockBytes + kk * 16 * 128, kBlockBytes));
    wgmma_commit();
  }
  wgmma_wait<0>();
  fence_operands(o);
  allow_dependents();  // the combine may launch; it waits for this grid's partials

  // l: each warpgroup summed its own keys' p; both halves meet in shared memory (its last use
  // as maxima was read before the last tile's P barrier).
  float total[2];
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    total[hh] = allreduce_sum<4, XorOrder::low_first>(l[hh]);
    if (t4 == 0) xch[wg * kWRows + lrow[hh]] = total[hh];
  }
  __syncthreads();
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    // Warpgroup 0's half first in both: the same sum in both warpgroups.
    const float other = xch[(wg ^ 1) * kWRows + lrow[hh]];
    const float sum = wg == 0 ? total[hh] + other : other + total[hh];
    const int64_t bh = int64_t{b} * rows + r0 + lrow[hh];  // o's row
    const int d0 = 256 * wg + 2 * t4;
    if (p.splits == 1) {
      // l >= 1: the key at the row's max contributes exp2(0), and every row sees key 0.
      const float inv = 1.f / sum;
      T* out = static_cast<T*>(p.o) + bh * kLatent + d0;
#pragma unroll
      for (int j = 0; j < 32; ++j)
        *reinterpret_cast<uint32_t*>(out + 8 * j) = pack2<T>(o[4 * j + 2 * hh] * inv, o[4 * j + 2 * hh + 1] * inv);
    } else {
      // A row that saw no key of this split writes m = -inf, l = 0, o = 0: the combine skips it.
      const int64_t row = bh * p.splits + split;
      float* out = p.part_o + row * kLatent + d0;
#pragma unroll
      for (int j = 0; j < 32; ++j)
        *reinterpret_cast<float2*>(out + 8 * j) = make_float2(o[4 * j + 2 * hh], o[4 * j + 2 * hh + 1]);
      if (wg == 0 && t4 == 0) p.part_ml[row] = make_float2(m[hh], sum);
    }
  }
#else
  __trap();  // built without sm_90a: supports() refuses other cards
#endif
}

template <class T>
void launch(const MlaParams& p, const LaunchContext& ctx) {
  constexpr const char* kName = "mla/split_kv_wgmma";
  const auto kernel = split_kv_wgmma_kernel<T>;
  static const int per_sm = splitkv::resident_blocks(kernel, kWThreads, kSmemBytes, kName);
  const int slots =
      splitkv::sm_count(ctx, "mla/split_kv_wgmma: needs the device's SM count (LaunchContext::caps)") * per_sm;
  const SplitPlan plan = plan_split_kv(p.host_context_lens, p.batch, p.longest_context, p.s_q * p.heads, slots, kWRows);
  MlaSplit d = split_args(p, plan);
  const MlaSplitHost h = host_of(p);
  splitkv::launch_split<T>(d, h, ctx, kernel, p.batch * plan.groups, kWThreads, kName, kSmemBytes);
}

}  // namespace

void split_kv_wgmma(const MlaParams& p, const LaunchContext& ctx) {
  with_16bit(p.dtype, "mla/split_kv_wgmma", [&](auto t) { launch<decltype(t)>(p, ctx); });
}

std::size_t split_kv_wgmma_workspace(const MlaParams& p) { return split_workspace(p, kWRows); }

std::string split_kv_wgmma_supports(const MlaParams& p, const DeviceCaps& caps) {
  if (const std::string r = split_reason(p, caps, kWRows); !r.empty()) return r;
  if (p.cache_format != MlaCache::dtype) return "a cache in q's dtype only (split_kv_reg takes the fp8 cache)";
  if (caps.cc_major != 0 && caps.cc_major != 9) return "needs sm_90 (wgmma; the binary's sm_90a build)";
  if ((p.s_q * p.heads) % kWRows != 0)
    return "heads · s_q must be a multiple of 64 (the rung's row groups; split_kv_reg takes the rest)";
  return smem_reason(caps, kSmemBytes);
}

}  // namespace attnbench::mla_impl
