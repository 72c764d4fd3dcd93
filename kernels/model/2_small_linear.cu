// The model's decode step, rung 2: small_linear (row PREFILL+DECODE+small_linear). Over rung 1
// (1_launches.cu) the projections and what surrounds them are fused: four launches a layer, the
// LayerNorms in their prologues and the QKV split, the residual adds, bias and GELU in their
// epilogues, the logits keeping their argmax as they are written (greedy_finish then writes the
// token); the attention is still the DECODE half's kernel. Rung 3 (3_persistent.cu) puts the
// whole step, attention included, in one launch. Batch 1 to 8 only: beyond, a projection is a
// GEMM again, and the row is skipped.
//
// A decode step's projections at batch <= 8, with what surrounds them fused in: at m = 1-8
// rows a projection is a matrix-vector product bound by reading W once, and the kernels
// around it (LayerNorm before, bias, GELU, the residual add, the QKV split after) are as long
// as it is. Each block keeps the m input rows in shared memory and takes eight output
// columns (W's rows, read with 16-byte loads) at a time: at batch 1 (and in fp32) a warp
// each, dotted in FMAs; at batch 2-8 on the tensor cores, its warps splitting the rows'
// length (small_linear_groups). Each column's m results go through the epilogue. With a
// LayerNorm prologue each block normalises the m rows of the fp32 residual stream itself (a
// few KB from L2) instead of waiting on a kernel for it. Results are rounded exactly where
// the unfused chain stores them. (The block's work is in small_linear.cuh, which rung 3 runs
// as its phases.)
#include <algorithm>

#include "kernels/model/small_linear.cuh"

namespace attnbench {
namespace {

constexpr int kThreads = 256, kWarps = kThreads / 32;
// The tensor-core form from batch 2: at batch 1 the column-a-warp form measured faster in the
// step's graph (GPT-2 124M TBT 0.3089 against 0.3142 ms, bench notes run 220; the logits alone
// on the groups +1.9%, run 224), though ncu timed most launches shorter alone.
constexpr int64_t kGroupsFrom = 2;

// Four blocks an SM (64 registers), so that the logits' 528 blocks run in one round: the
// batch-1 LayerNorm's gains held across the wait (small_linear_block) took it to 80. GPT-2
// 124M's TBT at batch 1: -1.2% from the bound alone, -2.6% with the gains held (bench notes,
// run 230).
template <class T, bool kColumns>
__global__ void __launch_bounds__(kThreads, 4) small_linear_kernel(SmallLinear p, int64_t columns) {
  extern __shared__ __align__(16) unsigned char smem[];
  small_linear_impl::small_linear_block<T, kWarps, true, kColumns>(p, reinterpret_cast<T*>(smem), blockIdx.x, gridDim.x,
                                                                   reinterpret_cast<T*>(smem + columns));
}

// The tensor-core form (16-bit types): the rows' shared memory, then at `partials` the warps'
// partial sums, then a LayerNorm's gains and shifts. Four blocks an SM, as the column-a-warp
// form gets at 64 registers.
template <class T>
__global__ void __launch_bounds__(kThreads, 4) small_linear_groups_kernel(SmallLinear p, int64_t partials) {
  extern __shared__ __align__(16) unsigned char smem[];
  small_linear_impl::small_linear_groups<T, kWarps, true>(
      p, reinterpret_cast<T*>(smem), reinterpret_cast<float*>(smem + partials),
      reinterpret_cast<T*>(smem + partials + small_linear_impl::group_partials_bytes(kWarps)), blockIdx.x, gridDim.x);
}

__global__ void greedy_finish_kernel(GreedyFinish p) {
  small_linear_impl::greedy_finish_row(p.best, p.seq, blockIdx.x * int64_t{blockDim.x} + threadIdx.x);
}

}  // namespace

std::string small_linear_supports(int64_t m, int64_t k, DType dtype) {
  if (m < 1 || m > kSmallLinearRows) return "batch " + std::to_string(m) + ": the fused decode step takes 1 to 8";
  if ((k * static_cast<int64_t>(dtype_bytes(dtype))) % 16 != 0) return "rows of W must be whole 16-byte loads";
  return "";
}

void small_linear(const SmallLinear& p, const LaunchContext& ctx) {
  with_storage(p.dtype, "model/small_linear", [&](auto tag) {
    using T = decltype(tag);
    static bool opted_in = false;  // per instantiation: its own static
    if (!opted_in) {
      const auto opt_in = [](auto kernel) {
        check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 160 * 1024),
                   "model/small_linear: shared memory");
      };
      opt_in(small_linear_kernel<T, false>);
      opt_in(small_linear_kernel<T, true>);
      if constexpr (sizeof(T) == 2) opt_in(small_linear_groups_kernel<T>);
      opted_in = true;
    }
    // Eight columns a block at a time (a group, or a column a warp), up to every SM busy a
    // few times over (the logits' 50257 columns then take several groups a block, each
    // block's prologue paid once for them). Launched to start while the kernel before it runs
    // (kEarly).
    const int64_t blocks = std::min<int64_t>(ceil_div(p.n, kWarps), 132 * 4);
    const int64_t rows = small_linear_impl::rows_smem_bytes(p.in, p.m, p.k, sizeof(T));
    if constexpr (sizeof(T) == 2) {
      if (p.m >= kGroupsFrom) {
        const int64_t partials = ceil_div(rows, 16) * 16;
        const int64_t staged = p.in == SmallLinear::In::layernorm ? 2 * p.k * int64_t{sizeof(T)} : 0;
        const auto smem = static_cast<std::size_t>(partials + small_linear_impl::group_partials_bytes(kWarps) + staged);
        launch_pdl(small_linear_groups_kernel<T>, dim3(static_cast<unsigned>(blocks)), dim3(kThreads), smem, ctx.stream,
                   true, ctx.caps->arch(), "model/small_linear", p, partials);
        return;
      }
    }
    // A column a warp (no logits): each warp's column comes into shared memory before the
    // wait, rather than into the L2. GPT-2 124M on an H200 (bench notes, runs 248-250): TBT
    // -0.9% at batch 1, -1.7% with the paged cache. It pays only when every projection of the
    // step does it: MLP down's alone cost 4.9%, the 768-wide ones' alone 3.3%.
    const int64_t column_bytes = kWarps * p.k * static_cast<int64_t>(sizeof(T));
    const bool stage = p.out != SmallLinear::Out::logits && p.n <= blocks * kWarps && column_bytes <= 48 * 1024;
    const int64_t columns = stage ? ceil_div(rows, int64_t{16}) * 16 : 0;
    launch_pdl(stage ? small_linear_kernel<T, true> : small_linear_kernel<T, false>,
               dim3(static_cast<unsigned>(blocks)), dim3(kThreads),
               static_cast<std::size_t>(stage ? columns + column_bytes : rows), ctx.stream, true, ctx.caps->arch(),
               "model/small_linear", p, columns);
  });
  check_launch("model/small_linear");
}

void greedy_finish(const GreedyFinish& p, cudaStream_t stream) {
  greedy_finish_kernel<<<1, 32, 0, stream>>>(p);
  check_launch("model/greedy_finish");
}

}  // namespace attnbench
