// fp64 reference of the batched GEMM.
#pragma once
#include "reference/common.hpp"

namespace attnbench::ref {

// C = A·Bᵀ (nt) or C = A·B (nn), batched. a: [batch, m, k]; b: nt [batch, n, k], nn [batch, k, n].
// Output row r is row (r % m) of batch (r / m); returns [rows.size(), n].
// With `faithful` on: the products summed in fp32.
Matrix gemm(const float* a, const float* b, bool nn, int64_t m, int64_t n, int64_t k, const Rows& rows,
            const Faithful& faithful = {});

}  // namespace attnbench::ref
