// A broken plugin for tests/CMakeLists.txt: it claims an ABI version attnbench does not
// take, as a plugin built against another attnbench's header would.
#include <attnbench/plugin.h>

namespace {
cudaError_t launch(const void*, void*, cudaStream_t) { return cudaSuccess; }
const attnbench_variant variants[] = {{"wrong_abi", "", ATTNBENCH_OP_SOFTMAX, nullptr, nullptr, launch}};
}  // namespace

extern "C" __attribute__((visibility("default"))) const attnbench_plugin* attnbench_plugin_entry(void) {
  static const attnbench_plugin plugin = {99, 1, variants};
  return &plugin;
}
