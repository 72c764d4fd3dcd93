// fp64 reference of softmax.
#pragma once
#include "reference/common.hpp"

namespace attnbench::ref {

// yᵢⱼ = exp(xᵢⱼ) / Σₖ exp(xᵢₖ), along each row. x: [rows, cols]; returns [rows.size(), cols].
Matrix softmax(const float* x, int64_t cols, const Rows& rows);

}  // namespace attnbench::ref
