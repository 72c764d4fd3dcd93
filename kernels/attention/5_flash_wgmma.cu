// attention rung 5, flash_wgmma: FlashAttention-2's forward on Hopper's warpgroup mma (sm_90a),
// fp16/bf16 storage, head_dim 128, fp32 scores, statistics and accumulators.
// H200, run 36: bf16 b4 s4096 d128 1.1957 ms (~460 TFLOP/s), 1.33x PyTorch's FA2, 0.76x cuDNN,
// 1.17-1.22x rung 4; run 32: 48-49% of the measured wgmma peak (cuDNN: 64%).
//
// Design: the step from flash_mma (mma.sync, at ~60% of the mma.sync peak, which is itself
// two thirds of the wgmma peak `attnbench info` measures) to the instruction cuDNN and
// FlashAttention-3 use, kept as plain as the algorithm allows:
//   - One block of two warpgroups owns 128 query rows of one (batch, head); each warpgroup
//     owns 64 rows and walks the same 128-key tiles (the causal ones up to its diagonal).
//   - S = Q Kᵀ: wgmma m64n128k16 with both operands in shared memory (Q and K tiles are
//     K-major: a row's head_dim is the k dimension), 8 k steps.
//   - O += P V: wgmma m64n128k16 with P from registers (the accumulator fragment of two
//     adjacent n8 columns of S, packed to 16 bits, is the A fragment of a k16 slice) and V
//     N-major in shared memory (V is [key][d]: the transpose-B form).
//   - Q, K and V tiles are [2 column blocks of 64 dims][128 rows][128 bytes] in the 128-byte
//     swizzle (chunk c of row r at (c ^ r % 8) x 16), copied by cp.async from every thread,
//     zero-filled past seq_q / seq_k; K and V are double-buffered, the next tile's copies
//     issued right after the barrier that publishes the current one.
//   - Eager online softmax in exp2 units (scale·log2(e) folded into one FFMA per score), a
//     row's max and sum reduced over the quad of lanes that holds it. Each k16 slice of P V
//     is issued as soon as its exp2 are done; S waits for its product, and the tile for P V.
//   - Masks (seq_k tail, causal, bottom-right aligned) only on the tiles that need them;
//     rows that see no key output 0.
//   - Sliding window and ALiBi (kReach, an instantiation of their own so that the other
//     paths keep their code): the block visits only the key tiles its rows' reaches cover,
//     and every tile gets the reach masks and the bias -slope·|position - key|.
// Not here (supports() says so): block-sparse masks, head_dim other than 128, other cards.
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
#include "kernels/common/dispatch.cuh"
#include "kernels/common/softmax_math.cuh"
#include "kernels/common/storage.cuh"
#include "kernels/common/wgmma.cuh"

namespace attnbench::attention_impl {
namespace {

constexpr int BR = 128, BC = 128, D = 128, THREADS = 256;
constexpr int TILE_BYTES = 128 * D * 2;            // 32 KB: 2 column blocks x 128 rows x 128 B
constexpr int BLOCK_BYTES = 128 * 128;             // one column block: 128 rows x 128 B
constexpr int SMEM_BYTES = 5 * TILE_BYTES + 1024;  // Q, K x 2, V x 2, + slack for 1024-byte atoms

// Byte offset of 16-byte chunk c (0..15, 8 dims each) of row r in a tile.
__device__ __forceinline__ uint32_t tile_off(int r, int c) {
  return (c >> 3) * BLOCK_BYTES + r * 128 + (((c & 7) ^ (r & 7)) << 4);
}

// Rows [row0, row0 + 128) of a matrix of `rows` rows, `stride` elements apart, into a tile:
// thread t copies chunk t % 16 of rows t / 16 + 16 i.
template <class T>
__device__ __forceinline__ void load_tile(uint32_t dst, const T* src, int64_t stride, int row0, int rows) {
  const int c = threadIdx.x % 16, r0 = threadIdx.x / 16;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int r = r0 + 16 * i;
    const bool ok = row0 + r < rows;
    cp_async_16(dst + tile_off(r, c), src + static_cast<int64_t>(ok ? row0 + r : 0) * stride + 8 * c, ok);
  }
}

// wgmma descriptors (wgmma_desc_sw128): Q and K K-major; V N-major, 16 KB (a column block)
// between its 64-dim column blocks.
__device__ __forceinline__ uint64_t desc_k(uint32_t addr) { return wgmma_desc_sw128(addr); }
__device__ __forceinline__ uint64_t desc_n(uint32_t addr) { return wgmma_desc_sw128(addr, BLOCK_BYTES); }

__device__ __forceinline__ void wgmma_commit_wait() {
  wgmma_commit();
  wgmma_wait<0>();
}

// Accumulator fragment (m64nN, fp32): register 4j + e of a thread holds row 16 (warp % 4) +
// lane / 4 (+ 8 when e >= 2) of its warpgroup's 64, column 8j + 2 (lane % 4) + e % 2.
// kCap: soft-capping (a.score.cap > 0), its own instantiation so that the other paths keep
// their code. kReach: a window or ALiBi; causal then comes in a.hi_reach (kCausal is false).
template <class T, bool kCausal, bool kCap, bool kReach>
__global__ __launch_bounds__(THREADS, 1) void flash_wgmma_kernel(const Args a) {
#if !defined(__CUDA_ARCH__) || defined(__CUDA_ARCH_FEAT_SM90_ALL)  // the host pass parses it too
  extern __shared__ unsigned char smem_raw[];
  const uint32_t sq = (static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw)) + 1023u) & ~1023u;
  const uint32_t sk = sq + TILE_BYTES, sv = sq + 3 * TILE_BYTES;  // two K tiles, then two V tiles
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, wgi = tid / 128, t4 = lane % 4;
  const int q0 = blockIdx.x * BR, h = blockIdx.y;
  const int64_t b = blockIdx.z + a.batch_offset;
  const int kvh = static_cast<int>((static_cast<uint64_t>(h) * a.group_rcp) >> 32);  // h / group (Args::group_rcp)
  const T* q = static_cast<const T*>(a.q) + b * a.q_batch_stride + int64_t{h} * D;
  const T* k = static_cast<const T*>(a.k) + b * a.kv_batch_stride + int64_t{kvh} * D;
  const T* v = static_cast<const T*>(a.v) + b * a.kv_batch_stride + int64_t{kvh} * D;
  T* o = static_cast<T*>(a.o) + b * a.o_batch_stride + int64_t{h} * D;
  int n_begin, n_end;  // the key tiles the block's rows can see
  visible_key_tiles<BR, BC, kCausal, kReach>(a, q0, n_begin, n_end);
  load_tile(sq, q, a.q_row_stride, q0, a.seq_q);
  if (n_end > n_begin) {
    load_tile(sk + (n_begin & 1) * TILE_BYTES, k, a.kv_row_stride, n_begin * BC, a.seq_k);
    load_tile(sv + (n_begin & 1) * TILE_BYTES, v, a.kv_row_stride, n_begin * BC, a.seq_k);
  }
  cp_async_commit();

  const int row = q0 + wgi * 64 + 16 * (warp % 4) + lane / 4;  // and row + 8
  float acc[64], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
#pragma unroll
  for (int i = 0; i < 64; ++i) acc[i] = 0.f;
  const uint32_t q_wg = sq + wgi * 64 * 128;  // this warpgroup's 64 rows in each column block

  for (int n = n_begin; n < n_end; ++n) {
    cp_async_wait<0>();
    fence_proxy_async_shared();  // cp.async's writes -> wgmma's reads
    __syncthreads();             // tile n is everyone's; every warpgroup is done with tile n - 1's buffers
    const int buf = n & 1;
    if (n + 1 < n_end) {
      load_tile(sk + (buf ^ 1) * TILE_BYTES, k, a.kv_row_stride, (n + 1) * BC, a.seq_k);
      load_tile(sv + (buf ^ 1) * TILE_BYTES, v, a.kv_row_stride, (n + 1) * BC, a.seq_k);
    }
    cp_async_commit();

    // S = Q Kᵀ: k step ks is dims 16 ks..: column block ks / 4, bytes 32 (ks % 4) into the rows.
    float s[64];
    const uint32_t kt = sk + buf * TILE_BYTES;
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks) {
      const uint32_t off = (ks / 4) * BLOCK_BYTES + (ks % 4) * 32;
      wgmma_m64n128k16_ss<T>(s, desc_k(q_wg + off), desc_k(kt + off), ks);
    }
    wgmma_commit_wait();

    mask_scores<BR, BC, kCausal, kCap, kReach>(s, a, h, q0, n * BC, row, t4);
    // Online softmax, exp2 units: m is the running max of s · scale_log2 per row.
    float corr[2], base[2];
    new_row_max<BC>(s, a.scale_log2, m, l, base, corr);
    // O is rescaled first, so that each k16 slice of P V can be issued as soon as its P is
    // packed: the tensor cores run slice kk while the exp2 of slice kk + 1 are computed
    // (3-4% faster than issuing all eight after the softmax, bench notes run 31).
#pragma unroll
    for (int i = 0; i < 64; ++i) acc[i] *= corr[(i % 4) / 2];
    const uint32_t vt = sv + buf * TILE_BYTES;
#pragma unroll
    for (int kk = 0; kk < BC / 16; ++kk) {
      // O += P V, k step kk: keys 16 kk.. = S columns of n8 tiles 2 kk and 2 kk + 1.
      uint32_t pa[4];
#pragma unroll
      for (int w = 0; w < 4; ++w) {
        const int e0 = 8 * kk + 2 * w, r = w % 2;  // words: (row, keys 2t..), (row + 8, ..), then + 8 keys
        const float p0 = exp2_approx(fmaf(s[e0], a.scale_log2, -base[r]));
        const float p1 = exp2_approx(fmaf(s[e0 + 1], a.scale_log2, -base[r]));
        l[r] += p0 + p1;
        pa[w] = pack2<T>(p0, p1);
      }
      wgmma_fence();  // pa (and, on the first slice, the rescaled O) written by ordinary instructions
      wgmma_m64n128k16_rs<T>(acc, pa, desc_n(vt + kk * 16 * 128));
    }
    wgmma_commit_wait();
  }
  cp_async_wait<0>();

  store_rows<T, D>(acc, l, m, sink_log2(a.score.sinks, h), o, a.q_row_stride, row, a.seq_q, t4);
#else
  __trap();  // built without sm_90a: supports() refuses other cards
#endif
}

template <class T, bool kCausal, bool kCap, bool kReach = false>
void launch_kernel(const AttentionParams& p, const LaunchContext& ctx) {
  const auto k = flash_wgmma_kernel<T, kCausal, kCap, kReach>;
  static const cudaError_t opt_in = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_BYTES);
  check_cuda(opt_in, "attention/flash_wgmma");
  launch_per_batch_chunk(p, k, make_args(p), BR, THREADS, SMEM_BYTES, ctx, "attention/flash_wgmma");
}

// The one switch on dtype, causal, soft-capping and the reach masks.
template <class T>
void launch_dtype(const AttentionParams& p, const LaunchContext& ctx) {
  const bool cap = p.score.softcap > 0;
  if (effective_window(p.window, p.seq_q, p.seq_k) > 0 || p.score.alibi)  // causal is in the reaches
    return with_bool(cap, [&](auto c) { launch_kernel<T, false, c, true>(p, ctx); });
  with_bool(p.causal, [&](auto causal) {
    with_bool(cap, [&](auto c) { launch_kernel<T, causal, c>(p, ctx); });
  });
}

}  // namespace

void flash_wgmma(const AttentionParams& p, const LaunchContext& ctx) {
  with_16bit(p.dtype, "attention/flash_wgmma", [&](auto tag) { launch_dtype<decltype(tag)>(p, ctx); });
}

std::string flash_wgmma_supports(const AttentionParams& p, const DeviceCaps& caps) {
  if (p.head_dim != D) return "head_dim 128 only (flash_mma takes every head_dim)";
  if (const std::string why = wgmma_prefill_supports(p, caps, "cp.async"); !why.empty()) return why;
  if (caps.smem_per_block_optin < static_cast<std::size_t>(SMEM_BYTES))
    return "needs " + std::to_string(SMEM_BYTES / 1024) + " KB of shared memory per block";
  return {};
}

}  // namespace attnbench::attention_impl
