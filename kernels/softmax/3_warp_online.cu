// softmax rung 3, warp_online: one pass. Each thread keeps its slice of the row in registers,
// loaded with 16-byte vectors, all loads issued before the first use; its max is then exact
// before any exp, so it computes (m, l) with one exp per element. The (m, l) pairs of the
// row's threads are merged with the online-softmax rule (l_hi + l_lo·exp(m_lo - m_hi)),
// through shuffles and, when a row spans several warps, one shared-memory step: one barrier
// instead of rung 2's two trees. The row is read once and written once, where rung 2 reads it
// three times. Rows too long for registers (> 32768 columns) stream: an online pass for
// (m, l), rescaling l whenever m grows, then a second pass that reads x again to write y.
// H200, run 36: fp32 32768x4096 at 97.6% of read bandwidth, 1.60x torch (run 1: 96.9% of
// copy bandwidth, 12.9x rung 1).
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/common/dispatch.cuh"
#include "kernels/common/reduce.cuh"
#include "kernels/common/softmax_math.cuh"
#include "kernels/common/storage.cuh"
#include "kernels/softmax/rungs.hpp"

namespace attnbench {
namespace {

// Elements of T in one 16-byte vector.
template <class T>
constexpr int kVec = 16 / static_cast<int>(sizeof(T));

// m·log2e for subtracting in exp2_approx. A max that is still -inf (only -inf seen, or
// nothing at all) becomes 0: -inf - -inf would be NaN, -inf - 0 gives exp = 0 as it should.
__device__ __forceinline__ float scaled_max(float m) { return m == -INFINITY ? 0.f : m * kLog2e; }

template <int N>
__device__ __forceinline__ float max_of(const float (&v)[N], float m) {
#pragma unroll
  for (int i = 0; i < N; ++i) m = fmaxf(m, v[i]);
  return m;
}

// v <- exp(v - m) with ms = scaled_max(m); returns the sum.
template <int N>
__device__ __forceinline__ float exp_sum(float (&v)[N], float ms) {
  float l = 0.f;
#pragma unroll
  for (int i = 0; i < N; ++i) {
    v[i] = exp2_approx(fmaf(v[i], kLog2e, -ms));
    l += v[i];
  }
  return l;
}

// A 32-bit word of -inf's of T: one fp32 or two 16-bit values.
template <class T>
constexpr uint32_t kNegInfBits = std::is_same_v<T, float>    ? 0xff800000u
                                 : std::is_same_v<T, __half> ? 0xfc00fc00u
                                                             : 0xff80ff80u;

// Chunk c of a row is its elements [c·V, c·V + V), V = kVec<T>. A thread owns the chunks
// first + k·kStride, k < kChunks, so consecutive lanes touch consecutive chunks and every
// warp access is contiguous. With vec_ok (row start 16-byte aligned, cols·sizeof(T) a
// multiple of 16) a chunk is one 16-byte load, and all kChunks loads are issued before any
// is used; otherwise elements are loaded one by one. Elements past the row read as -inf,
// which adds nothing to a max or to a sum of exps.
template <class T, int kChunks, int kStride>
__device__ __forceinline__ void load_chunks(const T* row, int64_t first, int64_t cols, bool vec_ok,
                                            float (&v)[kChunks * kVec<T>]) {
  constexpr int V = kVec<T>;
  if (vec_ok) {
    const int64_t n = cols / V;
    // Chunks past the row are -inf already in storage bits rather than selected after
    // unpacking: a select would wait on its load and hold back the loads after it.
    uint4 raw[kChunks];
#pragma unroll
    for (int k = 0; k < kChunks; ++k) {
      const int64_t c = first + int64_t{k} * kStride;
      raw[k] = c < n ? reinterpret_cast<const uint4*>(row)[c]
                     : make_uint4(kNegInfBits<T>, kNegInfBits<T>, kNegInfBits<T>, kNegInfBits<T>);
    }
#pragma unroll
    for (int k = 0; k < kChunks; ++k) unpack<T>(raw[k], v + k * V);
  } else {
#pragma unroll
    for (int k = 0; k < kChunks; ++k) {
#pragma unroll
      for (int j = 0; j < V; ++j) {
        const int64_t col = (first + int64_t{k} * kStride) * V + j;
        v[k * V + j] = col < cols ? to_float(row[col]) : -INFINITY;
      }
    }
  }
}

// The store side of load_chunks: same ownership, elements past the row are not written.
template <class T, int kChunks, int kStride>
__device__ __forceinline__ void store_chunks(T* row, int64_t first, int64_t cols, bool vec_ok,
                                             const float (&v)[kChunks * kVec<T>]) {
  constexpr int V = kVec<T>;
  if (vec_ok) {
    const int64_t n = cols / V;
#pragma unroll
    for (int k = 0; k < kChunks; ++k) {
      const int64_t c = first + int64_t{k} * kStride;
      if (c < n) reinterpret_cast<uint4*>(row)[c] = pack<T>(v + k * V);
    }
  } else {
#pragma unroll
    for (int k = 0; k < kChunks; ++k) {
#pragma unroll
      for (int j = 0; j < V; ++j) {
        const int64_t col = (first + int64_t{k} * kStride) * V + j;
        if (col < cols) row[col] = from_float<T>(v[k * V + j]);
      }
    }
  }
}

// Merges the (m, l) partials of the kThreads threads of one row; every thread ends with
// the row's. The xor butterfly leaves the same value in every lane. Rows wider than a warp
// are one block each: lane 0 of each warp posts its pair, and after the barrier every warp
// reads all of them (lane i takes warp i % kWarps) and merges them again.
template <int kThreads>
__device__ __forceinline__ void row_reduce(float& m, float& l) {
  allreduce_pair<32>(m, l, [](float& m, float& l, float m2, float l2) { merge_ml(m, l, m2, l2); });
  if constexpr (kThreads > 32) {
    constexpr int kWarps = kThreads / 32;
    __shared__ float2 partial[kWarps];
    const int lane = threadIdx.x % 32;
    if (lane == 0) partial[threadIdx.x / 32] = make_float2(m, l);
    __syncthreads();
    const float2 p = partial[lane % kWarps];
    m = p.x;
    l = p.y;
    allreduce_pair<kWarps>(m, l, [](float& m, float& l, float m2, float l2) { merge_ml(m, l, m2, l2); });
  }
}

// warp_online's register-resident shapes. Level L takes rows of up to 256·2^L columns.
// A thread holds 8, 16, then at most 32 elements: 32 fp32 registers for the row, so the
// kernel fits in 64 and an SM keeps at least 1024 threads, 128 KB of loads in flight.
// One warp per row (4 rows a block) up to 1024 columns, then 64 to 1024 threads per row,
// one row a block.
constexpr int kResidentLevels = 8;  // up to 256·2^7 = 32768 columns

template <class T, int L>
struct Resident {
  static constexpr int kElems = (8 << L) < 32 ? (8 << L) : 32;  // per thread
  static constexpr int kThreads = (256 << L) / kElems;          // per row
  static constexpr int kChunks = kElems / kVec<T>;              // 16-byte vectors per thread
  static constexpr int kRowsPerBlock = kThreads == 32 ? 4 : 1;
  static constexpr int kBlock = kThreads * kRowsPerBlock;
};

// The streaming fallback: one row a block, 4 vectors a thread per step.
constexpr int kStreamThreads = 512;
constexpr int kStreamChunks = 4;

// x, y: [rows, cols], cols <= 256·2^L. kThreads threads per row, kRowsPerBlock rows a block.
template <class T, int L>
__global__ void __launch_bounds__(Resident<T, L>::kBlock, 1024 / Resident<T, L>::kBlock)
    warp_online_resident_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t rows, int64_t cols, bool vec_ok) {
  using R = Resident<T, L>;
  const int t = threadIdx.x % R::kThreads;
  const int64_t row = int64_t{blockIdx.x} * R::kRowsPerBlock + threadIdx.x / R::kThreads;
  if (row >= rows) return;  // only whole warps of the last block: no barrier is skipped

  float v[R::kChunks * kVec<T>];
  load_chunks<T, R::kChunks, R::kThreads>(x + row * cols, t, cols, vec_ok, v);

  // The whole slice is here, so its max is exact before any exp: one exp per element.
  const float m_t = max_of(v, -INFINITY);
  const float ms_t = scaled_max(m_t);
  float m = m_t;
  float l = exp_sum(v, ms_t);
  row_reduce<R::kThreads>(m, l);

  // v holds exp(x - m_t); the row's max m rescales it. A slice of only -inf (m_t = -inf,
  // v = 0) gets scale 0: exp(m_t - m) = 0, whereas exp(-m) with ms_t = 0 overflows to inf
  // when m < -88 and inf·0 = NaN; a row of only -inf (m = -inf, l = 0, a fully masked
  // attention row) thus becomes 0, as the attention reference has it.
  const float scale = m_t == -INFINITY ? 0.f : exp2_approx(fmaf(m, -kLog2e, ms_t)) / l;
#pragma unroll
  for (auto& e : v) e *= scale;
  store_chunks<T, R::kChunks, R::kThreads>(y + row * cols, t, cols, vec_ok, v);
}

// x, y: [rows, cols], any cols. Block b owns row b and reads it twice.
template <class T>
__global__ void __launch_bounds__(kStreamThreads, 2)
    warp_online_streaming_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t cols, bool vec_ok) {
  constexpr int kStep = kStreamThreads * kStreamChunks;  // chunks per step of the block
  const int64_t chunks = ceil_div(cols, kVec<T>);
  const T* xr = x + int64_t{blockIdx.x} * cols;
  T* yr = y + int64_t{blockIdx.x} * cols;

  // Online pass: when a step raises the running max, the sum so far is rescaled by
  // exp(m_old - m_new) <= 1, so l stays <= the number of elements seen.
  float m = -INFINITY, l = 0.f;
  for (int64_t c = threadIdx.x; c < chunks; c += kStep) {
    float v[kStreamChunks * kVec<T>];
    load_chunks<T, kStreamChunks, kStreamThreads>(xr, c, cols, vec_ok, v);
    const float m_new = max_of(v, m);
    const float ms = scaled_max(m_new);
    l = l * exp2_approx(fmaf(m, kLog2e, -ms)) + exp_sum(v, ms);
    m = m_new;
  }
  row_reduce<kStreamThreads>(m, l);

  const float ms = scaled_max(m);
  // A row of only -inf (a fully masked attention row) has l = 0 and becomes 0, as the
  // attention reference has it, instead of 0·(1/0) = NaN.
  const float inv_l = m == -INFINITY ? 0.f : 1.f / l;
  for (int64_t c = threadIdx.x; c < chunks; c += kStep) {
    float v[kStreamChunks * kVec<T>];
    load_chunks<T, kStreamChunks, kStreamThreads>(xr, c, cols, vec_ok, v);
#pragma unroll
    for (auto& e : v) e = exp2_approx(fmaf(e, kLog2e, -ms)) * inv_l;
    store_chunks<T, kStreamChunks, kStreamThreads>(yr, c, cols, vec_ok, v);
  }
}

// Smallest level whose rows hold cols; kResidentLevels when none does.
int resident_level(int64_t cols) {
  int level = 0;
  while (level < kResidentLevels && cols > (int64_t{256} << level)) ++level;
  return level;
}

template <class T, int L>
void launch_resident(const SoftmaxParams& p, const LaunchContext& ctx, bool vec_ok) {
  using R = Resident<T, L>;
  warp_online_resident_kernel<T, L>
      <<<static_cast<unsigned>(ceil_div(p.rows, R::kRowsPerBlock)), R::kBlock, 0, ctx.stream>>>(
          static_cast<const T*>(p.x), static_cast<T*>(p.y), p.rows, p.cols, vec_ok);
}

template <class T>
void launch_streaming(const SoftmaxParams& p, const LaunchContext& ctx, bool vec_ok) {
  warp_online_streaming_kernel<T><<<static_cast<unsigned>(p.rows), kStreamThreads, 0, ctx.stream>>>(
      static_cast<const T*>(p.x), static_cast<T*>(p.y), p.cols, vec_ok);
}

}  // namespace

void softmax_impl::warp_online(const SoftmaxParams& p, const LaunchContext& ctx) {
  // Every row start is 16-byte aligned exactly when the base is and a row is a whole
  // number of 16-byte vectors.
  const bool vec_ok = (p.cols * static_cast<int64_t>(dtype_bytes(p.dtype))) % 16 == 0 &&
                      reinterpret_cast<uintptr_t>(p.x) % 16 == 0 && reinterpret_cast<uintptr_t>(p.y) % 16 == 0;
  with_storage(p.dtype, "softmax", [&](auto tag) {
    using T = decltype(tag);
    switch (resident_level(p.cols)) {
      case 0:
        return launch_resident<T, 0>(p, ctx, vec_ok);
      case 1:
        return launch_resident<T, 1>(p, ctx, vec_ok);
      case 2:
        return launch_resident<T, 2>(p, ctx, vec_ok);
      case 3:
        return launch_resident<T, 3>(p, ctx, vec_ok);
      case 4:
        return launch_resident<T, 4>(p, ctx, vec_ok);
      case 5:
        return launch_resident<T, 5>(p, ctx, vec_ok);
      case 6:
        return launch_resident<T, 6>(p, ctx, vec_ok);
      case 7:
        return launch_resident<T, 7>(p, ctx, vec_ok);
      default:
        return launch_streaming<T>(p, ctx, vec_ok);
    }
  });
  check_launch("softmax/warp_online");
}

}  // namespace attnbench
