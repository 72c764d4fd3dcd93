// An example plugin: row-wise softmax, one warp per row, in one pass over the row with an
// online (max, sum) and a second pass that writes. Run it beside attnbench's own:
//   attnbench run softmax --plugin kernels/plugin/examples/softmax_rows.cu
#include "example_math.cuh"

namespace {

using example::from_float;
using example::to_float;

// Folds (m2, s2) into (m, s): s is the sum of exp(x - m) over the elements seen.
__device__ void merge(float& m, float& s, float m2, float s2) {
  const float mn = fmaxf(m, m2);
  if (mn == -INFINITY) return;
  s = s * __expf(m - mn) + s2 * __expf(m2 - mn);
  m = mn;
}

template <class T>
__global__ void softmax_warp_per_row(const T* x, T* y, int64_t rows, int64_t cols) {
  const int64_t row = blockIdx.x * (int64_t)(blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const T* in = x + row * cols;
  float m = -INFINITY, s = 0.f;
  for (int64_t c = lane; c < cols; c += 32) merge(m, s, to_float(in[c]), 1.f);
  for (int offset = 16; offset > 0; offset /= 2) {
    const float m2 = __shfl_xor_sync(0xffffffffu, m, offset), s2 = __shfl_xor_sync(0xffffffffu, s, offset);
    merge(m, s, m2, s2);
  }
  const float inv = 1.f / s;
  for (int64_t c = lane; c < cols; c += 32) y[row * cols + c] = from_float<T>(__expf(to_float(in[c]) - m) * inv);
}

template <class T>
cudaError_t launch_as(const attnbench_softmax_params* p, cudaStream_t stream) {
  const int warps = 8;
  const unsigned blocks = (unsigned)((p->rows + warps - 1) / warps);
  softmax_warp_per_row<T><<<blocks, warps * 32, 0, stream>>>((const T*)p->x, (T*)p->y, p->rows, p->cols);
  return cudaGetLastError();
}

cudaError_t launch(const void* params, void*, cudaStream_t stream) {
  const auto* p = (const attnbench_softmax_params*)params;
  return example::by_dtype(p->dtype, [&](auto t) { return launch_as<decltype(t)>(p, stream); });
}

const char* supports(const void* params, const attnbench_device*) {
  const auto* p = (const attnbench_softmax_params*)params;
  if ((p->rows + 7) / 8 > 2147483647) return "rows / 8 must fit in gridDim.x";
  return nullptr;
}

const attnbench_variant variants[] = {
    {"my_softmax", "example plugin: one warp per row, online max and sum", ATTNBENCH_OP_SOFTMAX, supports, nullptr,
     launch},
};

}  // namespace

ATTNBENCH_PLUGIN(variants)
