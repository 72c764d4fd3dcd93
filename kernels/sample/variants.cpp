// The sample ladder, baseline first: one token per row of logits by temperature, min-p, top-k
// and top-p, storage fp32/fp16/bf16, weights and sums fp32. One rung per file: 1_sort.cu,
// 2_pivot.cu, 3_cluster.cu.
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/sample/rungs.hpp"
#include "kernels/sample/sample.hpp"

namespace attnbench {
namespace {

// Every rung runs every shape and storage type.
std::string supports(const SampleParams& p, const DeviceCaps&) {
  if (p.dtype != DType::fp32 && p.dtype != DType::fp16 && p.dtype != DType::bf16)
    return std::string("dtype ") + dtype_name(p.dtype) + " is not a sample storage type (fp32, fp16, bf16)";
  if (p.batch < 1 || p.vocab < 2) return "batch must be >= 1 and vocab >= 2";
  if (p.batch > INT32_MAX) return "batch must be < 2^31 (rows go in gridDim.x)";
  if (p.vocab > INT32_MAX) return "vocab must be < 2^31 (token ids are int32)";
  return "";
}

// The sort's CUB call counts items in int.
std::string sort_supports(const SampleParams& p, const DeviceCaps& caps) {
  const std::string why = supports(p, caps);
  if (!why.empty()) return why;
  if (p.batch * p.vocab >= INT32_MAX) return "batch · vocab must be < 2^31 (CUB's radix sort counts in int)";
  return "";
}

}  // namespace

const std::vector<Variant<SampleParams>>& sample_variants() {
  using namespace sample_impl;
  static const std::vector<Variant<SampleParams>> table = with_added_variants<SampleParams>({
      {"sort", "PyTorch's way: one CUB radix sort of every row, thresholds read off the sorted row, then the draw",
       sort, sort_supports, sort_workspace},
      {"pivot", "sorting-free (FlashInfer's spirit): a block per row finds the top-k and top-p thresholds by "
                "8-way pivot passes over the row, then the draw",
       pivot, supports, nullptr},
      {"cluster", "sm_90: pivot with each row split over a cluster of up to 8 blocks, the statistics summed through "
                  "distributed shared memory",
       cluster, [](const SampleParams& p, const DeviceCaps& caps) {
         const std::string why = supports(p, caps);
         return why.empty() ? sample_impl::cluster_supports(p, caps) : why;
       },
       nullptr},
  });
  return table;
}

}  // namespace attnbench
