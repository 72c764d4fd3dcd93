// The SM clock while timing, through NVML loaded at run time (dlopen of
// libnvidia-ml.so.1; attnbench never links it, so a machine without it runs as
// before, with no clock column). A sample taken while the SM clock sits below
// 90% of its maximum is flagged: the card was throttling, not the kernel slow.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace attnbench {

class SmClock {
 public:
  // NVML's handle for the CUDA device with this PCI bus id ("0000:3b:00.0", as
  // cudaDeviceGetPCIBusId writes it); inactive when NVML or the device is not there.
  explicit SmClock(const std::string& pci_bus_id);
  ~SmClock();
  SmClock(const SmClock&) = delete;
  SmClock& operator=(const SmClock&) = delete;

  bool active() const { return device_ != nullptr; }
  double max_mhz() const { return max_mhz_; }
  // The SM clock now; 0 when inactive or the read fails.
  double current_mhz() const;

 private:
  void* lib_ = nullptr;
  void* device_ = nullptr;
  double max_mhz_ = 0;
  int (*get_clock_)(void*, int, unsigned*) = nullptr;
  int (*shutdown_)() = nullptr;
};

struct ClockStats {
  int64_t samples = 0;      // samples with a clock reading
  int64_t low_samples = 0;  // of those, below kLowClock of the maximum
  double mean_mhz = 0, max_mhz = 0;
};

constexpr double kLowClock = 0.9;

// Readings of 0 (not read) are left out.
ClockStats summarize_clocks(const std::vector<double>& mhz, double max_mhz);

}  // namespace attnbench
