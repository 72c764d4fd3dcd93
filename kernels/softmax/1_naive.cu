// softmax rung 1, naive: one thread per row, three passes over the row (max, sum of exp,
// write). Neighbouring threads read addresses a whole row apart, so no access is coalesced:
// the baseline the ladder is measured against.
// H200, run 1: fp32 32768x4096 3.428 ms, 313 GB/s, 7.5% of copy bandwidth.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "kernels/common/dispatch.cuh"
#include "kernels/common/storage.cuh"
#include "kernels/softmax/rungs.hpp"

namespace attnbench {
namespace {

// x, y: [rows, cols]. Thread i owns row i.
template <class T>
__global__ void naive_kernel(const T* x, T* y, int64_t rows, int64_t cols) {
  const int64_t row = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (row >= rows) return;
  const T* xr = x + row * cols;
  T* yr = y + row * cols;
  float m = -INFINITY;
  for (int64_t c = 0; c < cols; ++c) m = fmaxf(m, to_float(xr[c]));
  // A row of only -inf (a fully masked attention row) becomes 0, as the attention reference
  // has it: otherwise exp(-inf - -inf) = NaN.
  if (m == -INFINITY) {
    for (int64_t c = 0; c < cols; ++c) yr[c] = from_float<T>(0.f);
    return;
  }
  float l = 0.f;
  for (int64_t c = 0; c < cols; ++c) l += expf(to_float(xr[c]) - m);
  for (int64_t c = 0; c < cols; ++c) yr[c] = from_float<T>(expf(to_float(xr[c]) - m) / l);
}

}  // namespace

void softmax_impl::naive(const SoftmaxParams& p, const LaunchContext& ctx) {
  with_storage(p.dtype, "softmax", [&](auto tag) {
    using T = decltype(tag);
    constexpr int kBlock = 128;
    naive_kernel<T><<<static_cast<unsigned>(ceil_div(p.rows, kBlock)), kBlock, 0, ctx.stream>>>(
        static_cast<const T*>(p.x), static_cast<T*>(p.y), p.rows, p.cols);
  });
  check_launch("softmax/naive");
}

}  // namespace attnbench
