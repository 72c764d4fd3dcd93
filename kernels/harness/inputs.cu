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

// The largest finite value of T: what an overflowing draw saturates to.
template <class T>
__device__ __forceinline__ float largest() {
  if constexpr (std::is_same_v<T, Fp8>) return 448.f;
  else if constexpr (std::is_same_v<T, __half>) return 65504.f;
  else if constexpr (std::is_same_v<T, __nv_bfloat16>) return 0x1.fep127f;
  else return 0x1.fffffep127f;
}

template <class T>
__global__ void fill_distribution(T* x, int64_t n, uint64_t seed, uint64_t stream_id, FillSpec spec) {
  const float top = largest<T>();
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const uint64_t u = static_cast<uint64_t>(i);
    float r = 0;
    switch (spec.kind) {
      case FillKind::normal: r = random_normal(seed, stream_id, u); break;
      case FillKind::uniform: r = random_uniform(seed, stream_id, u); break;
      case FillKind::pareto: {
        const uint64_t b = random_bits(seed, stream_id, u);
        const double v = (static_cast<double>(b >> 11) + 1.0) * 0x1.0p-53;  // (0, 1]
        r = static_cast<float>(pow(v, -1.0 / 3.0) - 1.0) * ((b & 1) ? -1.f : 1.f);
        break;
      }
      case FillKind::constant: r = random_uniform(seed, stream_id, u / static_cast<uint64_t>(spec.row)); break;
    }
    float v = spec.scale * r + spec.offset;
    // A stream of its own, so that which elements are outliers does not follow their values.
    if (spec.outliers && (random_bits(seed, stream_id ^ 0x6f75746c69657273ull, u) >> 54) == 0) v *= 100.f;
    x[i] = to_storage<T>(fminf(fmaxf(v, -top), top));  // inf saturates too; no draw is NaN
  }
}

}  // namespace

void launch_fill_distribution(void* buf, int64_t count, DType dtype, uint64_t seed, uint64_t stream_id,
                              const FillSpec& spec, cudaStream_t stream) {
  if (count <= 0) return;
  FillSpec s = spec;
  s.row = std::max<int64_t>(1, s.row);
  const int blocks = static_cast<int>(std::min<int64_t>(4096, (count + 255) / 256));
  switch (dtype) {
    case DType::fp32: fill_distribution<<<blocks, 256, 0, stream>>>(static_cast<float*>(buf), count, seed, stream_id, s); break;
    case DType::fp16: fill_distribution<<<blocks, 256, 0, stream>>>(static_cast<__half*>(buf), count, seed, stream_id, s); break;
    case DType::bf16:
      fill_distribution<<<blocks, 256, 0, stream>>>(static_cast<__nv_bfloat16*>(buf), count, seed, stream_id, s);
      break;
    case DType::fp8_e4m3: fill_distribution<<<blocks, 256, 0, stream>>>(static_cast<Fp8*>(buf), count, seed, stream_id, s); break;
  }
  check_launch("harness/fill_distribution");
}

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
