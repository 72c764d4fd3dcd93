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
  // The epilogue of a fused projection (mha's `epilogue` step), taken only by the rungs whose
  // supports say so (naive, wgmma_ws): with `biased`, bias [n] is added to every row in fp32,
  // before the one rounding to dtype; with split_n[0] > 0 C's columns are three tensors:
  // [0, split_n[0]) go to c, the next split_n[1] to c1 and the rest to c2, each dense
  // [batch, m, its columns] (the QKV projection writing q, k and v itself). (A flag beside the
  // pointer: a dry run's rows are chosen with no tensors allocated.)
  bool biased = false;
  const void* bias = nullptr;
  int64_t split_n[2] = {0, 0};
  void* c1 = nullptr;
  void* c2 = nullptr;
};

// Whether p asks for an epilogue beyond the rounding.
inline bool has_epilogue(const GemmParams& p) { return p.biased || p.split_n[0] > 0; }

const std::vector<Variant<GemmParams>>& gemm_variants();

}  // namespace attnbench
