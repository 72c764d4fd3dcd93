// A faulting plugin for tests/plugin_fault.sh: a softmax variant that traps on the case's
// rows = 3 point, after the built-in variants have run there.
#include <attnbench/plugin.h>

namespace {
__global__ void trap_kernel() { __trap(); }

cudaError_t launch(const void* params, void*, cudaStream_t stream) {
  const auto* p = (const attnbench_softmax_params*)params;
  if (p->rows == 3) trap_kernel<<<1, 1, 0, stream>>>();
  return cudaGetLastError();
}

const char* fp32_rows_3(const void* params, const attnbench_device*) {
  const auto* p = (const attnbench_softmax_params*)params;
  return p->rows == 3 ? nullptr : "test plugin: runs (and faults) on rows = 3 only";
}

const attnbench_variant variants[] = {{"plugin_trap", "TEST ONLY: traps (a device fault) on rows = 3",
                                       ATTNBENCH_OP_SOFTMAX, fp32_rows_3, nullptr, launch}};
}  // namespace

ATTNBENCH_PLUGIN(variants)
