// A broken plugin for tests/CMakeLists.txt: it calls a function no library defines, so
// loading it fails, and attnbench must name the missing symbol.
#include <attnbench/plugin.h>

extern "C" cudaError_t helper_that_is_nowhere(const void* params, cudaStream_t stream);

namespace {
cudaError_t launch(const void* params, void*, cudaStream_t stream) { return helper_that_is_nowhere(params, stream); }
const attnbench_variant variants[] = {{"undefined_symbol", "", ATTNBENCH_OP_SOFTMAX, nullptr, nullptr, launch}};
}  // namespace

ATTNBENCH_PLUGIN(variants)
