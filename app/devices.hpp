// --devices all | 0,2,3: a run spread over a host's GPUs, one worker process per GPU (the same
// binary with --device and a hidden --worker option), so that no two timings share a card and
// each worker has its card's own ceilings. Points are handed out as workers ask for them, the
// costliest first, through a claims file: one byte per point of the run, taken under an
// exclusive lock. Each worker writes a json report with its part of the plan; the parent merges
// them (app/merge.hpp) into what a single-GPU run would have printed.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace attnbench {

// "all" (every GPU of the machine: needs one) or a comma-separated list of distinct indices.
// Throws InputError on a malformed list, NoDevice when "all" finds none.
std::vector<int> parse_devices(const std::string& text);

// The claims file of a run of `points` points.
void create_claims(const std::string& path, int64_t points);

// A worker's side: takes a point for worker `worker` (0-based) unless another has.
class PointClaims {
 public:
  PointClaims(std::string path, int worker) : path_(std::move(path)), worker_(worker) {}
  bool claim(int64_t index) const;

 private:
  std::string path_;
  int worker_;
};

// Who took each point so far: 0 = nobody, w + 1 = worker w.
std::vector<uint8_t> read_claims(const std::string& path);

struct Worker {
  int device = 0;
  std::string report, out, err;  // its json report, stdout and stderr files
  int exit_code = -1;            // -1: did not start
  std::string last_error;        // its stderr's last line, when it failed
};

// Starts one worker per device: `argv` plus "--device D --worker I/N:CLAIMS -o REPORT", stdout
// and stderr to files in `dir`; calls `progress` every 100 ms and as each ends.
std::vector<Worker> run_workers(const std::vector<std::string>& argv, const std::vector<int>& devices,
                                const std::string& dir, const std::string& claims,
                                const std::function<void(const std::vector<Worker>&)>& progress);

// Worker side of --worker I/N:CLAIMS.
struct WorkerSpec {
  int index = 0, count = 1;
  std::string claims;
};
WorkerSpec parse_worker(const std::string& text);

}  // namespace attnbench
