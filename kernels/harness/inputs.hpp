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

}  // namespace attnbench
