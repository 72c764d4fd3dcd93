// Storage types. Plain C++: included by host code (.cpp) and device code (.cu).
#pragma once
#include <cstddef>
#include <cstdint>

namespace attnbench {

enum class DType { fp32, fp16, bf16, fp8_e4m3 };

inline const char* dtype_name(DType t) {
  switch (t) {
    case DType::fp32: return "fp32";
    case DType::fp16: return "fp16";
    case DType::bf16: return "bf16";
    case DType::fp8_e4m3: return "fp8_e4m3";
  }
  return "?";
}

inline std::size_t dtype_bytes(DType t) {
  switch (t) {
    case DType::fp32: return 4;
    case DType::fp16: return 2;
    case DType::bf16: return 2;
    case DType::fp8_e4m3: return 1;
  }
  return 0;
}

}  // namespace attnbench
