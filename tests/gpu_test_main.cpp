// main() of the GPU unit tests (test_scan, test_inputs): without a GPU they report themselves
// skipped (exit 3, CTest's SKIP_RETURN_CODE) instead of failing.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdio>

int main(int argc, char** argv) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::puts("skipped: no GPU");
    return 3;
  }
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
