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
#include "kernels/common/copy.cuh"
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
// kCap: soft-capping (a.softcap > 0), its own instantiation so that the other paths keep
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
  const int shift = a.q_offset;  // query i sits at key position i + shift

  // Key tiles the block's rows can see: [n_begin, n_end).
  int n_begin = 0, n_end = (a.seq_k + BC - 1) / BC;
  if (kCausal) {
    const int last = min(q0 + BR, a.seq_q) - 1 + shift;  // the last row's position
    n_end = last < 0 ? 0 : min(n_end, last / BC + 1);
  }
  if constexpr (kReach) {  // keys [position - lo_reach, position + hi_reach] of the first and last rows
    const int last_hi = min(min(q0 + BR, a.seq_q) - 1 + shift + a.hi_reach, a.seq_k - 1);
    n_end = last_hi < 0 ? 0 : min(n_end, last_hi / BC + 1);
    n_begin = min(max(q0 + shift - a.lo_reach, 0) / BC, n_end);
  }
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

    if constexpr (kCap) {  // before the masks, in raw score units
#pragma unroll
      for (int i = 0; i < 64; ++i) s[i] = soft_cap_sfu(s[i], a.softcap, a.inv_softcap);
    }
    // Masks: keys past seq_k, and (causal) past a row's position.
    const int key0 = n * BC;
    const bool tail = key0 + BC > a.seq_k;
    const bool diag = kCausal && key0 + BC - 1 > q0 + shift;
    if (tail || diag) {
#pragma unroll
      for (int j = 0; j < 16; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int key = key0 + 8 * j + 2 * t4 + (e & 1);
          const bool ok = key < a.seq_k && (!kCausal || key <= row + 8 * (e >> 1) + shift);
          if (!ok) s[4 * j + e] = -INFINITY;
        }
    }
    // Reach masks on the tiles the reaches cut: a tile every row sees whole (above the last
    // row's lowest key, below the first row's highest) needs none; ALiBi's bias varies along
    // every tile.
    if (kReach && (a.alibi || key0 + BC - 1 > min(q0 + shift + a.hi_reach, a.seq_k - 1) ||
                   key0 < min(q0 + BR, a.seq_q) - 1 + shift - a.lo_reach)) {
      const float slope = a.alibi ? a.alibi_slopes[h] * a.alibi_scale : 0.f;  // raw score units
#pragma unroll
      for (int j = 0; j < 16; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int key = key0 + 8 * j + 2 * t4 + (e & 1), pos = row + 8 * (e >> 1) + shift;
          float& x = s[4 * j + e];
          x = fmaf(-slope, fabsf(static_cast<float>(pos - key)), x);
          if (key < pos - a.lo_reach || key > pos + a.hi_reach) x = -INFINITY;
        }
    }
    // Online softmax, exp2 units: m is the running max of s · scale_log2 per row.
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      mx[0] = fmaxf(mx[0], fmaxf(s[4 * j], s[4 * j + 1]));
      mx[1] = fmaxf(mx[1], fmaxf(s[4 * j + 2], s[4 * j + 3]));
    }
    float corr[2], base[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
      const float m_new = fmaxf(m[r], mx[r] * a.scale_log2);
      base[r] = m_new == -INFINITY ? 0.f : m_new;  // a row that has seen no key yet stays at 0
      corr[r] = exp2_approx(m[r] - base[r]);
      m[r] = m_new;
      l[r] *= corr[r];
    }
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

  // O / l; a row that saw no key has l = 0 and outputs 0.
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
    const int i = row + 8 * r;
    if (i >= a.seq_q) continue;
    const float inv = l[r] > 0.f ? 1.f / l[r] : 0.f;
    T* out = o + static_cast<int64_t>(i) * a.q_row_stride;
#pragma unroll
    for (int j = 0; j < 16; ++j)
      *reinterpret_cast<uint32_t*>(out + 8 * j + 2 * t4) =
          pack2<T>(acc[4 * j + 2 * r] * inv, acc[4 * j + 2 * r + 1] * inv);
  }
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
  if (effective_window(p.window, p.seq_q, p.seq_k) > 0 || p.alibi)  // causal is in the reaches
    return p.softcap > 0 ? launch_kernel<T, false, true, true>(p, ctx) : launch_kernel<T, false, false, true>(p, ctx);
  if (p.softcap > 0) return p.causal ? launch_kernel<T, true, true>(p, ctx) : launch_kernel<T, false, true>(p, ctx);
  return p.causal ? launch_kernel<T, true, false>(p, ctx) : launch_kernel<T, false, false>(p, ctx);
}

}  // namespace

void flash_wgmma(const AttentionParams& p, const LaunchContext& ctx) {
  switch (p.dtype) {
    case DType::fp16:
      return launch_dtype<__half>(p, ctx);
    case DType::bf16:
      return launch_dtype<__nv_bfloat16>(p, ctx);
    default:
      throw std::invalid_argument(std::string("attention/flash_wgmma: no ") + dtype_name(p.dtype) + " path");
  }
}

std::string flash_wgmma_supports(const AttentionParams& p, const DeviceCaps& caps) {
  if (p.dtype != DType::fp16 && p.dtype != DType::bf16) return "fp16/bf16 only (wgmma on 16-bit inputs)";
  if (caps.cc_major != 9) return "needs sm_90 (wgmma; the binary's sm_90a build)";
  if (p.head_dim != D) return "head_dim 128 only (flash_mma takes every head_dim)";
  if (p.sparse.on()) return "no block-sparse mask (flash_mma has it)";
  if (p.batch < 1 || p.heads < 1 || p.kv_heads < 1 || p.seq_q < 1 || p.seq_k < 1)
    return "batch, heads, kv_heads, seq_q and seq_k must be >= 1";
  if (p.heads % p.kv_heads != 0) return "heads must be a multiple of kv_heads";
  if (p.heads > kMaxGridYZ) return "heads must be <= 65535 (heads is gridDim.y)";
  if (p.batch > INT_MAX) return "batch must fit in int";
  if (p.seq_q >= (int64_t{1} << 29) || p.seq_k >= (int64_t{1} << 29))
    return "seq_q and seq_k must be < 2^29 (key positions are int)";
  if (p.q_batch_stride % 8 != 0 || p.kv_batch_stride % 8 != 0 || p.o_batch_stride % 8 != 0)
    return "batch strides must be multiples of 8 elements (16-byte rows)";
  if ((p.q && !aligned16(p.q)) || (p.k && !aligned16(p.k)) || (p.v && !aligned16(p.v)) || (p.o && !aligned16(p.o)))
    return "q, k, v and o must be 16-byte aligned (cp.async)";
  if (caps.smem_per_block_optin < static_cast<std::size_t>(SMEM_BYTES))
    return "needs " + std::to_string(SMEM_BYTES / 1024) + " KB of shared memory per block";
  return {};
}

}  // namespace attnbench::attention_impl
