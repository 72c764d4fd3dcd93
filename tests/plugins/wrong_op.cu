// A broken plugin for tests/CMakeLists.txt: its variant names an op number that takes no
// plugins.
#include <attnbench/plugin.h>

namespace {
cudaError_t launch(const void*, void*, cudaStream_t) { return cudaSuccess; }
const attnbench_variant variants[] = {{"wrong_op", "", 42, nullptr, nullptr, launch}};
}  // namespace

ATTNBENCH_PLUGIN(variants)
