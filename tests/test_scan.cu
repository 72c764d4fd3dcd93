// The harness's device checks (kernels/harness/scan.cu) against the host's decoding: the
// NaN/Inf count of every bit pattern of each dtype, and the row gather. GPU test: exits 3
// (skipped) without a device.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <numeric>
#include <random>
#include <vector>

#include "app/numeric.hpp"
#include "kernels/harness/scan.hpp"

namespace attnbench {
namespace {

template <class T>
T* device_copy(const std::vector<T>& host) {
  T* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, host.size() * sizeof(T) + 1), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  return p;
}

// Every bit pattern of the dtype (all 2^16 for the 16-bit types), plus seeded random fp32
// words, repeated so the count passes one grid's worth of threads.
std::vector<uint8_t> every_pattern(DType t) {
  std::vector<uint8_t> bytes;
  const std::size_t e = dtype_bytes(t);
  if (e == 4) {
    std::mt19937 gen(5);
    for (int i = 0; i < 1 << 20; ++i) {
      uint32_t u = gen();
      if (i % 7 == 0) u |= 0x7f800000u;  // plenty of NaN and Inf
      bytes.insert(bytes.end(), reinterpret_cast<uint8_t*>(&u), reinterpret_cast<uint8_t*>(&u) + 4);
    }
    return bytes;
  }
  for (int rep = 0; rep < 20; ++rep)
    for (uint32_t w = 0; w < (1u << (8 * e)); ++w)
      bytes.insert(bytes.end(), reinterpret_cast<uint8_t*>(&w), reinterpret_cast<uint8_t*>(&w) + e);
  return bytes;
}

TEST(Scan, CountsWhatTheHostDecodesAsNonFinite) {
  for (DType t : {DType::fp32, DType::fp16, DType::bf16, DType::fp8_e4m3}) {
    const std::vector<uint8_t> bytes = every_pattern(t);
    const int64_t n = static_cast<int64_t>(bytes.size() / dtype_bytes(t));
    unsigned long long want = 0;
    for (int64_t i = 0; i < n; ++i) want += !std::isfinite(decode_element(t, bytes.data(), i));
    ASSERT_GT(want, 0u) << dtype_name(t);
    uint8_t* buf = device_copy(bytes);
    unsigned long long* count = nullptr;
    ASSERT_EQ(cudaMalloc(&count, 8), cudaSuccess);
    ASSERT_EQ(cudaMemset(count, 0, 8), cudaSuccess);
    launch_count_nonfinite(buf, n, t, count, nullptr);
    unsigned long long got = 0;
    ASSERT_EQ(cudaMemcpy(&got, count, 8, cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(got, want) << dtype_name(t) << " over " << n << " elements";
    cudaFree(buf);
    cudaFree(count);
  }
}

TEST(Scan, GathersTheRowsAskedForInOrder) {
  const int64_t rows = 1000, row_bytes = 6 * 37;  // odd sizes: no alignment assumed
  std::vector<uint8_t> src(static_cast<size_t>(rows * row_bytes));
  std::iota(src.begin(), src.end(), 0);
  const std::vector<int64_t> pick = {999, 0, 17, 17, 500, 1};
  uint8_t* d_src = device_copy(src);
  int64_t* d_pick = device_copy(pick);
  uint8_t* d_dst = nullptr;
  ASSERT_EQ(cudaMalloc(&d_dst, pick.size() * row_bytes), cudaSuccess);
  launch_gather_rows(d_src, row_bytes, d_pick, static_cast<int64_t>(pick.size()), d_dst, nullptr);
  std::vector<uint8_t> got(pick.size() * row_bytes);
  ASSERT_EQ(cudaMemcpy(got.data(), d_dst, got.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  for (size_t r = 0; r < pick.size(); ++r)
    for (int64_t i = 0; i < row_bytes; ++i)
      ASSERT_EQ(got[r * row_bytes + i], src[pick[r] * row_bytes + i]) << "row " << r << " byte " << i;
  cudaFree(d_src);
  cudaFree(d_pick);
  cudaFree(d_dst);
}

}  // namespace
}  // namespace attnbench

// main: tests/gpu_test_main.cpp (exit 3, skipped, without a GPU).
