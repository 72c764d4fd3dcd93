// Mutant suite, softmax (tests/mutants/README.md). One correct kernel, ctl_softmax, and
// mutants of it that each carry exactly one bug, chosen at compile time by `Bug`: the code
// is written once, and every mutant differs from the control only where its bug is.
//   attnbench verify tests/mutants/cases/softmax-odd.toml --plugin tests/mutants/softmax.cu
#include "mutant_math.cuh"

namespace {

using mutant::from_float;
using mutant::to_float;

enum class Bug {
  none,      // the control
  zeros,     // writes zeros
  no_max,    // exp(x) without subtracting the row maximum: overflows on large logits
  twice,     // divides by the sum twice: the output is off by a factor of the sum
  lowp_sum,  // sums exp(x - m) in the storage dtype (fp16/bf16) instead of fp32
  last_row,  // leaves the last row unwritten
};

// One thread per row, three passes (max, sum, write): the simplest correct softmax, fp32
// statistics whatever the storage type. The control does what attnbench's own `naive` rung
// does (kernels/softmax/1_naive.cu), so it is exactly as accurate.
template <class T, Bug kBug>
__global__ void softmax_rows(const T* x, T* y, int64_t rows, int64_t cols) {
  const int64_t r = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (r >= rows) return;
  if (kBug == Bug::last_row && r == rows - 1) return;
  const T* in = x + r * cols;
  T* out = y + r * cols;
  float m = 0.f;
  if constexpr (kBug != Bug::no_max) {
    m = -INFINITY;
    for (int64_t c = 0; c < cols; ++c) m = fmaxf(m, to_float(in[c]));
  }
  using Acc = std::conditional_t<kBug == Bug::lowp_sum, T, float>;
  Acc s = from_float<Acc>(0.f);
  for (int64_t c = 0; c < cols; ++c) s = mutant::add_to(s, expf(to_float(in[c]) - m));
  const float sum = to_float(s);
  for (int64_t c = 0; c < cols; ++c) {
    float v = expf(to_float(in[c]) - m) / sum;
    if (kBug == Bug::twice) v /= sum;
    if (kBug == Bug::zeros) v = 0.f;
    out[c] = from_float<T>(v);
  }
}

template <Bug kBug>
cudaError_t launch(const void* params, void*, cudaStream_t stream) {
  const auto& p = *(const attnbench_softmax_params*)params;
  return mutant::by_dtype(p.dtype, [&](auto t) {
    using T = decltype(t);
    softmax_rows<T, kBug><<<(unsigned)((p.rows + 127) / 128), 128, 0, stream>>>((const T*)p.x, (T*)p.y, p.rows, p.cols);
    return cudaGetLastError();
  });
}

const char* supports(const void* params, const attnbench_device*) {
  const auto& p = *(const attnbench_softmax_params*)params;
  return (p.rows + 127) / 128 > 2147483647 ? "rows / 128 must fit in gridDim.x" : nullptr;
}

const attnbench_variant variants[] = {
    {"ctl_softmax", "mutant suite control: one thread per row, max, fp32 sum, write", ATTNBENCH_OP_SOFTMAX, supports,
     nullptr, launch<Bug::none>},
    {"mut_softmax_zeros", "MUTANT: writes zeros", ATTNBENCH_OP_SOFTMAX, supports, nullptr, launch<Bug::zeros>},
    {"mut_softmax_no_max", "MUTANT: exp(x) without subtracting the row max (overflows on large logits)",
     ATTNBENCH_OP_SOFTMAX, supports, nullptr, launch<Bug::no_max>},
    {"mut_softmax_twice", "MUTANT: normalised twice (divides by the sum twice)", ATTNBENCH_OP_SOFTMAX, supports,
     nullptr, launch<Bug::twice>},
    {"mut_softmax_lowp_sum", "MUTANT: sums exp(x - max) in the storage dtype (fp16/bf16) instead of fp32",
     ATTNBENCH_OP_SOFTMAX, supports, nullptr, launch<Bug::lowp_sum>},
    {"mut_softmax_last_row", "MUTANT: leaves the last row unwritten", ATTNBENCH_OP_SOFTMAX, supports, nullptr,
     launch<Bug::last_row>},
};

}  // namespace

ATTNBENCH_PLUGIN(variants)
