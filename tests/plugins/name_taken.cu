// A broken plugin for tests/CMakeLists.txt: its variant takes the name of one of
// attnbench's own softmax variants.
#include <attnbench/plugin.h>

namespace {
cudaError_t launch(const void*, void*, cudaStream_t) { return cudaSuccess; }
const attnbench_variant variants[] = {{"warp_online", "", ATTNBENCH_OP_SOFTMAX, nullptr, nullptr, launch}};
}  // namespace

ATTNBENCH_PLUGIN(variants)
