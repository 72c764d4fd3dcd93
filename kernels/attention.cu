// attention family (prefill): O = softmax(Q Kᵀ · scale + bias + mask) V per query head,
// fp32 softmax statistics, storage in dtype. The semantics (bottom-right causal, window,
// ALiBi, GQA, fully masked rows -> 0) are AttentionParams' (attention.hpp).
//
// Variants, from the path a learner writes first to the fused kernels:
//   naive       the unfused path, four kernels: S = Q Kᵀ in fp32, one thread per score;
//               scale and mask (ALiBi bias, causal / window -> -inf); the softmax family's
//               block_reduce on the fp32 score matrix; O = P V, one thread per output.
//               S and P ([batch, heads, seq_q, seq_k] fp32) live in device memory: 8 bytes
//               per (query, key) pair, written and read back between kernels.
//   cublas      the same unfused path as a framework without fused attention runs it:
//               S = Q Kᵀ and O = P V with cublasGemmBatchedEx over pointer arrays built on
//               the device (so GQA maps heads without copying and the batch strides need
//               not be uniform); 16-bit inputs with fp32 scores, true fp32 for fp32. Scores
//               stay fp32 until the max is subtracted (an fp16 score could overflow); P is
//               rounded to the storage type for the second GEMM, as frameworks do.
//   flash_fp32  FlashAttention-2 forward (Algorithm 1; O is rescaled by
//               diag(exp(m_old - m_new)) and divided by l once at the end, the paper's typo
//               fixed), SIMT fp32: one block per Br query rows of one head, one pass over
//               K/V in tiles of Bc keys, online softmax with a running max m and sum l per
//               row, never an N x N matrix in memory. Register-tiled like an SGEMM: a thread
//               owns 4 rows x 8 keys of S and 4 rows x head_dim/8 columns of O; the 8 lanes
//               sharing rows reduce the row max with shuffles. Q (pre-scaled by
//               scale·log2(e), so S is already in exp2 units), K, V (row-major, as cp.async
//               copies them: float4s along head_dim serve S = Q Kᵀ as well as a transposed
//               K would) and P sit in padded shared memory read as float4s, lanes paired so
//               that each LDS.128 returns in 2 cycles, not 4. K and V arrive by cp.async,
//               V_j while S_j = Q K_jᵀ is computed and K_j+1 while O += P_j V_j is. Causal
//               tiles above the diagonal are never visited; interior tiles skip the mask.
//   flash_mma   fp16/bf16 FlashAttention-2 on tensor cores (attention_mma.cuh).
//   flash_wgmma fp16/bf16, head_dim 128, sm_90a: the same algorithm on Hopper's warpgroup
//               mma (attention_wgmma.cuh).
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/common.cuh"
#include "kernels/attention.hpp"
#include "kernels/attention_mma.cuh"
#include "kernels/attention_wgmma.cuh"
#include "kernels/softmax.hpp"

namespace attnbench {
namespace {
// Everything but the table lives in `impl`, so that no name here can collide with one
// of attention_mma.cuh's, which shares this translation unit.
namespace impl {

// ---------------------------------------------------------------------------------------
// Helpers

constexpr float kLog2e = 1.4426950408889634f;

// Sequence lengths stay below this so that positions, windows and their sums fit in int.
constexpr int64_t kMaxSeq = int64_t{1} << 29;

// What the kernels read, derived once on the host from AttentionParams.
struct Shape {
  int64_t q_batch_stride, kv_batch_stride, o_batch_stride;  // elements
  int64_t q_row_stride, kv_row_stride;                      // heads·head_dim, kv_heads·head_dim
  int64_t batch_heads;
  int heads, group;  // group: query heads per kv head; query head h reads kv head h / group
  int seq_q, seq_k, head_dim;
  int offset;  // seq_k - seq_q: query i sits at key position i + offset (bottom-right)
  int window;  // 0 = none; capped at seq_q + seq_k, a distance no pair reaches
  bool causal, alibi;
  float scale, scale_log2;
};

Shape make_shape(const AttentionParams& p) {
  Shape s;
  s.q_batch_stride = p.q_batch_stride;
  s.kv_batch_stride = p.kv_batch_stride;
  s.o_batch_stride = p.o_batch_stride;
  s.q_row_stride = p.heads * p.head_dim;
  s.kv_row_stride = p.kv_heads * p.head_dim;
  s.batch_heads = p.batch * p.heads;
  s.heads = static_cast<int>(p.heads);
  s.group = static_cast<int>(p.heads / p.kv_heads);
  s.seq_q = static_cast<int>(p.seq_q);
  s.seq_k = static_cast<int>(p.seq_k);
  s.head_dim = static_cast<int>(p.head_dim);
  s.offset = static_cast<int>(p.seq_k - p.seq_q);
  s.window = static_cast<int>(std::min(p.window, p.seq_q + p.seq_k));
  s.causal = p.causal;
  s.alibi = p.alibi;
  s.scale = p.scale;
  s.scale_log2 = p.scale_log2;
  return s;
}

// Whether the query at key position `pos` sees key j (j < seq_k is the caller's to check).
// Bitwise & and |, not && and ||: per-score code stays free of branches.
__host__ __device__ __forceinline__ bool visible(const Shape& s, int pos, int j) {
  return (!s.causal | (j <= pos)) & ((s.window == 0) | (abs(pos - j) < s.window));
}

// ALiBi slope of query head h: 2^(-8 (h + 1) / heads).
__host__ __device__ __forceinline__ float alibi_slope(int h, int heads) {
  return exp2f(-8.f * static_cast<float>(h + 1) / static_cast<float>(heads));
}

bool aligned16(const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; }

std::string gib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GiB", bytes / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

// What no variant can run; empty when AttentionParams is within its documented semantics.
std::string common_reason(const AttentionParams& p) {
  if (p.dtype != DType::fp32 && p.dtype != DType::fp16 && p.dtype != DType::bf16)
    return std::string("dtype ") + dtype_name(p.dtype) + " is not an attention storage type (fp32, fp16, bf16)";
  if (p.batch < 1 || p.heads < 1 || p.kv_heads < 1 || p.seq_q < 1 || p.seq_k < 1)
    return "batch, heads, kv_heads, seq_q and seq_k must be >= 1";
  if (p.heads % p.kv_heads != 0) return "heads must be a multiple of kv_heads";
  if (p.head_dim < 8 || p.head_dim > 256 || p.head_dim % 8 != 0) return "head_dim must be a multiple of 8, at most 256";
  if (p.window < 0) return "window must be >= 0";
  if (p.seq_q >= kMaxSeq || p.seq_k >= kMaxSeq) return "seq_q and seq_k must be < 2^29";
  if (p.heads > INT_MAX || p.batch * p.heads > INT_MAX) return "batch * heads must be < 2^31";
  return {};
}

// Inputs and output start on 16-byte boundaries in every batch (16-byte vector loads,
// cp.async, cuBLAS's tensor-core paths). Null pointers are not checked: supports() may
// be asked before allocation.
std::string alignment_reason(const AttentionParams& p) {
  const int64_t e = static_cast<int64_t>(dtype_bytes(p.dtype));
  for (const void* ptr : {p.q, p.k, p.v, static_cast<const void*>(p.o)})
    if (ptr && !aligned16(ptr)) return "q, k, v and o must be 16-byte aligned";
  if ((p.q_batch_stride * e) % 16 || (p.kv_batch_stride * e) % 16 || (p.o_batch_stride * e) % 16)
    return "batch strides must be multiples of 16 bytes";
  return {};
}

// ---------------------------------------------------------------------------------------
// Unfused path (naive, cublas): workspace and kernels

// S and P are [batch·heads, seq_q, ld] fp32 in the workspace, one after the other, then
// (cublas) six arrays of batch·heads pointers. cublas pads rows to ld = seq_k rounded up
// to 8, so that every matrix row and every per-head matrix starts 32-byte aligned (16 in
// the 16-bit copy of P) for its tensor-core kernels; the padding columns are -inf in S,
// hence 0 in P, and the GEMMs never read them. naive keeps ld = seq_k.
struct UnfusedLayout {
  int64_t ld;                // elements per row of S and P
  std::size_t matrix_bytes;  // one of S, P; a multiple of 256
  std::size_t pointer_bytes;
  std::size_t total() const { return 2 * matrix_bytes + pointer_bytes; }
};

std::size_t round_up_256(std::size_t n) { return (n + 255) / 256 * 256; }

UnfusedLayout unfused_layout(const AttentionParams& p, bool for_cublas) {
  UnfusedLayout w;
  w.ld = for_cublas ? ceil_div(p.seq_k, 8) * 8 : p.seq_k;
  w.matrix_bytes = round_up_256(static_cast<std::size_t>(p.batch * p.heads * p.seq_q * w.ld) * sizeof(float));
  w.pointer_bytes = for_cublas ? round_up_256(6 * static_cast<std::size_t>(p.batch * p.heads) * sizeof(void*)) : 0;
  return w;
}

constexpr int kElementwiseThreads = 256;

unsigned elementwise_blocks(int64_t n) { return static_cast<unsigned>(ceil_div(n, kElementwiseThreads)); }

// s: [batch·heads, seq_q, ld] fp32, s[(bh·seq_q + i)·ld + j] = q_i · k_j (fp32 accumulate).
// q: [batch, seq_q, heads, head_dim]; k: [batch, seq_k, kv_heads, head_dim].
// One thread per score, keys fastest: a warp reads one query row (a broadcast) and 32 key
// rows a whole row apart, so no read is coalesced: the baseline.
template <class T>
__global__ void naive_scores_kernel(const T* __restrict__ q, const T* __restrict__ k, float* __restrict__ s,
                                    const Shape sh, int64_t ld) {
  const int64_t idx = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (idx >= sh.batch_heads * sh.seq_q * sh.seq_k) return;
  const int64_t j = idx % sh.seq_k, row = idx / sh.seq_k;
  const int64_t i = row % sh.seq_q, bh = row / sh.seq_q;
  const int64_t b = bh / sh.heads;
  const int h = static_cast<int>(bh % sh.heads);
  const T* qr = q + b * sh.q_batch_stride + i * sh.q_row_stride + int64_t{h} * sh.head_dim;
  const T* kr = k + b * sh.kv_batch_stride + j * sh.kv_row_stride + int64_t{h / sh.group} * sh.head_dim;
  float acc = 0.f;
  for (int c = 0; c < sh.head_dim; ++c) acc = fmaf(to_float(qr[c]), to_float(kr[c]), acc);
  s[row * ld + j] = acc;
}

// s: [batch·heads, seq_q, ld] fp32, in place: s·scale - slope(h)·|pos - j| where query i
// (at key position pos) sees key j, -inf where it does not and in the padding j >= seq_k.
// The softmax then turns -inf into 0, and a row of only -inf into zeros.
__global__ void scale_and_mask_kernel(float* __restrict__ s, const Shape sh, int64_t ld) {
  const int64_t idx = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (idx >= sh.batch_heads * sh.seq_q * ld) return;
  const int j = static_cast<int>(idx % ld);
  const int64_t row = idx / ld;
  const int pos = static_cast<int>(row % sh.seq_q) + sh.offset;
  const int h = static_cast<int>(row / sh.seq_q % sh.heads);
  const float bias = sh.alibi ? alibi_slope(h, sh.heads) * static_cast<float>(abs(pos - j)) : 0.f;
  s[idx] = j < sh.seq_k && visible(sh, pos, j) ? s[idx] * sh.scale - bias : -INFINITY;
}

// o = P V. p: [batch·heads, seq_q, ld] fp32; v: [batch, seq_k, kv_heads, head_dim];
// o: [batch, seq_q, heads, head_dim]. One thread per output element, head_dim fastest: a
// warp reads one row of P (a broadcast) and consecutive elements of each V row.
template <class T>
__global__ void naive_pv_kernel(const float* __restrict__ p, const T* __restrict__ v, T* __restrict__ o,
                                const Shape sh, int64_t ld) {
  const int64_t idx = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (idx >= sh.batch_heads * sh.seq_q * sh.head_dim) return;
  const int c = static_cast<int>(idx % sh.head_dim);
  const int64_t row = idx / sh.head_dim;
  const int64_t i = row % sh.seq_q, bh = row / sh.seq_q;
  const int64_t b = bh / sh.heads;
  const int h = static_cast<int>(bh % sh.heads);
  const float* pr = p + row * ld;
  const T* vc = v + b * sh.kv_batch_stride + int64_t{h / sh.group} * sh.head_dim + c;
  float acc = 0.f;
  for (int j = 0; j < sh.seq_k; ++j) acc = fmaf(pr[j], to_float(vc[j * sh.kv_row_stride]), acc);
  o[b * sh.o_batch_stride + i * sh.q_row_stride + int64_t{h} * sh.head_dim + c] = from_float<T>(acc);
}

// The operand arrays of cublas's two batched GEMMs, batch·heads entries each.
struct GemmPointers {
  const void** k;  // S = Q Kᵀ
  const void** q;
  void** s;
  const void** v;  // O = P V
  const void** p;
  void** o;
};

// One (batch, head) per thread. The head -> kv head map (GQA) and the batch strides go
// into the pointers, so no operand is copied. p: P in the storage type, [bh, seq_q, ld].
template <class T>
__global__ void gemm_pointers_kernel(const T* q, const T* k, const T* v, T* o, float* s, const T* p, const Shape sh,
                                     int64_t ld, GemmPointers ptr) {
  const int64_t bh = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (bh >= sh.batch_heads) return;
  const int64_t b = bh / sh.heads, h = bh % sh.heads;
  const int64_t kv = b * sh.kv_batch_stride + (h / sh.group) * sh.head_dim;
  ptr.k[bh] = k + kv;
  ptr.q[bh] = q + b * sh.q_batch_stride + h * sh.head_dim;
  ptr.s[bh] = s + bh * sh.seq_q * ld;
  ptr.v[bh] = v + kv;
  ptr.p[bh] = p + bh * sh.seq_q * ld;
  ptr.o[bh] = o + b * sh.o_batch_stride + h * sh.head_dim;
}

// out = p rounded to T, 4 elements per thread (the element count is a multiple of 4:
// ld is a multiple of 8).
template <class T>
__global__ void to_storage_kernel(const float4* __restrict__ p, T* __restrict__ out, int64_t n4) {
  const int64_t idx = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (idx >= n4) return;
  const float4 x = p[idx];
  out[4 * idx + 0] = from_float<T>(x.x);
  out[4 * idx + 1] = from_float<T>(x.y);
  out[4 * idx + 2] = from_float<T>(x.z);
  out[4 * idx + 3] = from_float<T>(x.w);
}

// ---------------------------------------------------------------------------------------
// flash_fp32: helpers

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// src-size 0 zero-fills: rows past the sequence and columns past head_dim read as 0.
// .cg: the tile is used once per block, keep it out of L1.
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }

// 2^x on the special-function unit; ex2(-inf) = 0.
__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// acc += a · b, four FMAs in k order.
__device__ __forceinline__ void dot4_acc(float& acc, const float4& a, const float4& b) {
  acc = fmaf(a.x, b.x, acc);
  acc = fmaf(a.y, b.y, acc);
  acc = fmaf(a.z, b.z, acc);
  acc = fmaf(a.w, b.w, acc);
}

// Element e of a float4; e is a constant once the loops around it are unrolled.
__device__ __forceinline__ float elem(const float4& v, int e) { return e == 0 ? v.x : e == 1 ? v.y : e == 2 ? v.z : v.w; }

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
  static constexpr int kChunksPerRow = kD / 4;  // 16-byte cp.async chunks per row
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
  // The 8 lanes of a row group differ in bits 1, 3 and 4: kRowLanes are the shuffle masks.
  const int tid = threadIdx.x, lane = tid % 32;
  const int rg = (tid / 32) * 4 + (lane & 1) + ((lane >> 1) & 2);
  const int cg = ((lane >> 1) & 1) + ((lane >> 2) & 6);
  constexpr int kRowLanes[3] = {2, 8, 16};

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
  auto store_o = [&](const float (&inv_l)[RM]) {
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
  cp_async_wait_all();
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
  const float slope_log2 = s.alibi ? alibi_slope(h, s.heads) * kLog2e : 0.f;

  const float* Qt = Qs + rg * kLd;   // + r·kRowGroups·kLd: row rg + kRowGroups·r
  const float* Kt = Ks + cg * kLd;   // + t·8·kLd: key cg + 8t
  const float* Pt = Ps + rg * kLdP;  // + r·kRowGroups·kLdP
  const float* Vt = Vs + 4 * cg;     // + j·kLd + 32·dq
  float* Pw = Ps + rg * kLdP + cg;   // + r·kRowGroups·kLdP + 8t

  for (int jt = jt_begin; jt < jt_end; ++jt) {
    const int j0 = jt * Bc;
    // V_j streams in while S_j is computed: the previous iteration's last barrier
    // certified that every warp is done reading V_j-1.
    load_tile<Cfg, Bc>(smem_addr(Vs + ld_smem), v_src + jt * kv_tile_stride, v + jt * kv_tile_stride,
                       s.kv_row_stride, ld_row, s.seq_k - j0, ld_col_ok);
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

    // Boundary tiles (sequence end, causal diagonal, window edges) and ALiBi: mask to
    // -inf and add the bias. Interior tiles, most of them, skip this.
    if (s.alibi || !tile_all_visible(s, p_lo, p_hi, j0, j0 + Bc)) {
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
#pragma unroll
      for (int x : kRowLanes) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, x));
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
    cp_async_wait_all();
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
      cp_async_wait_all();
      __syncthreads();
    }
  }

  // l: add up the row's 8 partial sums. A row that saw no key has l = 0 and outputs 0;
  // any other has l >= 1 (its max contributes exp2(0)).
  float inv_l[RM];
#pragma unroll
  for (int r = 0; r < RM; ++r) {
    float sum = l[r];
#pragma unroll
    for (int x : kRowLanes) sum += __shfl_xor_sync(0xffffffffu, sum, x);
    inv_l[r] = sum > 0.f ? 1.f / sum : 0.f;
  }
  store_o(inv_l);
}

// ---------------------------------------------------------------------------------------
// Launchers

// Calls f(T{}) with the storage type T of p.dtype (common_reason has checked it).
template <class F>
void with_storage(DType dtype, const char* name, F&& f) {
  switch (dtype) {
    case DType::fp32: return f(float{});
    case DType::fp16: return f(__half{});
    case DType::bf16: return f(__nv_bfloat16{});
    case DType::fp8_e4m3: break;
  }
  throw std::invalid_argument(std::string(name) + ": no kernel for dtype " + dtype_name(dtype));
}

const Variant<SoftmaxParams>& softmax_variant(const char* name) {
  const Variant<SoftmaxParams>* v = find_variant(softmax_variants(), name);
  if (!v) throw std::logic_error(std::string("attention: softmax variant ") + name + " is gone");
  return *v;
}

// The softmax of the unfused paths: rows of S (fp32, -inf where masked) into P.
SoftmaxParams softmax_params(const AttentionParams& p, const float* s, float* out, int64_t ld) {
  SoftmaxParams sp;
  sp.x = s;
  sp.y = out;
  sp.rows = p.batch * p.heads * p.seq_q;
  sp.cols = ld;
  sp.dtype = DType::fp32;
  return sp;
}

void naive(const AttentionParams& p, const LaunchContext& ctx) {
  const Shape sh = make_shape(p);
  const UnfusedLayout w = unfused_layout(p, false);
  float* s = static_cast<float*>(ctx.workspace);
  float* prob = reinterpret_cast<float*>(static_cast<char*>(ctx.workspace) + w.matrix_bytes);
  const int64_t scores = sh.batch_heads * sh.seq_q * w.ld;
  with_storage(p.dtype, "attention/naive", [&](auto tag) {
    using T = decltype(tag);
    naive_scores_kernel<T><<<elementwise_blocks(sh.batch_heads * sh.seq_q * sh.seq_k), kElementwiseThreads, 0,
                             ctx.stream>>>(static_cast<const T*>(p.q), static_cast<const T*>(p.k), s, sh, w.ld);
    check_launch("attention/naive");
    scale_and_mask_kernel<<<elementwise_blocks(scores), kElementwiseThreads, 0, ctx.stream>>>(s, sh, w.ld);
    check_launch("attention/naive");
    softmax_variant("block_reduce").launch(softmax_params(p, s, prob, w.ld), ctx);
    naive_pv_kernel<T><<<elementwise_blocks(sh.batch_heads * sh.seq_q * sh.head_dim), kElementwiseThreads, 0,
                         ctx.stream>>>(prob, static_cast<const T*>(p.v), static_cast<T*>(p.o), sh, w.ld);
    check_launch("attention/naive");
  });
}

template <class T>
constexpr cudaDataType_t cuda_type() {
  if constexpr (std::is_same_v<T, float>) return CUDA_R_32F;
  if constexpr (std::is_same_v<T, __half>) return CUDA_R_16F;
  return CUDA_R_16BF;
}

void cublas(const AttentionParams& p, const LaunchContext& ctx) {
  const Shape sh = make_shape(p);
  const UnfusedLayout w = unfused_layout(p, true);
  char* ws = static_cast<char*>(ctx.workspace);
  float* s = reinterpret_cast<float*>(ws);
  float* prob = reinterpret_cast<float*>(ws + w.matrix_bytes);
  const void** arrays = reinterpret_cast<const void**>(ws + 2 * w.matrix_bytes);
  const int64_t n = sh.batch_heads;
  const GemmPointers ptr{arrays,
                         arrays + n,
                         const_cast<void**>(arrays + 2 * n),
                         arrays + 3 * n,
                         arrays + 4 * n,
                         const_cast<void**>(arrays + 5 * n)};
  const int batch = static_cast<int>(n);
  const int seq_q = static_cast<int>(p.seq_q), seq_k = static_cast<int>(p.seq_k), d = static_cast<int>(p.head_dim);
  const int ld = static_cast<int>(w.ld), ldq = static_cast<int>(sh.q_row_stride),
            ldkv = static_cast<int>(sh.kv_row_stride);

  // Default math: fp32 stays fp32 (TF32 only under CUBLAS_TF32_TENSOR_OP_MATH) while
  // fp16/bf16 get tensor cores. Pointer mode host: alpha and beta live here.
  check_cublas(cublasSetMathMode(ctx.cublas, CUBLAS_DEFAULT_MATH), "attention/cublas: cublasSetMathMode");
  check_cublas(cublasSetPointerMode(ctx.cublas, CUBLAS_POINTER_MODE_HOST), "attention/cublas: cublasSetPointerMode");
  const float one = 1.f, zero = 0.f;

  with_storage(p.dtype, "attention/cublas", [&](auto tag) {
    using T = decltype(tag);
    constexpr cudaDataType_t type = cuda_type<T>();
    constexpr bool kFp32 = std::is_same_v<T, float>;
    // P as the second GEMM reads it: the softmax output itself for fp32, else its 16-bit
    // copy, written over S (dead once the softmax has read it).
    const T* p_op = kFp32 ? reinterpret_cast<const T*>(prob) : reinterpret_cast<const T*>(s);
    gemm_pointers_kernel<T><<<elementwise_blocks(n), kElementwiseThreads, 0, ctx.stream>>>(
        static_cast<const T*>(p.q), static_cast<const T*>(p.k), static_cast<const T*>(p.v), static_cast<T*>(p.o), s,
        p_op, sh, w.ld, ptr);
    check_launch("attention/cublas");

    // cuBLAS is column-major; a row-major X [r, c] with row stride ld is the column-major
    // Xᵀ [c, r]. S [seq_q, seq_k] as Sᵀ = K Qᵀ: A = K seen as Kᵀ [d, seq_k] (op T),
    // B = Q seen as Qᵀ [d, seq_q], C = Sᵀ [seq_k, seq_q] with ld.
    check_cublas(cublasGemmBatchedEx(ctx.cublas, CUBLAS_OP_T, CUBLAS_OP_N, seq_k, seq_q, d, &one, ptr.k, type, ldkv,
                                     ptr.q, type, ldq, &zero, ptr.s, CUDA_R_32F, ld, batch, CUBLAS_COMPUTE_32F,
                                     CUBLAS_GEMM_DEFAULT),
                 "attention/cublas: S = Q K^T");
    scale_and_mask_kernel<<<elementwise_blocks(n * seq_q * w.ld), kElementwiseThreads, 0, ctx.stream>>>(s, sh,
                                                                                                       w.ld);
    check_launch("attention/cublas");
    softmax_variant("warp_online").launch(softmax_params(p, s, prob, w.ld), ctx);
    if constexpr (!kFp32) {
      const int64_t n4 = n * seq_q * w.ld / 4;
      to_storage_kernel<T><<<elementwise_blocks(n4), kElementwiseThreads, 0, ctx.stream>>>(
          reinterpret_cast<const float4*>(prob), reinterpret_cast<T*>(s), n4);
      check_launch("attention/cublas");
    }
    // O [seq_q, d] as Oᵀ = Vᵀ Pᵀ: A = V seen as Vᵀ [d, seq_k], B = P seen as Pᵀ
    // [seq_k, seq_q] with ld (its padding columns are never read: k = seq_k), C = Oᵀ.
    check_cublas(cublasGemmBatchedEx(ctx.cublas, CUBLAS_OP_N, CUBLAS_OP_N, d, seq_q, seq_k, &one, ptr.v, type, ldkv,
                                     ptr.p, type, ld, &zero, ptr.o, type, ldq, batch, CUBLAS_COMPUTE_32F,
                                     CUBLAS_GEMM_DEFAULT),
                 "attention/cublas: O = P V");
  });
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

// head_dim padded to the configuration's kD.
int flash_fp32_padded_dim(int64_t head_dim) {
  return head_dim <= 32 ? 32 : head_dim <= 64 ? 64 : head_dim <= 128 ? 128 : 256;
}

void flash_fp32(const AttentionParams& p, const LaunchContext& ctx) {
  switch (flash_fp32_padded_dim(p.head_dim)) {
    case 32: return launch_flash_fp32<Flash32>(p, ctx, "attention/flash_fp32");
    case 64: return launch_flash_fp32<Flash64>(p, ctx, "attention/flash_fp32");
    case 128: return launch_flash_fp32<Flash128>(p, ctx, "attention/flash_fp32");
    default: return launch_flash_fp32<Flash256>(p, ctx, "attention/flash_fp32");
  }
}

// ---------------------------------------------------------------------------------------
// supports and workspace

std::size_t naive_workspace(const AttentionParams& p) { return unfused_layout(p, false).total(); }
std::size_t cublas_workspace(const AttentionParams& p) { return unfused_layout(p, true).total(); }

// The unfused paths hold S and P for every head at once: refused beyond a quarter of the
// card (total_memory 0 means unknown: allowed), and within what their grids and the
// softmax can index.
std::string unfused_reason(const AttentionParams& p, const DeviceCaps& caps, bool for_cublas) {
  std::string r = common_reason(p);
  if (!r.empty()) return r;
  const UnfusedLayout w = unfused_layout(p, for_cublas);
  if (caps.total_memory > 0 && w.total() > caps.total_memory / 4)
    return "score and probability matrices need " + gib(static_cast<double>(w.total())) +
           " (more than a quarter of the card's " + gib(static_cast<double>(caps.total_memory)) + ")";
  // The widest elementwise grid: one thread per score or per output element.
  const int64_t threads = p.batch * p.heads * p.seq_q * std::max(w.ld, p.head_dim);
  if (ceil_div(threads, kElementwiseThreads) > INT_MAX) return "too many scores for one elementwise grid";
  const SoftmaxParams sp = softmax_params(p, nullptr, nullptr, w.ld);
  r = softmax_variant(for_cublas ? "warp_online" : "block_reduce").supports(sp, caps);
  return r.empty() ? r : "softmax: " + r;
}

std::string naive_supports(const AttentionParams& p, const DeviceCaps& caps) { return unfused_reason(p, caps, false); }

std::string cublas_supports(const AttentionParams& p, const DeviceCaps& caps) {
  std::string r = unfused_reason(p, caps, true);
  if (!r.empty()) return r;
  r = alignment_reason(p);
  if (!r.empty()) return r;
  if (p.heads * p.head_dim > INT_MAX) return "heads * head_dim must fit in int (a cuBLAS leading dimension)";
  return {};
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

std::string flash_fp32_supports(const AttentionParams& p, const DeviceCaps& caps) {
  switch (flash_fp32_padded_dim(p.head_dim)) {
    case 32: return flash_fp32_config_reason<Flash32>(p, caps);
    case 64: return flash_fp32_config_reason<Flash64>(p, caps);
    case 128: return flash_fp32_config_reason<Flash128>(p, caps);
    default: return flash_fp32_config_reason<Flash256>(p, caps);
  }
}

}  // namespace impl
}  // namespace

// ---------------------------------------------------------------------------------------
// Variant table

const std::vector<Variant<AttentionParams>>& attention_variants() {
  static const std::vector<Variant<AttentionParams>> table = {
      {"naive", "unfused: fp32 scores (thread per score), scale+mask, softmax block_reduce, P V (the baseline)",
       impl::naive, impl::naive_supports, impl::naive_workspace},
      {"cublas", "unfused as a framework runs it: cuBLAS batched GEMMs, fp32 scores, softmax warp_online",
       impl::cublas, impl::cublas_supports, impl::cublas_workspace},
      {"flash_fp32", "fp32 FlashAttention-2: register-tiled SIMT (4x8 per thread), online softmax, cp.async K/V",
       impl::flash_fp32, impl::flash_fp32_supports},
      {"flash_mma",
       "fp16/bf16 FlashAttention-2: mma.sync m16n8k16, ldmatrix, cp.async pipeline, P in registers, lazy rescale",
       flash_mma, flash_mma_supports},
      {"flash_wgmma", "fp16/bf16 d128, sm_90a: wgmma m64n128k16, Q/K/V in 128-byte swizzle, P in registers",
       flash_wgmma, flash_wgmma_supports},
  };
  return table;
}

}  // namespace attnbench
