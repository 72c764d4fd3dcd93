// Timing one launch with CUDA events (GPU.md "Measuring"): warm-up, then
// samples until the stopping rule says enough.
//   cold:  L2 flushed before each sample (the flush is enqueued before the start event);
//   hot:   back-to-back launches, inputs possibly resident in L2;
//   graph: `graph_launches` launches captured in a CUDA graph, one replay per sample,
//          time divided by the launch count (no launch overhead).
#pragma once
#include <functional>
#include <vector>

#include "app/case.hpp"
#include "app/device.hpp"
#include "app/stats.hpp"

namespace attnbench {

struct Timing {
  TimingMode mode = TimingMode::cold;
  Summary ms;                  // per launch
  std::vector<double> samples; // ms, in the order taken
  double elapsed_ms = 0;       // wall time spent sampling
};

// `launch` enqueues one run of the kernel on gpu.stream().
Timing time_launch(Gpu& gpu, const std::function<void()>& launch, const BenchSpec& spec);

// One timed run of `work` (several launches may be enqueued), after an L2 flush when
// `cold`; waits for it and returns its milliseconds.
double time_once(Gpu& gpu, const std::function<void()>& work, bool cold);

}  // namespace attnbench
