// The host's one thread pool helper: the fp64 reference and the harness (drawing
// inputs, scanning outputs) spread their loops over the cores with it.
#pragma once
#include <algorithm>
#include <cstdlib>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace attnbench {

// Below this much work (about one unit per flop) handing out the loop costs more than it saves.
constexpr double kParallelWork = 1e7;
// A byte read from memory counts as this much work: a loop that streams more than it
// computes (a decode step's matrix-vector products, its attention over the cache) is long
// on one core for its bytes, not its flops.
constexpr double kWorkPerByte = 10;

// Threads started once and kept: a model's fp64 decode step makes a hundred parallel loops,
// and starting and joining a thread per core for each cost more than the loops on a machine
// of many cores. A loop is a job: its caller works on it too and returns once every index is
// done, so a loop inside a loop, or loops from two threads at once, always finish (on their
// callers alone if every pool thread is busy).
class HostPool {
 public:
  static HostPool& get() {
    static HostPool pool;
    return pool;
  }
  ~HostPool() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    for (std::thread& t : threads_) t.join();
  }
  int64_t threads() const { return static_cast<int64_t>(threads_.size()) + 1; }

  // body(0), ..., body(n - 1) on the caller and up to `helpers` pool threads.
  void run(int64_t n, int64_t helpers, const std::function<void(int64_t)>& body) {
    auto job = std::make_shared<Job>(body, n);
    if (helpers > 0) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        job->helpers = helpers;
        jobs_.push_back(job);
      }
      helpers == 1 ? wake_.notify_one() : wake_.notify_all();
    }
    job->work();
    if (helpers > 0) {  // every index is handed out: threads that have not joined need not
      std::lock_guard<std::mutex> lock(mutex_);
      const auto it = std::find(jobs_.begin(), jobs_.end(), job);
      if (it != jobs_.end()) jobs_.erase(it);
    }
    {
      std::unique_lock<std::mutex> lock(job->mutex);
      job->finished.wait(lock, [&] { return job->done == job->n; });
    }
    if (job->error) std::rethrow_exception(job->error);
  }

 private:
  struct Job {
    Job(const std::function<void(int64_t)>& b, int64_t count) : body(b), n(count) {}
    const std::function<void(int64_t)>& body;
    const int64_t n;
    std::atomic<int64_t> next{0};
    int64_t done = 0;          // under mutex
    int64_t helpers = 0;       // pool threads still to join it; under the pool's mutex
    std::exception_ptr error;  // under mutex
    std::mutex mutex;
    std::condition_variable finished;

    // Takes indices until none is left; an exception stops the handing out and is kept.
    void work() {
      int64_t mine = 0;
      std::exception_ptr failed;
      for (int64_t i; (i = next++) < n;) {
        try {
          body(i);
        } catch (...) {
          if (!failed) failed = std::current_exception();
          const int64_t skipped = std::max<int64_t>(0, n - next.exchange(n));  // never handed out
          mine += skipped;
        }
        ++mine;
      }
      if (mine == 0 && !failed) return;
      std::lock_guard<std::mutex> lock(mutex);
      if (failed && !error) error = failed;
      done += mine;
      if (done == n) finished.notify_all();
    }
  };

  HostPool() {
    // ATTNBENCH_HOST_THREADS=N caps the threads, for jobs that share a node (docs/cluster.md).
    int64_t cores = std::max(1u, std::thread::hardware_concurrency());
    if (const char* env = std::getenv("ATTNBENCH_HOST_THREADS"); env && std::atoll(env) > 0)
      cores = std::min<int64_t>(cores, std::atoll(env));
    for (int64_t t = 1; t < cores; ++t) threads_.emplace_back([this] { serve(); });
  }

  void serve() {
    while (true) {
      std::shared_ptr<Job> job;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
        if (stop_) return;
        job = jobs_.front();
        if (--job->helpers == 0) jobs_.pop_front();
      }
      job->work();
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<Job>> jobs_;  // loops still taking helpers, oldest first
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

// Runs body(0), ..., body(n - 1), spread over the cores when `work` is large enough to pay for it.
template <class Body>
void parallel_for(int64_t n, double work, const Body& body) {
  if (n <= 0) return;
  HostPool& pool = HostPool::get();
  const int64_t helpers = work < kParallelWork ? 0 : std::min(n, pool.threads()) - 1;
  if (helpers <= 0) {
    for (int64_t i = 0; i < n; ++i) body(i);
    return;
  }
  pool.run(n, helpers, std::function<void(int64_t)>(std::cref(body)));
}

}  // namespace attnbench
