// Size arithmetic that cannot overflow silently. Every size an op computes from a
// user's numbers (element counts, byte sizes, block counts, sums of lengths) goes
// through these: an overflow is an input error naming what was being computed, never
// a wrapped value that a later check would wave through.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <string>

#include "app/errors.hpp"

namespace attnbench {

// Kernels index tensors with 32-bit ints: no dimension and no tensor may hold more
// elements than this.
constexpr int64_t kMaxIndex = INT32_MAX;

// Thrown as an InputError: "<what> overflows 64-bit arithmetic".
[[noreturn]] void overflow(const std::string& what);

// For int64_t and uint64_t alike; both operands of one type, so nothing converts silently.
template <class T>
T checked_mul(T a, T b, const std::string& what) {
  T r = 0;
  if (__builtin_mul_overflow(a, b, &r)) overflow(what);
  return r;
}

template <class T>
T checked_add(T a, T b, const std::string& what) {
  T r = 0;
  if (__builtin_add_overflow(a, b, &r)) overflow(what);
  return r;
}

// The product of `factors` (all >= 0).
int64_t checked_product(std::initializer_list<int64_t> factors, const std::string& what);

}  // namespace attnbench
