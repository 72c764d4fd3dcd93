// attention rung 3, flash_fp32: FlashAttention-2 forward (Algorithm 1; O is rescaled by
// diag(exp(m_old - m_new)) and divided by l once at the end, the paper's typo fixed) in SIMT
// fp32: one block per Br query rows of one head, one pass over K/V in tiles of Bc keys, online
// softmax with a running max m and sum l per row, never an N x N matrix in memory: what rungs
// 1-2 write and read back is gone. Register-tiled like an SGEMM: a thread owns 4 rows x 8 keys
// of S and 4 rows x head_dim/8 columns of O; the 8 lanes sharing rows reduce the row max with
// shuffles. Q (pre-scaled by scale·log2(e), so S is already in exp2 units), K, V (row-major, as
// cp.async copies them: float4s along head_dim serve S = Q Kᵀ as well as a transposed K would)
// and P sit in padded shared memory read as float4s, lanes paired so that each LDS.128 returns
// in 2 cycles, not 4. K and V arrive by cp.async, V_j while S_j = Q K_jᵀ is computed and K_j+1
// while O += P_j V_j is. Causal tiles above the diagonal are never visited; interior tiles skip
// the mask.
// H200, run 6: fp32 b8 s1024 d64 40.1 TFLOP/s (causal 37.8): 1.20x (1.35x) PyTorch's
// memory-efficient attention, 2.2x rung 2.
#include <cuda_runtime.h>

#include <climits>
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>

#include "kernels/attention/rungs.hpp"
#include "kernels/attention/shape.cuh"
#include "kernels/common/copy.cuh"
#include "kernels/common/dispatch.cuh"
#include "kernels/common/mask.cuh"
#include "kernels/common/reduce.cuh"
#include "kernels/common/softmax_math.cuh"

namespace attnbench::attention_impl {
namespace {

// acc += a · b, four FMAs in k order.
__device__ __forceinline__ void dot4_acc(float& acc, const float4& a, const float4& b) {
  acc = fmaf(a.x, b.x, acc);
  acc = fmaf(a.y, b.y, acc);
  acc = fmaf(a.z, b.z, acc);
  acc = fmaf(a.w, b.w, acc);
}

// Element e of a float4; e is a constant once the loops around it are unrolled.
__device__ __forceinline__ float elem(const float4& v, int e) {
  return e == 0 ? v.x : e == 1 ? v.y : e == 2 ? v.z : v.w;
}

// Whether query positions [p_lo, p_hi] all see keys [j0, j1) (then the tile needs no mask):
// causal needs the last key at or before the first query, a window needs the farthest
// pairs on each side (p_hi, j0) and, when not causal, (p_lo, j1 - 1) less than window apart.
__host__ __device__ __forceinline__ bool tile_all_visible(const Shape& s, int p_lo, int p_hi, int j0, int j1) {
  if (j1 > s.seq_k) return false;
  if (s.causal && j1 - 1 > p_lo) return false;
  if (s.window > 0) {
    if (p_hi - j0 >= s.window) return false;
    if (!s.causal && j1 - 1 - p_lo >= s.window) return false;
  }
  return true;
}

// The keys [begin, end) that some query position in [p_lo, p_hi] sees; end <= begin when
// none does.
struct KeyRange {
  int begin, end;
};
__host__ __device__ __forceinline__ KeyRange visible_keys(const Shape& s, int p_lo, int p_hi) {
  KeyRange r{0, s.seq_k};
  if (s.causal) r.end = min(r.end, p_hi + 1);
  if (s.window > 0) {
    r.begin = max(0, p_lo - s.window + 1);
    if (!s.causal) r.end = min(r.end, p_hi + s.window);
  }
  return r;
}

// One flash_fp32 configuration. kD is head_dim padded to a multiple of 32 (the padding
// columns are zero-filled and never stored). A thread is a row group rg (kRowGroups of
// them, 4 per warp) and a column group cg (8): it owns rows rg + kRowGroups·r (r < RM) of
// S and O, keys cg + 8t (t < KN) of S and columns 4cg + 32q .. +3 (q < DQ) of O.
// kMinBlocks: blocks per SM the registers must allow (__launch_bounds__).
template <int kD_, int Br_, int Bc_, int kThreads_, int kMinBlocks_>
struct FlashConfig {
  static constexpr int kD = kD_, Br = Br_, Bc = Bc_, kThreads = kThreads_, kMinBlocks = kMinBlocks_;
  static constexpr int kRowGroups = kThreads / 8;
  static constexpr int RM = Br / kRowGroups;
  static constexpr int KN = Bc / 8;
  static constexpr int DQ = kD / 32;
  // Shared row strides in floats. kLd = kD + 4: the 8 K rows a warp reads at one k (keys
  // cg + 8t) and the 4 Q rows (rg) start 16 bytes apart mod 128, one float4 per bank
  // group: conflict-free. kLdP = Bc + 8 (= 8 mod 32 words): P's scalar stores (4 rows x 8
  // keys per warp) hit 32 distinct banks and its float4 loads (4 rows) 4 distinct groups.
  static constexpr int kLd = kD + 4, kLdP = Bc + 8;
  static constexpr int kChunksPerRow = kD / 4;               // 16-byte cp.async chunks per row
  static constexpr int kRowStep = kThreads / kChunksPerRow;  // rows per cp.async pass of the block
  static constexpr int kSmemBytes = (Br * kLd + 2 * Bc * kLd + Br * kLdP) * static_cast<int>(sizeof(float));
  static_assert(kD % 32 == 0 && kThreads % 32 == 0 && Bc % 32 == 0, "tile shapes");
  static_assert(Br % kRowGroups == 0 && RM >= 1, "whole rows per thread");
  static_assert(kThreads % kChunksPerRow == 0 && Br % kRowStep == 0 && Bc % kRowStep == 0,
                "every cp.async pass covers whole rows; each thread keeps one column");
};

// The flash_fp32 configurations. head_dim is padded to 32, 64, 128 or 256. Shared memory
// and registers decide the shapes: at kD = 64, Br = Bc = 64 takes 69 KB, three blocks (12
// warps) per SM with up to 168 registers each (a 128-register cap, four blocks, spills);
// larger kD halve Bc (and at 256 Br) to keep two blocks.
using Flash32 = FlashConfig<32, 64, 64, 128, 3>;    // 46 KB
using Flash64 = FlashConfig<64, 64, 64, 128, 3>;    // 69 KB
using Flash128 = FlashConfig<128, 64, 32, 128, 2>;  // 76 KB
using Flash256 = FlashConfig<256, 32, 32, 128, 2>;  // 102.5 KB
// The configuration of head_dim class kD.
template <int kD>
using FlashFor =
    std::conditional_t<kD == 32, Flash32,
                       std::conditional_t<kD == 64, Flash64, std::conditional_t<kD == 128, Flash128, Flash256>>>;

// Copies rows [0, kRows) of a tile (row r at src_tile + r·row_stride) into shared memory
// (row stride kLd), 16 bytes per cp.async. This thread's chunks are rows ld_row +
// n·kRowStep at its one column ld_col; `dst` and `src` point at the first of them. Rows
// >= valid_rows and columns >= head_dim (col_ok false) are zero-filled.
template <class Cfg, int kRows>
__device__ __forceinline__ void load_tile(uint32_t dst, const float* src, const float* src_tile, int64_t row_stride,
                                          int ld_row, int valid_rows, bool col_ok) {
  constexpr int kPasses = kRows / Cfg::kRowStep;
  if (col_ok && valid_rows >= kRows) {  // every chunk in range (all tiles but the last): no selects
#pragma unroll
    for (int n = 0; n < kPasses; ++n)
      cp_async_16(dst + n * Cfg::kRowStep * Cfg::kLd * 4, src + n * Cfg::kRowStep * row_stride, true);
  } else {
#pragma unroll
    for (int n = 0; n < kPasses; ++n) {
      const bool ok = col_ok && ld_row + n * Cfg::kRowStep < valid_rows;
      cp_async_16(dst + n * Cfg::kRowStep * Cfg::kLd * 4, ok ? src + n * Cfg::kRowStep * row_stride : src_tile, ok);
    }
  }
}

// ---------------------------------------------------------------------------------------
// flash_fp32: kernel

// q, o: [batch, seq_q, heads, head_dim]; k, v: [batch, seq_k, kv_heads, head_dim], fp32.
// Block x owns Br query rows of one (batch, head). Causal blocks go heaviest first (the
// last query tiles see the most keys), so the short ones fill the tail of the grid;
// otherwise the q tiles of one head are adjacent and share its K/V in L2.
template <class Cfg>
__global__ void __launch_bounds__(Cfg::kThreads, Cfg::kMinBlocks)
    flash_fp32_kernel(const float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ v,
                      float* __restrict__ o, const Shape s, int num_q_tiles) {
  constexpr int kD = Cfg::kD, Br = Cfg::Br, Bc = Cfg::Bc, kLd = Cfg::kLd, kLdP = Cfg::kLdP;
  constexpr int RM = Cfg::RM, KN = Cfg::KN, DQ = Cfg::DQ, kRowGroups = Cfg::kRowGroups;
  extern __shared__ float4 smem4[];
  float* Qs = reinterpret_cast<float*>(smem4);  // [Br][kLd], Q · scale_log2
  float* Ks = Qs + Br * kLd;                    // [Bc][kLd]
  float* Vs = Ks + Bc * kLd;                    // [Bc][kLd]
  float* Ps = Vs + Bc * kLd;                    // [Br][kLdP]

  // Lane bits 0 and 2 give the row group within the warp, bits 1, 3 and 4 the column
  // group. Shared memory returns 128 bytes a cycle, so a warp's LDS.128 takes 4 cycles,
  // or 2 when lanes n and n^1 (or all n and n^2) read the same address. K and V reads
  // depend on cg only and pair n with n^1; Q and P reads depend on rg only and pair n with
  // n^2. (With rg = tid / 8, cg = tid % 8, the K and V reads, two thirds of them, took 4.)
  // The 8 lanes of a row group differ in bits 1, 3 and 4: the shuffle masks 2, 8, 16 of the
  // row reductions (allreduce_xor).
  const int tid = threadIdx.x, lane = tid % 32;
  const int rg = (tid / 32) * 4 + (lane & 1) + ((lane >> 1) & 2);
  const int cg = ((lane >> 1) & 1) + ((lane >> 2) & 6);

  int64_t bh;
  int qt;
  if (s.causal) {
    qt = num_q_tiles - 1 - static_cast<int>(blockIdx.x / s.batch_heads);
    bh = blockIdx.x % s.batch_heads;
  } else {
    qt = static_cast<int>(blockIdx.x % num_q_tiles);
    bh = blockIdx.x / num_q_tiles;
  }
  const int64_t b = bh / s.heads;
  const int h = static_cast<int>(bh % s.heads);
  const int i0 = qt * Br;
  const int rows = min(Br, s.seq_q - i0);
  q += b * s.q_batch_stride + i0 * s.q_row_stride + int64_t{h} * s.head_dim;
  o += b * s.o_batch_stride + i0 * s.q_row_stride + int64_t{h} * s.head_dim;
  k += b * s.kv_batch_stride + int64_t{h / s.group} * s.head_dim;
  v += b * s.kv_batch_stride + int64_t{h / s.group} * s.head_dim;

  float O[RM][4 * DQ];
#pragma unroll
  for (int r = 0; r < RM; ++r)
#pragma unroll
    for (int c = 0; c < 4 * DQ; ++c) O[r][c] = 0.f;

  // Writes this thread's part of the O tile scaled by inv_l[r]; 8 lanes store 128
  // contiguous bytes of a row per instruction.
  auto store_o = [&](const float(&inv_l)[RM]) {
#pragma unroll
    for (int r = 0; r < RM; ++r) {
      const int row = rg + kRowGroups * r;
      if (row >= rows) continue;
#pragma unroll
      for (int dq = 0; dq < DQ; ++dq) {
        const int col = 4 * cg + 32 * dq;
        if (col < s.head_dim)
          *reinterpret_cast<float4*>(o + row * s.q_row_stride + col) =
              make_float4(O[r][4 * dq] * inv_l[r], O[r][4 * dq + 1] * inv_l[r], O[r][4 * dq + 2] * inv_l[r],
                          O[r][4 * dq + 3] * inv_l[r]);
      }
    }
  };

  const int p_lo = i0 + s.offset, p_hi = p_lo + rows - 1;  // key positions of the tile's queries
  const KeyRange keys = visible_keys(s, p_lo, p_hi);
  if (keys.end <= keys.begin) {  // no query of the tile sees a key: its rows are 0
    float zero[RM];
#pragma unroll
    for (int r = 0; r < RM; ++r) zero[r] = 0.f;
    store_o(zero);
    return;
  }
  const int jt_begin = keys.begin / Bc, jt_end = (keys.end + Bc - 1) / Bc;

  // cp.async ownership: one 16-byte column, rows ld_row + n·kRowStep.
  const int ld_row = tid / Cfg::kChunksPerRow, ld_col = 4 * (tid % Cfg::kChunksPerRow);
  const bool ld_col_ok = ld_col < s.head_dim;
  const int ld_smem = ld_row * kLd + ld_col;
  const float* q_src = q + ld_row * s.q_row_stride + ld_col;
  const float* k_src = k + ld_row * s.kv_row_stride + ld_col;
  const float* v_src = v + ld_row * s.kv_row_stride + ld_col;
  const int64_t kv_tile_stride = int64_t{Bc} * s.kv_row_stride;

  load_tile<Cfg, Br>(smem_addr(Qs + ld_smem), q_src, q, s.q_row_stride, ld_row, rows, ld_col_ok);
  {
    const int j0 = jt_begin * Bc;
    load_tile<Cfg, Bc>(smem_addr(Ks + ld_smem), k_src + jt_begin * kv_tile_stride, k + jt_begin * kv_tile_stride,
                       s.kv_row_stride, ld_row, s.seq_k - j0, ld_col_ok);
  }
  cp_async_commit();
  cp_async_wait<0>();
  // Fold scale·log2(e) into Q once, so that S comes out in exp2 units. Each thread scales
  // the chunks its own cp.async wrote (visible to it after the wait); the barrier then
  // publishes Q and K_0 to all.
#pragma unroll
  for (int n = 0; n < Br / Cfg::kRowStep; ++n) {
    float4* c = reinterpret_cast<float4*>(Qs + ld_smem + n * Cfg::kRowStep * kLd);
    float4 x = *c;
    x.x *= s.scale_log2;
    x.y *= s.scale_log2;
    x.z *= s.scale_log2;
    x.w *= s.scale_log2;
    *c = x;
  }
  __syncthreads();

  // m: running row max of S (exp2 units), the same in the 8 lanes of a row; l: this
  // thread's part of the row sum, rescaled with m and added up across the lanes at the end.
  float m[RM], l[RM];
#pragma unroll
  for (int r = 0; r < RM; ++r) {
    m[r] = -INFINITY;
    l[r] = 0.f;
  }
  const float slope_log2 = alibi_slope(s.score.alibi, s.score.slopes, h, kLog2e);
  // Soft-capping in exp2 units: softcap·tanh(x / softcap) of a score x is
  // cap·tanh(y / cap) of y = x·log2 e, cap = softcap·log2 e. tanhf keeps this rung exact.
  const float cap_log2 = s.score.cap * kLog2e;

  const float* Qt = Qs + rg * kLd;   // + r·kRowGroups·kLd: row rg + kRowGroups·r
  const float* Kt = Ks + cg * kLd;   // + t·8·kLd: key cg + 8t
  const float* Pt = Ps + rg * kLdP;  // + r·kRowGroups·kLdP
  const float* Vt = Vs + 4 * cg;     // + j·kLd + 32·dq
  float* Pw = Ps + rg * kLdP + cg;   // + r·kRowGroups·kLdP + 8t

  for (int jt = jt_begin; jt < jt_end; ++jt) {
    const int j0 = jt * Bc;
    // V_j streams in while S_j is computed: the previous iteration's last barrier
    // certified that every warp is done reading V_j-1.
    load_tile<Cfg, Bc>(smem_addr(Vs + ld_smem), v_src + jt * kv_tile_stride, v + jt * kv_tile_stride, s.kv_row_stride,
                       ld_row, s.seq_k - j0, ld_col_ok);
    cp_async_commit();

    // S = Q K_jᵀ (Q pre-scaled): per 4 k, RM + KN float4 loads for 4·RM·KN FMAs.
    float S[RM][KN];
#pragma unroll
    for (int r = 0; r < RM; ++r)
#pragma unroll
      for (int t = 0; t < KN; ++t) S[r][t] = 0.f;
#pragma unroll 4
    for (int kk = 0; kk < kD; kk += 4) {
      // Every config has RM <= KN: Q's fragments stay in registers while K's stream by.
      float4 qf[RM];
#pragma unroll
      for (int r = 0; r < RM; ++r) qf[r] = *reinterpret_cast<const float4*>(Qt + r * kRowGroups * kLd + kk);
#pragma unroll
      for (int t = 0; t < KN; ++t) {
        const float4 kf = *reinterpret_cast<const float4*>(Kt + t * 8 * kLd + kk);
#pragma unroll
        for (int r = 0; r < RM; ++r) dot4_acc(S[r][t], qf[r], kf);
      }
    }

    if (s.score.cap > 0.f) {
#pragma unroll
      for (int r = 0; r < RM; ++r)
#pragma unroll
        for (int t = 0; t < KN; ++t) S[r][t] = cap_log2 * tanhf(S[r][t] / cap_log2);
    }

    // Boundary tiles (sequence end, causal diagonal, window edges) and ALiBi: mask to
    // -inf and add the bias. Interior tiles, most of them, skip this.
    if (s.score.alibi || !tile_all_visible(s, p_lo, p_hi, j0, j0 + Bc)) {
#pragma unroll
      for (int r = 0; r < RM; ++r) {
        const int pos = p_lo + rg + kRowGroups * r;
#pragma unroll
        for (int t = 0; t < KN; ++t) {
          const int j = j0 + cg + 8 * t;
          const float bias = slope_log2 * static_cast<float>(abs(pos - j));
          S[r][t] = (j < s.seq_k) & visible(s, pos, j) ? S[r][t] - bias : -INFINITY;
        }
      }
    }

    // Online softmax (exp2 units): m_new = max(m, rowmax(S)), P = exp2(S - m_new),
    // l = l·exp2(m - m_new) + rowsum(P), O = diag(exp2(m - m_new)) O. A row that has seen
    // only -inf keeps m = -inf; subtracting 0 instead gives P = 0 and alpha = 0, never
    // -inf - -inf = NaN.
#pragma unroll
    for (int r = 0; r < RM; ++r) {
      float mx = S[r][0];
#pragma unroll
      for (int t = 1; t < KN; ++t) mx = fmaxf(mx, S[r][t]);
      mx = allreduce_xor<2, 8, 16>(mx, MaxOp{});
      const float m_new = fmaxf(m[r], mx);
      const float m_sub = m_new == -INFINITY ? 0.f : m_new;
      const float alpha = exp2_approx(m[r] - m_sub);
      m[r] = m_new;
      float sum = 0.f;
#pragma unroll
      for (int t = 0; t < KN; ++t) {
        S[r][t] = exp2_approx(S[r][t] - m_sub);
        sum += S[r][t];
      }
      l[r] = fmaf(l[r], alpha, sum);
#pragma unroll
      for (int c = 0; c < 4 * DQ; ++c) O[r][c] *= alpha;
#pragma unroll
      for (int t = 0; t < KN; ++t) Pw[r * kRowGroups * kLdP + 8 * t] = S[r][t];
    }

    // One barrier publishes P_j and V_j (each thread waited for its own copies) and
    // certifies that every warp is done reading K_j, which is then refilled with K_j+1
    // while O += P_j V_j runs.
    cp_async_wait<0>();
    __syncthreads();
    if (jt + 1 < jt_end) {
      load_tile<Cfg, Bc>(smem_addr(Ks + ld_smem), k_src + (jt + 1) * kv_tile_stride, k + (jt + 1) * kv_tile_stride,
                         s.kv_row_stride, ld_row, s.seq_k - j0 - Bc, ld_col_ok);
      cp_async_commit();
    }

    // O += P V_j: per 4 keys, RM float4 loads of P and 4·DQ of V for 16·RM·DQ FMAs.
#pragma unroll 4
    for (int jj = 0; jj < Bc; jj += 4) {
      float4 pf[RM];
#pragma unroll
      for (int r = 0; r < RM; ++r) pf[r] = *reinterpret_cast<const float4*>(Pt + r * kRowGroups * kLdP + jj);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
#pragma unroll
        for (int dq = 0; dq < DQ; ++dq) {
          const float4 vf = *reinterpret_cast<const float4*>(Vt + (jj + e) * kLd + 32 * dq);
#pragma unroll
          for (int r = 0; r < RM; ++r) {
            const float pe = elem(pf[r], e);
            O[r][4 * dq + 0] = fmaf(pe, vf.x, O[r][4 * dq + 0]);
            O[r][4 * dq + 1] = fmaf(pe, vf.y, O[r][4 * dq + 1]);
            O[r][4 * dq + 2] = fmaf(pe, vf.z, O[r][4 * dq + 2]);
            O[r][4 * dq + 3] = fmaf(pe, vf.w, O[r][4 * dq + 3]);
          }
        }
      }
    }

    // K_j+1 has landed and every warp is done with P_j and V_j (the next iteration
    // overwrites both). The last iteration has nothing left to protect.
    if (jt + 1 < jt_end) {
      cp_async_wait<0>();
      __syncthreads();
    }
  }

  // l: add up the row's 8 partial sums. A row that saw no key has l = 0 and outputs 0;
  // any other has l >= 1 (its max contributes exp2(0)).
  float inv_l[RM];
#pragma unroll
  for (int r = 0; r < RM; ++r) {
    float sum = l[r];
    sum = plus_sink(allreduce_xor<2, 8, 16>(sum, SumOp{}), m[r], sink_log2(s.score.sinks, h));
    inv_l[r] = sum > 0.f ? 1.f / sum : 0.f;
  }
  store_o(inv_l);
}

template <class Cfg>
void launch_flash_fp32(const AttentionParams& p, const LaunchContext& ctx, const char* name) {
  const auto kernel = flash_fp32_kernel<Cfg>;
  // More than 48 KB of dynamic shared memory needs an opt-in, once per kernel.
  static const cudaError_t opt_in =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::kSmemBytes);
  check_cuda(opt_in, name);
  const Shape sh = make_shape(p);
  const int num_q_tiles = static_cast<int>(ceil_div(p.seq_q, Cfg::Br));
  kernel<<<static_cast<unsigned>(num_q_tiles * sh.batch_heads), Cfg::kThreads, Cfg::kSmemBytes, ctx.stream>>>(
      static_cast<const float*>(p.q), static_cast<const float*>(p.k), static_cast<const float*>(p.v),
      static_cast<float*>(p.o), sh, num_q_tiles);
  check_launch(name);
}

template <class Cfg>
std::string flash_fp32_config_reason(const AttentionParams& p, const DeviceCaps& caps) {
  std::string r = common_reason(p);
  if (!r.empty()) return r;
  if (p.dtype != DType::fp32) return "fp32 only (fp16/bf16: flash_mma)";
  if (caps.arch() < 80) return "needs sm_80+ (cp.async)";
  if (caps.smem_per_block_optin < static_cast<std::size_t>(Cfg::kSmemBytes))
    return "needs " + std::to_string(Cfg::kSmemBytes / 1024) + " KB of shared memory per block";
  r = alignment_reason(p);
  if (!r.empty()) return r;
  if (ceil_div(p.seq_q, Cfg::Br) * p.batch * p.heads > INT_MAX) return "too many query tiles for gridDim.x";
  return {};
}

}  // namespace

void flash_fp32(const AttentionParams& p, const LaunchContext& ctx) {
  with_head_dim_class<32, 64, 128, 256>(
      p.head_dim, [&](auto d) { launch_flash_fp32<FlashFor<decltype(d)::value>>(p, ctx, "attention/flash_fp32"); });
}

std::string flash_fp32_supports(const AttentionParams& p, const DeviceCaps& caps) {
  if (p.sparse.on()) return "no block-sparse mask (naive, cublas and flash_mma have it)";
  return with_head_dim_class<32, 64, 128, 256>(
      p.head_dim, [&](auto d) { return flash_fp32_config_reason<FlashFor<decltype(d)::value>>(p, caps); });
}

}  // namespace attnbench::attention_impl
