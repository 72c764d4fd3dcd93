#include "app/build_info.hpp"

#include <cuda_runtime_api.h>

#include <nlohmann/json.hpp>

#include "attnbench_commit.hpp"  // generated at build time by app/build_info.cmake

namespace attnbench {
namespace {

std::string cuda_version(int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); }

// The runtime library this process loaded (it needs no GPU); "" where it cannot say.
std::string loaded_runtime() {
  int v = 0;
  return cudaRuntimeGetVersion(&v) == cudaSuccess && v > 0 ? cuda_version(v) : "";
}

}  // namespace

nlohmann::json build_identity() {
  return {{"version", ATTNBENCH_VERSION},
          {"commit", ATTNBENCH_COMMIT},
          {"cuda_runtime_built", cuda_version(CUDART_VERSION)},
          {"cuda_runtime", loaded_runtime()},
          {"architectures", ATTNBENCH_CUDA_ARCHITECTURES}};
}

std::string version_text() {
  const std::string loaded = loaded_runtime();
  return std::string("attnbench ") + ATTNBENCH_VERSION + " (commit " + ATTNBENCH_COMMIT + ", CUDA runtime " +
         cuda_version(CUDART_VERSION) + " built" + (loaded.empty() ? "" : " / " + loaded + " loaded") +
         ", architectures " + ATTNBENCH_CUDA_ARCHITECTURES + ")";
}

}  // namespace attnbench
