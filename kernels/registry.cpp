#include "kernels/registry.hpp"

#include "kernels/gemm.hpp"
#include "kernels/softmax.hpp"

namespace attnbench {
namespace {

template <class Params>
FamilyInfo family(const char* op, const std::vector<Variant<Params>>& table) {
  FamilyInfo f{op, {}};
  for (const auto& v : table) f.variants.push_back({v.name, v.note});
  return f;
}

}  // namespace

std::vector<FamilyInfo> kernel_families() {
  return {
      family("softmax", softmax_variants()),
      family("gemm", gemm_variants()),
  };
}

}  // namespace attnbench
