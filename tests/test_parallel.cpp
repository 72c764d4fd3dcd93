// parallel_for on the host pool: every index runs exactly once, whatever the nesting or the
// number of callers at once; the first exception reaches the caller, and the loop still ends.
#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <thread>
#include <vector>

#include "reference/parallel.hpp"

namespace attnbench {
namespace {

constexpr double kBig = 1e9;  // work past kParallelWork: the pool takes part

TEST(ParallelFor, EveryIndexOnce) {
  for (int64_t n : {0, 1, 2, 7, 1000}) {
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    parallel_for(n, kBig, [&](int64_t i) { ++hits[static_cast<size_t>(i)]; });
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(hits[static_cast<size_t>(i)].load(), 1) << "n " << n << ", index " << i;
  }
}

TEST(ParallelFor, NestedLoopsFinish) {
  std::atomic<int64_t> sum{0};
  parallel_for(16, kBig, [&](int64_t i) {
    parallel_for(64, kBig, [&](int64_t j) { sum += i * 64 + j; });
  });
  EXPECT_EQ(sum.load(), 1024 * 1023 / 2);
}

TEST(ParallelFor, TwoCallersAtOnce) {
  std::atomic<int64_t> a{0}, b{0};
  std::thread other([&] {
    for (int r = 0; r < 50; ++r) parallel_for(100, kBig, [&](int64_t) { ++a; });
  });
  for (int r = 0; r < 50; ++r) parallel_for(100, kBig, [&](int64_t) { ++b; });
  other.join();
  EXPECT_EQ(a.load(), 5000);
  EXPECT_EQ(b.load(), 5000);
}

TEST(ParallelFor, FirstExceptionReachesTheCaller) {
  std::atomic<int64_t> ran{0};
  EXPECT_THROW(parallel_for(1000, kBig,
                            [&](int64_t i) {
                              ++ran;
                              if (i == 10) throw std::runtime_error("ten");
                            }),
               std::runtime_error);
  EXPECT_LE(ran.load(), 1000);
  // The pool still serves loops afterwards.
  std::atomic<int64_t> after{0};
  parallel_for(100, kBig, [&](int64_t) { ++after; });
  EXPECT_EQ(after.load(), 100);
}

}  // namespace
}  // namespace attnbench
