#include "kernels/registry.hpp"

#include "kernels/attention/attention.hpp"
#include "kernels/cache_append/cache_append.hpp"
#include "kernels/decode/decode.hpp"
#include "kernels/gemm/gemm.hpp"
#include "kernels/paged/paged.hpp"
#include "kernels/reshape_and_cache/reshape_and_cache.hpp"
#include "kernels/softmax/softmax.hpp"

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
      family("cache_append", cache_append_variants()),
      family("reshape_and_cache", reshape_and_cache_variants()),
  };
}

}  // namespace attnbench
