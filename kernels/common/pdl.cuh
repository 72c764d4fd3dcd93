// Programmatic dependent launch (sm_90): a kernel launched with pdl_attribute may start while
// the kernel before it in the stream still runs, once every block of that one has called
// allow_dependents() (or exited). Until wait_for_primary() returns it may only read what the
// earlier kernels do not write (weights); after it, everything they wrote is visible.
#pragma once
#include <cuda_runtime.h>

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

// The launch attribute that lets a kernel start early; returns how many attributes to pass
// (0 below sm_90, where the launch is an ordinary one).
inline unsigned pdl_attribute(cudaLaunchAttribute& attr, int arch) {
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  return arch >= 90 ? 1u : 0u;
}

}  // namespace attnbench
