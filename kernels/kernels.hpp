// What every kernel family shares: the device's capabilities, the launch context
// and the variant table entry. Host code and device code both include this; it
// holds no device code, so g++ compiles it too.
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

#include "dtype.hpp"

namespace attnbench {

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
  void* workspace = nullptr;        // at least Variant::workspace(params) bytes, 256-byte aligned
};

// One implementation of a family. Each family's .cu ends with a table of these.
template <class Params>
struct Variant {
  const char* name;  // matches the launch function's name
  const char* note;  // one line for `attnbench list`
  void (*launch)(const Params&, const LaunchContext&);
  // Empty when the variant can run `p` on this device, else the reason it cannot.
  std::string (*supports)(const Params& p, const DeviceCaps& caps);
  // Scratch bytes the launch needs; nullptr when none.
  std::size_t (*workspace)(const Params& p) = nullptr;
};

template <class Params>
const Variant<Params>* find_variant(const std::vector<Variant<Params>>& table, const std::string& name) {
  for (const auto& v : table)
    if (name == v.name) return &v;
  return nullptr;
}

}  // namespace attnbench
