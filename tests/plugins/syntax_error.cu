// A broken plugin for tests/CMakeLists.txt: nvcc must reject it, and attnbench must show
// nvcc's message with the file and line and exit 2.
#include <attnbench/plugin.h>

cudaError_t launch(const void*, void*, cudaStream_t) { return cudaSuccess }
