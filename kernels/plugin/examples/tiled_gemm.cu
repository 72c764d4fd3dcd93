// An example plugin: the course's shared-memory tiled GEMM. A 16x16 block computes a
// 16x16 tile of C, one output per thread, walking k in 16-wide tiles of A and B staged in
// shared memory. Handles both layouts (C = A B^T and C = A B), any size, fp32 accumulate.
//   attnbench run gemm --plugin kernels/plugin/examples/tiled_gemm.cu
#include "example_math.cuh"

namespace {

constexpr int kTile = 16;

template <class T>
__global__ void tiled_gemm(attnbench_gemm_params p) {
  __shared__ float a_tile[kTile][kTile], b_tile[kTile][kTile + 1];
  const int64_t z = blockIdx.z;
  const T* a = (const T*)p.a + z * p.m * p.k;
  const T* b = (const T*)p.b + z * p.n * p.k;
  const int64_t row = blockIdx.y * (int64_t)kTile + threadIdx.y, col = blockIdx.x * (int64_t)kTile + threadIdx.x;
  float acc = 0.f;
  for (int64_t k0 = 0; k0 < p.k; k0 += kTile) {
    const int64_t ka = k0 + threadIdx.x, kb = k0 + threadIdx.y;
    a_tile[threadIdx.y][threadIdx.x] = row < p.m && ka < p.k ? example::to_float(a[row * p.k + ka]) : 0.f;
    // b_tile[kk][j] = B's element (k0 + kk, col j): row col of B for nt, column col for nn.
    float bv = 0.f;
    if (col < p.n && kb < p.k) bv = example::to_float(p.layout == 0 ? b[col * p.k + kb] : b[kb * p.n + col]);
    b_tile[threadIdx.y][threadIdx.x] = bv;
    __syncthreads();
    for (int kk = 0; kk < kTile; ++kk) acc += a_tile[threadIdx.y][kk] * b_tile[kk][threadIdx.x];
    __syncthreads();
  }
  if (row < p.m && col < p.n) ((T*)p.c)[z * p.m * p.n + row * p.n + col] = example::from_float<T>(acc);
}

template <class T>
cudaError_t launch_as(const attnbench_gemm_params& p, cudaStream_t stream) {
  const dim3 grid((unsigned)((p.n + kTile - 1) / kTile), (unsigned)((p.m + kTile - 1) / kTile), (unsigned)p.batch);
  tiled_gemm<T><<<grid, dim3(kTile, kTile), 0, stream>>>(p);
  return cudaGetLastError();
}

cudaError_t launch(const void* params, void*, cudaStream_t stream) {
  const auto& p = *(const attnbench_gemm_params*)params;
  return example::by_dtype(p.dtype, [&](auto t) { return launch_as<decltype(t)>(p, stream); });
}

const char* supports(const void* params, const attnbench_device*) {
  const auto& p = *(const attnbench_gemm_params*)params;
  if ((p.m + kTile - 1) / kTile > 65535) return "m must be at most 65535 * 16 (gridDim.y)";
  if (p.batch > 65535) return "batch must be at most 65535 (gridDim.z)";
  return nullptr;
}

const attnbench_variant variants[] = {
    {"my_tiled_gemm", "example plugin: the course's 16x16 shared-memory tiles, one output per thread",
     ATTNBENCH_OP_GEMM, supports, nullptr, launch},
};

}  // namespace

ATTNBENCH_PLUGIN(variants)
