// The harness's input drawing on the device: a tensor of `count` random values in its
// storage type, element i a pure function of (seed, stream, i) (kernels/common/random.hpp).
// Drawing on the GPU and reading the values back costs a few milliseconds where drawing
// them on the host cost seconds per gigabyte.
#pragma once
#include <cstdint>

#include "kernels/common/kernels.hpp"

namespace attnbench {

// buf[i] = scale * N(0, 1) when `normal`, else scale * U(-1, 1), rounded to nearest in
// `dtype` (fp8 e4m3 saturates at +-448).
void launch_fill_random(void* buf, int64_t count, DType dtype, uint64_t seed, uint64_t stream_id, float scale,
                        bool normal, cudaStream_t stream);

// The case's [inputs] distributions (docs/cases.md), element i still a pure function of
// (seed, stream, i). Every value is `offset + scale * r` with r by kind, then, with
// `outliers`, multiplied by 100 with probability 1/1024 (a hash of seed, stream and i);
// a value past the dtype's largest finite one saturates to it (fp16 65504, fp8 448).
enum class FillKind {
  normal,    // r ~ N(0, 1)
  uniform,   // r ~ U(-1, 1)
  pareto,    // r = sign * (u^(-1/3) - 1), u ~ U(0, 1], a random sign: tail index 3
  constant,  // r ~ U(-1, 1) drawn once per row of `row` elements (the last dimension)
};
struct FillSpec {
  FillKind kind = FillKind::normal;
  float scale = 1, offset = 0;
  bool outliers = false;
  int64_t row = 1;
};
void launch_fill_distribution(void* buf, int64_t count, DType dtype, uint64_t seed, uint64_t stream_id,
                              const FillSpec& spec, cudaStream_t stream);

}  // namespace attnbench
