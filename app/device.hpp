// The GPU: opening it, device buffers, the stream and cuBLAS handle every launch
// uses, the L2 flush, and the card's measured ceilings.
#pragma once
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "app/clocks.hpp"

#include "kernels/common/kernels.hpp"

namespace attnbench {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* get() const { return ptr_; }
  std::size_t bytes() const { return bytes_; }
  void upload(const void* host, std::size_t bytes);
  void download(void* host, std::size_t bytes) const;

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

struct DeviceInfo {
  int index = 0;
  std::string name;
  DeviceCaps caps;
  std::size_t total_memory = 0;
  int driver_version = 0, runtime_version = 0;  // as 13000 = 13.0
  int memory_bus_bits = 0;
  std::string pci_bus_id;
  double sm_clock_max_mhz = 0;  // NVML's maximum SM clock, else the CUDA attribute's
  bool nvml = false;            // the SM clock can be read while timing
};

std::string cuda_version_string(int v);  // 13000 -> "13.0"

// The card's measured ceilings; the % column of every report divides by these.
struct Ceilings {
  double copy_gbps = 0;   // device-to-device copy, bytes read + written
  double read_gbps = 0;   // streaming read
  double write_gbps = 0;  // streaming write
  double fp32_tflops = 0, fp16_tflops = 0, bf16_tflops = 0;  // cuBLAS dense GEMM, 8192^3
  double tf32_tflops = 0;           // cuBLAS, fp32 data through TF32 tensor cores
  double mma_sync_bf16_tflops = 0;  // mma.sync from registers only; 0 = not measured (before sm_80)
  double wgmma_bf16_tflops = 0;     // wgmma, B from a fixed shared tile; 0 = not measured (needs sm_90a)
  double fp8_tflops = 0;            // cuBLASLt e4m3 GEMM, 8192^3; 0 = not measured (before sm_89)
  std::string source;     // "measured" or the cache file it came from
};

// What NVIDIA's datasheet promises for a card (dense, no sparsity), beside the
// measured ceilings: how far the card, not the kernel, is from the brochure.
struct Datasheet {
  std::string card;  // the datasheet's name for it
  double hbm_gbps = 0, fp32_tflops = 0, tf32_tflops = 0, fp16_tflops = 0, bf16_tflops = 0;
};
// By the CUDA device name ("NVIDIA H100 80GB HBM3", "NVIDIA H200", ...); none for other cards.
std::optional<Datasheet> datasheet_for(const std::string& device_name);

// Where attnbench keeps what it can make again: $XDG_CACHE_HOME/attnbench, else
// ~/.cache/attnbench (the ceilings, compiled plugins).
std::filesystem::path cache_dir();

class Gpu {
 public:
  // Opens device `index`; throws NoDevice (exit 3) when there is no usable GPU.
  explicit Gpu(int index);
  ~Gpu();
  Gpu(const Gpu&) = delete;
  Gpu& operator=(const Gpu&) = delete;

  const DeviceInfo& info() const { return info_; }
  cudaStream_t stream() const { return stream_; }
  LaunchContext context(void* workspace) const { return {stream_, cublas_, &info_.caps, workspace}; }
  std::size_t free_memory() const;
  // Evicts L2 before a cold sample; enqueued on the stream before the start event.
  //   read:  loads over a buffer twice the L2: dirty lines are written back during the
  //          flush, and the L2 is left holding clean lines (the default);
  //   write: zeroes that buffer, as Triton's do_bench (and so peers.py) does: the L2 is left
  //          full of dirty lines whose write-back lands in the timed kernel (17-36 us on an
  //          H200's decode shapes). For like-for-like ratios against such tools.
  void flush_l2();
  void set_flush_writes(bool writes) { flush_writes_ = writes; }
  void synchronize() const;
  // No variant may time inside a persisting-L2 carve-out that an earlier one set up:
  // the stream's access-policy window cleared, persisting lines reset, the carve-out 0.
  void reset_persisting_l2();
  const SmClock& clock() const { return *clock_; }
  // Measured once per card and driver, then read from the user's cache directory.
  const Ceilings& ceilings(bool remeasure = false);

 private:
  Ceilings measure_ceilings();

  DeviceInfo info_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  DeviceBuffer flush_, flush_sink_;
  bool flush_writes_ = false;
  std::unique_ptr<SmClock> clock_;
  Ceilings ceilings_;
  bool have_ceilings_ = false;
};

// Throws NoDevice unless a CUDA device can be used. The one line it carries is
// what the CLI prints.
int device_count_or_throw();

}  // namespace attnbench
