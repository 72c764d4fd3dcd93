// Kernels that measure the card's ceilings for `attnbench info`: a pure read
// stream and a pure write stream over a large buffer. Copy bandwidth uses
// cudaMemcpyAsync and GEMM rates use cuBLAS, so they need no kernels here.
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

int stream_blocks(const DeviceCaps& caps) { return caps.sm_count * 4; }

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

void launch_write_stream(void* buf, std::size_t bytes, const DeviceCaps& caps, cudaStream_t stream) {
  write_stream<<<stream_blocks(caps), 512, 0, stream>>>(static_cast<float4*>(buf), static_cast<int64_t>(bytes / 16));
  check_launch("ceilings/write_stream");
}

}  // namespace attnbench
