// Timing one launch with CUDA events (docs/measuring.md): warm-up, then
// samples until the stopping rule says enough. Each sample's launches are queued
// behind a kernel that holds the stream until they all are, so host launch latency
// stays out of the events; the SM clock is read during each sample (NVML); and NVTX
// ranges name the timed launch, so Nsight can pick it out.
//   cold:  L2 flushed before each sample (the flush is enqueued before the start event);
//   hot:   back-to-back launches, inputs possibly resident in L2;
//   graph: launches captured in a CUDA graph, one replay per sample, time divided by the
//          launch count (no launch overhead); each launch on its own copy of the inputs,
//          the copies together over twice the L2, so every launch starts cold;
//   graph_hot: the same graph over one copy: the L2 stays warm from launch to launch.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "app/clocks.hpp"
#include "app/stats.hpp"

namespace attnbench {

class Gpu;  // app/device.hpp

// graph: cold launches from a CUDA graph, each launch on its own copy of the point's tensors
// (together over twice the L2); graph_hot: the graph over one copy, so the L2 stays warm.
enum class TimingMode { cold, hot, graph, graph_hot };
const char* mode_name(TimingMode m);

// How a variant is timed: a case's [bench] (app/case.hpp), --mode and --min-clock over it.
struct BenchSpec {
  TimingMode mode = TimingMode::cold;
  double warmup_ms = 20, min_time_ms = 100, max_noise = 0.005, max_time_ms = 2000;
  // A sample whose SM clock read below this fraction of the maximum is dropped and taken
  // again after a cool-down (--min-clock); 0 keeps every sample (they are still flagged).
  double min_clock = 0;
};

struct Timing {
  TimingMode mode = TimingMode::cold;
  Summary ms;                  // per launch
  std::vector<double> samples; // ms, in the order taken
  std::vector<double> samples_mhz;  // the SM clock read during each sample, 0 where not read; empty without NVML
  double elapsed_ms = 0;       // wall time spent sampling
  int launches_per_sample = 1; // graph modes: the launches one replay holds
  int copies = 1;              // graph mode: the copies of the inputs its launches rotate over
  ClockStats clock;            // the SM clock during the samples (when NVML is there)
  int64_t hold_timeouts = 0;   // samples whose stream hold gave up before the launches were queued
  // Throttling: samples dropped below the clock floor (and taken again), NVML's reason bits
  // read at every sample below kLowClock or the floor, and whether dropping gave up (the
  // clock did not come back after kMaxDropsInARow cool-downs: the samples were kept).
  int64_t dropped = 0;
  uint64_t throttle_reasons = 0;
  bool clock_gave_up = false;
};

// Adds `more`'s samples to `into` (the same variant and mode timed again: an --interleave
// round) and summarises them all again.
void merge_timing(Timing& into, Timing more);

// After this many samples dropped in a row, the clock is taken as what this load runs at.
constexpr int kMaxDropsInARow = 8;
// How long a dropped sample waits before the next, for the card's power and heat to recover.
constexpr double kCoolDownMs = 50;

// The NVTX ranges around a variant's timed or profiled launches, outermost first: the
// case, the sweep point's label when the case has a sweep (`point` not empty), the variant.
std::vector<std::string> nvtx_ranges(const std::string& case_name, const std::string& point,
                                     const std::string& variant);
// Those ranges as Nsight Compute's `--nvtx-include` names push/pop ranges: joined by '/',
// ending in '/', with the characters ncu's syntax gives a meaning ('/', '[', ']', '+', '*',
// '@' and the backslash) escaped by a backslash, so that a point "context=[1,7]" or a
// pipeline pair "flash_mma+split_kv" matches itself.
std::string ncu_nvtx_include(const std::vector<std::string>& ranges);

// `launch` enqueues one run of the kernel on gpu.stream(). `nvtx_ranges` are pushed,
// outermost first, around the timed launches only (never the flush or the hold):
// {case, point, variant} lets `ncu --nvtx-include "case/variant/"` find one variant.
// `before_last`, when set, runs (untimed) before the last sample, which is taken once the
// stopping rule is met and kept like the others: the caller poisons the output there and
// verifies it after, so a launch that skips work it did before (a cached result, a
// graph replay living off an earlier one) is caught.
// Graph mode's copies of the inputs (Problem::make_copies): the graph's launch i runs on
// copy i % copies; copy 0 is put back in place once the graph is captured.
struct Rotation {
  int copies = 1;
  std::function<void(int)> use;
};

Timing time_launch(Gpu& gpu, const std::function<void()>& launch, const BenchSpec& spec,
                   const std::vector<std::string>& nvtx_ranges = {},
                   const std::function<void()>& before_last = nullptr, const Rotation* rotation = nullptr);

// A part of a variant's launch that the harness times on its own. A single-stage op
// has one stage (its launch). Stage k's runs start from the state stages 0..k-1 leave:
// before each pass over a later stage, the earlier ones run untimed.
struct Stage {
  std::string name;  // "TTFT", "TBT"
  std::string what;  // what one run does, for the report: "cache append + decode"
  int64_t runs = 1;
  std::function<void(int64_t run)> run;
  double bytes = 0;  // the fewest bytes one run reads, for its floor at the read bandwidth; 0 = not given
  double tokens = 0;  // tokens one run makes (a decode step's batch), for tokens/s; 0 = not given
};

// One stage's times, per run, when an op has several stages.
struct StageTiming {
  std::string name, what;
  Summary ms;
  double p99 = 0;
  int64_t runs = 0;  // runs timed
  double bytes = 0;     // Stage::bytes
  double floor_ms = 0;  // bytes at the measured read bandwidth (derive_rates); 0 = none
  double tokens = 0;    // Stage::tokens
};

// Times an op's stages with time_launch's sampler, warm-up, hold, flush and clock:
// the first stage as time_launch times a launch (the returned Timing is the row's),
// each later stage run by run over kStagePasses passes (several passes for the
// percentiles), each pass after the stages before it ran untimed. `later` gets every
// stage's times when there are several, the first included.
constexpr int kStagePasses = 3;
// `before_last` as time_launch's: before the last sample of the last stage's last pass
// (before the earlier stages rerun for it).
Timing time_stages(Gpu& gpu, const std::vector<Stage>& stages, const BenchSpec& spec,
                   const std::vector<std::string>& nvtx_ranges, std::vector<StageTiming>* all,
                   const std::function<void()>& before_last = nullptr, const Rotation* rotation = nullptr);

// `run --profile` (docs/profiling.md): every stage once, untimed and outside any range (the
// warm-up: clocks up, caches and lazy loading as a timed sample finds them), then
// `before_profiled` (the caller poisons the output), then every stage once more, each run
// inside its NVTX ranges as time_stages names them. No stream hold, no L2 flush and no
// events: a profiler that serializes launches (Nsight Compute) finds nothing to wait out,
// and the ranges hold the variant's own kernels alone.
void profile_stages(Gpu& gpu, const std::vector<Stage>& stages, const std::vector<std::string>& nvtx_ranges,
                    const std::function<void()>& before_profiled);

// Single timed runs of different work, one at a time, each taken as time_launch takes a
// sample: behind the stream hold, after an L2 flush when `cold`, inside its NVTX ranges,
// with the SM clock read. A pipeline times its prefill and each decode step this way.
class SampleTimer {
 public:
  SampleTimer(Gpu& gpu, bool cold);
  ~SampleTimer();
  SampleTimer(const SampleTimer&) = delete;
  SampleTimer& operator=(const SampleTimer&) = delete;
  // Enqueues `work` (any number of launches), waits for it, returns its milliseconds.
  double time(const std::function<void()>& work, const std::vector<std::string>& nvtx_ranges);
  // The last sample's clock reading (0 when not read), and forgetting it (a dropped sample).
  double last_mhz() const;
  void drop_last();
  // The SM clock over the samples since the last call, and how many holds gave up; both reset.
  // `readings`, when given, receives each sample's reading (0 where it could not be read).
  ClockStats take_clock(std::vector<double>* readings = nullptr);
  int64_t take_hold_timeouts();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace attnbench
