// gemm family: C = A·Bᵀ (layout nt) or C = A·B (layout nn), batched,
// storage in dtype, accumulation in fp32. All matrices row-major.
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/common/kernels.hpp"

namespace attnbench {

enum class GemmLayout { nt, nn };

struct GemmParams {
  const void* a;  // [batch, m, k]
  const void* b;  // nt: [batch, n, k]; nn: [batch, k, n]
  void* c;        // [batch, m, n]
  int64_t batch = 1, m = 0, n = 0, k = 0;
  GemmLayout layout = GemmLayout::nt;
  DType dtype = DType::fp32;
};

const std::vector<Variant<GemmParams>>& gemm_variants();

}  // namespace attnbench
