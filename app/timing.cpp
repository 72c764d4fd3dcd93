#include "app/timing.hpp"

#include <algorithm>
#include <chrono>
#include <memory>

namespace attnbench {
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

// Estimates one launch's time so that a graph holds about 1 ms of work.
double rough_launch_ms(Gpu& gpu, const std::function<void()>& launch) {
  EventPair ev;
  ev.start(gpu.stream());
  launch();
  ev.stop(gpu.stream());
  return ev.ms();
}

}  // namespace

double time_once(Gpu& gpu, const std::function<void()>& work, bool cold) {
  static thread_local EventPair ev;
  if (cold) gpu.flush_l2();
  ev.start(gpu.stream());
  work();
  ev.stop(gpu.stream());
  return ev.ms();
}

Timing time_launch(Gpu& gpu, const std::function<void()>& launch, const BenchSpec& spec) {
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
  if (spec.mode == TimingMode::graph) {
    const double one = std::max(rough_launch_ms(gpu, launch), 1e-4);
    per_sample = static_cast<int>(std::min(1000.0, std::max(1.0, 1.0 / one)));
    graph = std::make_unique<Graph>(s, launch, per_sample);
  }

  EventPair ev;
  const auto t0 = Clock::now();
  // Checking the rule costs a sort; checking at ~10% growth keeps it linear overall.
  size_t next_check = 1;
  while (true) {
    if (spec.mode == TimingMode::cold) gpu.flush_l2();
    ev.start(s);
    if (graph)
      graph->replay(s);
    else
      launch();
    ev.stop(s);
    t.samples.push_back(ev.ms() / per_sample);
    if (t.samples.size() >= next_check) {
      if (rule.done(t.samples, since_ms(t0))) break;
      next_check = t.samples.size() + std::max<size_t>(1, t.samples.size() / 10);
    }
  }
  t.elapsed_ms = since_ms(t0);
  t.ms = summarize(t.samples);
  return t;
}

}  // namespace attnbench
