// The host's one thread pool helper: the fp64 reference and the harness (drawing
// inputs, scanning outputs) spread their loops over the cores with it.
#pragma once
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace attnbench {

// Below this much work (about one unit per flop) starting threads costs more than it saves.
constexpr double kParallelWork = 1e7;

// Runs body(0), ..., body(n - 1), spread over the cores when `work` is large enough to pay for the threads.
template <class Body>
void parallel_for(int64_t n, double work, const Body& body) {
  const int64_t cores = std::max(1u, std::thread::hardware_concurrency());
  const int64_t threads = work < kParallelWork ? 1 : std::min(n, cores);
  std::atomic<int64_t> next{0};
  std::exception_ptr error;  // an exception escaping a std::thread would terminate the program
  std::mutex error_mutex;
  auto worker = [&] {
    for (int64_t i; (i = next++) < n;) {
      try {
        body(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
        next = n;
      }
    }
  };
  std::vector<std::thread> pool;
  for (int64_t t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace attnbench
