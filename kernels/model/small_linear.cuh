// small_linear's work for one block (kernels/model/2_small_linear.cu launches it alone; the
// persistent decode step, kernels/model/3_persistent.cu, runs it as one phase of many):
// the m input rows into shared memory (through a LayerNorm or as stored), then whole output
// columns a warp (small_linear_block) or eight a block on the tensor cores
// (small_linear_groups), W's rows read with 16-byte loads, each column's m results through
// the epilogue. Results are rounded exactly where the unfused chain stores them.
#pragma once
#include <cfloat>

#include "kernels/common/copy.cuh"
#include "kernels/common/dispatch.cuh"
#include "kernels/common/layernorm.cuh"
#include "kernels/common/mma.cuh"
#include "kernels/common/pdl.cuh"
#include "kernels/common/reduce.cuh"
#include "kernels/model/model.cuh"
#include "kernels/model/model.hpp"

namespace attnbench {
namespace small_linear_impl {

// A logit and its id as one 64-bit key whose unsigned order is (larger logit, then lower
// id): the bits of a float made monotone, then the id's complement. atomicMax over the keys
// of a row leaves its greedy token.
__device__ __forceinline__ unsigned long long argmax_key(float v, int64_t id) {
  const unsigned u = __float_as_uint(v);
  const unsigned ordered = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
  return (static_cast<unsigned long long>(ordered) << 32) | (0xffffffffu - static_cast<unsigned>(id));
}

// The greedy token a row's atomicMax left in its key (0 when no logit was written).
__device__ __forceinline__ int64_t argmax_id(unsigned long long key) {
  return 0xffffffffu - static_cast<unsigned>(key & 0xffffffffu);
}

// acc[r] += the 16-byte chunk of W's row times row r's elements at c, for the m rows.
template <class T>
__device__ __forceinline__ void dot_chunk(const uint4& chunk, const T* a, int64_t k, int64_t m, int64_t c, float* acc) {
  constexpr int kPer = 16 / sizeof(T);
  const T* wv = reinterpret_cast<const T*>(&chunk);
  float wf[kPer];
#pragma unroll
  for (int j = 0; j < kPer; ++j) wf[j] = to_float(wv[j]);
#pragma unroll
  for (int r = 0; r < kSmallLinearRows; ++r) {
    if (r < m) {
      const uint4 in = *reinterpret_cast<const uint4*>(a + r * k + c);
      const T* av = reinterpret_cast<const T*>(&in);
#pragma unroll
      for (int j = 0; j < kPer; ++j) acc[r] = fmaf(wf[j], to_float(av[j]), acc[r]);
    }
  }
}

// Shared memory load_rows uses: the m rows in T, and for a LayerNorm the m fp32 rows of the
// residual stream beside them, then each row's mean and reciprocal deviation.
__host__ __device__ constexpr int64_t rows_smem_bytes(SmallLinear::In in, int64_t m, int64_t k, int64_t elem) {
  return m * k * elem + (in == SmallLinear::In::layernorm ? 4 * (m * k + 2 * m) : 0);
}

// Whether p's LayerNorm prologue takes the whole block (layernorm_row_block, layernorm.cuh):
// batch 1, a row of at most kLnPerThread elements a thread.
template <int kWarps>
__device__ __forceinline__ bool layernorm_by_block(const SmallLinear& p) {
  return p.in == SmallLinear::In::layernorm && p.m == 1 && p.k <= kLnPerThread * 32 * kWarps;
}
// The m input rows of p into shared memory `a` (rows_smem_bytes of it): through the LayerNorm
// from the fp32 residual stream, or copied as stored. Ends with the block synchronised.
// kStaged: the LayerNorm's rows come through shared memory, its gains and shifts first (the
// persistent step, where a round trip to memory costs 1.5-2 µs beside the copies of the next
// phase's W); else a warp a row reads the stream where it is (one launch a projection: at
// batch 8 this measured 5% faster than the staged form).
template <class T, int kWarps, bool kStaged>
__device__ __forceinline__ void load_rows(const SmallLinear& p, T* a, const T* gains = nullptr,
                                          const T* shifts = nullptr) {
  constexpr int kThreads = kWarps * 32;
  const int64_t m = p.m, k = p.k;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (!kStaged && p.in == SmallLinear::In::layernorm) {
    // A warp a row, no block barrier; one row (batch 1) by the whole block. (One block
    // reduction for all rows at once measured slower: run 84.) The gains and shifts from
    // where the caller staged them, if it did.
    const T* g = gains ? gains : static_cast<const T*>(p.gamma);
    const T* b = shifts ? shifts : static_cast<const T*>(p.beta);
    if (layernorm_by_block<kWarps>(p)) {
      BlockGains gs;
      gs.load<T, kWarps>(g, b, k);
      layernorm_row_block<T, kWarps>(p.x, gs, a, k, p.eps, reinterpret_cast<float*>(a + k));
    } else {
      for (int64_t r = warp; r < m; r += kWarps) layernorm_row(p.x + r * k, g, b, a + r * k, k, p.eps);
    }
  } else if (p.in == SmallLinear::In::layernorm) {
    // The rows come in with every thread's loads at once (one round trip, where a warp
    // walking its row took one a pass); then a warp a row's statistics; then every thread
    // normalises its elements.
    float* xs = reinterpret_cast<float*>(a + m * k);
    float* stats = xs + m * k;
    // Each thread normalises columns c = threadIdx.x + j · kThreads of every row: their gains
    // and shifts are read first, so that those loads travel with the rows'.
    constexpr int kHeld = 4;  // columns a thread keeps gains for (GPT-2 medium's 1024 at 256 threads)
    const T* g = static_cast<const T*>(p.gamma);
    const T* b = static_cast<const T*>(p.beta);
    float gain[kHeld], shift[kHeld];
#pragma unroll
    for (int j = 0; j < kHeld; ++j) {
      const int64_t c = threadIdx.x + j * int64_t{kThreads};
      if (c < k) {
        gain[j] = to_float(g[c]);
        shift[j] = to_float(b[c]);
      }
    }
    for (int64_t i = threadIdx.x; i < m * k / 4; i += kThreads)
      reinterpret_cast<float4*>(xs)[i] = reinterpret_cast<const float4*>(p.x)[i];
    __syncthreads();
    for (int64_t r = warp; r < m; r += kWarps) {
      const float2 st = row_stats(xs + r * k, k, p.eps);
      if (lane == 0) {
        stats[2 * r] = st.x;
        stats[2 * r + 1] = st.y;
      }
    }
    __syncthreads();
    for (int64_t r = 0; r < m; ++r) {
      const float mean = stats[2 * r], rstd = stats[2 * r + 1];
#pragma unroll
      for (int j = 0; j < kHeld; ++j) {
        const int64_t c = threadIdx.x + j * int64_t{kThreads};
        if (c < k) a[r * k + c] = from_float<T>(layernorm_normalize(xs[r * k + c], mean, rstd) * gain[j] + shift[j]);
      }
      for (int64_t c = threadIdx.x + kHeld * int64_t{kThreads}; c < k; c += kThreads)
        a[r * k + c] = from_float<T>(layernorm_normalize(xs[r * k + c], mean, rstd) * to_float(g[c]) + to_float(b[c]));
    }
  } else {
    const uint4* src = static_cast<const uint4*>(p.a);
    uint4* dst = reinterpret_cast<uint4*>(a);
    for (int64_t i = threadIdx.x; i < m * k * static_cast<int64_t>(sizeof(T)) / 16; i += kThreads) dst[i] = src[i];
  }
  __syncthreads();
}

// W's row n (output column n) asked of the L2: a launch's first rows, before it waits for the
// kernel before it (W does not depend on the step).
template <class T>
__device__ __forceinline__ void prefetch_row(const SmallLinear& p, const T* w, int64_t n) {
  prefetch_l2(w + n * p.k, static_cast<unsigned>(p.k * static_cast<int64_t>(sizeof(T))));
}

// The bias of a block's first eight columns n0.. asked of the L2 before the wait, by one thread:
// the epilogue reads it after the product, from memory in a step that starts with the L2
// flushed. (Whole 16-byte pieces only.)
template <class T>
__device__ __forceinline__ void prefetch_bias(const SmallLinear& p, int64_t n0) {
  constexpr int64_t kCols = 8, kBytes = kCols * int64_t{sizeof(T)};
  if (threadIdx.x == 0 && p.out != SmallLinear::Out::logits && n0 + kCols <= p.n && kBytes % 16 == 0)
    prefetch_l2(static_cast<const T*>(p.bias) + n0, static_cast<unsigned>(kBytes));
}

// What the epilogue of row r, column n reads besides the product (has_row: r < m).
struct EpilogueInputs {
  float bias = 0;
  int64_t position = 0;  // the row's position (qkv_to_cache, logits)
  float residual = 0;
};
template <class T>
__device__ __forceinline__ EpilogueInputs epilogue_inputs(const SmallLinear& p, int64_t r, int64_t n, bool has_row) {
  EpilogueInputs e;
  if (p.out != SmallLinear::Out::logits) e.bias = to_float(static_cast<const T*>(p.bias)[n]);
  if (has_row && (p.out == SmallLinear::Out::qkv_to_cache || p.out == SmallLinear::Out::logits))
    e.position = p.positions[r];
  if (has_row && p.out == SmallLinear::Out::residual) e.residual = p.residual[r * p.n + n];
  return e;
}

// Row r's result v at output column n through the epilogue. Out::logits keeps the row's best
// key in `best` (the caller's, over all its columns): one atomicMax a row per warp afterwards
// rather than one a column, which put 50257 atomics a row on one address (bench notes, run 129).
template <class T>
__device__ __forceinline__ void store_result(const SmallLinear& p, int64_t r, int64_t n, float v,
                                             const EpilogueInputs& e, unsigned long long& best) {
  switch (p.out) {
    case SmallLinear::Out::qkv_to_cache: {
      // q, k, v after their bias, as the unfused split stores them: the product stored, plus the bias, stored.
      const T x = from_float<T>(to_float(from_float<T>(v)) + e.bias);
      const int64_t width = p.n / 3, which = n / width, col = n % width;
      if (which == 0)
        static_cast<T*>(p.q)[r * width + col] = x;
      else
        static_cast<T*>(which == 1 ? p.k_cache : p.v_cache)[(r * p.max_context + e.position) * width + col] = x;
      break;
    }
    case SmallLinear::Out::residual:
      p.residual[r * p.n + n] = e.residual + (to_float(from_float<T>(v)) + e.bias);
      break;
    case SmallLinear::Out::bias_gelu:
      static_cast<T*>(p.out_rows)[r * p.n + n] = from_float<T>(gelu_tanh(to_float(from_float<T>(v)) + e.bias));
      break;
    case SmallLinear::Out::logits: {
      const int64_t step = e.position - (p.prompt - 1);
      if (step < 0 || step >= p.generate) break;
      p.logits[(step * p.m + r) * p.n + n] = v;
      if (v == v) best = max(best, argmax_key(v, n));
      break;
    }
  }
}

// Output column n of p: W's row `row` (in global memory, or staged in shared memory) dotted
// with the m rows in `a`, then the epilogue, lane r writing row r's result.
template <class T, bool kShared>
__device__ __forceinline__ void column(const SmallLinear& p, const T* a, const T* row, int64_t n,
                                       unsigned long long& best) {
  const int64_t m = p.m, k = p.k;
  const int lane = threadIdx.x % 32;
  constexpr int64_t kStep = 32 * (16 / sizeof(T));  // a warp's 16-byte loads cover this many elements
  // Loads a lane issues before it uses them: from memory three, so that a GPT-2 row (768
  // elements of 16 bits) is one batch (run 134: -0.7% / -2.8% TBT at batch 1 / 8 against
  // four); from shared memory four (three cost the persistent step 6-8%).
  constexpr int kInFlight = kShared ? 4 : 3;
  // From shared W (the persistent step) the epilogue's inputs are loaded before the dot
  // product, so that their round trips overlap it rather than follow it.
  EpilogueInputs e;
  if constexpr (kShared) e = epilogue_inputs<T>(p, lane, n, lane < m);
  float acc[kSmallLinearRows] = {};
  int64_t c = lane * (16 / sizeof(T));
  for (; c + (kInFlight - 1) * kStep < k; c += kInFlight * kStep) {
    uint4 chunk[kInFlight];
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) {
      const uint4* at = reinterpret_cast<const uint4*>(row + c + u * kStep);
      chunk[u] = kShared ? *at : __ldg(at);
    }
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) dot_chunk(chunk[u], a, k, m, c + u * kStep, acc);
  }
  // (Issuing the last batch's loads together too, predicated, measured 8% slower at m = 8.)
  for (; c < k; c += kStep) {
    const uint4* at = reinterpret_cast<const uint4*>(row + c);
    dot_chunk(kShared ? *at : __ldg(at), a, k, m, c, acc);
  }
  if (m == 1) {
    acc[0] = warp_sum(acc[0]);  // 5 shuffles rather than 40: the other rows' sums are of zeros
  } else {
#pragma unroll
    for (int r = 0; r < kSmallLinearRows; ++r) acc[r] = warp_sum(acc[r]);  // (guarded by r < m: 6% slower at m = 8)
  }
  if (lane >= m) return;
  if constexpr (!kShared) e = epilogue_inputs<T>(p, lane, n, lane < m);
  float v = 0;
#pragma unroll
  for (int r = 0; r < kSmallLinearRows; ++r)
    if (r == lane) v = acc[r];
  store_result<T>(p, lane, n, v, e, best);
}

// After a warp's columns of the logits: each row's best key into p.best (lane r: row r's).
__device__ __forceinline__ void finish_argmax(const SmallLinear& p, unsigned long long best) {
  if (p.out == SmallLinear::Out::logits && threadIdx.x % 32 < p.m && best) atomicMax(p.best + threadIdx.x % 32, best);
}

// The tensor-core form of small_linear_block (16-bit T, launched alone): a block takes 8
// output columns at a time (a group, the mma's n) with its warps splitting k, each warp's
// share through mma.sync m16n8k16 with the group's 8 rows of W as B and the m input rows as
// A's rows (rows m-15 zero); the warps' partial sums meet in shared memory. Where the scalar
// form spends, for each 16 bytes of W at batch 8, 8 shared loads, 64 conversions and 64 FMAs
// (bench notes, run 218: the projections' arithmetic, not their loads, bounds a batch-8
// step), this spends one shared load and two mma.
//
// k is walked in chunks of 32 elements: lane (g, t) = (lane / 4, lane % 4) loads W[n0 + g][32 j
// + 8 t .. + 7] with one 16-byte load and the input row g's same 8 elements. A dot product
// may take its k in any order as long as A and B agree, so each chunk's two mma k-steps take
// the lane's halves: step s's k = 2t, 2t + 1 | 2t + 8, 2t + 9 (mma.cuh's fragments) are
// elements 8t + 4s + {0, 1} | {2, 3}, for B (its column g) and for A (its row g) alike.
constexpr int kGroup = 8;          // output columns a block takes at a time
constexpr int kChunk = 32;         // elements of k a warp's 16-byte loads cover in a group
constexpr int kGroupInFlight = 3;  // chunks a lane loads before it uses them (GPT-2's k = 768: all)

// Shared memory for the warps' partial sums: two groups' worth (so one barrier a group), each
// kWarps x 8 rows x 8 columns of fp32.
constexpr int64_t group_partials_bytes(int warps) { return 2 * int64_t{warps} * kSmallLinearRows * kGroup * 4; }

// Batch `batch` of the warp's chunks of group n0 (chunk j = warp + kWarps (batch ·
// kGroupInFlight + u)): W's 16 bytes for the lane, zero past k or past the last column.
template <class T, int kWarps>
__device__ __forceinline__ void load_group_batch(const SmallLinear& p, const T* w, int64_t n0, int64_t batch,
                                                 uint4 (&chunk)[kGroupInFlight]) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t n = n0 + lane / 4;
#pragma unroll
  for (int u = 0; u < kGroupInFlight; ++u) {
    const int64_t c = (warp + kWarps * (batch * kGroupInFlight + u)) * kChunk + 8 * (lane % 4);
    chunk[u] = n < p.n && c < p.k ? __ldg(reinterpret_cast<const uint4*>(w + n * p.k + c)) : make_uint4(0, 0, 0, 0);
  }
}

// d += the batch's chunks of W times the input rows in `a` (the same chunks of them).
template <class T, int kWarps>
__device__ __forceinline__ void mma_group_batch(const SmallLinear& p, const T* a, int64_t batch,
                                                const uint4 (&chunk)[kGroupInFlight], float (&d)[4]) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane / 4;
#pragma unroll
  for (int u = 0; u < kGroupInFlight; ++u) {
    const int64_t c = (warp + kWarps * (batch * kGroupInFlight + u)) * kChunk + 8 * (lane % 4);
    const uint4 x = g < p.m && c < p.k ? *reinterpret_cast<const uint4*>(a + g * p.k + c) : make_uint4(0, 0, 0, 0);
    mma_16816<T>(d, x.x, 0u, x.y, 0u, chunk[u].x, chunk[u].y);
    mma_16816<T>(d, x.z, 0u, x.w, 0u, chunk[u].z, chunk[u].w);
  }
}

template <class T, int kWarps, bool kEarly>
__device__ __forceinline__ void small_linear_groups(const SmallLinear& p, T* a, float* partials, T* staged,
                                                    int64_t block, int64_t blocks) {
  static_assert(sizeof(T) == 2, "the mma takes 16-bit inputs");
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane / 4, t = lane % 4;
  const T* w = static_cast<const T*>(p.w);
  const int64_t batches = ceil_div(ceil_div(ceil_div(p.k, int64_t{kChunk}), int64_t{kWarps}), int64_t{kGroupInFlight});
  const int64_t stride = blocks * kGroup;
  int64_t n0 = block * kGroup;
  uint4 chunk[kGroupInFlight];
  // W does not depend on the step: each warp asks the L2 for its row of the first group while
  // the kernel before still runs, as the column-a-warp form does. (Loading the first batch
  // into registers before the wait instead measured slower: GPT-2 TBT +2.5% at batch 1, +3.3%
  // at batch 8, bench notes run 220.) Each later group's first loads go out before the partial
  // sums of the one before meet.
  // A LayerNorm's gains and shifts do not depend on it either: they come into shared memory
  // (`staged`, 2k elements) before the wait, where a warp a row would read them from memory
  // only once it has the row's statistics, a second round trip after the wait.
  const bool stage = p.in == SmallLinear::In::layernorm && p.m > 1;
  if constexpr (kEarly) {
    allow_dependents();
    if (lane == 0 && n0 + warp < p.n) prefetch_row(p, w, n0 + warp);
    prefetch_bias<T>(p, n0);
  }
  if (stage) {
    const int64_t each = p.k * static_cast<int64_t>(sizeof(T)) / 16;
    for (int64_t i = threadIdx.x; i < 2 * each; i += kWarps * 32)
      reinterpret_cast<uint4*>(staged)[i] = static_cast<const uint4*>(i < each ? p.gamma : p.beta)[i % each];
    __syncthreads();
  }
  if constexpr (kEarly) wait_for_primary();
  load_group_batch<T, kWarps>(p, w, n0, 0, chunk);
  if (stage)
    load_rows<T, kWarps, false>(p, a, staged, staged + p.k);
  else
    load_rows<T, kWarps, false>(p, a);
  // The epilogue: thread (r, j) = (threadIdx.x / 8, threadIdx.x % 8) < 64 takes row r of the
  // group's column n0 + j.
  const int64_t r = threadIdx.x / kGroup, j = threadIdx.x % kGroup;
  unsigned long long best = 0;
  for (int buf = 0; n0 < p.n; n0 += stride, buf ^= 1) {
    float d[4] = {};
    for (int64_t b = 0;;) {
      mma_group_batch<T, kWarps>(p, a, b, chunk, d);
      if (++b == batches) break;
      load_group_batch<T, kWarps>(p, w, n0, b, chunk);
    }
    if (n0 + stride < p.n) load_group_batch<T, kWarps>(p, w, n0 + stride, 0, chunk);
    const bool writes = threadIdx.x < kGroup * kSmallLinearRows && r < p.m && n0 + j < p.n;
    EpilogueInputs e;
    if (writes) e = epilogue_inputs<T>(p, r, n0 + j, true);
    float* part = partials + buf * (kWarps * kSmallLinearRows * kGroup);
    if (g < p.m)
      *reinterpret_cast<float2*>(part + (warp * kSmallLinearRows + g) * kGroup + 2 * t) = make_float2(d[0], d[1]);
    __syncthreads();
    if (writes) {
      float v = 0;
#pragma unroll
      for (int u = 0; u < kWarps; ++u) v += part[(u * kSmallLinearRows + r) * kGroup + j];
      store_result<T>(p, r, n0 + j, v, e, best);
    }
  }
  // Each row's best key over the block's columns: threads 8r .. 8r + 7 hold row r's.
  if (p.out == SmallLinear::Out::logits && threadIdx.x < kGroup * kSmallLinearRows) {
    best = allreduce<kGroup>(best, [](unsigned long long a, unsigned long long b) { return max(a, b); });
    if (j == 0 && r < p.m && best) atomicMax(p.best + r, best);
  }
}

// The projection p as block `block` of `blocks`, each of kWarps warps, W read from global
// memory: the rows into `a`, then a column a warp, warps of all blocks interleaved. A caller
// that reuses `a` afterwards synchronises the block first.
// kEarly (a launch_pdl launch): the kernel lets the next projection start at once, and
// asks the L2 for its first column of W while the kernel before it still runs: W does not
// depend on the step, only the rows (and what the epilogue reads) wait for that kernel. The
// first column only: a projection has one or two a warp, but the logits ~12 (GPT-2: 77 MB
// in all, beyond the L2's 50 MB on an H100, 60 MiB on an H200), and asking for them all
// evicted lines before their turn (H200, run 200: the logits 37.7 -> 32.8 µs by ncu, TBT
// -0.5% at batch 1 and 8).
// kColumns (kEarly launches whose warps take one column each; small_linear decides): each
// warp copies its column of W into `columns` (kWarps rows of k) by cp.async before the wait,
// where it would ask the L2 for it, and dots it from there.
template <class T, int kWarps, bool kEarly = false, bool kColumns = false>
__device__ __forceinline__ void small_linear_block(const SmallLinear& p, T* a, int64_t block, int64_t blocks,
                                                   T* columns = nullptr) {
  static_assert(kEarly || !kColumns, "the columns are copied before the wait: a kEarly launch's");
  const int warp = threadIdx.x / 32;
  const T* w = static_cast<const T*>(p.w);
  const int64_t first = block * int64_t{kWarps} + warp, stride = blocks * kWarps;
  T* mine = kColumns ? columns + warp * p.k : nullptr;
  // A batch-1 LayerNorm's gains and shifts do not depend on the step either: they come into
  // registers before the wait, where they came in with the row after it (from memory, in a
  // step that starts with the L2 flushed). GPT-2 124M on an H200, a globaltimer trace of the
  // step's graph: the QKV and MLP-up launches' LayerNorm 1.78 -> 1.29 and 1.94 -> 1.51 µs;
  // TBT -1.4% (bench notes, run 230). The bias, loaded into registers the same way, cost
  // 1.5%: it is asked of the L2 instead (prefetch_bias; run 233).
  BlockGains held;
  const bool hold = kEarly && layernorm_by_block<kWarps>(p);
  if constexpr (kEarly) {
    allow_dependents();
    if constexpr (kColumns) {
      if (first < p.n) {
        const int64_t chunks = p.k * static_cast<int64_t>(sizeof(T)) / 16;
        for (int64_t c = threadIdx.x % 32; c < chunks; c += 32)
          cp_async_16(smem_addr(reinterpret_cast<const uint4*>(mine) + c),
                      reinterpret_cast<const uint4*>(w + first * p.k) + c);
      }
      cp_async_commit();
    } else if (threadIdx.x % 32 == 0 && first < p.n) {
      prefetch_row(p, w, first);
    }
    prefetch_bias<T>(p, block * int64_t{kWarps});
    if (hold) held.load<T, kWarps>(static_cast<const T*>(p.gamma), static_cast<const T*>(p.beta), p.k);
    wait_for_primary();
  }
  // load_rows' batch-1 LayerNorm, with the gains it would load already held.
  if (hold) {
    layernorm_row_block<T, kWarps>(p.x, held, a, p.k, p.eps, reinterpret_cast<float*>(a + p.k));
    __syncthreads();  // as load_rows ends
  } else {
    load_rows<T, kWarps, false>(p, a);
  }
  unsigned long long best = 0;
  if constexpr (kColumns) {
    cp_async_wait<0>();
    __syncwarp();  // the warp's own copies, seen by all its lanes
    if (first < p.n) column<T, true>(p, a, mine, first, best);
  } else {
    for (int64_t n = first; n < p.n; n += stride) column<T, false>(p, a, w + n * p.k, n, best);
  }
  finish_argmax(p, best);
}

// After the logits: sequence b's greedy token from its key in `best` (then cleared), written
// and advanced as greedy_step does.
__device__ __forceinline__ void greedy_finish_row(unsigned long long* best, const Sequences& seq, int64_t b) {
  if (b >= seq.batch || step_of(seq, b) < 0) return;
  const unsigned long long key = best[b];
  const int64_t id = argmax_id(key);
  best[b] = 0;
  // No logit written (all NaN): token 0 keeps the next step's reads in bounds.
  advance(seq, b, key && id < seq.vocab ? static_cast<int32_t>(id) : 0);
}

}  // namespace small_linear_impl
}  // namespace attnbench
