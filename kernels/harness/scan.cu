#include "kernels/harness/scan.hpp"

#include <algorithm>

namespace attnbench {
namespace {

// A storage word whose exponent bits are all ones is NaN or Inf; e4m3 keeps only the
// all-ones mantissa for NaN.
template <class Word>
__device__ __forceinline__ bool nonfinite_bits(Word w, Word exponent) {
  return (w & exponent) == exponent;
}
__device__ __forceinline__ bool nonfinite_e4m3(uint8_t b) { return (b & 0x7f) == 0x7f; }

template <class Word, bool kE4m3>
__global__ void count_nonfinite(const Word* x, int64_t n, Word exponent, unsigned long long* count) {
  unsigned long long bad = 0;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const Word w = x[i];
    if constexpr (kE4m3)
      bad += nonfinite_e4m3(w);
    else
      bad += nonfinite_bits(w, exponent);
  }
  // One atomic per warp.
  for (int off = 16; off > 0; off >>= 1) bad += __shfl_down_sync(0xffffffffu, bad, off);
  if ((threadIdx.x & 31) == 0 && bad) atomicAdd(count, bad);
}

__global__ void gather_rows(const uint8_t* src, int64_t row_bytes, const int64_t* rows, void* dst) {
  const uint8_t* from = src + rows[blockIdx.x] * row_bytes;
  uint8_t* to = static_cast<uint8_t*>(dst) + static_cast<int64_t>(blockIdx.x) * row_bytes;
  for (int64_t i = threadIdx.x; i < row_bytes; i += blockDim.x) to[i] = from[i];
}

int grid_for(int64_t n) { return static_cast<int>(std::min<int64_t>(4096, (n + 255) / 256)); }

}  // namespace

void launch_count_nonfinite(const void* buf, int64_t n, DType dtype, unsigned long long* count, cudaStream_t stream) {
  if (n <= 0) return;
  switch (dtype) {
    case DType::fp32:
      count_nonfinite<uint32_t, false><<<grid_for(n), 256, 0, stream>>>(static_cast<const uint32_t*>(buf), n,
                                                                          0x7f800000u, count);
      break;
    case DType::fp16:
      count_nonfinite<uint16_t, false><<<grid_for(n), 256, 0, stream>>>(static_cast<const uint16_t*>(buf), n,
                                                                          uint16_t{0x7c00}, count);
      break;
    case DType::bf16:
      count_nonfinite<uint16_t, false><<<grid_for(n), 256, 0, stream>>>(static_cast<const uint16_t*>(buf), n,
                                                                          uint16_t{0x7f80}, count);
      break;
    case DType::fp8_e4m3:
      count_nonfinite<uint8_t, true><<<grid_for(n), 256, 0, stream>>>(static_cast<const uint8_t*>(buf), n,
                                                                        uint8_t{0}, count);
      break;
  }
  check_launch("harness/count_nonfinite");
}

void launch_gather_rows(const void* src, int64_t row_bytes, const int64_t* rows, int64_t n_rows, void* dst,
                        cudaStream_t stream) {
  if (n_rows <= 0 || row_bytes <= 0) return;
  // One block per row: rows are a few hundred bytes to a few hundred kilobytes.
  for (int64_t at = 0; at < n_rows; at += 65535)
    gather_rows<<<static_cast<unsigned>(std::min<int64_t>(65535, n_rows - at)), 256, 0, stream>>>(
        static_cast<const uint8_t*>(src), row_bytes, rows + at, static_cast<uint8_t*>(dst) + at * row_bytes);
  check_launch("harness/gather_rows");
}

}  // namespace attnbench
