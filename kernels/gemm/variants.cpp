// The gemm ladder, vendor baseline first: C = A·Bᵀ (layout nt) or C = A·B (layout nn),
// batched, row-major, storage in dtype, accumulation in fp32. One rung per file, from
// 0_cublas.cu (the baseline) up the SGEMM ladder to the tensor-core rungs 4_mma.cu,
// 5_wgmma.cu and 6_wgmma_ws.cu.
#include <vector>

#include "kernels/gemm/gemm.hpp"
#include "kernels/gemm/rungs.hpp"

namespace attnbench {

const std::vector<Variant<GemmParams>>& gemm_variants() {
  using namespace gemm_impl;
  static const std::vector<Variant<GemmParams>> table = with_added_variants<GemmParams>({
      {"cublas", "cuBLAS GemmStridedBatchedEx, fp32 compute, no TF32", cublas, cublas_supports},
      {"naive", "one thread per output, k loop from global memory", naive, naive_supports},
      {"smem_tiled_unpadded",
       "smem_tiled without its +1 pad: nt's transposing stores 32-way bank-conflicted (the lesson's first half)",
       smem_tiled_unpadded, smem_tiled_supports, {},
       // A lesson, not a contender: it runs where a case or -k names it (cases/gemm/bank-conflicts.toml).
       [](const GemmParams&) { return false; }, nullptr, true, nullptr,
       "ncu --metrics l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,"
       "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum,sass__inst_executed_shared_stores: nt's transposing "
       "stores all land in one bank (words 32 tx + ty), 32 wavefronts a store instruction of the B load, 31 of them "
       "conflicts; compare smem_tiled's profile"},
      {"smem_tiled", "32x32 shared-memory tiles, one output per thread", smem_tiled, smem_tiled_supports, {}, nullptr,
       nullptr, true, nullptr,
       "ncu --metrics l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,"
       "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum,sass__inst_executed_shared_stores: the +1 pad spreads "
       "nt's transposing stores over 32 banks (words 33 tx + ty), one wavefront a store, no conflicts; "
       "smem_tiled_unpadded has 32"},
      {"reg_tiled", "fp32: 128x128x16 tiles, 8x8 outputs/thread, float4, double buffer", reg_tiled,
       reg_tiled_supports},
      {"mma", "fp16/bf16: mma.sync + ldmatrix, 3-stage cp.async, 128x256x64, swizzled", mma,
       mma_supports},
      {"wgmma", "fp16/bf16, sm_90a: wgmma m64n256k16 from swizzled shared memory, 4-stage cp.async", wgmma,
       wgmma_supports},
      {"wgmma_ws_1cta", "fp16/bf16, sm_90a: TMA producer warp, 2 consumer warpgroups, persistent, TMA-stored outputs",
       wgmma_ws_1cta, wgmma_ws_supports},
      {"wgmma_ws", "wgmma_ws_1cta in clusters of 2 blocks that share B tiles by TMA multicast", wgmma_ws,
       wgmma_ws_supports},
  });
  return table;
}

}  // namespace attnbench
