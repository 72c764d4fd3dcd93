#include "app/clocks.hpp"

#include <dlfcn.h>

namespace attnbench {
namespace {

// The few NVML entry points used, declared here so that no NVML header or library
// is needed to build: nvmlReturn_t is an int (0 = success), nvmlDevice_t a pointer.
constexpr int kNvmlSuccess = 0, kNvmlClockSm = 1;
using InitFn = int (*)();
using HandleFn = int (*)(const char*, void**);
using ClockFn = int (*)(void*, int, unsigned*);

template <class Fn>
Fn symbol(void* lib, const char* name) {
  return reinterpret_cast<Fn>(dlsym(lib, name));
}

}  // namespace

SmClock::SmClock(const std::string& pci_bus_id) {
  lib_ = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib_) return;
  const auto init = symbol<InitFn>(lib_, "nvmlInit_v2");
  const auto handle = symbol<HandleFn>(lib_, "nvmlDeviceGetHandleByPciBusId_v2");
  const auto max_clock = symbol<ClockFn>(lib_, "nvmlDeviceGetMaxClockInfo");
  get_clock_ = symbol<ClockFn>(lib_, "nvmlDeviceGetClockInfo");
  shutdown_ = symbol<int (*)()>(lib_, "nvmlShutdown");
  if (!init || !handle || !max_clock || !get_clock_ || !shutdown_ || init() != kNvmlSuccess) {
    shutdown_ = nullptr;
    return;
  }
  void* dev = nullptr;
  unsigned mhz = 0;
  if (handle(pci_bus_id.c_str(), &dev) == kNvmlSuccess && max_clock(dev, kNvmlClockSm, &mhz) == kNvmlSuccess &&
      mhz > 0) {
    device_ = dev;
    max_mhz_ = mhz;
  }
}

SmClock::~SmClock() {
  if (shutdown_) shutdown_();
  if (lib_) dlclose(lib_);
}

double SmClock::current_mhz() const {
  unsigned mhz = 0;
  if (!device_ || get_clock_(device_, kNvmlClockSm, &mhz) != kNvmlSuccess) return 0;
  return mhz;
}

ClockStats summarize_clocks(const std::vector<double>& mhz, double max_mhz) {
  ClockStats s;
  s.max_mhz = max_mhz;
  double sum = 0;
  for (double m : mhz) {
    if (m <= 0) continue;
    ++s.samples;
    sum += m;
    if (max_mhz > 0 && m < kLowClock * max_mhz) ++s.low_samples;
  }
  s.mean_mhz = s.samples ? sum / static_cast<double>(s.samples) : 0;
  return s;
}

}  // namespace attnbench
