#include "kernels/harness/inputs.hpp"

#include "kernels/common/random.hpp"
#include "kernels/common/storage.cuh"

namespace attnbench {
namespace {

template <class T>
__device__ __forceinline__ T to_storage(float x) {
  if constexpr (std::is_same_v<T, Fp8>) {
    return Fp8(x);  // round to nearest even, saturating to the largest finite value
  } else {
    return from_float<T>(x);
  }
}

template <class T>
__global__ void fill_random(T* x, int64_t n, uint64_t seed, uint64_t stream_id, float scale, bool normal) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const uint64_t u = static_cast<uint64_t>(i);
    const float r = normal ? random_normal(seed, stream_id, u) : random_uniform(seed, stream_id, u);
    x[i] = to_storage<T>(scale * r);
  }
}

}  // namespace

void launch_fill_random(void* buf, int64_t count, DType dtype, uint64_t seed, uint64_t stream_id, float scale,
                        bool normal, cudaStream_t stream) {
  if (count <= 0) return;
  // Enough blocks to fill any card; the grid-stride loop takes the rest.
  const int blocks = static_cast<int>(std::min<int64_t>(4096, (count + 255) / 256));
  switch (dtype) {
    case DType::fp32: fill_random<<<blocks, 256, 0, stream>>>(static_cast<float*>(buf), count, seed, stream_id, scale, normal); break;
    case DType::fp16: fill_random<<<blocks, 256, 0, stream>>>(static_cast<__half*>(buf), count, seed, stream_id, scale, normal); break;
    case DType::bf16:
      fill_random<<<blocks, 256, 0, stream>>>(static_cast<__nv_bfloat16*>(buf), count, seed, stream_id, scale, normal);
      break;
    case DType::fp8_e4m3: fill_random<<<blocks, 256, 0, stream>>>(static_cast<Fp8*>(buf), count, seed, stream_id, scale, normal); break;
  }
  check_launch("harness/fill_random");
}

}  // namespace attnbench
