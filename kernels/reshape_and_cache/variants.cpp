// The reshape_and_cache ladder: 1_scatter.cu (vLLM's thread order), 2_token_major.cu (threads
// over tokens first: whole-sector stores for tokens that fill a block in order).
#include <string>
#include <vector>

#include "kernels/paged/paged.hpp"
#include "kernels/reshape_and_cache/reshape_and_cache.hpp"
#include "kernels/reshape_and_cache/rungs.hpp"

namespace attnbench {
namespace reshape_and_cache_impl {

namespace {

// What both rungs refuse (they throw the same when launched anyway).
std::string supports(const ReshapeAndCacheParams& p, const DeviceCaps&) {
  if (p.kv_dtype != p.dtype && p.kv_dtype != DType::fp8_e4m3) return "kv_dtype must be dtype or fp8_e4m3";
  if (p.dtype == DType::fp8_e4m3) return "dtype must be fp32, fp16 or bf16";
  const int64_t x = paged_x(p.kv_dtype);
  if (p.head_dim < x || p.head_dim % x != 0 || p.block_size < 1 || p.kv_heads < 1)
    return "head_dim must be a multiple of x = " + std::to_string(x) + ", block_size and kv_heads >= 1";
  return {};
}

}  // namespace
}  // namespace reshape_and_cache_impl

const std::vector<Variant<ReshapeAndCacheParams>>& reshape_and_cache_variants() {
  using namespace reshape_and_cache_impl;
  static const std::vector<Variant<ReshapeAndCacheParams>> table = with_added_variants<ReshapeAndCacheParams>({
      {"scatter", "token i's K and V rows to slot slot_mapping[i] in vLLM's layouts, fp8 quantised",
       scatter, supports, nullptr},
      {"token_major", "as scatter, neighbouring threads on neighbouring tokens: a prompt's blocks written in whole sectors",
       token_major, supports, nullptr},
  });
  return table;
}

void reshape_and_cache(const ReshapeAndCacheParams& p, const LaunchContext& ctx) {
  reshape_and_cache_variants().front().launch(p, ctx);
}

}  // namespace attnbench
