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
  // Why the clocks are where they are now: NVML's clocks-event (throttle) reason bits; 0
  // when inactive, when the read fails, or when nothing holds them down.
  uint64_t reasons() const;

 private:
  void* lib_ = nullptr;
  void* device_ = nullptr;
  double max_mhz_ = 0;
  int (*get_clock_)(void*, int, unsigned*) = nullptr;
  int (*get_reasons_)(void*, unsigned long long*) = nullptr;
  int (*shutdown_)() = nullptr;
};

struct ClockStats {
  int64_t samples = 0;      // samples with a clock reading
  int64_t low_samples = 0;  // of those, below kLowClock of the maximum
  double mean_mhz = 0, max_mhz = 0;
};

constexpr double kLowClock = 0.9;

// NVML's reason bits as words, e.g. {"sw_power_cap", "hw_thermal_slowdown"}; the idle and
// application-clock bits, which hold nothing down while a kernel runs, are left out.
std::vector<std::string> clock_reason_names(uint64_t reasons);

// Readings of 0 (not read) are left out.
ClockStats summarize_clocks(const std::vector<double>& mhz, double max_mhz);

}  // namespace attnbench
