// The sample ladder, baseline first: one token per row of logits by temperature, min-p, top-k
// and top-p, storage fp32/fp16/bf16, weights and sums fp32. One rung per file: 1_sort.cu,
// 2_pivot.cu, 3_cluster.cu on given logits; 4_gemm_then_sample.cu and 5_fused_lm_head.cu on the
// LM-head form (shape.hidden > 0: the logits computed from hidden and W). Each form's rungs `apply` to its
// points only, so a point lists the rungs of its form.
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/sample/rungs.hpp"
#include "kernels/sample/sample.hpp"

namespace attnbench {
namespace {

// The shapes and storage types every rung takes.
std::string common(const SampleParams& p) {
  if (p.dtype != DType::fp32 && p.dtype != DType::fp16 && p.dtype != DType::bf16)
    return std::string("dtype ") + dtype_name(p.dtype) + " is not a sample storage type (fp32, fp16, bf16)";
  if (p.batch < 1 || p.vocab < 2) return "batch must be >= 1 and vocab >= 2";
  if (p.batch > INT32_MAX) return "batch must be < 2^31 (rows go in gridDim.x)";
  if (p.vocab > INT32_MAX) return "vocab must be < 2^31 (token ids are int32)";
  return "";
}

// Rungs 1-3 read given logits: every shape and storage type.
std::string supports(const SampleParams& p, const DeviceCaps&) {
  if (p.d > 0) return "needs the logits given (shape.hidden = 0); the LM-head form runs on gemm_then_sample";
  return common(p);
}
bool logits_given(const SampleParams& p) { return p.d == 0; }

// Rung 4 computes them from an LM head: fp16/bf16, cuBLAS's int sizes.
std::string lm_head_supports(const SampleParams& p, const DeviceCaps&) {
  if (p.d <= 0) return "the LM-head form only (shape.hidden > 0): it computes the logits";
  const std::string why = common(p);
  if (!why.empty()) return why;
  if (p.dtype == DType::fp32) return "fp16/bf16 only (the LM head as a checkpoint stores it)";
  if (p.d > INT32_MAX) return "hidden must be < 2^31 (cuBLAS counts in int)";
  return "";
}
bool lm_head_form(const SampleParams& p) { return p.d > 0; }

// The sort's CUB call counts items in int.
std::string sort_supports(const SampleParams& p, const DeviceCaps& caps) {
  const std::string why = supports(p, caps);
  if (!why.empty()) return why;
  if (p.batch * p.vocab >= INT32_MAX) return "batch · vocab must be < 2^31 (CUB's radix sort counts in int)";
  return "";
}

// A rung's own reasons after the form's: First's, else Second's.
using Supports = std::string (*)(const SampleParams&, const DeviceCaps&);
template <Supports First, Supports Second>
std::string both(const SampleParams& p, const DeviceCaps& caps) {
  const std::string why = First(p, caps);
  return why.empty() ? Second(p, caps) : why;
}

}  // namespace

const std::vector<Variant<SampleParams>>& sample_variants() {
  using namespace sample_impl;
  static const std::vector<Variant<SampleParams>> table = with_added_variants<SampleParams>({
      {"sort", "PyTorch's way: one CUB radix sort of every row, thresholds read off the sorted row, then the draw",
       sort, sort_supports, sort_workspace, logits_given},
      {"pivot", "sorting-free (FlashInfer's spirit): a block per row finds the top-k and top-p thresholds by "
                "8-way pivot passes over the row, then the draw",
       pivot, supports, nullptr, logits_given},
      {"cluster", "sm_90: pivot with each row split over a cluster of up to 8 blocks, the statistics summed through "
                  "distributed shared memory",
       cluster, both<supports, cluster_supports>, nullptr, logits_given},
      {"gemm_then_sample", "LM-head form (shape.hidden): the fp32 logits by cuBLAS into the workspace, then the "
                           "cluster rung (pivot before sm_90) on them; every option",
       gemm_then_sample, lm_head_supports, gemm_then_sample_workspace, lm_head_form},
      {"fused_lm_head", "LM-head form, FMMS-style: W streamed once through mma.sync, a summary (max, sum) per "
                        "16-token tile, then a block per row finds the tile and the token; temperature/greedy only",
       fused_lm_head, both<lm_head_supports, fused_lm_head_supports>, fused_lm_head_workspace, lm_head_form},
  });
  return table;
}

}  // namespace attnbench
