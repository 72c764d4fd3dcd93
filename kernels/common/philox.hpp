// Philox-4x32-10 (Salmon, Moraes, Dror and Shaw, "Parallel random numbers: as easy as 1, 2,
// 3", SC 2011; Random123's philox4x32 with 10 rounds): a counter-based generator, four 32-bit
// words out of a 128-bit counter and a 64-bit key, a pure function of the two. Written once for
// g++ and nvcc, so that a kernel and the fp64 reference draw the very same numbers (the sample
// op's one uniform per row). tests/test_sample.cpp checks Random123's known-answer vectors.
#pragma once
#include <cstdint>

#include "kernels/common/host_device.hpp"

namespace attnbench {

struct Philox4 {
  uint32_t v[4];
};

ATTNBENCH_HOST_DEVICE inline Philox4 philox4x32_10(Philox4 ctr, uint32_t key0, uint32_t key1) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;  // the round multipliers
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;  // the key schedule's Weyl steps
  for (int round = 0; round < 10; ++round) {
    if (round > 0) key0 += kW0, key1 += kW1;
    const uint64_t p0 = static_cast<uint64_t>(kM0) * ctr.v[0], p1 = static_cast<uint64_t>(kM1) * ctr.v[2];
    const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    ctr = Philox4{{hi1 ^ ctr.v[1] ^ key0, lo1, hi0 ^ ctr.v[3] ^ key1, lo0}};
  }
  return ctr;
}

// The sample op's uniform of `row` under `seed`: Philox-4x32-10 of counter (row low, row high,
// 0, 0) and key (seed low, seed high); its first word's top 24 bits over 2^24, so u is an
// fp32 value in [0, 1) that float and double hold exactly and both sides read the same.
ATTNBENCH_HOST_DEVICE inline float sample_uniform(uint64_t seed, uint64_t row) {
  const Philox4 r = philox4x32_10(
      Philox4{{static_cast<uint32_t>(row), static_cast<uint32_t>(row >> 32), 0u, 0u}},
      static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
  return static_cast<float>(r.v[0] >> 8) * 0x1.0p-24f;
}

}  // namespace attnbench
