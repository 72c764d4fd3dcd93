// Kernels that measure the card's ceilings for `attnbench info`: a pure read
// stream and a pure write stream over a large buffer, and the mma.sync peak from
// registers. Copy bandwidth uses cudaMemcpyAsync and GEMM rates use cuBLAS, so
// they need no kernels here. Also the stream hold of the timing loop.
#include "kernels/ceilings.hpp"
#include "kernels/common.cuh"

namespace attnbench {
namespace {

// Grid-stride 16-byte loads, four in flight per thread before any is used.
__global__ void __launch_bounds__(512) read_stream(const float4* __restrict__ x, int64_t n, float* sink) {
  float acc = 0.f;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + 3 * stride < n; i += 4 * stride) {
    float4 v[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) v[u] = __ldcs(x + i + u * stride);
#pragma unroll
    for (int u = 0; u < 4; ++u) acc += v[u].x + v[u].y + v[u].z + v[u].w;
  }
  for (; i < n; i += stride) {
    const float4 v = __ldcs(x + i);
    acc += v.x + v.y + v.z + v.w;
  }
  // A store the compiler cannot prove dead, that never happens on real data.
  if (acc == -1.2345e38f) *sink = acc;
}

__global__ void __launch_bounds__(512) write_stream(float4* __restrict__ x, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    __stcs(x + i, make_float4(0.f, 0.f, 0.f, 0.f));
}

template <class T>
__global__ void fill_uniform(T* x, int64_t n, unsigned seed) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    // A cheap integer hash is plenty for timing data.
    unsigned h = static_cast<unsigned>(i) * 0x9e3779b9u ^ seed;
    h ^= h >> 16;
    h *= 0x85ebca6bu;
    h ^= h >> 13;
    x[i] = from_float<T>(static_cast<float>(h) * 0x1.0p-31f - 1.f);
  }
}

__device__ uint64_t global_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// One thread polls host memory; the short sleep keeps it off the memory bus.
__global__ void stream_hold(const volatile int* release, int* timed_out, uint64_t timeout_ns) {
  const uint64_t t0 = global_ns();
  while (*release == 0) {
    if (global_ns() - t0 > timeout_ns) {
      *timed_out = 1;
      return;
    }
    __nanosleep(500);
  }
}

int stream_blocks(const DeviceCaps& caps) { return caps.sm_count * 4; }

// Independent accumulator chains per warp: enough MMAs in flight to cover the
// instruction's latency, so the tensor cores, not dependencies, set the rate.
constexpr int kMmaChains = 8, kMmaIters = 1 << 15, kMmaThreads = 256;
constexpr double kMmaFlops = 2.0 * 16 * 8 * 16;  // one m16n8k16

__global__ void __launch_bounds__(kMmaThreads) mma_sync_peak(float* sink) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  // Small bf16 values (2^-7 and neighbours), so the fp32 sums stay finite.
  const uint32_t a0 = 0x3c003c00u + (threadIdx.x & 7u), b0 = 0x3c003c01u;
  uint32_t a[4] = {a0, a0 ^ 1u, a0 ^ 2u, a0 ^ 3u}, b[2] = {b0, b0 ^ 4u};
  float c[kMmaChains][4] = {};
  for (int it = 0; it < kMmaIters; ++it) {
#pragma unroll
    for (int ch = 0; ch < kMmaChains; ++ch)
      asm volatile(
          "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
          "{%0, %1, %2, %3};\n"
          : "+f"(c[ch][0]), "+f"(c[ch][1]), "+f"(c[ch][2]), "+f"(c[ch][3])
          : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
  float acc = 0.f;
#pragma unroll
  for (int ch = 0; ch < kMmaChains; ++ch) acc += c[ch][0] + c[ch][1] + c[ch][2] + c[ch][3];
  if (acc == -1.2345e38f) *sink = acc;
#endif
}

}  // namespace

void launch_read_stream(const void* buf, std::size_t bytes, float* sink, const DeviceCaps& caps,
                        cudaStream_t stream) {
  read_stream<<<stream_blocks(caps), 512, 0, stream>>>(static_cast<const float4*>(buf),
                                                        static_cast<int64_t>(bytes / 16), sink);
  check_launch("ceilings/read_stream");
}

void launch_fill_uniform(void* buf, std::size_t count, DType dtype, unsigned seed, cudaStream_t stream) {
  const auto n = static_cast<int64_t>(count);
  switch (dtype) {
    case DType::fp32: fill_uniform<<<1024, 256, 0, stream>>>(static_cast<float*>(buf), n, seed); break;
    case DType::fp16: fill_uniform<<<1024, 256, 0, stream>>>(static_cast<__half*>(buf), n, seed); break;
    case DType::bf16: fill_uniform<<<1024, 256, 0, stream>>>(static_cast<__nv_bfloat16*>(buf), n, seed); break;
    case DType::fp8_e4m3: throw CudaError("fill_uniform: fp8 is not a GEMM storage type");
  }
  check_launch("ceilings/fill_uniform");
}

double launch_mma_sync_peak(float* sink, const DeviceCaps& caps, cudaStream_t stream) {
  const int blocks = caps.sm_count * 4;  // 32 warps per SM, 8 per scheduler
  mma_sync_peak<<<blocks, kMmaThreads, 0, stream>>>(sink);
  check_launch("ceilings/mma_sync_peak");
  return static_cast<double>(blocks) * (kMmaThreads / 32) * kMmaIters * kMmaChains * kMmaFlops;
}

void launch_stream_hold(const volatile int* release, int* timed_out, double timeout_ms, cudaStream_t stream) {
  stream_hold<<<1, 1, 0, stream>>>(release, timed_out, static_cast<uint64_t>(timeout_ms * 1e6));
  check_launch("ceilings/stream_hold");
}

void launch_write_stream(void* buf, std::size_t bytes, const DeviceCaps& caps, cudaStream_t stream) {
  write_stream<<<stream_blocks(caps), 512, 0, stream>>>(static_cast<float4*>(buf), static_cast<int64_t>(bytes / 16));
  check_launch("ceilings/write_stream");
}

}  // namespace attnbench
