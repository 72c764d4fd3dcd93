// What every kernel family shares: the device's capabilities, the launch context,
// the variant table entry, CUDA error checks and a few constants and host helpers.
// Host code and device code both include this; it holds no device code, so g++
// compiles it too.
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/common/dtype.hpp"
#include "kernels/common/host_device.hpp"

namespace attnbench {

// log2(e): kernels compute exp(x) as exp2(x * log2(e)), one FFMA and one MUFU.EX2.
constexpr float kLog2e = 1.4426950408889634f;

// gridDim.y and gridDim.z are limited to 65535.
constexpr int64_t kMaxGridYZ = 65535;

ATTNBENCH_HOST_DEVICE constexpr int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Blocks for an elementwise grid-stride loop over n elements: enough to fill an H100's SMs a
// few times over, the loop strides over the rest.
inline unsigned grid_stride_blocks(int64_t n, int threads) {
  const int64_t blocks = ceil_div(n, threads);
  return static_cast<unsigned>(blocks < 1 ? 1 : blocks < 132 * 16 ? blocks : 132 * 16);
}

// cuBLAS's name for a storage type; fp8 has none here (its GEMMs are not cuBLAS's).
inline cudaDataType_t cuda_data_type(DType t) {
  switch (t) {
    case DType::fp16: return CUDA_R_16F;
    case DType::bf16: return CUDA_R_16BF;
    default: return CUDA_R_32F;
  }
}

// Workspace pieces start 256 bytes apart (cudaMalloc's alignment), so each is as aligned as
// its own allocation would be.
inline std::size_t round_up_256(std::size_t n) { return (n + 255) / 256 * 256; }

// 16-byte vector loads, cp.async and bulk copies need 16-byte aligned addresses.
inline bool aligned16(const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; }

// A CUDA or cuBLAS failure. The CLI turns it into exit code 3.
struct CudaError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

inline void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw CudaError(std::string(what) + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}

inline void check_cublas(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw CudaError(std::string(what) + ": cuBLAS status " + std::to_string(static_cast<int>(s)));
}

// Called after every launch: a bad configuration shows up here, not three calls later.
inline void check_launch(const char* kernel) { check_cuda(cudaGetLastError(), kernel); }

struct DeviceCaps {
  int sm_count = 0;
  int cc_major = 0, cc_minor = 0;
  std::size_t smem_per_block_optin = 0;  // bytes a block may ask for after cudaFuncSetAttribute
  std::size_t l2_bytes = 0;
  std::size_t total_memory = 0;  // device memory, for variants that need large scratch
  int arch() const { return cc_major * 10 + cc_minor; }
};

struct LaunchContext {
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;  // bound to `stream`
  const DeviceCaps* caps = nullptr;
  void* workspace = nullptr;  // at least Variant::workspace(params) bytes, 256-byte aligned
};

// One implementation of a family: a rung of its ladder. Each family's variants.cpp holds
// a table of these, baseline first. The calls are std::function so that a variant loaded
// at run time (a user's plugin, app/plugin.cpp) can carry the plugin entry it forwards to;
// attnbench's own rungs are plain functions.
template <class Params>
struct Variant {
  const char* name;  // matches the launch function's name
  const char* note;  // one line for `attnbench list`
  std::function<void(const Params&, const LaunchContext&)> launch;
  // Empty when the variant can run `p` on this device, else the reason it cannot.
  std::function<std::string(const Params& p, const DeviceCaps& caps)> supports;
  // Scratch bytes the launch needs; empty when none.
  std::function<std::size_t(const Params& p)> workspace;
  // Whether the variant means anything for p (empty: always). One that does not (an
  // unfused-RoPE baseline on a point without RoPE) is left out of the point's rows unless a
  // case or -k names it; supports() still says why it would not run.
  std::function<bool(const Params& p)> applies;
  // The plugin file a user's variant came from; null for attnbench's own. A plugin's
  // variant runs beside the built-in ones but is never picked as a default.
  const char* plugin = nullptr;
  // False for a variant whose output may differ bit for bit between runs on the same inputs
  // (floating-point atomics, an order that depends on scheduling): [verify] repeat then reports
  // its spread instead of failing it. True, the default, is a promise repeat holds it to.
  bool deterministic = true;
  // The host microseconds a launch spends before its kernels are queued, where that is large
  // enough to matter (a Python plugin's marshalling and call); empty for everything else.
  std::function<double(const Params& p)> host_overhead_us;
  // What to read in a profiler for this rung, when it is a lesson in one counter (the bank-
  // conflict pair of gemm's smem_tiled); `run --profile` prints it under the row. Null: none.
  const char* profile_note = nullptr;
};

// Variants added to a family's table before it is first built: a test binary's (a
// deliberately faulting or cheating kernel, to prove the harness catches it) and a user's
// plugins (app/plugin.cpp). The shipped binary without plugins has none.
template <class Params>
std::vector<Variant<Params>>& added_variants() {
  static std::vector<Variant<Params>> extra;
  return extra;
}

// Set once the family's table is built: a variant added later would never be seen.
template <class Params>
bool& variant_table_built() {
  static bool built = false;
  return built;
}

template <class Params>
void add_variant(Variant<Params> v) {
  if (variant_table_built<Params>())
    throw std::logic_error(std::string("variant ") + v.name + " added after its table was built");
  added_variants<Params>().push_back(std::move(v));
}

// A family's table with the added variants after its own.
template <class Params>
std::vector<Variant<Params>> with_added_variants(std::vector<Variant<Params>> table) {
  variant_table_built<Params>() = true;
  for (const auto& v : added_variants<Params>()) table.push_back(v);
  return table;
}

// The fastest variant of a table that runs a point, `why(v)` saying why v cannot ("" = it can):
// tables run from the learner's version to the fastest, so the last of the table's own that
// runs. Never a plugin's (it runs only when named), and an option's unfused baseline (a variant
// with `applies`, listed after the kernel it unfuses) only when nothing else runs; null when
// none does. The ops' defaults (PairedTables::fastest) and the ragged separate rung's choice of
// dense kernels.
template <class Params, class Why>
const Variant<Params>* fastest_variant(const std::vector<Variant<Params>>& table, const Why& why) {
  const Variant<Params>* fallback = nullptr;
  for (auto v = table.rbegin(); v != table.rend(); ++v) {
    if (v->plugin || !why(*v).empty()) continue;
    if (!v->applies) return &*v;
    if (!fallback) fallback = &*v;
  }
  return fallback;
}

template <class Params>
const Variant<Params>* find_variant(const std::vector<Variant<Params>>& table, const std::string& name) {
  for (const auto& v : table)
    if (name == v.name) return &v;
  return nullptr;
}

}  // namespace attnbench
