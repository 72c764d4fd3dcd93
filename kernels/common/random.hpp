// Counter-based random numbers: element i of tensor `stream` under `seed` is a
// pure function of the three, so inputs are reproducible from the seed alone and
// large tensors can be filled in parallel, on the host or on the device (the
// harness draws inputs on the GPU: kernels/harness/inputs.cu).
#pragma once
#include <cmath>
#include <cstdint>

#include "kernels/common/host_device.hpp"

namespace attnbench {

ATTNBENCH_HOST_DEVICE inline uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

ATTNBENCH_HOST_DEVICE inline uint64_t random_bits(uint64_t seed, uint64_t stream, uint64_t i) {
  return splitmix64(splitmix64(seed * 0x100000001b3ull + stream) ^ i);
}

// Uniform in [-1, 1).
ATTNBENCH_HOST_DEVICE inline float random_uniform(uint64_t seed, uint64_t stream, uint64_t i) {
  const double u = static_cast<double>(random_bits(seed, stream, i) >> 11) * 0x1.0p-53;  // [0, 1)
  return static_cast<float>(2.0 * u - 1.0);
}

// Standard normal (Box-Muller on two independent uniforms).
ATTNBENCH_HOST_DEVICE inline float random_normal(uint64_t seed, uint64_t stream, uint64_t i) {
  const uint64_t r1 = random_bits(seed, stream, 2 * i), r2 = random_bits(seed, stream, 2 * i + 1);
  const double u1 = (static_cast<double>(r1 >> 11) + 1.0) * 0x1.0p-53;  // (0, 1], so log is finite
  const double u2 = static_cast<double>(r2 >> 11) * 0x1.0p-53;
  return static_cast<float>(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

}  // namespace attnbench
