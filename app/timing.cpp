#include "app/timing.hpp"

#include <nvtx3/nvToolsExt.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <string_view>
#include <thread>

#include "app/device.hpp"
#include "kernels/harness/ceilings.hpp"

namespace attnbench {

const char* mode_name(TimingMode m) {
  switch (m) {
    case TimingMode::cold: return "cold";
    case TimingMode::hot: return "hot";
    case TimingMode::graph: return "graph";
    case TimingMode::graph_hot: return "graph_hot";
  }
  return "?";
}

namespace {

using Clock = std::chrono::steady_clock;

double since_ms(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

class EventPair {
 public:
  EventPair() {
    check_cuda(cudaEventCreate(&start_), "cudaEventCreate");
    check_cuda(cudaEventCreate(&stop_), "cudaEventCreate");
  }
  ~EventPair() {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }
  EventPair(const EventPair&) = delete;
  EventPair& operator=(const EventPair&) = delete;
  void start(cudaStream_t s) { check_cuda(cudaEventRecord(start_, s), "cudaEventRecord"); }
  void stop(cudaStream_t s) { check_cuda(cudaEventRecord(stop_, s), "cudaEventRecord"); }
  double ms() {
    check_cuda(cudaEventSynchronize(stop_), "cudaEventSynchronize");
    float t = 0;
    check_cuda(cudaEventElapsedTime(&t, start_, stop_), "cudaEventElapsedTime");
    return t;
  }

 private:
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

class Graph {
 public:
  Graph(cudaStream_t s, const std::function<void()>& launch, int launches) {
    check_cuda(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
    try {
      for (int i = 0; i < launches; ++i) launch();
    } catch (...) {
      cudaGraph_t g = nullptr;
      cudaStreamEndCapture(s, &g);
      if (g) cudaGraphDestroy(g);
      throw;
    }
    check_cuda(cudaStreamEndCapture(s, &graph_), "cudaStreamEndCapture");
    check_cuda(cudaGraphInstantiate(&exec_, graph_, 0), "cudaGraphInstantiate");
  }
  ~Graph() {
    if (exec_) cudaGraphExecDestroy(exec_);
    if (graph_) cudaGraphDestroy(graph_);
  }
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  void replay(cudaStream_t s) { check_cuda(cudaGraphLaunch(exec_, s), "cudaGraphLaunch"); }

 private:
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
};

// The stream-hold kernel's flags in host-mapped memory: [0] release, [1] timed out.
class StreamHold {
 public:
  StreamHold() {
    void* host = nullptr;
    void* device = nullptr;
    check_cuda(cudaHostAlloc(&host, 2 * sizeof(int), cudaHostAllocMapped), "cudaHostAlloc");
    flags_ = static_cast<volatile int*>(host);
    check_cuda(cudaHostGetDevicePointer(&device, host, 0), "cudaHostGetDevicePointer");
    device_flags_ = static_cast<volatile int*>(device);
    flags_[1] = 0;
  }
  ~StreamHold() {
    release();  // never leave the card spinning, even when a launch threw
    if (stream_) cudaStreamSynchronize(stream_);  // the kernel reads the flags until it sees the release
    cudaFreeHost(const_cast<int*>(flags_));
  }
  StreamHold(const StreamHold&) = delete;
  StreamHold& operator=(const StreamHold&) = delete;

  void hold(cudaStream_t s) {
    stream_ = s;
    flags_[0] = 0;
    std::atomic_thread_fence(std::memory_order_seq_cst);
    // Long enough for any host to queue a sample's launches, short enough not to matter if it goes wrong.
    launch_stream_hold(device_flags_, const_cast<int*>(device_flags_ + 1), 1000.0, s);
  }
  void release() {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    flags_[0] = 1;
  }
  // Read after the stream is synchronized.
  bool timed_out() {
    const bool t = flags_[1] != 0;
    flags_[1] = 0;
    return t;
  }

 private:
  volatile int* flags_ = nullptr;
  volatile int* device_flags_ = nullptr;
  cudaStream_t stream_ = nullptr;
};

// Pushes the ranges on construction, pops them all at the end of the scope.
class NvtxRanges {
 public:
  explicit NvtxRanges(const std::vector<std::string>& names) : n_(names.size()) {
    for (const auto& name : names) nvtxRangePushA(name.c_str());
  }
  ~NvtxRanges() {
    for (size_t i = 0; i < n_; ++i) nvtxRangePop();
  }

 private:
  size_t n_;
};

// A stage's ranges: the variant's, then the stage's name when the op has several.
std::vector<std::string> stage_ranges(const std::vector<std::string>& ranges, const std::vector<Stage>& stages,
                                      const Stage& st) {
  std::vector<std::string> r = ranges;
  if (stages.size() > 1) r.push_back(st.name);
  return r;
}

// Estimates one launch's time so that a graph holds about 1 ms of work.
double rough_launch_ms(Gpu& gpu, const std::function<void()>& launch) {
  EventPair ev;
  ev.start(gpu.stream());
  launch();
  ev.stop(gpu.stream());
  return ev.ms();
}

}  // namespace

std::vector<std::string> nvtx_ranges(const std::string& case_name, const std::string& point,
                                     const std::string& variant) {
  std::vector<std::string> r = {case_name};
  if (!point.empty()) r.push_back(point);
  r.push_back(variant);
  return r;
}

std::string ncu_nvtx_include(const std::vector<std::string>& ranges) {
  std::string s;
  for (const auto& range : ranges) {
    for (char c : range) {
      if (std::string_view("/[]+*@\\").find(c) != std::string_view::npos) s += '\\';
      s += c;
    }
    s += '/';
  }
  return s;
}

void profile_stages(Gpu& gpu, const std::vector<Stage>& stages, const std::vector<std::string>& nvtx_ranges,
                    const std::function<void()>& before_profiled) {
  const auto pass = [&](bool ranged) {
    for (const Stage& st : stages)
      for (int64_t i = 0; i < st.runs; ++i) {
        const NvtxRanges ranges(ranged ? stage_ranges(nvtx_ranges, stages, st) : std::vector<std::string>{});
        st.run(i);
      }
    gpu.synchronize();
  };
  pass(false);
  if (before_profiled) before_profiled();
  pass(true);
}

struct SampleTimer::Impl {
  Gpu& gpu;
  bool cold;
  EventPair ev;
  StreamHold hold;
  std::vector<double> mhz;
  int64_t hold_timeouts = 0;
};

SampleTimer::SampleTimer(Gpu& gpu, bool cold) : impl_(new Impl{gpu, cold, {}, {}, {}, 0}) {}
SampleTimer::~SampleTimer() = default;

double SampleTimer::time(const std::function<void()>& work, const std::vector<std::string>& nvtx_ranges) {
  Impl& m = *impl_;
  const cudaStream_t s = m.gpu.stream();
  m.hold.hold(s);
  if (m.cold) m.gpu.flush_l2();
  m.ev.start(s);
  {
    const NvtxRanges ranges(nvtx_ranges);
    work();
  }
  m.ev.stop(s);
  m.hold.release();
  m.mhz.push_back(m.gpu.clock().current_mhz());  // while the sample runs, or just after
  const double ms = m.ev.ms();
  m.hold_timeouts += m.hold.timed_out();
  return ms;
}

double SampleTimer::last_mhz() const { return impl_->mhz.empty() ? 0 : impl_->mhz.back(); }

void SampleTimer::drop_last() {
  if (!impl_->mhz.empty()) impl_->mhz.pop_back();
}

ClockStats SampleTimer::take_clock(std::vector<double>* readings) {
  ClockStats c = summarize_clocks(impl_->mhz, impl_->gpu.clock().max_mhz());
  if (readings) *readings = impl_->mhz;
  impl_->mhz.clear();
  return c;
}

int64_t SampleTimer::take_hold_timeouts() {
  const int64_t n = impl_->hold_timeouts;
  impl_->hold_timeouts = 0;
  return n;
}

Timing time_launch(Gpu& gpu, const std::function<void()>& launch, const BenchSpec& spec,
                   const std::vector<std::string>& nvtx_ranges, const std::function<void()>& before_last,
                   const Rotation* rotation) {
  Timing t;
  t.mode = spec.mode;
  const cudaStream_t s = gpu.stream();

  // Warm-up: module load, cuBLAS heuristics and clocks ramping stay out of the samples.
  const auto w0 = Clock::now();
  do {
    launch();
    gpu.synchronize();
  } while (since_ms(w0) < spec.warmup_ms);

  StoppingRule rule;
  rule.min_time_ms = spec.min_time_ms;
  rule.max_noise = spec.max_noise;
  rule.max_time_ms = spec.max_time_ms;

  int per_sample = 1;
  std::unique_ptr<Graph> graph;
  if (spec.mode == TimingMode::graph || spec.mode == TimingMode::graph_hot) {
    const double one = std::max(rough_launch_ms(gpu, launch), 1e-4);
    per_sample = static_cast<int>(std::min(1000.0, std::max(1.0, 1.0 / one)));
    const bool rotate = spec.mode == TimingMode::graph && rotation && rotation->copies > 1;
    if (rotate) {
      // Every copy at least once a replay, so that the replay's memory is over twice the L2.
      per_sample = std::max(per_sample, std::min(rotation->copies, 1000));
      int next = 0;
      struct Restore {
        const Rotation& r;
        ~Restore() { r.use(0); }
      } restore{*rotation};
      graph = std::make_unique<Graph>(s, [&] {
        rotation->use(next++ % rotation->copies);
        launch();
      }, per_sample);
    } else {
      graph = std::make_unique<Graph>(s, launch, per_sample);
    }
  }

  SampleTimer timer(gpu, spec.mode == TimingMode::cold);
  const std::function<void()> sample = graph ? std::function<void()>([&] { graph->replay(s); }) : launch;
  const auto t0 = Clock::now();
  // Checking the rule costs a sort; checking at ~10% growth keeps it linear overall.
  size_t next_check = 1;
  const SmClock& clock = gpu.clock();
  const double low_mhz = kLowClock * clock.max_mhz(), floor_mhz = spec.min_clock * clock.max_mhz();
  int drops_in_a_row = 0;
  // One sample; below the floor it is dropped, after a cool-down, unless the clock has not
  // come back for kMaxDropsInARow samples. Returns whether it was kept.
  const auto take = [&] {
    const double ms = timer.time(sample, nvtx_ranges) / per_sample;
    const double mhz = timer.last_mhz();
    if (mhz > 0 && mhz < std::max(low_mhz, floor_mhz)) t.throttle_reasons |= clock.reasons();
    if (mhz > 0 && mhz < floor_mhz && !t.clock_gave_up) {
      if (++drops_in_a_row <= kMaxDropsInARow) {
        timer.drop_last();
        ++t.dropped;
        std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(kCoolDownMs));
        return false;
      }
      t.clock_gave_up = true;
    }
    drops_in_a_row = 0;
    t.samples.push_back(ms);
    return true;
  };
  while (true) {
    if (!take()) continue;
    if (t.samples.size() >= next_check) {
      if (rule.done(t.samples, since_ms(t0))) break;
      next_check = t.samples.size() + std::max<size_t>(1, t.samples.size() / 10);
    }
  }
  if (before_last) {
    // The poisoned launch must be the last one timed: a dropped sample poisons again.
    do before_last();
    while (!take());
  }
  t.elapsed_ms = since_ms(t0);
  t.launches_per_sample = per_sample;
  if (spec.mode == TimingMode::graph && rotation) t.copies = std::min(rotation->copies, per_sample);
  t.clock = timer.take_clock(&t.samples_mhz);
  // One reading per sample; without NVML every reading is 0, and none is kept.
  if (!t.clock.samples) t.samples_mhz.clear();
  t.hold_timeouts = timer.take_hold_timeouts();
  t.ms = summarize(t.samples);
  return t;
}

void merge_timing(Timing& into, Timing more) {
  into.samples.insert(into.samples.end(), more.samples.begin(), more.samples.end());
  into.samples_mhz.insert(into.samples_mhz.end(), more.samples_mhz.begin(), more.samples_mhz.end());
  into.ms = summarize(into.samples);
  if (!into.samples_mhz.empty()) into.clock = summarize_clocks(into.samples_mhz, into.clock.max_mhz);
  into.elapsed_ms += more.elapsed_ms;
  into.hold_timeouts += more.hold_timeouts;
  into.dropped += more.dropped;
  into.throttle_reasons |= more.throttle_reasons;
  into.clock_gave_up = into.clock_gave_up || more.clock_gave_up;
}

Timing time_stages(Gpu& gpu, const std::vector<Stage>& stages, const BenchSpec& spec,
                   const std::vector<std::string>& nvtx_ranges, std::vector<StageTiming>* all,
                   const std::function<void()>& before_last, const Rotation* rotation) {
  std::vector<StageTiming> discarded;  // later stages still run: the last one's output is verified
  const auto with_stage = [&](const Stage& st) { return stage_ranges(nvtx_ranges, stages, st); };
  const Stage& first = stages.front();
  if (stages.size() == 1)
    return time_launch(gpu, [&] { first.run(0); }, spec, with_stage(first), before_last, rotation);
  Timing t = time_launch(gpu, [&] { first.run(0); }, spec, with_stage(first));
  if (!all && !before_last) return t;
  if (!all) all = &discarded;
  auto stage_timing = [](const Stage& st, std::vector<double> samples) {
    StageTiming s{st.name, st.what, summarize(samples), 0, static_cast<int64_t>(samples.size()), st.bytes, 0, st.tokens};
    std::sort(samples.begin(), samples.end());
    s.p99 = quantile(samples, 0.99);
    return s;
  };
  all->push_back(stage_timing(first, t.samples));
  SampleTimer timer(gpu, spec.mode == TimingMode::cold);
  for (size_t k = 1; k < stages.size(); ++k) {
    const Stage& st = stages[k];
    const std::vector<std::string> ranges = with_stage(st);
    std::vector<double> samples;
    // The first pass warms this stage's kernels up; it is not kept.
    for (int pass = 0; pass <= kStagePasses; ++pass) {
      if (before_last && pass == kStagePasses && k + 1 == stages.size()) before_last();
      for (size_t e = 0; e < k; ++e)
        for (int64_t i = 0; i < stages[e].runs; ++i) stages[e].run(i);
      for (int64_t i = 0; i < st.runs; ++i) {
        const double ms = timer.time([&] { st.run(i); }, ranges);
        if (pass > 0) samples.push_back(ms);
      }
    }
    all->push_back(stage_timing(st, std::move(samples)));
  }
  t.hold_timeouts += timer.take_hold_timeouts();
  return t;
}

}  // namespace attnbench
