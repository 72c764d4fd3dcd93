// The attention (prefill) ladder, baseline first: O = softmax(Q Kᵀ · scale + bias + mask) V per
// query head, fp32 softmax statistics, storage in dtype; the semantics (bottom-right causal,
// window, ALiBi, GQA, fully masked rows -> 0) are AttentionParams' (attention.hpp). One rung
// per file, from the unfused paths (1_naive.cu, 2_cublas.cu) to the fused kernels
// (3_flash_fp32.cu, 4_flash_mma.cu, 5_flash_wgmma.cu).
#include <vector>

#include "kernels/attention/attention.hpp"
#include "kernels/attention/rungs.hpp"

namespace attnbench {

const std::vector<Variant<AttentionParams>>& attention_variants() {
  using namespace attention_impl;
  static const std::vector<Variant<AttentionParams>> table = {
      {"naive", "unfused: fp32 scores (thread per score), scale+mask, softmax block_reduce, P V",
       naive, naive_supports, naive_workspace},
      {"cublas", "unfused as a framework runs it: cuBLAS batched GEMMs, fp32 scores, softmax warp_online",
       cublas, cublas_supports, cublas_workspace},
      {"flash_fp32", "fp32 FlashAttention-2: register-tiled SIMT (4x8 per thread), online softmax, cp.async K/V",
       flash_fp32, flash_fp32_supports},
      {"flash_mma",
       "fp16/bf16 FlashAttention-2: mma.sync m16n8k16, ldmatrix, cp.async pipeline, P in registers, lazy rescale",
       flash_mma, flash_mma_supports},
      {"flash_wgmma", "fp16/bf16 d128, sm_90a: wgmma m64n128k16, Q/K/V in 128-byte swizzle, P in registers",
       flash_wgmma, flash_wgmma_supports},
  };
  return table;
}

}  // namespace attnbench
