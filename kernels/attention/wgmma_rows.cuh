// What the Hopper prefill rungs (5_flash_wgmma.cu, 6_flash_ws.cu) do alike to the rows a
// warpgroup owns: the key tiles a block of query rows can see, the score masks and soft-capping
// on a tile of S, the online softmax's new row maxima, the final O / l store, and the checks
// their supports() share.
//
// A warpgroup's S and O tiles are wgmma accumulator fragments (m64nN, fp32): register 4j + e of
// a thread holds row 16 (warp % 4) + lane / 4 (+ 8 when e >= 2) of the warpgroup's 64, column
// 8j + 2 (lane % 4) + e % 2. `row` below is the thread's first row as a query index, t4 its
// lane % 4.
#pragma once
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>
#include <string>

#include "kernels/attention/flash_args.cuh"
#include "kernels/common/mask.cuh"
#include "kernels/common/reduce.cuh"
#include "kernels/common/softmax_math.cuh"
#include "kernels/common/storage.cuh"

namespace attnbench::attention_impl {

// Key tiles of BC keys the query rows [q0, q0 + BR) can see: [n_begin, n_end). kCausal: the
// plain causal mask; kReach: a window or ALiBi, causal then comes in a.hi_reach.
template <int BR, int BC, bool kCausal, bool kReach>
__device__ __forceinline__ void visible_key_tiles(const Args& a, int q0, int& n_begin, int& n_end) {
  const int shift = a.q_offset;  // query i sits at key position i + shift
  n_begin = 0;
  n_end = (a.seq_k + BC - 1) / BC;
  if (kCausal) {
    const int last = min(q0 + BR, a.seq_q) - 1 + shift;  // the last row's position
    n_end = last < 0 ? 0 : min(n_end, last / BC + 1);
  }
  if constexpr (kReach) {  // keys [position - lo_reach, position + hi_reach] of the first and last rows
    const int last_hi = min(min(q0 + BR, a.seq_q) - 1 + shift + a.hi_reach, a.seq_k - 1);
    n_end = last_hi < 0 ? 0 : min(n_end, last_hi / BC + 1);
    n_begin = min(max(q0 + shift - a.lo_reach, 0) / BC, n_end);
  }
}

// Soft-capping (kCap), then the masks of the key tile at key0 on S (raw scores): keys past
// seq_k and (causal) past a row's position, only on the tiles that need them; the reach masks
// and the ALiBi bias -slope·|position - key| (kReach) on the tiles the reaches cut, and on every
// tile with ALiBi, whose bias varies along each.
template <int BR, int BC, bool kCausal, bool kCap, bool kReach>
__device__ __forceinline__ void mask_scores(float (&s)[BC / 2], const Args& a, int h, int q0, int key0, int row,
                                            int t4) {
  const int shift = a.q_offset;
  if constexpr (kCap) {  // before the masks, in raw score units
#pragma unroll
    for (int i = 0; i < BC / 2; ++i) s[i] = soft_cap_sfu(s[i], a.score.cap, a.score.inv_cap);
  }
  const bool tail = key0 + BC > a.seq_k;
  const bool diag = kCausal && key0 + BC - 1 > q0 + shift;
  if (tail || diag) {
#pragma unroll
    for (int j = 0; j < BC / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = key0 + 8 * j + 2 * t4 + (e & 1);
        const bool ok = key < a.seq_k && (!kCausal || key <= row + 8 * (e >> 1) + shift);
        if (!ok) s[4 * j + e] = -INFINITY;
      }
  }
  // A tile every row sees whole (above the last row's lowest key, below the first row's
  // highest) needs no reach mask.
  if (kReach && (a.score.alibi || key0 + BC - 1 > min(q0 + shift + a.hi_reach, a.seq_k - 1) ||
                 key0 < min(q0 + BR, a.seq_q) - 1 + shift - a.lo_reach)) {
    const float slope = alibi_slope(a.score.alibi, a.score.slopes, h, a.alibi_scale);  // raw score units
#pragma unroll
    for (int j = 0; j < BC / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = key0 + 8 * j + 2 * t4 + (e & 1), pos = row + 8 * (e >> 1) + shift;
        float& x = s[4 * j + e];
        x = fmaf(-slope, fabsf(static_cast<float>(pos - key)), x);
        if (key < pos - a.lo_reach || key > pos + a.hi_reach) x = -INFINITY;
      }
  }
}

// The online softmax's step in exp2 units over a masked tile: m (the running max of s ·
// scale_log2 per row) takes the tile's maxima, reduced over the quad of lanes that holds a row;
// base is what the tile's exponents subtract; l and O are to be scaled by corr. In two parts:
// this lane's maxima of its rows' scores, then the step from them.
template <int BC>
__device__ __forceinline__ void lane_row_max(const float (&s)[BC / 2], float (&mx)[2]) {
  mx[0] = mx[1] = -INFINITY;
#pragma unroll
  for (int j = 0; j < BC / 8; ++j) {
    mx[0] = fmaxf(mx[0], fmaxf(s[4 * j], s[4 * j + 1]));
    mx[1] = fmaxf(mx[1], fmaxf(s[4 * j + 2], s[4 * j + 3]));
  }
}
__device__ __forceinline__ void row_max_step(float (&mx)[2], float scale_log2, float (&m)[2], float (&l)[2],
                                             float (&base)[2], float (&corr)[2]) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    mx[r] = allreduce_max<4, XorOrder::low_first>(mx[r]);  // the quad that holds row r
    const float m_new = fmaxf(m[r], mx[r] * scale_log2);
    base[r] = m_new == -INFINITY ? 0.f : m_new;  // a row that has seen no key yet stays at 0
    corr[r] = exp2_approx(m[r] - base[r]);
    m[r] = m_new;
    l[r] *= corr[r];
  }
}
template <int BC>
__device__ __forceinline__ void new_row_max(const float (&s)[BC / 2], float scale_log2, float (&m)[2], float (&l)[2],
                                            float (&base)[2], float (&corr)[2]) {
  float mx[2];
  lane_row_max<BC>(s, mx);
  row_max_step(mx, scale_log2, m, l, base, corr);
}

// The lazy step (flash_mma's, and FlashAttention-4's): a row's m moves only when one of the
// tile's scores passes it by kLazyWgLog2 (exp2 units), so every exponent stays <= 2^8 (fp16,
// bf16 and e4m3 all hold it; the row sums stay far from fp32's range). A lane's share of a row
// passes iff one of its scores does, so the test needs no shuffle; a warp where any row
// passes takes new_row_max's exact step for all its rows. Returns whether it did (warp-
// uniform): when not, corr is 1 and O needs no rescale.
constexpr float kLazyWgLog2 = 8.f;
template <int BC>
__device__ __forceinline__ bool lazy_row_max(const float (&s)[BC / 2], float scale_log2, float (&m)[2], float (&l)[2],
                                             float (&base)[2], float (&corr)[2]) {
  float mx[2];
  lane_row_max<BC>(s, mx);
  const bool grow = mx[0] * scale_log2 > m[0] + kLazyWgLog2 || mx[1] * scale_log2 > m[1] + kLazyWgLog2;
  if (__any_sync(0xffffffffu, grow)) {
    row_max_step(mx, scale_log2, m, l, base, corr);
    return true;
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    base[r] = m[r] == -INFINITY ? 0.f : m[r];  // a row that has seen no key yet stays at 0
    corr[r] = 1.f;
  }
  return false;
}

// O / l into rows row and row + 8 of out (a row_stride apart), the rows below seq_q; a row
// that saw no key has l = 0 and outputs 0. sink: the head's sink in exp2 units, joining l
// relative to the row's m (-inf: none; plus_sink).
template <class T, int D>
__device__ __forceinline__ void store_rows(const float (&o)[D / 2], float (&l)[2], const float (&m)[2], float sink,
                                           T* out, int64_t row_stride, int row, int seq_q, int t4, float vscale = 1.f) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] = plus_sink(allreduce_sum<4, XorOrder::low_first>(l[r]), m[r], sink);
    const int i = row + 8 * r;
    if (i >= seq_q) continue;
    const float inv = l[r] > 0.f ? vscale / l[r] : 0.f;
    T* dst = out + static_cast<int64_t>(i) * row_stride;
#pragma unroll
    for (int j = 0; j < D / 8; ++j)
      *reinterpret_cast<uint32_t*>(dst + 8 * j + 2 * t4) = pack2<T>(o[4 * j + 2 * r] * inv, o[4 * j + 2 * r + 1] * inv);
  }
}

// What both Hopper rungs need of a problem beyond their head_dims and shared memory: 16-bit
// inputs, an sm_90 card, no block-sparse mask, grid and index limits, and 16-byte rows.
inline std::string wgmma_prefill_supports(const AttentionParams& p, const DeviceCaps& caps, const char* copies,
                                          bool fp8 = false) {
  if (p.dtype != DType::fp16 && p.dtype != DType::bf16 && !(fp8 && p.dtype == DType::fp8_e4m3))
    return fp8 ? "fp16, bf16 or fp8_e4m3 only (wgmma's input types)" : "fp16/bf16 only (wgmma on 16-bit inputs)";
  if (caps.cc_major != 9) return "needs sm_90 (wgmma; the binary's sm_90a build)";
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
  if (p.dtype == DType::fp8_e4m3 && (p.q_batch_stride % 16 != 0 || p.kv_batch_stride % 16 != 0))
    return "fp8: batch strides of q, k and v must be multiples of 16 elements (16-byte rows)";
  if ((p.q && !aligned16(p.q)) || (p.k && !aligned16(p.k)) || (p.v && !aligned16(p.v)) || (p.o && !aligned16(p.o)))
    return std::string("q, k, v and o must be 16-byte aligned (") + copies + ")";
  return {};
}

}  // namespace attnbench::attention_impl
