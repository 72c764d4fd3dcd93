#include "app/clocks.hpp"

#include <dlfcn.h>

#include <utility>

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
  // Renamed "clocks event reasons" in recent drivers; the old name is still exported.
  get_reasons_ = symbol<int (*)(void*, unsigned long long*)>(lib_, "nvmlDeviceGetCurrentClocksEventReasons");
  if (!get_reasons_)
    get_reasons_ = symbol<int (*)(void*, unsigned long long*)>(lib_, "nvmlDeviceGetCurrentClocksThrottleReasons");
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

uint64_t SmClock::reasons() const {
  unsigned long long bits = 0;
  if (!device_ || !get_reasons_ || get_reasons_(device_, &bits) != kNvmlSuccess) return 0;
  return bits;
}

std::vector<std::string> clock_reason_names(uint64_t reasons) {
  // nvml.h's nvmlClocksEventReason* bits.
  static const std::pair<uint64_t, const char*> kNames[] = {
      {0x4, "sw_power_cap"},          {0x8, "hw_slowdown"},          {0x10, "sync_boost"},
      {0x20, "sw_thermal_slowdown"},  {0x40, "hw_thermal_slowdown"}, {0x80, "hw_power_brake_slowdown"},
      {0x100, "display_clock_setting"}};
  std::vector<std::string> out;
  for (const auto& [bit, name] : kNames)
    if (reasons & bit) out.push_back(name);
  return out;
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
