// Programmatic dependent launch (sm_90): a kernel launched with launch_pdl may start while
// the kernel before it in the stream still runs, once every block of that one has called
// allow_dependents() (or exited). Until wait_for_primary() returns it may only read what the
// earlier kernels do not write (weights); after it, everything they wrote is visible.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>

#include "kernels/common/kernels.hpp"

namespace attnbench {

__device__ __forceinline__ void allow_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void wait_for_primary() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

// kernel<<<grid, block, smem, stream>>>(args...), as a programmatic dependent launch when
// `early` and the card has it (sm_90; an ordinary launch otherwise).
template <class Kernel, class... Args>
void launch_pdl(Kernel kernel, dim3 grid, dim3 block, std::size_t smem, cudaStream_t stream, bool early, int arch,
                const char* name, const Args&... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = early && arch >= 90 ? 1 : 0;
  check_cuda(cudaLaunchKernelEx(&cfg, kernel, args...), name);
}

}  // namespace attnbench
