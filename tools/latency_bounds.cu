// Tool: the least time short and dependent launches can take on the card (built by hand, below).
// The least time the card allows three kinds of short, dependent work, against which issue
// 15's decode targets are read (bench notes, runs 226 and 240-246):
//   read  one launch reading N bytes once, after an L2 flush by reads (the way attnbench
//         times a sample in cold mode: events around the launch), for N from 4 to 256 MiB or
//         the sizes given, the best of six grid shapes; t(N) - N / (read bandwidth) is what a
//         launch costs beyond its bytes.
//   hop   an all-to-all dependency: every block writes its slice of a 768-float vector (a
//         GPT-2 124M row) and every block of the next phase reads the whole vector before it
//         writes its own: what separates a decode step's projections. Five ways, each timed as
//         256 phases in a row: launches in a CUDA graph (plain, and with programmatic
//         dependent launch), and one cooperative kernel, its phases a cooperative-groups grid
//         barrier apart, an atomic counter apart, or with no barrier at all, each value
//         stored with its phase number beside it (64-bit relaxed stores) and read until the
//         phase matches.
//   step  GPT-2 124M's batch-1 decode step as the least a chain of phases could do: 61
//         launches in a CUDA graph with programmatic dependent launch, each a bare matrix-
//         vector product of the shapes a step reads (per layer QKV 768 -> 2304, a stand-in for
//         the attention reading 640 positions of keys and values, 1280 x 768, the output
//         projection, MLP up and down; then the logits, 768 -> 50257), nothing else (no
//         LayerNorm, softmax, combine, bias, residual or argmax). W does not depend on the
//         step, so each launch takes its block's rows before it waits for the launch before
//         it: asked of the L2, or copied into shared memory (cp.async); it lets the next
//         launch start before its wait or after. The same launches without W ("the chain
//         alone") time the dependency by itself. Then the same products in one persistent
//         kernel, a block an SM, its phases a grid barrier apart, each block's rows of the next
//         phase (or chunk of the logits) copied into shared memory while it works on this
//         one's. Against the same bytes at the read rate of the largest `read` size: how far
//         under issue 15's 1.5x a step could go.
// From the repository root:
//   nvcc -O3 -arch=sm_90a -std=c++17 -o latency_bounds tools/latency_bounds.cu && ./latency_bounds [MiB ...]
// The step table's environment: STEP_SLICE_KB (rows a block takes in the launch forms, 12 KiB
// unless set: of 3-48, 12 measured best, runs 240-242), STEP_LAYERS / STEP_LOGITS (a part of the step
// alone: how many layers, whether the logits), STEP_PERSIST_SKIP (diagnosis of the persistent
// form, a sum of 1 no copies, 2 no barriers, 4 no products).
#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <type_traits>
#include <vector>

namespace cg = cooperative_groups;

#define CK(x)                                                               \
  do {                                                                      \
    cudaError_t e = (x);                                                    \
    if (e != cudaSuccess) {                                                 \
      std::printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); \
      std::exit(1);                                                         \
    }                                                                       \
  } while (0)

namespace {

constexpr int kThreads = 256;
constexpr int kWidth = 768;  // the vector each phase passes on (d_model)
constexpr int kSlice = 8;    // floats a block writes: 96 blocks, as a 768-column projection
constexpr int kBlocks = kWidth / kSlice;
constexpr int kPhases = 256;

// U 16-byte loads in flight a thread, grid-stride; a store the compiler cannot prove dead.
template <int U>
__global__ void __launch_bounds__(512) read_kernel(const float4* __restrict__ x, int64_t n, float* sink) {
  float acc = 0.f;
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  for (; i + (U - 1) * stride < n; i += U * stride) {
    float4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) v[u] = __ldcs(x + i + u * stride);
#pragma unroll
    for (int u = 0; u < U; ++u) acc += v[u].x + v[u].y + v[u].z + v[u].w;
  }
  for (; i < n; i += stride) {
    const float4 v = __ldcs(x + i);
    acc += v.x + v.y + v.z + v.w;
  }
  if (acc == -1.2345e38f) *sink = acc;
}

// attnbench's cold-mode flush: plain loads over twice the L2, leaving it full of clean lines.
__global__ void flush_kernel(const float4* __restrict__ x, int64_t n, float* sink) {
  float acc = 0.f;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const float4 v = __ldcg(x + i);
    acc += v.x + v.y + v.z + v.w;
  }
  if (acc == -1.2345e38f) *sink = acc;
}

// The block's sum of `mine` (one value a thread), in every thread.
__device__ float block_sum(float mine, float* red) {
  for (int o = 16; o; o /= 2) mine += __shfl_xor_sync(0xffffffffu, mine, o);
  __syncthreads();  // red's last readers are done
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = mine;
  __syncthreads();
  float s = 0;
#pragma unroll
  for (int w = 0; w < kThreads / 32; ++w) s += red[w];
  return s;
}

// One phase's work after its input is visible: the whole vector in (three floats a thread),
// summed by the block, the block's slice out.
__device__ void phase_body(const float* in, float* out, float* red) {
  float mine = 0;
#pragma unroll
  for (int j = 0; j < kWidth / kThreads; ++j) mine += in[threadIdx.x + kThreads * j];
  const float s = block_sum(mine, red);
  if (threadIdx.x < kSlice) out[blockIdx.x * kSlice + threadIdx.x] = s * 1e-3f + threadIdx.x;
}

__global__ void __launch_bounds__(kThreads) hop_launch(const float* in, float* out, int pdl) {
  __shared__ float red[kThreads / 32];
  if (pdl) {
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
    asm volatile("griddepcontrol.wait;" ::: "memory");
  }
  phase_body(in, out, red);
}

// All phases in one cooperative kernel; `mode` 0: cg grid sync, 1: an atomic counter.
__global__ void __launch_bounds__(kThreads) hop_barrier(float* buf, unsigned* count, int mode) {
  __shared__ float red[kThreads / 32];
  cg::grid_group grid = cg::this_grid();
  for (int p = 0; p < kPhases; ++p) {
    phase_body(buf + (p % 2) * kWidth, buf + ((p + 1) % 2) * kWidth, red);
    if (mode == 0) {
      grid.sync();
    } else {
      __syncthreads();
      if (threadIdx.x == 0) {
        __threadfence();
        atomicAdd(count, 1u);
        const unsigned target = (p + 1u) * gridDim.x;
        unsigned seen;
        do asm volatile("ld.acquire.gpu.u32 %0, [%1];" : "=r"(seen) : "l"(count) : "memory");
        while (seen < target);
      }
      __syncthreads();
    }
  }
}

// No barrier: each value travels with its phase (64-bit relaxed stores and loads); a reader
// spins on its three words until they carry the phase it wants. Two buffers by the phase's
// parity: a block writes phase p + 2 only after it read all of p + 1, which every block wrote
// only after reading all of p.
__global__ void __launch_bounds__(kThreads) hop_tagged(unsigned long long* buf) {
  __shared__ float red[kThreads / 32];
  for (int p = 1; p <= kPhases; ++p) {
    const unsigned long long* in = buf + ((p - 1) % 2) * kWidth;
    float mine = 0;
#pragma unroll
    for (int j = 0; j < kWidth / kThreads; ++j) {
      unsigned long long w;
      do asm volatile("ld.relaxed.gpu.u64 %0, [%1];" : "=l"(w) : "l"(in + threadIdx.x + kThreads * j) : "memory");
      while (static_cast<unsigned>(w >> 32) != static_cast<unsigned>(p - 1));
      mine += __uint_as_float(static_cast<unsigned>(w));
    }
    const float s = block_sum(mine, red);
    if (threadIdx.x < kSlice) {
      const float v = s * 1e-3f + threadIdx.x;
      const unsigned long long w = (static_cast<unsigned long long>(p) << 32) | __float_as_uint(v);
      asm volatile("st.relaxed.gpu.u64 [%0], %1;" ::"l"(buf + (p % 2) * kWidth + blockIdx.x * kSlice + threadIdx.x),
                   "l"(w)
                   : "memory");
    }
  }
}

// Rows 0..nrows of `rows` (K bf16 each, in shared memory or, kShared false, in global memory)
// dotted with x (K floats in shared memory) into out[0..nrows): a warp kGroup rows at a time,
// every 16-byte load of the group issued before any is used.
template <int K, bool kShared>
__device__ void dot_rows(const char* rows, int nrows, const float* x, float* out) {
  constexpr int kChunks = K / 256, kGroup = kChunks >= 12 ? 1 : 12 / kChunks;
  constexpr int64_t kRowBytes = int64_t{K} * 2;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (int c0 = warp * kGroup; c0 < nrows; c0 += kThreads / 32 * kGroup) {
    float acc[kGroup] = {};
    uint4 u[kGroup][kChunks];
#pragma unroll
    for (int g = 0; g < kGroup; ++g)
#pragma unroll
      for (int j = 0; j < kChunks; ++j)
        if (c0 + g < nrows) {
          const uint4* at = reinterpret_cast<const uint4*>(rows + (c0 + g) * kRowBytes + 16 * (lane + 32 * j));
          u[g][j] = kShared ? *at : __ldg(at);
        }
#pragma unroll
    for (int j = 0; j < kChunks; ++j) {
      const float4 x0 = reinterpret_cast<const float4*>(x)[2 * (lane + 32 * j)];
      const float4 x1 = reinterpret_cast<const float4*>(x)[2 * (lane + 32 * j) + 1];
      const float xs[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
#pragma unroll
      for (int g = 0; g < kGroup; ++g)
        if (c0 + g < nrows) {
          const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&u[g][j]);
#pragma unroll
          for (int q = 0; q < 4; ++q) {
            const float2 f = __bfloat1622float2(h[q]);
            acc[g] = fmaf(f.x, xs[2 * q], fmaf(f.y, xs[2 * q + 1], acc[g]));
          }
        }
    }
#pragma unroll
    for (int g = 0; g < kGroup; ++g) {
      for (int o = 16; o; o /= 2) acc[g] += __shfl_xor_sync(0xffffffffu, acc[g], o);
      if (lane == 0 && c0 + g < nrows) out[c0 + g] = acc[g] * 1e-3f;
    }
  }
}

// One launch of the step table: output column n is W's row n (K bf16) dotted with the input
// vector (K floats), `cols` columns a block (dot_rows). kStage: the block's rows copied into
// shared memory before the wait, else asked of the L2 then; kEarly: the next launch may start
// before this one's wait, else only after it. weights = 0: the chain alone (the same
// launches, the input vector read, W never read).
template <int K, bool kStage, bool kEarly>
__global__ void __launch_bounds__(kThreads, 4)
    step_phase(const float* __restrict__ in, const __nv_bfloat16* __restrict__ w, int n, int cols,
               float* __restrict__ out, int weights) {
  constexpr int64_t kRowBytes = int64_t{K} * 2;
  extern __shared__ __align__(16) unsigned char smem[];
  const int n0 = blockIdx.x * cols, nc = min(cols, n - n0);
  const char* src = reinterpret_cast<const char*>(w) + n0 * kRowBytes;
  const int chunks = weights ? static_cast<int>(nc * kRowBytes / 16) : 0;
  if (kStage) {
    for (int i = threadIdx.x; i < chunks; i += kThreads) {
      const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem + 16 * i));
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src + 16 * int64_t{i}) : "memory");
    }
    asm volatile("cp.async.commit_group;" ::: "memory");
  } else {
    for (int i = threadIdx.x * 8; i < chunks; i += kThreads * 8)  // a 128-byte line a thread
      asm volatile("prefetch.global.L2 [%0];" ::"l"(src + 16 * int64_t{i}));
  }
  if (kEarly) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  asm volatile("griddepcontrol.wait;" ::: "memory");
  if (!kEarly) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  float* x = reinterpret_cast<float*>(smem + (kStage ? 16 * chunks : 0));
  for (int i = threadIdx.x; i < K / 4; i += kThreads)
    reinterpret_cast<float4*>(x)[i] = reinterpret_cast<const float4*>(in)[i];
  if (kStage) asm volatile("cp.async.wait_all;" ::: "memory");
  __syncthreads();
  if (weights) {
    dot_rows<K, kStage>(kStage ? reinterpret_cast<const char*>(smem) : src, nc, x, out + n0);
  } else {  // the input read, summed a warp a column
    const int lane = threadIdx.x % 32;
    for (int c = threadIdx.x / 32; c < nc; c += kThreads / 32) {
      float acc = 0;
#pragma unroll
      for (int j = 0; j < K / 256; ++j) acc += x[8 * (lane + 32 * j)];
      for (int o = 16; o; o /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, o);
      if (lane == 0) out[n0 + c] = acc * 1e-3f;
    }
  }
}

float median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Events {
  cudaEvent_t a, b;
  Events() {
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
  }
  float ms() {
    CK(cudaEventSynchronize(b));
    float t;
    CK(cudaEventElapsedTime(&t, a, b));
    return t;
  }
};

// Returns the read rate (GB/s) of the largest size.
double read_table(cudaStream_t s, int sms, std::vector<double> sizes) {
  const size_t big = size_t{256} << 20, flush_bytes = size_t{128} << 20;
  float4 *x, *f;
  float* sink;
  CK(cudaMalloc(&x, big));
  CK(cudaMalloc(&f, flush_bytes));
  CK(cudaMalloc(&sink, 4));
  CK(cudaMemset(x, 0, big));
  CK(cudaMemset(f, 0, flush_bytes));
  Events ev;
  double rate = 0;
  std::printf("read: one launch over N bytes after a read flush (median of 100, µs); best shape\n");
  std::printf("%10s %10s %10s %8s %s\n", "MiB", "median", "min", "GB/s", "shape (blocks x 512, loads in flight)");
  for (double mb : sizes) {
    const size_t bytes = static_cast<size_t>(mb * (1 << 20)) / 16 * 16;
    float best = 1e9, best_min = 0;
    int best_blocks = 0, best_u = 0;
    for (int per_sm : {1, 2, 4})
      for (int u : {4, 8}) {
        std::vector<float> t;
        for (int rep = 0; rep < 101; ++rep) {
          flush_kernel<<<sms * 4, 512, 0, s>>>(f, flush_bytes / 16, sink);
          CK(cudaEventRecord(ev.a, s));
          if (u == 4)
            read_kernel<4><<<sms * per_sm, 512, 0, s>>>(x, bytes / 16, sink);
          else
            read_kernel<8><<<sms * per_sm, 512, 0, s>>>(x, bytes / 16, sink);
          CK(cudaEventRecord(ev.b, s));
          const float ms = ev.ms();
          if (rep) t.push_back(ms * 1000);
        }
        const float med = median(t);
        if (med < best) {
          best = med;
          best_min = *std::min_element(t.begin(), t.end());
          best_blocks = sms * per_sm;
          best_u = u;
        }
      }
    std::printf("%10.2f %10.2f %10.2f %8.0f %d x 512, %d\n", mb, best, best_min, bytes / (best * 1e3), best_blocks,
                best_u);
    rate = bytes / (best * 1e3);
  }
  CK(cudaFree(x));
  CK(cudaFree(f));
  CK(cudaFree(sink));
  return rate;
}

// µs a unit of `run` (which runs `units` of them: phases, steps), the median of 21 runs after
// a warm-up.
template <class F>
float per_unit(cudaStream_t s, F run, int units) {
  Events ev;
  std::vector<float> t;
  for (int rep = 0; rep < 22; ++rep) {
    CK(cudaEventRecord(ev.a, s));
    run();
    CK(cudaEventRecord(ev.b, s));
    const float ms = ev.ms();
    if (rep) t.push_back(ms * 1000 / units);
  }
  return median(t);
}
template <class F>
float per_phase(cudaStream_t s, F run) {
  return per_unit(s, run, kPhases);
}

void hop_table(cudaStream_t s) {
  float* buf;
  unsigned* count;
  unsigned long long* tagged;
  CK(cudaMalloc(&buf, 2 * kWidth * sizeof(float)));
  CK(cudaMalloc(&count, sizeof(unsigned)));
  CK(cudaMalloc(&tagged, 2 * kWidth * sizeof(unsigned long long)));
  CK(cudaMemset(buf, 0, 2 * kWidth * sizeof(float)));
  std::printf(
      "\nhop: %d blocks x %d threads each write %d of %d floats, the next phase's blocks read all %d (µs a "
      "phase, median of 21 runs of %d phases)\n",
      kBlocks, kThreads, kSlice, kWidth, kWidth, kPhases);
  for (int pdl : {0, 1}) {
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    for (int p = 0; p < kPhases; ++p) {
      cudaLaunchConfig_t cfg = {};
      cfg.gridDim = dim3(kBlocks);
      cfg.blockDim = dim3(kThreads);
      cfg.stream = s;
      cudaLaunchAttribute attr[1];
      attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
      attr[0].val.programmaticStreamSerializationAllowed = 1;
      cfg.attrs = attr;
      cfg.numAttrs = pdl;
      const float* in = buf + (p % 2) * kWidth;
      float* out = buf + ((p + 1) % 2) * kWidth;
      CK(cudaLaunchKernelEx(&cfg, hop_launch, in, out, pdl));
    }
    CK(cudaStreamEndCapture(s, &g));
    CK(cudaGraphInstantiate(&ge, g, 0));
    CK(cudaGraphLaunch(ge, s));
    CK(cudaStreamSynchronize(s));
    std::printf("  %-44s %6.2f\n", pdl ? "launches in a graph, programmatic dependent" : "launches in a graph",
                per_phase(s, [&] { CK(cudaGraphLaunch(ge, s)); }));
    CK(cudaGraphExecDestroy(ge));
    CK(cudaGraphDestroy(g));
  }
  for (int mode : {0, 1}) {
    const auto run = [&] {
      CK(cudaMemsetAsync(count, 0, sizeof(unsigned), s));
      void* args[] = {&buf, &count, &mode};
      CK(cudaLaunchCooperativeKernel(reinterpret_cast<void*>(hop_barrier), dim3(kBlocks), dim3(kThreads), args, 0, s));
    };
    run();
    CK(cudaStreamSynchronize(s));
    std::printf("  %-44s %6.2f\n", mode ? "one kernel, an atomic-counter barrier" : "one kernel, cg grid.sync()",
                per_phase(s, run));
  }
  const auto run_tagged = [&] {
    CK(cudaMemsetAsync(tagged, 0, 2 * kWidth * sizeof(unsigned long long), s));
    void* args[] = {&tagged};
    CK(cudaLaunchCooperativeKernel(reinterpret_cast<void*>(hop_tagged), dim3(kBlocks), dim3(kThreads), args, 0, s));
  };
  run_tagged();
  CK(cudaStreamSynchronize(s));
  std::printf("  %-44s %6.2f\n", "one kernel, values tagged with their phase", per_phase(s, run_tagged));
  CK(cudaFree(buf));
  CK(cudaFree(count));
  CK(cudaFree(tagged));
}

// The persistent form of the step table: the phases of `steps` steps in one cooperative kernel.
// A block's work is a list of items, each a chunk of at most kChunkBytes of its rows of one
// phase (the logits take many); item i's rows are copied (cp.async) into buffer i % 2 while the
// block works on item i - 1, and a phase's first item waits at the grid barrier for the phase
// before it, then reads its input vector.
constexpr int kChunkBytes = 48 * 1024;
constexpr int kStepMaxK = 3072;  // the longest row (MLP down)
struct PersistPhase {
  int k, n;
  const __nv_bfloat16* w;
};
// A block's rows of each phase, [lo, hi), and the rows a chunk takes (in shared memory).
struct BlockRows {
  int lo, hi, per, k;
};
constexpr int kMaxPhases = 64;
// A walk over this block's items: step st, phase q, its chunk j; the item's rows r0.. (nrows).
struct Cursor {
  int st = 0, q = 0, j = 0;
  int r0 = 0, nrows = 0;
  // Fills r0 and nrows; false past the last step.
  __device__ bool at(const BlockRows* br, int phases, int steps) {
    while (st < steps) {
      const BlockRows& b = br[q];
      if (b.lo + j * b.per < b.hi) {
        r0 = b.lo + j * b.per;
        nrows = min(b.per, b.hi - r0);
        return true;
      }
      j = 0;
      if (++q == phases) q = 0, ++st;
    }
    return false;
  }
  __device__ void next() { ++j; }
};
// kOwnBarrier: warp 0 alone copies the rows and another thread keeps an atomic-counter
// barrier (a fence that waited for the copies in flight would put them back on the chain);
// else every thread copies and the phases are cooperative groups' grid.sync() apart.
template <bool kOwnBarrier>
__global__ void __launch_bounds__(kThreads, 1)
    step_persistent(const PersistPhase* ph, int phases, int steps, float* buf, int width, unsigned* count, int skip) {
  extern __shared__ __align__(16) unsigned char smem[];
  unsigned char* rows[2] = {smem, smem + kChunkBytes};
  float* x = reinterpret_cast<float*>(smem + 2 * kChunkBytes);
  __shared__ BlockRows br[kMaxPhases];
  __shared__ const __nv_bfloat16* wp[kMaxPhases];
  for (int q = threadIdx.x; q < phases; q += kThreads) {
    const int lo = static_cast<int>(int64_t{ph[q].n} * blockIdx.x / gridDim.x);
    const int hi = static_cast<int>(int64_t{ph[q].n} * (blockIdx.x + 1) / gridDim.x);
    br[q] = {lo, hi, kChunkBytes / (2 * ph[q].k), ph[q].k};
    wp[q] = ph[q].w;
  }
  __syncthreads();
  cg::grid_group grid = cg::this_grid();
  const auto load = [&](Cursor& c, int slot) {
    if (c.at(br, phases, steps) && !(skip & 1)) {
      const char* src = reinterpret_cast<const char*>(wp[c.q]) + int64_t{c.r0} * 2 * br[c.q].k;
      const int chunks = c.nrows * 2 * br[c.q].k / 16;
      for (int t = threadIdx.x; t < chunks; t += kOwnBarrier ? 32 : kThreads) {
        const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(rows[slot] + 16 * t));
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src + 16 * int64_t{t}) : "memory");
      }
    }
    asm volatile("cp.async.commit_group;" ::: "memory");  // (an empty group past the end)
  };
  Cursor cur, ahead;
  const bool loader = !kOwnBarrier || threadIdx.x < 32;
  if (loader) load(ahead, 0);
  int phase_count = 0;  // phases begun, over the steps: which half of buf is the input
  for (int i = 0; cur.at(br, phases, steps); ++i, cur.next()) {
    ahead = cur;
    ahead.next();
    if (loader) load(ahead, (i + 1) % 2);
    if (cur.j == 0) {
      // Every block has rows in every phase (each phase has more rows than blocks), so all
      // take the same barriers.
      if (phase_count > 0 && !(skip & 2)) {
        if (!kOwnBarrier) {
          grid.sync();
        } else {
          __syncthreads();  // the block's results of the phase before are written
          if (threadIdx.x == 32) {
            const unsigned target = static_cast<unsigned>(phase_count) * gridDim.x;
            asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(count) : "memory");
            unsigned seen;
            do asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(seen) : "l"(count) : "memory");
            while (seen < target);
          }
          __syncthreads();
        }
      }
      const float* in = buf + (phase_count % 2) * width;
      for (int t = threadIdx.x; t < br[cur.q].k / 4; t += kThreads)
        reinterpret_cast<float4*>(x)[t] = reinterpret_cast<const float4*>(in)[t];
      ++phase_count;
    }
    if (loader) asm volatile("cp.async.wait_group 1;" ::: "memory");
    __syncthreads();
    float* out = buf + (phase_count % 2) * width + cur.r0;
    const char* mine = reinterpret_cast<const char*>(rows[i % 2]);
    if (!(skip & 4)) {
      if (br[cur.q].k == 768)
        dot_rows<768, true>(mine, cur.nrows, x, out);
      else if (br[cur.q].k == 1280)
        dot_rows<1280, true>(mine, cur.nrows, x, out);
      else
        dot_rows<3072, true>(mine, cur.nrows, x, out);
    }
    __syncthreads();  // buffer i % 2 is item i + 2's
  }
}

void persistent_row(cudaStream_t s, int sms, const std::vector<PersistPhase>& host, float* buf, int width,
                    double floor_us) {
  const char* skip_env = std::getenv("STEP_PERSIST_SKIP");  // diagnosis: 1 no copies, 2 no barriers, 4 no products
  int skip = skip_env ? std::atoi(skip_env) : 0;
  if (host.size() > kMaxPhases) return;
  PersistPhase* ph;
  CK(cudaMalloc(&ph, host.size() * sizeof(PersistPhase)));
  CK(cudaMemcpy(ph, host.data(), host.size() * sizeof(PersistPhase), cudaMemcpyHostToDevice));
  unsigned* count;
  CK(cudaMalloc(&count, sizeof(unsigned)));
  const size_t smem = 2 * kChunkBytes + 4 * kStepMaxK;
  for (bool own : {false, true}) {
    const auto kernel = own ? step_persistent<true> : step_persistent<false>;
    CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    int phases = static_cast<int>(host.size()), steps = 10;
    const auto run = [&] {
      CK(cudaMemsetAsync(count, 0, sizeof(unsigned), s));
      void* args[] = {&ph, &phases, &steps, &buf, &width, &count, &skip};
      CK(cudaLaunchCooperativeKernel(reinterpret_cast<void*>(kernel), dim3(sms), dim3(kThreads), args, smem, s));
    };
    run();
    CK(cudaStreamSynchronize(s));
    const float us = per_unit(s, run, steps);
    std::printf("  %-58s %8.1f %8.2f\n",
                own ? "one persistent kernel, W a phase ahead by warp 0, atomic barrier"
                    : "one persistent kernel, W a phase ahead, grid.sync()",
                us, us / floor_us);
  }
  CK(cudaFree(ph));
  CK(cudaFree(count));
}

// The step table (see the header): six ways of the same 61 launches, then the persistent
// kernel two ways; µs a step (the median of 21 samples of 10 steps each), and that over the
// bytes' time at `gbps`.
void step_table(cudaStream_t s, int sms, double gbps, int slice_kb) {
  struct Phase {
    int k, n, cols;
    bool stageable;
    __nv_bfloat16* w;
  };
  std::vector<Phase> phases;
  const auto add = [&](int k, int n) {
    const int cols = std::max(1, slice_kb * 1024 / (2 * k));
    phases.push_back({k, n, cols, true, nullptr});
  };
  const char* layers_env = std::getenv("STEP_LAYERS");  // a part of the step alone: layers, logits
  const char* logits_env = std::getenv("STEP_LOGITS");
  const int layers = layers_env ? std::atoi(layers_env) : 12;
  for (int l = 0; l < layers; ++l) {
    add(768, 2304);  // QKV
    add(1280, 768);  // the attention's keys and values: 12 heads x 640 positions x 64 x 2
    add(768, 768);   // output projection
    add(768, 3072);  // MLP up
    add(3072, 768);  // MLP down
  }
  const int logit_blocks = 4 * sms;
  if (!logits_env || std::atoi(logits_env))
    phases.push_back({768, 50257, (50257 + logit_blocks - 1) / logit_blocks, false, nullptr});
  double bytes = 0;
  for (Phase& p : phases) {
    const size_t b = size_t{2} * p.k * p.n;
    CK(cudaMalloc(&p.w, b));
    CK(cudaMemset(p.w, 0x3c, b));  // bf16 0x3c3c, about 0.0115
    bytes += b;
  }
  float* buf;
  const int width = 50257 + 3;
  CK(cudaMalloc(&buf, 2 * sizeof(float) * width));
  CK(cudaMemset(buf, 0, 2 * sizeof(float) * width));
  using Kernel = void (*)(const float*, const __nv_bfloat16*, int, int, float*, int);
  const auto kernel = [](int k, bool stage, bool early) -> Kernel {
    const auto pick = [&](auto k_) -> Kernel {
      constexpr int K = decltype(k_)::value;
      return stage ? (early ? step_phase<K, true, true> : step_phase<K, true, false>)
                   : (early ? step_phase<K, false, true> : step_phase<K, false, false>);
    };
    return k == 768    ? pick(std::integral_constant<int, 768>{})
           : k == 1280 ? pick(std::integral_constant<int, 1280>{})
                       : pick(std::integral_constant<int, 3072>{});
  };
  for (int k : {768, 1280, 3072})
    for (bool stage : {false, true})
      for (bool early : {false, true})
        CK(cudaFuncSetAttribute(kernel(k, stage, early), cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024));
  const double floor_us = bytes / (gbps * 1e3);
  std::printf(
      "\nstep: GPT-2 124M batch 1 as %zu bare matrix-vector launches, %.1f MB of W (%d KiB of rows a block); "
      "floor %.1f µs at %.0f GB/s\n",
      phases.size(), bytes / 1e6, slice_kb, floor_us, gbps);
  std::printf("  %-58s %8s %8s\n", "", "µs", "x floor");
  struct Way {
    const char* name;
    bool stage, early;
    int weights;
  };
  for (const Way& way : {Way{"the chain alone (no W read), next launch after the wait", false, false, 0},
                         Way{"the chain alone (no W read), next launch before it", false, true, 0},
                         Way{"W asked of the L2 before the wait, next launch after it", false, false, 1},
                         Way{"W asked of the L2 before the wait, next launch before it", false, true, 1},
                         Way{"W into shared memory before the wait, next launch after it", true, false, 1},
                         Way{"W into shared memory before the wait, next launch before it", true, true, 1}}) {
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    for (size_t i = 0; i < phases.size(); ++i) {
      const Phase& p = phases[i];
      const bool stage = way.stage && p.stageable && way.weights;
      cudaLaunchConfig_t cfg = {};
      cfg.gridDim = dim3((p.n + p.cols - 1) / p.cols);
      cfg.blockDim = dim3(kThreads);
      cfg.dynamicSmemBytes = (stage ? size_t{2} * p.cols * p.k : 0) + size_t{4} * p.k;
      cfg.stream = s;
      cudaLaunchAttribute attr[1];
      attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
      attr[0].val.programmaticStreamSerializationAllowed = 1;
      cfg.attrs = attr;
      cfg.numAttrs = 1;
      const float* in = buf + (i % 2) * width;
      float* out = buf + ((i + 1) % 2) * width;
      CK(cudaLaunchKernelEx(&cfg, kernel(p.k, stage, way.early), in, static_cast<const __nv_bfloat16*>(p.w), p.n,
                            p.cols, out, way.weights));
    }
    CK(cudaStreamEndCapture(s, &g));
    CK(cudaGraphInstantiate(&ge, g, 0));
    CK(cudaGraphLaunch(ge, s));
    CK(cudaStreamSynchronize(s));
    constexpr int kSteps = 10;  // graph launches a sample
    const float us = per_unit(
        s,
        [&] {
          for (int r = 0; r < kSteps; ++r) CK(cudaGraphLaunch(ge, s));
        },
        kSteps);
    std::printf("  %-58s %8.1f %8.2f\n", way.name, us, us / floor_us);
    CK(cudaGraphExecDestroy(ge));
    CK(cudaGraphDestroy(g));
  }
  std::vector<PersistPhase> host;
  for (const Phase& p : phases) host.push_back({p.k, p.n, p.w});
  persistent_row(s, sms, host, buf, width, floor_us);
  for (Phase& p : phases) CK(cudaFree(p.w));
  CK(cudaFree(buf));
}

}  // namespace

int main(int argc, char** argv) {
  // MiB to read: the list below, or the arguments (at most 256 each).
  std::vector<double> sizes = {4, 8, 16, 32, 64, 128, 256};
  if (argc > 1) sizes.clear();
  for (int i = 1; i < argc; ++i) sizes.push_back(std::min(256.0, std::atof(argv[i])));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("%s, %d SMs, %.0f MiB L2\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize / 1048576.0);
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const double gbps = read_table(s, prop.multiProcessorCount, sizes);
  hop_table(s);
  const char* slice = std::getenv("STEP_SLICE_KB");  // rows a block takes in the step table
  step_table(s, prop.multiProcessorCount, gbps, slice ? std::atoi(slice) : 12);
  return 0;
}
