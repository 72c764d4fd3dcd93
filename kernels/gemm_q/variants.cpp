// The gemm_q ladder (issue 52), the simple way first: C = A · dequant(W)ᵀ with W int4/int8 codes,
// per-group scales and optional zeros (kernels/gemm_q/gemm_q.hpp's layout). One rung per file:
// 1_dequant_cublas.cu (the baseline), 2_fused_mma.cu, 3_splitk_gemv.cu (m <= 16: k split over
// the blocks of a cluster, the weight stream over every SM), 4_stream_gemv.cu (m <= 16: the weights
// streamed into registers by 16 warps an SM, the scales on fp32 step partials); the Hopper rung for
// larger m (wgmma with the dequant in registers overlapped with the loads, issue 52) is still to
// come, as 5_wgmma.cu, before dense_cublas. dense_cublas is no quantized kernel: cuBLAS on W already dequantized (untimed), the
// fp16/bf16 GEMM the targets divide by, run in the same call (perf cases name it their
// baseline).
#include <vector>

#include "kernels/gemm_q/gemm_q.hpp"
#include "kernels/gemm_q/rungs.hpp"

namespace attnbench {

const std::vector<Variant<GemmQParams>>& gemm_q_variants() {
  using namespace gemm_q_impl;
  static const std::vector<Variant<GemmQParams>> table = with_added_variants<GemmQParams>({
      {"dequant_cublas", "dequantize W into a dtype workspace, then cuBLAS A·Wᵀ (fp32 compute)", dequant_cublas,
       dequant_cublas_supports, dequant_cublas_workspace},
      {"fused_mma",
       "mma.sync m16n8k16 on W streamed packed (lane-private cp.async ring), dequantized in registers; 8 warps split "
       "k, 32 channels a block",
       fused_mma, fused_mma_supports},
      {"splitk_gemv",
       "m <= 16, sm_90: rung 2's dequant + mma.sync with k split over a cluster's blocks (512 blocks at n 4096), "
       "an 8-stage lane-private cp.async ring, partials summed in distributed shared memory",
       splitk_gemv, splitk_gemv_supports},
      {"stream_gemv",
       "m <= 16: (code - zero) exact into mma.sync, the scale on each k step's fp32 partial; the weights streamed "
       "into a 2-4-step register ring by 8 warps a 16-channel tile (16 warps an SM), no shared memory until the sum",
       stream_gemv, stream_gemv_supports},
      // 5: wgmma (sm_90a), the dequant in registers overlapped with TMA loads (issue 52, to come).
      {"dense_cublas",
       "not a quantized kernel: cuBLAS on W dequantized before timing, the dense fp16/bf16 GEMM the targets divide by",
       dense_cublas, dense_cublas_supports},
  });
  return table;
}

}  // namespace attnbench
