// A broken plugin for tests/CMakeLists.txt: it compiles but never declares its variants
// with ATTNBENCH_PLUGIN, so it has no entry point.
#include <attnbench/plugin.h>

cudaError_t launch(const void*, void*, cudaStream_t) { return cudaSuccess; }
