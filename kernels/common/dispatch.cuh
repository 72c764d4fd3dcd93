// Host-side dispatch from run-time parameters to kernel instantiations: the storage types of
// a DType, the head_dim class a kernel is compiled for, a flag, and one of a few values (an
// enum, a small integer). One idiom everywhere: a visitor f that receives the choice as a type
// (T{}, or std::integral_constant), so that `decltype(arg)::value` names the instantiation and
// a choice no kernel is built for throws, saying so, instead of falling through a switch.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include "kernels/common/dtype.hpp"
#include "kernels/common/storage.cuh"

namespace attnbench {

// Returns f(T{}) with the storage type T of dtype (fp32, fp16 or bf16); fp8 has no kernel of
// its own there: "<name>: no kernel for dtype fp8_e4m3".
template <class F>
decltype(auto) with_storage(DType dtype, const char* name, F&& f) {
  switch (dtype) {
    case DType::fp32:
      return f(float{});
    case DType::fp16:
      return f(__half{});
    case DType::bf16:
      return f(__nv_bfloat16{});
    case DType::fp8_e4m3:
      break;
  }
  throw std::invalid_argument(std::string(name) + ": no kernel for dtype " + dtype_name(dtype));
}

// Returns f(T{}) with the 16-bit storage type T of dtype (fp16 or bf16), what the tensor-core
// kernels take; any other dtype: "<name>: no <dtype> path".
template <class F>
decltype(auto) with_16bit(DType dtype, const char* name, F&& f) {
  if (dtype == DType::fp16) return f(__half{});
  if (dtype == DType::bf16) return f(__nv_bfloat16{});
  throw std::invalid_argument(std::string(name) + ": no " + dtype_name(dtype) + " path");
}

// Returns f(T{}, C{}) with the storage type T of dtype and C of a cache of kv_dtype: T, or Fp8.
template <class F>
decltype(auto) with_types(DType dtype, DType kv_dtype, const char* name, F&& f) {
  return with_storage(dtype, name, [&](auto tag) {
    using T = decltype(tag);
    if (kv_dtype == DType::fp8_e4m3) return f(T{}, Fp8{});
    return f(T{}, T{});
  });
}

// Returns f(std::integral_constant<int, D>{}) for the smallest head_dim class D >= head_dim
// among kClasses (ascending), the last one when none is: a head_dim below its class runs
// zero-filled in the class kernel.
template <int kFirst, int... kRest, class F>
decltype(auto) with_head_dim_class(int64_t head_dim, F&& f) {
  if constexpr (sizeof...(kRest) == 0) {
    return f(std::integral_constant<int, kFirst>{});
  } else {
    if (head_dim <= kFirst) return f(std::integral_constant<int, kFirst>{});
    return with_head_dim_class<kRest...>(head_dim, std::forward<F>(f));
  }
}

// Returns f(std::true_type{}) or f(std::false_type{}): a run-time flag as a template argument.
template <class F>
decltype(auto) with_bool(bool flag, F&& f) {
  if (flag) return f(std::true_type{});
  return f(std::false_type{});
}

// Returns f(std::integral_constant<decltype(V), V>{}) for the one of kValues equal to value
// (integers or enumerators, e.g. GemmLayout::nt, GemmLayout::nn); any other value: "<name>: no
// kernel for <what> <value>".
template <auto kFirst, auto... kRest, class V, class F>
decltype(auto) with_value(V value, const char* name, const char* what, F&& f) {
  if (value == kFirst) return f(std::integral_constant<decltype(kFirst), kFirst>{});
  if constexpr (sizeof...(kRest) == 0) {
    throw std::invalid_argument(std::string(name) + ": no kernel for " + what + " " +
                                std::to_string(static_cast<long long>(value)));
  } else {
    return with_value<kRest...>(value, name, what, std::forward<F>(f));
  }
}

}  // namespace attnbench
