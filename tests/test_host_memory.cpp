// The host block cache behind tensors' host arrays: large blocks come back for reuse,
// small ones never enter it, and a block is not handed to a request far smaller.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "app/host_memory.hpp"

namespace attnbench {
namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;

TEST(HostMemory, AReleasedLargeBlockIsReusedForTheSameSize) {
  const std::size_t before = host_cached_bytes();
  void* a = host_allocate(40 * kMiB + 3);
  std::memset(a, 1, 40 * kMiB + 3);  // all of it is writable
  host_release(a, 40 * kMiB + 3);
  EXPECT_GE(host_cached_bytes(), before + 40 * kMiB);
  void* b = host_allocate(40 * kMiB);
  EXPECT_EQ(b, a);
  EXPECT_EQ(host_cached_bytes(), before);
  host_release(b, 40 * kMiB);
}

TEST(HostMemory, ABlockIsNotGivenToARequestLessThanHalfItsSize) {
  void* big = host_allocate(64 * kMiB);
  host_release(big, 64 * kMiB);
  void* small = host_allocate(16 * kMiB);
  EXPECT_NE(small, big);
  host_release(small, 16 * kMiB);
}

TEST(HostMemory, SmallAllocationsStayOutOfTheCache) {
  const std::size_t before = host_cached_bytes();
  void* p = host_allocate(kLargeBlock - 1);
  host_release(p, kLargeBlock - 1);
  EXPECT_EQ(host_cached_bytes(), before);
}

TEST(HostMemory, VectorsOnTheAllocatorGrowAndKeepTheirValues) {
  std::vector<float, HostAllocator<float>> v;
  v.resize(3 * kMiB);  // 12 MiB: from the cache
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 1000);
  v.resize(5 * kMiB);
  for (std::size_t i = 0; i < 3 * kMiB; ++i) ASSERT_EQ(v[i], static_cast<float>(i % 1000)) << i;
  std::vector<float, HostAllocator<float>> w(v.begin(), v.begin() + 10);
  EXPECT_EQ(w[9], 9.f);
}

TEST(HostMemory, HostBytesGoBackToTheCache) {
  void* seen = nullptr;
  std::size_t held = 0;
  {
    HostBytes b = host_bytes(8 * kMiB);
    seen = b.get();
    b[8 * kMiB - 1] = 7;
    held = host_cached_bytes();
  }
  EXPECT_GE(host_cached_bytes(), held + 8 * kMiB);
  HostBytes again = host_bytes(8 * kMiB);
  EXPECT_EQ(again.get(), seen);
}

}  // namespace
}  // namespace attnbench
