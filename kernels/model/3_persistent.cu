// The model's decode step, rung 3: persistent (row PREFILL+persistent). Over rung 2
// (2_small_linear.cu) the attention and the launch boundaries go too: the whole step is one
// launch, its phases a grid-wide barrier apart, the next phase's weights copied in while this
// one runs. Launched one launch group at a time, a GPT-2 124M step is about 60 small
// kernels; each moves a megabyte or a few, which the card reads
// in a microsecond or two, but the launch boundary between two dependent kernels and the
// next kernel's first loads from memory cost several (run 85: 7 µs a projection). Here one
// block an SM (a cooperative launch, so that all are resident) runs the whole step as
// phases a grid-wide barrier apart: the embedding; for each layer the QKV projection, the
// attention, the output projection, the MLP's two projections (each small_linear's work over
// the whole grid); then the logits and the greedy token. Weights do not depend on the step's
// values, so at the start of a phase each block's bulk copy (TMA) fetches its share of the
// next projection's W into shared memory, one of two buffers, and it arrives while this
// phase and its barrier run: a projection then reads W from shared memory. Where the two
// buffers do not fit (fp32, wide models), W is read from memory, asked of the L2 a phase ahead.
//
// Where the time goes: built with -DATTNBENCH_STEP_TRACE, block 0 stamps the clock at each
// phase's steps (rows in, W waited for, columns done, barrier passed) and prints one step's
// stamps. On an H100 (bench notes, run 129) a GPT-2 124M layer at batch 1 took ~38 µs: a
// LayerNorm's rows 3-3.5 µs and a copied input's 2 µs (a round trip to memory behind the
// next phase's W copies), the projections' columns 1.5-4 µs, the attention 8.7 µs on 12 of
// the 132 blocks, each barrier 1.1-1.5 µs; the logits 57-62 µs (not their atomics: one
// atomicMax a warp rather than a column changed the step by 1%, run 131). Splitting the
// attention over every warp did not help either (run 131): each round trip to memory costs
// 1-1.5 µs here, and the split's merge adds as many as it saves.
#include <cooperative_groups.h>

#include <algorithm>
#include <cmath>

#include "kernels/common/copy.cuh"
#include "kernels/common/wgmma.cuh"
#include "kernels/model/rungs.hpp"
#include "kernels/model/small_linear.cuh"

namespace attnbench::model_step_impl {
namespace {

namespace cg = cooperative_groups;
using small_linear_impl::column;
using small_linear_impl::greedy_finish_row;
using small_linear_impl::load_rows;
using small_linear_impl::small_linear_block;

constexpr int kWarps = 8, kThreads = 32 * kWarps;  // 16 warps capped registers at 128: spills
constexpr int kMaxHeadDim = 128;                   // the attention's scratch is sized for it

// Asks the L2 for this block's share of bytes [p, p + bytes): a hint, so an unaligned range
// is left alone and the tail past the last whole 16 bytes is not asked for.
__device__ __forceinline__ void prefetch_share(const void* p, int64_t bytes, int64_t block, int64_t blocks) {
  if (threadIdx.x != 0 || bytes < 16 || reinterpret_cast<uintptr_t>(p) % 16 != 0) return;
  const int64_t share = ((bytes + blocks - 1) / blocks + 15) / 16 * 16;
  const int64_t lo = block * share, hi = std::min(bytes, lo + share) / 16 * 16;
  constexpr int64_t kPiece = 32 * 1024;
  for (int64_t at = lo; at < hi; at += kPiece) {
    const unsigned n = static_cast<unsigned>(std::min(kPiece, hi - at));
    prefetch_l2(static_cast<const char*>(p) + at, n);
  }
}

template <class T>
__device__ __forceinline__ const T* layer_of(const void* w, int64_t l, int64_t elements) {
  return static_cast<const T*>(w) + l * elements;
}

// Layer l's keys and values that this step reads (each sequence's context), asked of the L2.
template <class T>
__device__ void prefetch_cache(const DecodeStepParams& p, int64_t l, int64_t block, int64_t blocks) {
  const int64_t d = p.d_model, m = p.seq.batch, layer = m * p.max_context * d;
  for (int64_t r = 0; r < m; ++r) {
    const int64_t at = l * layer + r * p.max_context * d, bytes = int64_t{p.seq.contexts[r]} * d * sizeof(T);
    prefetch_share(static_cast<const T*>(p.k_cache) + at, bytes, block, blocks);
    prefetch_share(static_cast<const T*>(p.v_cache) + at, bytes, block, blocks);
  }
}

// Layer l's attention of each sequence's one query over its context, a block a (sequence,
// head): each warp takes every kWarps-th run of 32 keys with an online softmax, then the block
// merges its warps. Scores: a lane a key, its row's loads all in flight. Values: four groups
// of eight lanes, a group eight of the run's keys, a lane head_dim / 8 dims of each, so that
// a lane's loads for the run go out together (a lane a dim walking the 32 keys took four
// round trips). o is stored in the dtype, as the decode kernels store it.
// kLoads: the 16-byte loads of a lane's head_dim / 8 dims of a value row.
template <class T, int kLoads>
__device__ void attention(const DecodeStepParams& p, int64_t l, float* smem, int64_t block, int64_t blocks) {
  const int64_t heads = p.heads, d = p.d_model, hd = d / heads, m = p.seq.batch, mc = p.max_context;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, group = lane / 8, member = lane % 8;
  constexpr int kPer = 16 / sizeof(T);   // elements a 16-byte load holds
  constexpr int kOwned = kLoads * kPer;  // dims a lane owns of each value row (head_dim / 8)
  constexpr int kKeysABatch = 8 / kLoads;
  const T* kc = static_cast<const T*>(p.k_cache) + l * m * mc * d;
  const T* vc = static_cast<const T*>(p.v_cache) + l * m * mc * d;
  float* qs = smem;                // [head_dim], scaled for exp2
  float* wmax = qs + kMaxHeadDim;  // [kWarps]: each warp's running max
  float* wsum = wmax + kWarps;     // [kWarps]: its running sum
  float* wout = wsum + kWarps;     // [kWarps, head_dim]: its unnormalised output
  const float scale = rsqrtf(static_cast<float>(hd)) * kLog2e;
  for (int64_t item = block; item < m * heads; item += blocks) {
    const int64_t r = item / heads, h = item % heads, keys = p.seq.contexts[r];
    for (int64_t t = threadIdx.x; t < hd; t += kThreads)
      qs[t] = to_float(static_cast<const T*>(p.q)[r * d + h * hd + t]) * scale;
    __syncthreads();
    float run_max = -INFINITY, run_sum = 0, acc[kOwned] = {};
    for (int64_t j0 = warp * 32; j0 < keys; j0 += kWarps * 32) {
      const int64_t j = j0 + lane;
      float s = -INFINITY;
      if (j < keys) {
        const T* krow = kc + (r * mc + j) * d + h * hd;
        s = 0;
        constexpr int kBatch = 64 / kPer;  // 64 elements' loads in flight at once
        for (int64_t c0 = 0; c0 < hd; c0 += kBatch * kPer) {
          uint4 chunk[kBatch];
#pragma unroll
          for (int c = 0; c < kBatch; ++c)
            if (c0 + c * kPer < hd) chunk[c] = *reinterpret_cast<const uint4*>(krow + c0 + c * kPer);
#pragma unroll
          for (int c = 0; c < kBatch; ++c)
            if (c0 + c * kPer < hd) {
              const T* kv = reinterpret_cast<const T*>(&chunk[c]);
#pragma unroll
              for (int i = 0; i < kPer; ++i) s = fmaf(qs[c0 + c * kPer + i], to_float(kv[i]), s);
            }
        }
      }
      const float next = fmaxf(run_max, warp_max(s));  // finite: lane 0's key is in range
      const float pj = j < keys ? exp2f(s - next) : 0.f;
      const float corr = exp2f(run_max - next);
      run_sum = run_sum * corr + warp_sum(pj);
#pragma unroll
      for (int i = 0; i < kOwned; ++i) acc[i] *= corr;
      // This group's eight keys: their probabilities, then their rows' loads, 8 at a time.
      float pk[8];
#pragma unroll
      for (int i = 0; i < 8; ++i) pk[i] = __shfl_sync(0xffffffffu, pj, group * 8 + i);
      const T* vrow = vc + (r * mc + j0 + group * 8) * d + h * hd + member * kOwned;
#pragma unroll
      for (int i0 = 0; i0 < 8; i0 += kKeysABatch) {
        uint4 v[8];
#pragma unroll
        for (int u = 0; u < 8; ++u)
          if (j0 + group * 8 + i0 + u / kLoads < keys)
            v[u] = *reinterpret_cast<const uint4*>(vrow + (i0 + u / kLoads) * d + (u % kLoads) * kPer);
#pragma unroll
        for (int u = 0; u < 8; ++u)
          if (j0 + group * 8 + i0 + u / kLoads < keys) {
            const T* vv = reinterpret_cast<const T*>(&v[u]);
#pragma unroll
            for (int x = 0; x < kPer; ++x)
              acc[(u % kLoads) * kPer + x] = fmaf(pk[i0 + u / kLoads], to_float(vv[x]), acc[(u % kLoads) * kPer + x]);
          }
      }
      run_max = next;
    }
    // The four groups' sums of each dim, then the first group holds the warp's output.
#pragma unroll
    for (int y = 0; y < kOwned; ++y) acc[y] = allreduce_sum<4, XorOrder::low_first, 8>(acc[y]);
    if (lane == 0) {
      wmax[warp] = run_max;
      wsum[warp] = run_sum;
    }
    if (group == 0)
#pragma unroll
      for (int y = 0; y < kOwned; ++y) wout[warp * hd + member * kOwned + y] = acc[y];
    __syncthreads();
    for (int64_t t = threadIdx.x; t < hd; t += kThreads) {
      float most = -INFINITY;
      for (int w = 0; w < kWarps; ++w) most = fmaxf(most, wmax[w]);
      float num = 0, den = 0;
      for (int w = 0; w < kWarps; ++w)
        if (wmax[w] != -INFINITY) {  // a warp past the context holds nothing
          const float f = exp2f(wmax[w] - most);
          num = fmaf(f, wout[w * hd + t], num);
          den = fmaf(f, wsum[w], den);
        }
      static_cast<T*>(p.o)[r * d + h * hd + t] = from_float<T>(num / den);
    }
    __syncthreads();
  }
}

// The two shared-memory buffers W is staged in, each with the mbarrier its bulk copies
// complete on and how many times it has been waited for (its phase parity).
template <class T>
struct Staging {
  bool on = false;
  T* buf[2];
  int64_t capacity = 0;  // bytes a buffer holds
  uint32_t bar[2];
  int uses[2] = {0, 0};
};

#ifdef ATTNBENCH_STEP_TRACE
// Block 0's clock at each mark of one step (a diagnostic build: -DATTNBENCH_STEP_TRACE).
__device__ uint64_t g_stamps[512];
__device__ int g_marks;
__device__ __forceinline__ void mark() {
  if (blockIdx.x != 0 || threadIdx.x != 0 || g_marks >= 512) return;
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  g_stamps[g_marks++] = t;
}
#else
__device__ __forceinline__ void mark() {}
#endif

// Block `block`'s columns of a projection of n columns: a contiguous run, so its rows of W
// are one contiguous range.
__device__ __forceinline__ int64_t first_column(int64_t n, int64_t block, int64_t blocks) { return n * block / blocks; }

// Starts the copy of W's rows [first, first + count) ([n, k] rows of T) into buffer b.
template <class T>
__device__ void stage_rows(const Staging<T>& s, int b, const void* w, int64_t first, int64_t count, int64_t k) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)  // the bulk copy and the async proxy are sm_90's: staging is
                                        // off on other cards (staging_bytes), so an sm_80 build has no copy
  if (!s.on || threadIdx.x != 0) return;
  const int64_t bytes = count * k * static_cast<int64_t>(sizeof(T));
  const char* src = reinterpret_cast<const char*>(static_cast<const T*>(w) + first * k);
  fence_proxy_async_shared();  // the buffer's last reads (generic proxy) before the copy's writes
  mbar_expect_tx(s.bar[b], static_cast<int>(bytes));
  constexpr int64_t kPiece = 16 * 1024;
  for (int64_t at = 0; at < bytes; at += kPiece)
    bulk_copy(smem_addr(s.buf[b]) + static_cast<uint32_t>(at), src + at, static_cast<int>(std::min(kPiece, bytes - at)),
              s.bar[b]);
#else
  (void)s, (void)b, (void)w, (void)first, (void)count, (void)k;
#endif
}

// Starts the copy of this block's rows of a projection's W ([n, k]) into buffer b.
template <class T>
__device__ void stage(const Staging<T>& s, int b, const void* w, int64_t n, int64_t k, int64_t block, int64_t blocks) {
  const int64_t first = first_column(n, block, blocks);
  stage_rows(s, b, w, first, first_column(n, block + 1, blocks) - first, k);
}

// Waits for buffer b's copy.
template <class T>
__device__ __forceinline__ void wait_staged(Staging<T>& s, int b) {
  mbar_wait(s.bar[b], s.uses[b]++ & 1);
}

// The projection p: from W staged in buffer b, or (staging off) from memory.
template <class T>
__device__ void linear(const SmallLinear& p, T* rows, Staging<T>& s, int b, int64_t block, int64_t blocks) {
  if (!s.on) return small_linear_block<T, kWarps>(p, rows, block, blocks);
  load_rows<T, kWarps, true>(p, rows);
  mark();
  wait_staged(s, b);
  mark();
  const int64_t first = first_column(p.n, block, blocks), last = first_column(p.n, block + 1, blocks);
  const T* w = s.buf[b];
  unsigned long long best = 0;
  for (int64_t n = first + threadIdx.x / 32; n < last; n += kWarps)
    column<T, true>(p, rows, w + (n - first) * p.k, n, best);
  small_linear_impl::finish_argmax(p, best);
  mark();
}

// Columns a staging buffer holds of the logits' W (the head streams its share through both).
template <class T>
__device__ __forceinline__ int64_t head_chunk(const Staging<T>& s, int64_t k) {
  return s.capacity / (k * static_cast<int64_t>(sizeof(T)));
}

// The logits: this block's share of wte's rows, far more than a buffer holds, streamed
// through the two buffers in turn (chunk 0 was started into buffer 0 a phase ahead): while
// the warps dot one chunk, the copy of the next is under way.
template <class T>
__device__ void head_linear(const SmallLinear& p, T* rows, Staging<T>& s, int64_t block, int64_t blocks) {
  if (!s.on) return small_linear_block<T, kWarps>(p, rows, block, blocks);
  const int64_t first = first_column(p.n, block, blocks), last = first_column(p.n, block + 1, blocks);
  const int64_t chunk = head_chunk(s, p.k), chunks = ceil_div(last - first, chunk);
  if (chunks > 1) stage_rows(s, 1, p.w, first + chunk, std::min(chunk, last - first - chunk), p.k);
  load_rows<T, kWarps, true>(p, rows);
  unsigned long long best = 0;
  for (int64_t c = 0; c < chunks; ++c) {
    const int b = static_cast<int>(c % 2);
    wait_staged(s, b);
    const int64_t from = first + c * chunk, to = std::min(last, from + chunk);
    for (int64_t n = from + threadIdx.x / 32; n < to; n += kWarps)
      column<T, true>(p, rows, s.buf[b] + (n - from) * p.k, n, best);
    __syncthreads();  // buffer b read: it may be refilled
    if (c + 2 < chunks) stage_rows(s, b, p.w, from + 2 * chunk, std::min(chunk, last - from - 2 * chunk), p.k);
  }
  small_linear_impl::finish_argmax(p, best);
  mark();
}

// A block's share of the widest projection's W, which each staging buffer holds.
int64_t stage_bytes(const DecodeStepParams& p, int64_t blocks) {
  const int64_t d = p.d_model;
  int64_t most = 0;
  for (auto [n, k] : {std::pair{3 * d, d}, {d, d}, {4 * d, d}, {d, 4 * d}})
    most = std::max(most, ceil_div(n, blocks) * k * static_cast<int64_t>(dtype_bytes(p.dtype)));
  return most;
}

template <class T>
__global__ void __launch_bounds__(kThreads, 1)
    step_kernel(DecodeStepParams p, int64_t staged_bytes, int64_t rows_region) {
  extern __shared__ __align__(128) unsigned char smem[];
  cg::grid_group grid = cg::this_grid();
  const int64_t block = blockIdx.x, blocks = gridDim.x;
  const int64_t m = p.seq.batch, d = p.d_model, e = sizeof(T);
  const int64_t d2 = d * d;
#ifdef ATTNBENCH_STEP_TRACE
  const int pos0 = p.seq.positions[0];
  if (block == 0 && threadIdx.x == 0) g_marks = 0;
#endif
  mark();
  // [W buffer 0 | W buffer 1 | the input rows (the attention's scratch) | two mbarriers], the
  // buffers staged_bytes each (0: staging off).
  Staging<T> s;
  s.on = staged_bytes > 0;
  s.buf[0] = reinterpret_cast<T*>(smem);
  s.buf[1] = reinterpret_cast<T*>(smem + staged_bytes);
  s.capacity = staged_bytes;
  T* rows = reinterpret_cast<T*>(smem + 2 * staged_bytes);
  s.bar[0] = smem_addr(smem + 2 * staged_bytes + rows_region);
  s.bar[1] = s.bar[0] + 8;
  if (s.on && threadIdx.x == 0) {
    mbar_init(s.bar[0], 1);
    mbar_init(s.bar[1], 1);
  }
  __syncthreads();

  // x = wte[token] + wpe[position], as the embed kernel computes it.
  if (!s.on) prefetch_share(p.w_qkv, 3 * d2 * e, block, blocks);
  stage(s, 0, p.w_qkv, 3 * d, d, block, blocks);
  for (int64_t i = block * kThreads + threadIdx.x; i < m * d; i += blocks * kThreads) {
    const int64_t r = i / d, c = i % d, pos = p.seq.positions[r];
    const int64_t id = p.seq.tokens[r * p.seq.token_stride + pos];
    p.x[i] = to_float(static_cast<const T*>(p.wte)[id * d + c]) + to_float(static_cast<const T*>(p.wpe)[pos * d + c]);
  }
  grid.sync();
  mark();

  SmallLinear base;
  base.m = m;
  base.k = d;
  base.eps = p.eps;
  base.dtype = p.dtype;
  const auto normed = [&](const void* gamma, const void* beta, const void* w, const void* bias, int64_t n) {
    return normed_linear(base, p.x, gamma, beta, w, bias, n, d);
  };
  const auto into_residual = [&](const void* rows_in, const void* w, const void* bias, int64_t k) {
    return residual_linear(base, rows_in, w, bias, k, p.x, d);
  };

  for (int64_t l = 0; l < p.layers; ++l) {
    // LayerNorm, QKV, k and v into the cache at each sequence's position.
    prefetch_cache<T>(p, l, block, blocks);
    if (!s.on) prefetch_share(layer_of<T>(p.w_o, l, d2), d2 * e, block, blocks);
    stage(s, 1, layer_of<T>(p.w_o, l, d2), d, d, block, blocks);
    SmallLinear qkv = normed(layer_of<T>(p.ln1_g, l, d), layer_of<T>(p.ln1_b, l, d), layer_of<T>(p.w_qkv, l, 3 * d2),
                             layer_of<T>(p.b_qkv, l, 3 * d), 3 * d);
    qkv.out = SmallLinear::Out::qkv_to_cache;
    qkv.q = p.q;
    qkv.k_cache = static_cast<T*>(p.k_cache) + l * m * p.max_context * d;
    qkv.v_cache = static_cast<T*>(p.v_cache) + l * m * p.max_context * d;
    qkv.positions = p.seq.positions;
    qkv.max_context = p.max_context;
    linear(qkv, rows, s, 0, block, blocks);
    grid.sync();
    mark();

    if (!s.on) prefetch_share(layer_of<T>(p.w_fc, l, 4 * d2), 4 * d2 * e, block, blocks);
    // head_dim / 8 dims a lane: 1 or 2 loads of 16 bytes (supports() allows up to 128 dims).
    if (d / p.heads / 8 * e == 16)
      attention<T, 1>(p, l, reinterpret_cast<float*>(rows), block, blocks);
    else if constexpr (sizeof(T) == 2)
      attention<T, 2>(p, l, reinterpret_cast<float*>(rows), block, blocks);
    else if (d / p.heads / 8 * e == 32)
      attention<T, 2>(p, l, reinterpret_cast<float*>(rows), block, blocks);
    else
      attention<T, 4>(p, l, reinterpret_cast<float*>(rows), block, blocks);
    mark();
    grid.sync();
    mark();

    // The output projection, its bias and the residual add.
    if (!s.on) prefetch_share(layer_of<T>(p.w_proj, l, 4 * d2), 4 * d2 * e, block, blocks);
    stage(s, 0, layer_of<T>(p.w_fc, l, 4 * d2), 4 * d, d, block, blocks);
    linear(into_residual(p.o, layer_of<T>(p.w_o, l, d2), layer_of<T>(p.b_o, l, d), d), rows, s, 1, block, blocks);
    grid.sync();
    mark();

    // LayerNorm, the MLP's first projection, bias and GELU.
    if (!s.on && l + 1 < p.layers) prefetch_share(layer_of<T>(p.w_qkv, l + 1, 3 * d2), 3 * d2 * e, block, blocks);
    stage(s, 1, layer_of<T>(p.w_proj, l, 4 * d2), d, 4 * d, block, blocks);
    SmallLinear fc = normed(layer_of<T>(p.ln2_g, l, d), layer_of<T>(p.ln2_b, l, d), layer_of<T>(p.w_fc, l, 4 * d2),
                            layer_of<T>(p.b_fc, l, 4 * d), 4 * d);
    fc.out = SmallLinear::Out::bias_gelu;
    fc.out_rows = p.f;
    linear(fc, rows, s, 0, block, blocks);
    grid.sync();
    mark();

    // The MLP's second projection, its bias and the residual add.
    if (!s.on && l + 1 < p.layers) prefetch_share(layer_of<T>(p.w_o, l + 1, d2), d2 * e, block, blocks);
    if (l + 1 < p.layers) {
      stage(s, 0, layer_of<T>(p.w_qkv, l + 1, 3 * d2), 3 * d, d, block, blocks);
    } else {
      // The logits' first chunk.
      const int64_t first = first_column(p.seq.vocab, block, blocks);
      stage_rows(s, 0, p.wte, first, std::min(head_chunk(s, d), first_column(p.seq.vocab, block + 1, blocks) - first),
                 d);
    }
    linear(into_residual(p.f, layer_of<T>(p.w_proj, l, 4 * d2), layer_of<T>(p.b_proj, l, d), 4 * d), rows, s, 1, block,
           blocks);
    grid.sync();
    mark();
  }

  // The final LayerNorm, the logits (tied to wte) with each row's argmax, then the token.
  SmallLinear head = normed(p.lnf_g, p.lnf_b, p.wte, nullptr, p.seq.vocab);
  head.out = SmallLinear::Out::logits;
  head.logits = p.logits;
  head.best = p.best;
  head.positions = p.seq.positions;
  head.prompt = p.seq.prompt;
  head.generate = p.seq.generate;
  head_linear(head, rows, s, block, blocks);
  grid.sync();
  mark();
  if (block == 0 && threadIdx.x < m) greedy_finish_row(p.best, p.seq, threadIdx.x);
#ifdef ATTNBENCH_STEP_TRACE
  if (block == 0 && threadIdx.x == 0 && pos0 == p.seq.prompt + 2) {
    printf("step trace (ns after the start, per mark): ");
    for (int i = 1; i < g_marks; ++i) printf("%d ", static_cast<int>(g_stamps[i] - g_stamps[0]));
    printf("\n");
  }
#endif
}

// Shared memory without staging: the widest projection's input rows, or the attention's scratch.
std::size_t smem_bytes(const DecodeStepParams& p) {
  const int64_t m = p.seq.batch, d = p.d_model, e = static_cast<int64_t>(dtype_bytes(p.dtype));
  const auto rows =
      static_cast<std::size_t>(std::max(small_linear_impl::rows_smem_bytes(SmallLinear::In::rows, m, 4 * d, e),
                                        small_linear_impl::rows_smem_bytes(SmallLinear::In::layernorm, m, d, e)));
  const std::size_t attention = sizeof(float) * (kMaxHeadDim + 2 * kWarps + kWarps * kMaxHeadDim);
  return (std::max(rows, attention) + 15) / 16 * 16;
}

// The staging buffers' size for a grid of `blocks` on this device: 0 (staging off) where two
// and the rest do not fit a block's shared memory, or TMA is missing.
int64_t staged_bytes(const DecodeStepParams& p, const DeviceCaps& caps, int64_t blocks) {
  const int64_t buffer = (stage_bytes(p, blocks) + 127) / 128 * 128;
  const bool fits = static_cast<std::size_t>(2 * buffer) + smem_bytes(p) + 16 <= caps.smem_per_block_optin;
  return caps.arch() >= 90 && fits ? buffer : 0;
}

}  // namespace

std::string supports(const DecodeStepParams& p, const DeviceCaps& caps) {
  const std::string rows = small_linear_supports(p.seq.batch, 4 * p.d_model, p.dtype);
  if (!rows.empty()) return rows;
  if (p.d_model * static_cast<int64_t>(dtype_bytes(p.dtype)) % 16 != 0) return "d_model must be whole 16-byte loads";
  const int64_t hd = p.heads > 0 ? p.d_model / p.heads : 0;
  // A lane loads head_dim / 8 of a value row's dims in whole 16-byte loads.
  const int64_t unit = 128 / static_cast<int64_t>(dtype_bytes(p.dtype));
  if (hd * p.heads != p.d_model || hd % unit != 0 || hd > kMaxHeadDim)
    return "head_dim " + std::to_string(hd) + ": the persistent step takes multiples of " + std::to_string(unit) +
           " up to " + std::to_string(kMaxHeadDim);
  if (caps.arch() < 70) return "needs cooperative launches with grid-wide barriers (sm_70 or newer)";
  if (smem_bytes(p) > caps.smem_per_block_optin) return "the input rows do not fit one block's shared memory";
  return "";
}

void persistent(const DecodeStepParams& p, const LaunchContext& ctx) {
  if (!ctx.caps || ctx.caps->sm_count < 1) throw std::invalid_argument("model/persistent: no device caps");
  const std::string why = supports(p, *ctx.caps);
  if (!why.empty()) throw std::invalid_argument("model/persistent: " + why);
  with_storage(p.dtype, "model/persistent", [&](auto tag) {
    using T = decltype(tag);
    const int64_t blocks = ctx.caps->sm_count, staged = staged_bytes(p, *ctx.caps, blocks);
    const std::size_t smem = static_cast<std::size_t>(2 * staged) + smem_bytes(p) + 16;
    check_cuda(
        cudaFuncSetAttribute(step_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)),
        "model/persistent: shared memory");
    // Every block resident at once, or the grid-wide barriers would wait forever: one block
    // an SM, launched as a cooperative kernel (the launch fails rather than hangs otherwise).
    cudaLaunchConfig_t config{};
    config.gridDim = dim3(static_cast<unsigned>(blocks));
    config.blockDim = dim3(kThreads);
    config.dynamicSmemBytes = smem;
    config.stream = ctx.stream;
    cudaLaunchAttribute cooperative{};
    cooperative.id = cudaLaunchAttributeCooperative;
    cooperative.val.cooperative = 1;
    config.attrs = &cooperative;
    config.numAttrs = 1;
    check_cuda(cudaLaunchKernelEx(&config, step_kernel<T>, p, staged, static_cast<int64_t>(smem_bytes(p))),
               "model/persistent");
  });
}

}  // namespace attnbench::model_step_impl
