// The softmax ladder, baseline first: y = softmax(x) along each row, storage fp32/fp16/bf16,
// statistics fp32. One rung per file: 1_naive.cu, 2_block_reduce.cu, 3_warp_online.cu.
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/softmax/rungs.hpp"
#include "kernels/softmax/softmax.hpp"

namespace attnbench {
namespace {

// Every rung runs every shape and storage type.
std::string supports(const SoftmaxParams& p, const DeviceCaps&) {
  if (p.dtype != DType::fp32 && p.dtype != DType::fp16 && p.dtype != DType::bf16)
    return std::string("dtype ") + dtype_name(p.dtype) + " is not a softmax storage type (fp32, fp16, bf16)";
  if (p.rows < 1 || p.cols < 1) return "rows and cols must be >= 1";
  if (p.rows > INT32_MAX) return "rows must be < 2^31 (row blocks go in gridDim.x)";
  return "";
}

}  // namespace

const std::vector<Variant<SoftmaxParams>>& softmax_variants() {
  using namespace softmax_impl;
  static const std::vector<Variant<SoftmaxParams>> table = with_added_variants<SoftmaxParams>({
      {"naive", "one thread per row, three passes over the row", naive, supports, nullptr},
      {"block_reduce", "one block per row, shared-memory tree reductions for the max, then the sum", block_reduce,
       supports, nullptr},
      {"warp_online", "one pass: row in registers, 16-byte vectors, online (max, sum) merged across threads",
       warp_online, supports, nullptr},
  });
  return table;
}

}  // namespace attnbench
