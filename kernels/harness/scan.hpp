// The harness's output checks on the device: the NaN/Inf scan of a whole output and the
// gather of the rows verification samples, so that a check reads back kilobytes, not the
// output (hundreds of megabytes at the perf shapes, once per variant and trial).
#pragma once
#include <cstdint>

#include "kernels/common/kernels.hpp"

namespace attnbench {

// Adds to *count the elements of buf[0, n) that are NaN or +-Inf in `dtype` (fp8 e4m3 has
// no Inf: its NaN is S.1111.111). The test is on the bits, as the host's decode sees them.
void launch_count_nonfinite(const void* buf, int64_t n, DType dtype, unsigned long long* count, cudaStream_t stream);

// dst row i = src row rows[i], rows of `row_bytes` bytes; `rows` is on the device.
void launch_gather_rows(const void* src, int64_t row_bytes, const int64_t* rows, int64_t n_rows, void* dst,
                        cudaStream_t stream);

}  // namespace attnbench
