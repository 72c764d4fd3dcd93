// softmax family: y = softmax(x) along each row, fp32 statistics.
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/common/kernels.hpp"

namespace attnbench {

struct SoftmaxParams {
  const void* x;  // [rows, cols], dtype, row-major, 16-byte aligned base
  void* y;        // [rows, cols], dtype
  int64_t rows = 0, cols = 0;
  DType dtype = DType::fp32;
};

const std::vector<Variant<SoftmaxParams>>& softmax_variants();

}  // namespace attnbench
