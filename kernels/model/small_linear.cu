// A decode step's projections at batch <= 8, with what surrounds them fused in: at m = 1-8
// rows a projection is a matrix-vector product bound by reading W once, and the kernels
// around it (LayerNorm before, bias, GELU, the residual add, the QKV split after) are as long
// as it is. Every warp takes whole output columns (W's rows, read with 16-byte loads), dots
// them with the m input rows each block keeps in shared memory, and writes the column's m
// results through the epilogue. With a LayerNorm prologue each block normalises the m rows of
// the fp32 residual stream itself (a few KB from L2) instead of waiting on a kernel for it.
// Results are rounded exactly where the unfused chain stores them.
#include <algorithm>

#include "kernels/model/small_linear.cuh"

namespace attnbench {
namespace {

constexpr int kThreads = 256, kWarps = kThreads / 32;

template <class T>
__global__ void __launch_bounds__(kThreads) small_linear_kernel(SmallLinear p) {
  extern __shared__ __align__(16) unsigned char smem[];
  small_linear_impl::small_linear_block<T, kWarps, true>(p, reinterpret_cast<T*>(smem), blockIdx.x, gridDim.x);
}

__global__ void greedy_finish_kernel(GreedyFinish p) {
  small_linear_impl::greedy_finish_row(p.best, p.seq, blockIdx.x * int64_t{blockDim.x} + threadIdx.x);
}

// The current device's compute capability as major * 10 + minor (a process keeps one device).
int current_arch() {
  static const int arch = [] {
    int device = 0, major = 0, minor = 0;
    check_cuda(cudaGetDevice(&device), "model/small_linear: the device");
    check_cuda(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device), "model/small_linear: arch");
    check_cuda(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device), "model/small_linear: arch");
    return major * 10 + minor;
  }();
  return arch;
}

}  // namespace

std::string small_linear_supports(int64_t m, int64_t k, DType dtype) {
  if (m < 1 || m > kSmallLinearRows) return "batch " + std::to_string(m) + ": the fused decode step takes 1 to 8";
  if ((k * static_cast<int64_t>(dtype_bytes(dtype))) % 16 != 0) return "rows of W must be whole 16-byte loads";
  return "";
}

void small_linear(const SmallLinear& p, cudaStream_t stream) {
  with_storage(p.dtype, "model/small_linear", [&](auto tag) {
    using T = decltype(tag);
    const auto smem = static_cast<std::size_t>(small_linear_impl::rows_smem_bytes(p.in, p.m, p.k, sizeof(T)));
    static bool opted_in = false;  // per instantiation: its own static
    if (!opted_in) {
      check_cuda(cudaFuncSetAttribute(small_linear_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, 160 * 1024),
                 "model/small_linear: shared memory");
      opted_in = true;
    }
    // A column a warp, up to every SM busy a few times over (the logits' 50257 columns then
    // take several a warp, each block's prologue paid once for them). Launched to start while
    // the kernel before it runs (small_linear_block's kEarly).
    const int64_t blocks = std::min<int64_t>(ceil_div(p.n, kWarps), 132 * 4);
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(static_cast<unsigned>(blocks));
    cfg.blockDim = dim3(kThreads);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = stream;
    cudaLaunchAttribute attr[1];
    cfg.attrs = attr;
    cfg.numAttrs = pdl_attribute(attr[0], current_arch());
    check_cuda(cudaLaunchKernelEx(&cfg, small_linear_kernel<T>, p), "model/small_linear");
  });
  check_launch("model/small_linear");
}

void greedy_finish(const GreedyFinish& p, cudaStream_t stream) {
  greedy_finish_kernel<<<1, 32, 0, stream>>>(p);
  check_launch("model/greedy_finish");
}

}  // namespace attnbench
