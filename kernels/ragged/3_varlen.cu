// ragged rung 3, varlen: the whole mixed batch in one launch, on the tensor cores, reading the
// paged cache where it lies. Over rung 2 (2_separate.cu), which gathers every context into
// dense K/V and then launches a decode kernel and one prefill kernel per other sequence:
//   - One launch. Blocks are (row tile, kv head); a row tile is 64 rows of one sequence, each
//     row a (query token, query head of the kv head's GQA group) pair: a decode's group of
//     query heads fills the rows of one tile (vLLM's unified attention packs its
//     BLOCK_M = BLOCK_Q x queries-per-kv the same way), so the K/V tile a block loads serves
//     every head that reads it. Tiles are numbered without a work list: sequence b's start at
//     cu_seqlens_q[b] / tokens_per_tile + b, an upper bound on the tiles before it, so a block
//     finds its sequence by a binary search of cu_seqlens_q and the few numbers past a
//     sequence's last tile exit at once (vLLM's find_seq_idx).
//   - No gather: each 64-key tile is copied by cp.async straight from the cache, key row by
//     key row through the block table (the flash layout keeps a key's dims contiguous, 16-byte
//     chunks of any block size), two stages deep: the next tile's copies run under this one's
//     products. Keys past the last one a tile's rows see are never read: the NaN traps after
//     each context stay untouched.
//   - FlashAttention-2's inner loop (4_flash_mma.cu's fragments: S = Q Kᵀ by mma.sync m16n8k16
//     from ldmatrix, an exact online softmax in exp2 units, P packed from S's accumulators as
//     the A operand of O += P V, V by ldmatrix.trans), with the causal limit, window, ALiBi,
//     soft-capping and the sink per row (each row its own position and head).
// What it does not do yet, and the next rung is for: split a long context over several
// blocks. A decode over 32k keys is one block per kv head walking all of them, where
// paged_flash would run hundreds; a batch of few long decodes leaves most SMs idle.
// fp16/bf16 with a cache of the same type; an fp8 cache and RoPE stay with rungs 1 and 2.
// Not yet timed (issue 48).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <climits>
#include <cmath>
#include <cstdint>
#include <string>

#include "kernels/common/copy.cuh"
#include "kernels/common/dispatch.cuh"
#include "kernels/common/mask.cuh"
#include "kernels/common/mma.cuh"
#include "kernels/common/reduce.cuh"
#include "kernels/common/softmax_math.cuh"
#include "kernels/common/storage.cuh"
#include "kernels/ragged/rungs.hpp"

namespace attnbench::ragged_impl {
namespace {

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
  static_assert(D == 64 || D == 128 || D == 256, "head-dim classes 64, 128, 256");
};

__device__ __forceinline__ uint32_t tile_offset(int row, int chunk, int pitch) { return row * pitch + chunk * 16; }

// What a block computes: rows of sequence b, tokens [t0, t0 + tokens) of its query_len, of kv
// head kvh; its tile's first keys and how far its rows see.
struct Block {
  int b, t0, tokens, q_len, ctx, first_q;  // first_q: sequence b's first row in q and o
};

// The largest b with start(b) = cu_seqlens_q[b] / per_tile + b <= x, over [0, batch).
__device__ __forceinline__ int find_sequence(const int32_t* cu, int batch, int x, int per_tile) {
  int lo = 0, hi = batch - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (__ldg(cu + mid) / per_tile + mid <= x) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

template <class T, int D>
__global__ void __launch_bounds__(Tile<D>::THREADS, 1) varlen_kernel(const __grid_constant__ RaggedParams p,
                                                                      int group, int per_tile) {
  using C = Tile<D>;
  constexpr int RB = C::PITCH, CH = C::CH, NT = C::NT, DT = C::DT, KS = C::KS, PK = C::PK;
  extern __shared__ __align__(128) unsigned char smem[];
  const uint32_t sQ = static_cast<uint32_t>(__cvta_generic_to_shared(smem)), sKV = sQ + C::Q_BYTES;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, g = lane / 4, t4 = lane % 4;
  const int kvh = blockIdx.y, x = blockIdx.x;

  Block w;
  w.b = find_sequence(p.cu_seqlens_q, static_cast<int>(p.batch), x, per_tile);
  w.first_q = p.cu_seqlens_q[w.b];
  w.q_len = p.cu_seqlens_q[w.b + 1] - w.first_q;
  w.t0 = (x - (w.first_q / per_tile + w.b)) * per_tile;
  if (w.t0 >= w.q_len) return;  // a number past the sequence's last tile
  w.tokens = min(per_tile, w.q_len - w.t0);
  w.ctx = p.context_lens[w.b];
  const int shift = w.ctx - w.q_len;  // token t sits at position shift + t
  const int rows = w.tokens * group;
  // Keys the block reads: from the first its first row sees (window) to the last its last row sees.
  const int key_end = shift + w.t0 + w.tokens;  // one past the last row's position
  const int key_begin = p.window > 0 ? max(0, shift + w.t0 - static_cast<int>(p.window) + 1) / C::KEYS * C::KEYS : 0;
  const int tiles = (key_end - key_begin + C::KEYS - 1) / C::KEYS;
  const int64_t kv_row = p.kv_heads * p.head_dim;  // elements between a block's token slots
  const int chunks = static_cast<int>(p.head_dim / 8);

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
  const auto load_kv = [&](int s, int n) {
    const T* k = static_cast<const T*>(p.k_cache);
    const T* v = static_cast<const T*>(p.v_cache);
    const uint32_t dst = sKV + s * 2 * C::KV_BYTES;
    for (int r = tid / CH; r < C::KEYS; r += C::LD_ROWS) {
      const int c = tid % CH, j = key_begin + n * C::KEYS + r;
      const bool ok = j < key_end && c < chunks;
      int64_t off = 0;
      if (ok) {
        // The table entry and the slot in it: a shift and a mask for the usual power-of-two
        // block sizes (a division by a runtime int is ~20 instructions, per row and tile).
        const int blk = log2_bs >= 0 ? j >> log2_bs : j / bs, in = log2_bs >= 0 ? j & (bs - 1) : j % bs;
        off = ((int64_t{__ldg(table + blk)} * bs + in) * kv_row) + int64_t{kvh} * p.head_dim + 8 * c;
      }
      cp_async_16(dst + tile_offset(r, c, RB), k + off, ok);
      cp_async_16(dst + C::KV_BYTES + tile_offset(r, c, RB), v + off, ok);
    }
  };
  if (tiles > 0) load_kv(0, 0);
  cp_async_commit();

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
  const float cap = p.score.softcap > 0 ? p.score.softcap / p.score.scale : 0.f;  // raw units
  const float inv_cap = p.score.softcap > 0 ? p.score.scale / p.score.softcap : 0.f;
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
  for (int n = 0; n < tiles; ++n) {
    const int s = n % 2;
    // One barrier a tile: tile n has landed everywhere, and every warp is done with tile n - 1,
    // whose stage the copies of tile n + 1 now overwrite.
    cp_async_wait<0>();
    __syncthreads();
    if (n + 1 < tiles) load_kv(s ^ 1, n + 1);
    cp_async_commit();
    const uint32_t sK = sKV + s * 2 * C::KV_BYTES, sV = sK + C::KV_BYTES;

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
          acc_s[nt][e] *= p.score.scale_log2;
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
          x = fmaf(x, p.score.scale_log2, -slope[hh] * static_cast<float>(pos[hh] - j));
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

  // O / l (the sink joining l) into each live row's token and head, pairs of dims per lane.
  T* o = static_cast<T*>(p.o);
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    const float sum = plus_sink(allreduce_sum<4, XorOrder::low_first>(l[hh]), m[hh], sink_log2(p.score.sinks ? p.score.sink_logits : nullptr, head[hh]));
    if (!live[hh]) continue;
    const float inv = sum > 0.f ? 1.f / sum : 0.f;
    const int r = warp * 16 + g + 8 * hh;
    T* dst = o + ((int64_t{w.first_q} + w.t0 + r / group) * p.heads + head[hh]) * p.head_dim;
#pragma unroll
    for (int dt = 0; dt < DT; ++dt) {
      const int d = 8 * dt + 2 * t4;
      if (d < p.head_dim)
        *reinterpret_cast<uint32_t*>(dst + d) = pack2<T>(acc_o[dt][2 * hh] * inv, acc_o[dt][2 * hh + 1] * inv);
    }
  }
}

// Query tokens a row tile holds: 64 rows of (token, head of the group).
int tokens_per_tile(const RaggedParams& p) { return static_cast<int>(64 / (p.heads / p.kv_heads)); }

template <class T, int D>
void launch_varlen(const RaggedParams& p, const LaunchContext& ctx) {
  const auto kernel = varlen_kernel<T, D>;
  static const cudaError_t opt_in =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Tile<D>::SMEM_BYTES);
  check_cuda(opt_in, "ragged/varlen");
  const int per_tile = tokens_per_tile(p);
  const dim3 grid(static_cast<unsigned>(p.total_queries / per_tile + p.batch), static_cast<unsigned>(p.kv_heads));
  kernel<<<grid, Tile<D>::THREADS, Tile<D>::SMEM_BYTES, ctx.stream>>>(p, static_cast<int>(p.heads / p.kv_heads),
                                                                      per_tile);
  check_launch("ragged/varlen");
}

int head_dim_class(int64_t head_dim) { return head_dim <= 64 ? 64 : head_dim <= 128 ? 128 : 256; }

}  // namespace

void varlen(const RaggedParams& p, const LaunchContext& ctx) {
  with_16bit(p.dtype, "ragged/varlen", [&](auto t) {
    with_value<64, 128, 256>(head_dim_class(p.head_dim), "ragged/varlen", "head_dim class",
                             [&](auto d) { launch_varlen<decltype(t), decltype(d)::value>(p, ctx); });
  });
}

std::string varlen_supports(const RaggedParams& p, const DeviceCaps& caps) {
  if (const std::string r = common_reason(p); !r.empty()) return r;
  if (p.dtype != DType::fp16 && p.dtype != DType::bf16) return "fp16/bf16 only (mma.sync on 16-bit inputs)";
  if (p.kv_dtype != p.dtype) return "a cache in the query's dtype only (an fp8 cache: naive and separate)";
  if (p.rope.style != 0) return "no RoPE yet (naive and separate turn the queries)";
  if (p.head_dim % 8 != 0) return "head_dim must be a multiple of 8 (16-byte rows)";
  if (p.heads / p.kv_heads > 64) return "more than 64 query heads a kv head (a row tile holds one token's group)";
  if (caps.cc_major != 0 && caps.arch() < 80) return "needs sm_80+ (mma.sync with bf16, cp.async)";
  const int bytes = head_dim_class(p.head_dim) == 64    ? Tile<64>::SMEM_BYTES
                    : head_dim_class(p.head_dim) == 128 ? Tile<128>::SMEM_BYTES
                                                        : Tile<256>::SMEM_BYTES;
  if (caps.smem_per_block_optin != 0 && caps.smem_per_block_optin < static_cast<std::size_t>(bytes))
    return "needs " + std::to_string(bytes / 1024) + " KB of shared memory per block";
  if (p.kv_heads > kMaxGridYZ) return "kv_heads must be <= 65535 (gridDim.y)";
  if (p.total_queries + p.batch > INT_MAX) return "too many row tiles for gridDim.x";
  return {};
}

}  // namespace attnbench::ragged_impl
