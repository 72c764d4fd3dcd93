// attention rung 6, flash_ws: FlashAttention-3's forward design on Hopper (sm_90a): warp
// specialization, TMA, an mbarrier pipeline, register reallocation, ping-pong warpgroups and
// softmax overlapped with the next tile's products. fp16/bf16, head_dim 128, fp32 scores,
// statistics and accumulators.
//
// Design (what rung 5, flash_wgmma, does not have; its notes explain the wgmma fragments):
//   - Three warpgroups a block. Warpgroup 0 is the producer: after giving back its registers
//     (setmaxnreg 24) one thread issues every copy as TMA tensor-map bulk copies (Q once,
//     then each key tile's K and V) into a STAGES-deep ring of buffers, each buffer with a
//     "full" mbarrier (the copy's bytes land) and an "empty" one (both consumers are done
//     with it). No thread of a consumer computes an address or waits on a copy it issued.
//   - Warpgroups 1 and 2 are the consumers (setmaxnreg 240): each owns 64 of the block's 128
//     query rows and walks the same key tiles.
//   - Intra-warpgroup overlap: at tile n a consumer issues S_n = Q K_nᵀ and O += P_{n-1} V_{n-1}
//     back to back, waits only for S_n, and computes tile n's masks and exponentials while the
//     tensor cores still run the P V product; the rescale of O waits for that product.
//   - Ping-pong: a pair of named barriers lets the consumers issue their products in turn, so
//     that one warpgroup's softmax runs under the other's products.
//   - Causal blocks go in reverse order, the longest (the last query rows) first, so that the
//     short blocks fill the last wave.
// Not here (supports() says so): block-sparse masks, RoPE (the unfused baseline turns Q and K
// first), head_dim other than 128, other cards.
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
#include "kernels/attention/wgmma_rows.cuh"
#include "kernels/common/copy.cuh"
#include "kernels/common/softmax_math.cuh"
#include "kernels/common/storage.cuh"
#include "kernels/common/tma.cuh"
#include "kernels/common/wgmma.cuh"

namespace attnbench::attention_impl {
namespace {

constexpr int BR = 128, THREADS = 384, CONSUMER_THREADS = 256;
// Named barriers: consumer w's turn to issue its products is barrier 1 + w.
constexpr int SCHED_BAR = 1;

// The tiling of each head_dim: key tiles of BC rows, a ring of STAGES K and V buffers. Tiles
// are [D / 64 column blocks][rows][128 bytes] in the 128-byte swizzle, as TMA writes a box of
// 64 dims x rows; registers per consumer thread: S (BC / 2), P (BC / 4), O (D / 2).
template <int D>
struct Tiling {
  static constexpr int BC = D == 256 ? 64 : 128;  // d256: S 32 + P 16 + O 128 registers
  static constexpr int STAGES = D == 64 ? 3 : 2;
  static constexpr int Q_BLOCK = BR * 128, KV_BLOCK = BC * 128;  // bytes of one column block
  static constexpr int Q_BYTES = (D / 64) * Q_BLOCK, KV_BYTES = (D / 64) * KV_BLOCK;
  static constexpr int SMEM = Q_BYTES + 2 * STAGES * KV_BYTES + 1024;  // + slack for 1024-byte atoms
};

// The block's query tile: causal blocks in reverse order (the longest first).
template <bool kCausal>
__device__ __forceinline__ int query_block() {
  return kCausal ? static_cast<int>(gridDim.x - 1 - blockIdx.x) : static_cast<int>(blockIdx.x);
}

// Shared memory: Q, then STAGES K buffers, then STAGES V buffers; the mbarriers apart.
template <int STAGES>
struct Bars {
  uint64_t q_full, k_full[STAGES], k_empty[STAGES], v_full[STAGES], v_empty[STAGES];
};

template <class T, int D, bool kCausal, bool kCap, bool kReach>
__global__ __launch_bounds__(THREADS, 1) void flash_ws_kernel(const __grid_constant__ Args a,
                                                              const __grid_constant__ CUtensorMap tq,
                                                              const __grid_constant__ CUtensorMap tk,
                                                              const __grid_constant__ CUtensorMap tv) {
#if !defined(__CUDA_ARCH__) || defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using L = Tiling<D>;
  constexpr int BC = L::BC, STAGES = L::STAGES;
  extern __shared__ unsigned char smem_raw[];
  __shared__ Bars<STAGES> bars;
  const uint32_t sq = (smem_addr(smem_raw) + 1023u) & ~1023u;
  const uint32_t sk = sq + L::Q_BYTES, sv = sk + STAGES * L::KV_BYTES;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int q0 = query_block<kCausal>() * BR, h = blockIdx.y;
  const int b = blockIdx.z + a.batch_offset;
  const int kvh = static_cast<int>((static_cast<uint64_t>(h) * a.group_rcp) >> 32);
  int n_begin, n_end;
  visible_key_tiles<BR, BC, kCausal, kReach>(a, q0, n_begin, n_end);
  const int tiles = n_end - n_begin;

  const uint32_t bq = smem_addr(&bars.q_full);
  auto bar = [](const uint64_t& x) { return smem_addr(&x); };
  if (tid == 0) {
    mbar_init(bq, 1);
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(bar(bars.k_full[s]), 1);
      mbar_init(bar(bars.v_full[s]), 1);
      mbar_init(bar(bars.k_empty[s]), CONSUMER_THREADS);
      mbar_init(bar(bars.v_empty[s]), CONSUMER_THREADS);
    }
  }
  __syncthreads();

  if (warp < 4) {  // ---- producer warpgroup ----
    setmaxnreg_dec<24>();
    if (warp == 0 && lane == 0 && tiles > 0) {
      tma_prefetch_map(tk);
      tma_prefetch_map(tv);
      mbar_expect_tx(bq, L::Q_BYTES);
      for (int c = 0; c < D / 64; ++c) tma_load_4d(sq + c * L::Q_BLOCK, tq, 64 * c, q0, h, b, bq);
      for (int it = 0; it < tiles; ++it) {
        const int s = it % STAGES, parity = ((it / STAGES) & 1) ^ 1;  // a fresh barrier passes parity 1
        const int key0 = (n_begin + it) * BC;
        mbar_wait(bar(bars.k_empty[s]), parity);
        mbar_expect_tx(bar(bars.k_full[s]), L::KV_BYTES);
        for (int c = 0; c < D / 64; ++c)
          tma_load_4d(sk + s * L::KV_BYTES + c * L::KV_BLOCK, tk, 64 * c, key0, kvh, b, bar(bars.k_full[s]));
        mbar_wait(bar(bars.v_empty[s]), parity);
        mbar_expect_tx(bar(bars.v_full[s]), L::KV_BYTES);
        for (int c = 0; c < D / 64; ++c)
          tma_load_4d(sv + s * L::KV_BYTES + c * L::KV_BLOCK, tv, 64 * c, key0, kvh, b, bar(bars.v_full[s]));
      }
    }
    return;
  }

  // ---- consumer warpgroups ----
  setmaxnreg_inc<240>();
  const int wg = warp / 4 - 1, t4 = lane % 4;
  const int row = q0 + wg * 64 + 16 * (warp % 4) + lane / 4;  // and row + 8
  const uint32_t q_wg = sq + wg * 64 * 128;  // this warpgroup's 64 rows in each column block
  float o[D / 2], s[BC / 2], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
  uint32_t p[BC / 16][4];
#pragma unroll
  for (int i = 0; i < D / 2; ++i) o[i] = 0.f;

  // Ping-pong: wait for this warpgroup's turn, issue, hand the turn over. Consumer 0 takes the
  // first turn unasked; consumer 1 hands over nothing after its last, so every barrier's
  // arrivals and waits balance.
  auto turn_begin = [&](bool first) {
    if (!(first && wg == 0)) named_bar_sync(SCHED_BAR + wg, CONSUMER_THREADS);
  };
  auto turn_end = [&](bool last) {
    if (!(last && wg == 1)) named_bar_arrive(SCHED_BAR + (wg ^ 1), CONSUMER_THREADS);
  };
  // S = Q K_itᵀ (k step ks: column block ks / 4, 32 bytes a step into its rows; both K-major).
  auto issue_s = [&](int it) {
    const int st = it % STAGES;
    mbar_wait(bar(bars.k_full[st]), (it / STAGES) & 1);
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
  // O += P V_it (k step kk: keys 16 kk.., 16 rows of 128 bytes into V's column blocks; V is
  // N-major, a column block of BC rows between its 64-dim blocks).
  auto issue_pv = [&](int it) {
    const int st = it % STAGES;
    mbar_wait(bar(bars.v_full[st]), (it / STAGES) & 1);
    const uint32_t vt = sv + st * L::KV_BYTES;
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BC / 16; ++kk) wgmma_rs_nmajor<T, D>(o, p[kk], wgmma_desc_sw128(vt + kk * 16 * 128, L::KV_BLOCK));
    wgmma_commit();
  };
  // Tile n's masks, then the online softmax: s becomes exp2(s · scale_log2 - m), l the new
  // sums; corr is what O must be scaled by.
  auto softmax = [&](int n, float (&corr)[2]) {
    mask_scores<BR, BC, kCausal, kCap, kReach>(s, a, h, q0, n * BC, row, t4);
    float base[2];
    new_row_max<BC>(s, a.scale_log2, m, l, base, corr);
#pragma unroll
    for (int i = 0; i < BC / 2; ++i) {
      const int r = (i % 4) / 2;
      s[i] = exp2_approx(fmaf(s[i], a.scale_log2, -base[r]));
      l[r] += s[i];
    }
  };
  // P (16-bit) from the exponentials: the accumulator fragment of n8 tiles 2 kk and 2 kk + 1
  // is the A fragment of k step kk.
  auto pack_p = [&] {
#pragma unroll
    for (int kk = 0; kk < BC / 16; ++kk)
#pragma unroll
      for (int w = 0; w < 4; ++w) p[kk][w] = pack2<T>(s[8 * kk + 2 * w], s[8 * kk + 2 * w + 1]);
  };
  auto release = [&](const uint64_t& empty) { mbar_arrive(bar(empty)); };

  if (tiles > 0) {
    mbar_wait(bq, 0);
    float corr[2];
    turn_begin(true);
    issue_s(0);
    turn_end(false);
    wgmma_wait<0>();
    fence_operands(s);
    release(bars.k_empty[0]);
    softmax(n_begin, corr);
    pack_p();
    for (int it = 1; it < tiles; ++it) {
      turn_begin(false);
      issue_s(it);
      issue_pv(it - 1);
      turn_end(false);
      wgmma_wait<1>();  // S_it; P V_{it-1} may still run
      fence_operands(s);
      release(bars.k_empty[it % STAGES]);
      softmax(n_begin + it, corr);
      wgmma_wait<0>();
      fence_operands(o);
      release(bars.v_empty[(it - 1) % STAGES]);
#pragma unroll
      for (int i = 0; i < D / 2; ++i) o[i] *= corr[(i % 4) / 2];
      pack_p();
    }
    turn_begin(false);
    issue_pv(tiles - 1);
    turn_end(true);
    wgmma_wait<0>();
    fence_operands(o);
    release(bars.v_empty[(tiles - 1) % STAGES]);
  }

  T* out = static_cast<T*>(a.o) + int64_t{b} * a.o_batch_stride + int64_t{h} * D;
  store_rows<T, D>(o, l, out, a.q_row_stride, row, a.seq_q, t4);
#else
  __trap();  // built without sm_90a: supports() refuses other cards
#endif
}

// [batch, seq, heads, head_dim] as a 4-d tensor map (dims: dim, row, head, batch), boxes of
// 64 dims x rows rows of one head.
template <class T, int D>
CUtensorMap map_of(const void* base, int64_t batch, int64_t seq, int64_t heads, int64_t batch_stride, int rows) {
  const uint64_t dims[4] = {D, static_cast<uint64_t>(seq), static_cast<uint64_t>(heads), static_cast<uint64_t>(batch)};
  const uint64_t strides[3] = {static_cast<uint64_t>(heads * D * 2), D * 2, static_cast<uint64_t>(batch_stride * 2)};
  const uint32_t box[4] = {64, static_cast<uint32_t>(rows), 1, 1};
  const auto type = std::is_same_v<T, __half> ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  return make_tensor_map_sw128(base, 4, dims, strides, box, type, "attention/flash_ws");
}

template <class T, int D, bool kCausal, bool kCap, bool kReach = false>
void launch_kernel(const AttentionParams& p, const LaunchContext& ctx) {
  using L = Tiling<D>;
  const auto k = flash_ws_kernel<T, D, kCausal, kCap, kReach>;
  static const cudaError_t opt_in = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, L::SMEM);
  check_cuda(opt_in, "attention/flash_ws");
  const CUtensorMap tq = map_of<T, D>(p.q, p.batch, p.seq_q, p.heads, p.q_batch_stride, BR);
  const CUtensorMap tk = map_of<T, D>(p.k, p.batch, p.seq_k, p.kv_heads, p.kv_batch_stride, L::BC);
  const CUtensorMap tv = map_of<T, D>(p.v, p.batch, p.seq_k, p.kv_heads, p.kv_batch_stride, L::BC);
  launch_per_batch_chunk(p, k, make_args(p), BR, THREADS, L::SMEM, ctx, "attention/flash_ws", tq, tk, tv);
}

// The one switch on head_dim, causal, soft-capping and the reach masks.
template <class T, int D>
void launch_options(const AttentionParams& p, const LaunchContext& ctx) {
  if (effective_window(p.window, p.seq_q, p.seq_k) > 0 || p.alibi)  // causal is in the reaches
    return p.softcap > 0 ? launch_kernel<T, D, false, true, true>(p, ctx)
                         : launch_kernel<T, D, false, false, true>(p, ctx);
  if (p.softcap > 0)
    return p.causal ? launch_kernel<T, D, true, true>(p, ctx) : launch_kernel<T, D, false, true>(p, ctx);
  return p.causal ? launch_kernel<T, D, true, false>(p, ctx) : launch_kernel<T, D, false, false>(p, ctx);
}

template <class T>
void launch_dtype(const AttentionParams& p, const LaunchContext& ctx) {
  switch (p.head_dim) {
    case 64:
      return launch_options<T, 64>(p, ctx);
    case 128:
      return launch_options<T, 128>(p, ctx);
    default:
      return launch_options<T, 256>(p, ctx);
  }
}

constexpr bool claimed_head_dim(int64_t d) { return d == 64 || d == 128 || d == 256; }

}  // namespace

void flash_ws(const AttentionParams& p, const LaunchContext& ctx) {
  switch (p.dtype) {
    case DType::fp16:
      return launch_dtype<__half>(p, ctx);
    case DType::bf16:
      return launch_dtype<__nv_bfloat16>(p, ctx);
    default:
      throw std::invalid_argument(std::string("attention/flash_ws: no ") + dtype_name(p.dtype) + " path");
  }
}

std::string flash_ws_supports(const AttentionParams& p, const DeviceCaps& caps) {
  if (!claimed_head_dim(p.head_dim)) return "head_dim 64, 128 or 256 only (flash_mma takes every head_dim)";
  if (const std::string why = wgmma_prefill_supports(p, caps, "TMA"); !why.empty()) return why;
  const std::size_t smem =
      (p.head_dim == 64 ? Tiling<64>::SMEM : p.head_dim == 128 ? Tiling<128>::SMEM : Tiling<256>::SMEM) +
      sizeof(Bars<Tiling<64>::STAGES>);  // the deepest ring's barriers
  if (caps.smem_per_block_optin < smem)
    return "needs " + std::to_string((smem + 1023) / 1024) + " KB of shared memory per block";
  return {};
}

}  // namespace attnbench::attention_impl
