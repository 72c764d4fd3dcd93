// The least time the card allows two kinds of short, dependent work, against which issue 15's
// decode targets are read (bench notes, run 226):
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
// From the repository root:
//   nvcc -O3 -arch=sm_90a -std=c++17 -o latency_bounds tests/latency_bounds.cu && ./latency_bounds [MiB ...]
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace cg = cooperative_groups;

#define CK(x)                                                                        \
  do {                                                                               \
    cudaError_t e = (x);                                                             \
    if (e != cudaSuccess) {                                                          \
      std::printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e));          \
      std::exit(1);                                                                  \
    }                                                                                \
  } while (0)

namespace {

constexpr int kThreads = 256;
constexpr int kWidth = 768;   // the vector each phase passes on (d_model)
constexpr int kSlice = 8;     // floats a block writes: 96 blocks, as a 768-column projection
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

void read_table(cudaStream_t s, int sms, std::vector<double> sizes) {
  const size_t big = size_t{256} << 20, flush_bytes = size_t{128} << 20;
  float4 *x, *f;
  float* sink;
  CK(cudaMalloc(&x, big));
  CK(cudaMalloc(&f, flush_bytes));
  CK(cudaMalloc(&sink, 4));
  CK(cudaMemset(x, 0, big));
  CK(cudaMemset(f, 0, flush_bytes));
  Events ev;
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
  }
  CK(cudaFree(x));
  CK(cudaFree(f));
  CK(cudaFree(sink));
}

// µs a phase of `run` (which runs kPhases phases), the median of 21 runs after a warm-up.
template <class F>
float per_phase(cudaStream_t s, F run) {
  Events ev;
  std::vector<float> t;
  for (int rep = 0; rep < 22; ++rep) {
    CK(cudaEventRecord(ev.a, s));
    run();
    CK(cudaEventRecord(ev.b, s));
    const float ms = ev.ms();
    if (rep) t.push_back(ms * 1000 / kPhases);
  }
  return median(t);
}

void hop_table(cudaStream_t s) {
  float* buf;
  unsigned* count;
  unsigned long long* tagged;
  CK(cudaMalloc(&buf, 2 * kWidth * sizeof(float)));
  CK(cudaMalloc(&count, sizeof(unsigned)));
  CK(cudaMalloc(&tagged, 2 * kWidth * sizeof(unsigned long long)));
  CK(cudaMemset(buf, 0, 2 * kWidth * sizeof(float)));
  std::printf("\nhop: %d blocks x %d threads each write %d of %d floats, the next phase's blocks read all %d (µs a "
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
  read_table(s, prop.multiProcessorCount, sizes);
  hop_table(s);
  return 0;
}
