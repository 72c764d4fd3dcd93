// Test-only softmax variants, linked only into attnbench_testvariants: kernels that
// misbehave on purpose, so the GPU tests can show the harness catching them.
//   test_trap:  faults (__trap) on rows = 3: the run must stop with one line naming
//               the case, point and variant, exit 3, every finished row kept in -o.
//   test_cheat: a right softmax for its first two launches (the verification trials),
//               then returns at once, as a kernel that caches its result would: the
//               timed launches' output must fail verification, in every timing mode.
//   test_jitter, test_jitter_promised: a right softmax whose every row's first element is
//               one ulp up on odd launches, as an unordered reduction's would move: within
//               the bound, not bit for bit. [verify] repeat reports the spread of the one
//               declared nondeterministic and fails the one that promises determinism.
#include <cuda_runtime.h>

#include <cmath>
#include <string>

#include "kernels/softmax/softmax.hpp"

namespace attnbench {
namespace {

__device__ int g_cheat_launches = 0;

__global__ void count_launch() { ++g_cheat_launches; }

// One row's softmax by one thread, fp32: the work an honest launch does.
__device__ void row_softmax(const float* in, float* out, int64_t cols) {
  float m = -INFINITY, sum = 0;
  for (int64_t j = 0; j < cols; ++j) m = fmaxf(m, in[j]);
  for (int64_t j = 0; j < cols; ++j) sum += expf(in[j] - m);
  for (int64_t j = 0; j < cols; ++j) out[j] = expf(in[j] - m) / sum;
}

__global__ void cheat_softmax(const float* x, float* y, int64_t rows, int64_t cols) {
  if (g_cheat_launches > 2) return;  // "already computed": the cheat
  const int64_t r = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (r < rows) row_softmax(x + r * cols, y + r * cols, cols);
}

__device__ int g_jitter_launches = 0;

__global__ void jitter_softmax(const float* x, float* y, int64_t rows, int64_t cols) {
  const int64_t r = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (r >= rows) return;
  row_softmax(x + r * cols, y + r * cols, cols);
  if (g_jitter_launches % 2 == 1) y[r * cols] = nextafterf(y[r * cols], 2.f);
}

__global__ void count_jitter() { ++g_jitter_launches; }

void test_jitter(const SoftmaxParams& p, const LaunchContext& ctx) {
  count_jitter<<<1, 1, 0, ctx.stream>>>();
  check_launch("count_jitter");
  jitter_softmax<<<static_cast<unsigned>(ceil_div(p.rows, 128)), 128, 0, ctx.stream>>>(
      static_cast<const float*>(p.x), static_cast<float*>(p.y), p.rows, p.cols);
  check_launch("test_jitter");
}

__global__ void trap_kernel() { __trap(); }

void test_cheat(const SoftmaxParams& p, const LaunchContext& ctx) {
  count_launch<<<1, 1, 0, ctx.stream>>>();
  check_launch("count_launch");
  cheat_softmax<<<static_cast<unsigned>(ceil_div(p.rows, 128)), 128, 0, ctx.stream>>>(
      static_cast<const float*>(p.x), static_cast<float*>(p.y), p.rows, p.cols);
  check_launch("test_cheat");
}

void test_trap(const SoftmaxParams&, const LaunchContext& ctx) {
  trap_kernel<<<1, 1, 0, ctx.stream>>>();
  check_launch("test_trap");
}

std::string fp32_only(const SoftmaxParams& p, const DeviceCaps&) {
  return p.dtype == DType::fp32 ? "" : "test kernel: fp32 only";
}

std::string rows_3_only(const SoftmaxParams& p, const DeviceCaps&) {
  return p.rows == 3 ? "" : "test kernel: faults on rows = 3 only";
}

const bool registered = [] {
  add_variant<SoftmaxParams>(
      {"test_cheat", "TEST ONLY: computes on its first two launches, then skips the work", test_cheat, fp32_only});
  add_variant<SoftmaxParams>(
      {"test_trap", "TEST ONLY: traps (a device fault) on rows = 3", test_trap, rows_3_only});
  Variant<SoftmaxParams> jitter{"test_jitter", "TEST ONLY: one ulp apart on odd launches, declared nondeterministic",
                                test_jitter, fp32_only};
  jitter.deterministic = false;
  add_variant<SoftmaxParams>(jitter);
  add_variant<SoftmaxParams>({"test_jitter_promised", "TEST ONLY: the same kernel, promised deterministic",
                              test_jitter, fp32_only});
  return true;
}();

}  // namespace
}  // namespace attnbench
