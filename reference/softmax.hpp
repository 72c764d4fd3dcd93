// fp64 reference of softmax.
#pragma once
#include "reference/common.hpp"

namespace attnbench::ref {

// yᵢⱼ = exp(xᵢⱼ) / Σₖ exp(xᵢₖ), along each row. x: [rows, cols]; returns [rows.size(), cols].
// With `faithful` on: in fp32, as a kernel computes it (max, exp(x - max), their sum, the quotient).
Matrix softmax(const float* x, int64_t cols, const Rows& rows, const Faithful& faithful = {});

}  // namespace attnbench::ref
