// PLACEHOLDER while the paged kernels are written (issue 5): no variants yet.
#include "kernels/paged.hpp"

namespace attnbench {

void reshape_and_cache(const ReshapeAndCacheParams&, const LaunchContext&) {
  throw CudaError("paged: reshape_and_cache is not built yet");
}

const std::vector<Variant<PagedParams>>& paged_variants() {
  static const std::vector<Variant<PagedParams>> table = {};
  return table;
}

}  // namespace attnbench
