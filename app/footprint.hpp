// What a variant's launch asks of the card, read without running it: the launch is
// captured into a CUDA graph (stream capture enqueues nothing), and each kernel node gives
// its grid, block and dynamic shared memory; the kernel's registers, static shared memory
// and local memory come from its attributes, and its resident blocks per SM from the CUDA
// occupancy calculator. Kernels launched by libraries (cuBLAS) are read the same way.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <cuda_runtime.h>

namespace attnbench {

struct KernelFootprint {
  std::string name;          // demangled, without its template arguments and parameters
  int64_t blocks = 0;        // the grid
  int threads = 0;           // per block
  int registers = -1;        // per thread; -1 where the attributes could not be read
  int64_t static_smem = -1;  // bytes per block, -1 as above
  int64_t dynamic_smem = 0;  // bytes per block, as launched
  int64_t local_bytes = -1;  // per thread (spills and stack), -1 as above
  int blocks_per_sm = -1;    // resident at once, from the occupancy calculator; -1 unknown
  // The grid over what the card holds at once (blocks_per_sm times its SMs); -1 unknown.
  double waves(int sm_count) const {
    return blocks_per_sm > 0 && sm_count > 0 ? static_cast<double>(blocks) / (blocks_per_sm * sm_count) : -1;
  }
  int64_t smem() const { return static_smem < 0 ? -1 : static_smem + dynamic_smem; }
};

struct Footprint {
  std::vector<KernelFootprint> kernels;  // in the captured graph's order: a stream's launch order
  int sm_count = 0;                      // the card's, for the waves
  std::string error;                     // why the launch could not be captured; empty when it was
};

// Captures `launch` (which enqueues on `stream`) and reads its kernels. A launch that
// synchronises, or otherwise cannot be captured, gives a Footprint with `error` set.
Footprint capture_footprint(cudaStream_t stream, int sm_count, const std::function<void()>& launch);

// "flash_mma_kernel<(int)128, ...>(Params)" -> "flash_mma_kernel"; a C name stays as it is.
std::string short_kernel_name(const std::string& demangled);

}  // namespace attnbench
