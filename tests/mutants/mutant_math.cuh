// What the mutant suite's kernels share: storage-type conversions, picking a kernel's
// storage type from the params' dtype, and warp reductions. Kept beside the plugins (not
// shared with kernels/plugin/examples) so that the plugin cache key covers it: attnbench
// hashes a plugin's quoted includes from beside it.
#pragma once
#include <attnbench/plugin.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <type_traits>

namespace mutant {

__device__ inline float to_float(float x) { return x; }
__device__ inline float to_float(__half x) { return __half2float(x); }
__device__ inline float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ inline float to_float(__nv_fp8_e4m3 x) { return float(x); }

template <class T>
__device__ T from_float(float x);
template <>
__device__ inline float from_float<float>(float x) {
  return x;
}
template <>
__device__ inline __half from_float<__half>(float x) {
  return __float2half_rn(x);
}
template <>
__device__ inline __nv_bfloat16 from_float<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

// `acc + x` rounded to the accumulator's type: exact fp32 for a float accumulator, a
// rounding per step for __half and __nv_bfloat16 (what a reduced-precision mutant does).
template <class Acc>
__device__ inline Acc add_to(Acc acc, float x) {
  return from_float<Acc>(to_float(acc) + x);
}

// Calls f with a value of the storage type `dtype` names, so a launcher can pick its
// kernel's template argument: by_dtype(p.dtype, [&](auto t) { return go<decltype(t)>(); }).
template <class F>
cudaError_t by_dtype(int32_t dtype, F f) {
  switch (dtype) {
    case ATTNBENCH_FP16:
      return f(__half());
    case ATTNBENCH_BF16:
      return f(__nv_bfloat16());
    default:
      return f(float());
  }
}

__device__ inline float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ inline float warp_max(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// The score options the mutant kernels leave to attnbench's own: why not, or null.
inline const char* plain_scores_only(const attnbench_score& score, int64_t window, const attnbench_rope& rope,
                                     bool takes_sinks = false) {
  if (score.alibi) return "mutant suite kernel: no ALiBi";
  if (score.sinks && !takes_sinks) return "mutant suite kernel: no attention sinks";
  if (score.softcap > 0.f) return "mutant suite kernel: no soft-capping";
  if (window > 0) return "mutant suite kernel: no window";
  if (rope.style != 0) return "mutant suite kernel: no RoPE";
  return nullptr;
}

// What the decode and paged kernels refuse alike (a warp keeps head_dim / 32 dims a lane, the
// sequences are gridDim.y).
template <class Params>
const char* one_query_refuses(const Params& p, int dims_per_lane) {
  if (const char* why = plain_scores_only(p.score, p.window, p.rope)) return why;
  if (p.head_dim > 32 * dims_per_lane) return "head_dim must be at most 256";
  if (p.batch > 65535) return "batch must be at most 65535 (gridDim.y)";
  return nullptr;
}

}  // namespace mutant

// One row of a file's variant table: a mutant of kOp (the file's op) with the file's
// supports() and launch<Bug>.
#define MUTANT(name, bug, note) {name, "MUTANT: " note, kOp, supports, nullptr, launch<Bug::bug>}
