// What mla's split-KV rungs (2_split_kv.cu, split_kv; 3_split_kv_reg.cu, split_kv_reg) share:
// DeepSeek's dims and FlashMLA's fp8 token, the kernel's arguments, and the host side around the
// kernel (the arguments built from MlaParams and the plan, the launch's configuration, the
// workspace, supports' checks). Each rung's own technique (its shared-memory layout, its S,
// softmax and P V) stays in its file; the host plan is split_plan.hpp, the combine
// common/split_kv.cuh.
// The kernels' prologue (the block's sequence, row group, split and keys, the block-table
// lookups and warp 0's bulk copies) is the same in both rungs but written in each: moved here,
// as an inlined function or a struct, it changed the registers ptxas allocates in every kernel
// of both rungs (tools/sass_compare.sh), and rung 2's SASS is the one verified on an H100.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>
#include <type_traits>

// The device library both rungs' kernels build on (bulk copies, mma.sync, PDL, warp reductions,
// exp2, storage types) and what the host side below needs.
#include "kernels/common/copy.cuh"
#include "kernels/common/dispatch.cuh"
#include "kernels/common/mma.cuh"
#include "kernels/common/pdl.cuh"
#include "kernels/common/reduce.cuh"
#include "kernels/common/softmax_math.cuh"
#include "kernels/common/split_kv.cuh"
#include "kernels/common/storage.cuh"
#include "kernels/mla/rungs.hpp"
#include "kernels/mla/split_plan.hpp"

namespace attnbench::mla_impl {

constexpr int kLatent = 512, kRope = 64, kWidth = kLatent + kRope;
// FlashMLA's fp8 token: 512 e4m3 codes, four fp32 scales (one per 128 codes), 64 bf16 RoPE values.
constexpr int kScaleOff = kLatent, kRopeOff = kLatent + 4 * (kLatent / 128);  // 512, 528
constexpr int kFp8TokenBytes = kRopeOff + 2 * kRope;                           // 656

// The kernel's arguments; the first block of fields is what splitkv's combine and launch_split
// read (P there): heads = the sequence's query rows (s_q · heads), head_dim = latent_dim.
struct MlaSplit {
  int heads = 0, head_dim = kLatent, splits = 1, chunk = 0;
  int window = 0, key_align = 1;  // no window: the combine's window_base is 0
  struct {
    const float* sinks = nullptr;  // MLA has none
  } score;
  const int32_t* context_lens = nullptr;
  void* o = nullptr;
  float* part_o = nullptr;
  float2* part_ml = nullptr;
  // The main kernel's own.
  const void* q = nullptr;
  const uint8_t* cache = nullptr;
  const int32_t* block_tables = nullptr;
  int64_t max_blocks = 1;
  int block_size = 64, s_q = 1, q_heads = 1, groups = 1;
  bool causal = true;
  float scale_log2 = 0;
};

// What launch_split and the workspace read of the host's side (Params there).
struct MlaSplitHost {
  int64_t batch = 1, heads = 1, head_dim = kLatent;
  bool launch_early = false;
};

inline MlaSplitHost host_of(const MlaParams& p) { return {p.batch, p.s_q * p.heads, kLatent, false}; }

// The kernel's arguments for the launch of `plan`.
inline MlaSplit split_args(const MlaParams& p, const SplitPlan& plan) {
  MlaSplit d;
  d.heads = static_cast<int>(p.s_q * p.heads);
  d.splits = static_cast<int>(plan.splits);
  d.chunk = static_cast<int>(plan.chunk);
  d.context_lens = p.context_lens;
  d.o = p.o;
  d.q = p.q;
  d.cache = static_cast<const uint8_t*>(p.cache);
  d.block_tables = p.block_tables;
  d.max_blocks = p.max_blocks_per_seq;
  d.block_size = static_cast<int>(p.block_size);
  d.s_q = static_cast<int>(p.s_q);
  d.q_heads = static_cast<int>(p.heads);
  d.groups = static_cast<int>(plan.groups);
  d.causal = p.causal;
  d.scale_log2 = p.scale * kLog2e;
  return d;
}

// The launch's configuration on a rung whose row classes are kClasses (the largest kMaxRows),
// as f(T{}, C{}, integral_constant<int, kRows>{}).
template <int64_t kMaxRows, int64_t... kClasses, class F>
decltype(auto) with_split_config(const MlaParams& p, const char* name, F&& f) {
  static_assert(kMaxRows == std::max({kClasses...}), "the rung's largest row class");
  return with_16bit(p.dtype, name, [&](auto tag) {
    using T = decltype(tag);
    return with_value<MlaCache::dtype, MlaCache::fp8>(p.cache_format, name, "cache", [&](auto cache) {
      using C = std::conditional_t<decltype(cache)::value == MlaCache::fp8, Fp8, T>;
      return with_value<kClasses...>(
          split_group_rows(p.s_q * p.heads, kMaxRows), name, "row class",
          [&](auto rows) { return f(T{}, C{}, std::integral_constant<int, static_cast<int>(decltype(rows)::value)>{}); });
    });
  });
}

// The partials' workspace of a rung whose largest row class is max_rows.
inline std::size_t split_workspace(const MlaParams& p, int64_t max_rows) {
  const int64_t rows = p.s_q * p.heads, groups = split_groups(rows, max_rows);
  return splitkv::partials_workspace(host_of(p), split_cap(p.batch, groups, p.longest_context));
}

// supports' checks before the configuration's shared memory ("" = all well), on a rung whose
// largest row class is max_rows.
inline std::string split_reason(const MlaParams& p, const DeviceCaps& caps, int64_t max_rows) {
  if (const std::string r = common_reason(p); !r.empty()) return r;
  if (p.dtype != DType::fp16 && p.dtype != DType::bf16)
    return "fp16/bf16 queries only (mma.sync on 16-bit inputs; fp32 runs naive)";
  if (p.latent_dim != kLatent || p.rope_dim != kRope)
    return "latent_dim 512 and rope_dim 64 only (DeepSeek's dims, FlashMLA's: the kernel is specialised to them)";
  if (caps.arch() < 90) return "needs sm_90 (bulk copies through mbarriers)";
  if ((p.q && !aligned16(p.q)) || (p.cache && !aligned16(p.cache)) || (p.o && !aligned16(p.o)))
    return "q, the cache and o must be 16-byte aligned (bulk copies, cp.async)";
  if (p.block_size > INT_MAX) return "block_size must fit in int";
  if (p.longest_context >= (int64_t{1} << 30)) return "contexts must be < 2^30 keys (key indices are int)";
  const int64_t rows = p.s_q * p.heads, groups = split_groups(rows, max_rows);
  if (rows > INT_MAX / 2 || p.batch * groups > INT_MAX) return "batch * s_q * heads must be < 2^30";
  return {};
}

// supports' last check: the configuration's shared memory fits the card's per-block opt-in.
inline std::string smem_reason(const DeviceCaps& caps, int smem) {
  if (caps.smem_per_block_optin < static_cast<std::size_t>(smem))
    return "needs " + std::to_string(smem / 1024) + " KB of shared memory per block";
  return {};
}

}  // namespace attnbench::mla_impl
