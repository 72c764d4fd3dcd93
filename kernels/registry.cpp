#include "kernels/registry.hpp"

#include "kernels/attention.hpp"
#include "kernels/decode.hpp"
#include "kernels/gemm.hpp"
#include "kernels/paged.hpp"
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
      family("attention", attention_variants()),
      family("decode", decode_variants()),
      family("paged", paged_variants()),
  };
}

}  // namespace attnbench
