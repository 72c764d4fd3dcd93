// One result row: a variant on a sweep point, as the runner fills it, the report formats
// print it, results.cpp reads it back and compare judges it. Its own header, so that what
// makes rows (app/runner.hpp) and what prints them (app/report.hpp) need not know each other.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "app/footprint.hpp"
#include "app/stats.hpp"
#include "app/timing.hpp"
#include "app/verify.hpp"
#include "app/work.hpp"
#include "kernels/common/dtype.hpp"

namespace attnbench {

struct Ceilings;  // app/device.hpp

// peer: a peer library's row read from a peer report (tests/peers.py --report), timed but
// never verified by attnbench; `run` and `verify` write none.
enum class Status { verified, failed, skipped, error, peer };
const char* status_name(Status s);

struct ResultRow {
  std::string case_name, point, op, dtype, variant;
  // A part of a run's rows (--shard, --devices): its point's index in the run's plan, which
  // names the point even where two cases share a name. -1 otherwise.
  int64_t plan_index = -1;
  bool baseline = false;
  Status status = Status::skipped;
  std::string reason;                // why skipped, or the error
  std::optional<Comparison> cmp;     // verified / failed
  std::string worst;                 // the worst element as (b, h, i, d)
  Tolerance tol;
  int trials = 0;
  std::string command;               // the command line that runs this row again, alone
  // Host wall time of the verification: the point's allocation, inputs, reference (its own
  // time, overlapping the launches, and the wait for it after them) and whole wall time
  // (allocation to the last check or timing, shared by its rows), and this variant's
  // launches and read-backs, over all trials.
  struct VerifyTime {
    double allocate_ms = 0, inputs_ms = 0, reference_ms = 0, reference_wait_ms = 0, release_ms = 0, point_ms = 0,
           check_ms = 0;
  } verify_time;
  // What the variant asks of the card: its kernels' launch shapes, registers, shared memory
  // and occupancy (read from a captured launch), the point's tensors and the variant's
  // workspace on the device.
  std::optional<Footprint> footprint;
  uint64_t tensor_bytes = 0, workspace_bytes = 0;
  std::optional<Timing> timing;      // `run` only; for an op of several stages, the first stage's
  std::vector<Timing> other_modes;   // --mode all: hot and graph, beside `timing` (cold)
  std::vector<StageTiming> stages;   // every stage's times, when the op has several
  Work work;
  // Derived from the timing and the card's ceilings:
  double tflops = 0, gbps = 0;
  // The floor is the least time the card's measured ceilings allow: the larger of
  // FLOPs / compute ceiling of the dtype and bytes / bandwidth ceiling of the op.
  double floor_ms = 0, floor_compute_ms = 0, floor_memory_ms = 0;
  double pct_of_floor = 0;  // floor / median: 100% = as fast as the card allows
  std::string bound;        // which term of the floor is larger: "compute" or "memory"
  std::optional<double> speedup;
  std::optional<Interval> speedup_ci;  // 95% bootstrap interval of the speedup (not on the baseline)
  int rounds = 1;                      // --interleave's rounds            // baseline median / this median
  // `run --profile`: the NVTX ranges of its one profiled launch, as `ncu --nvtx-include`
  // takes them ("case/point/variant/"); empty when not profiled. Such a row has no timing.
  std::string profiled;
  std::string timing_note;  // what the op measured of the variant besides its timing (Problem::timing_note)
};

// Fills tflops, gbps, floor, % and bound from row.timing and row.work.
void derive_rates(ResultRow& row, DType dtype, const Ceilings& c);
// A median further below the floor than its noise allows: the card cannot do that work in that
// time, so the timing measured something else (work off the stream, skipped work). "" = none.
// The memory floor counts only where the work cannot sit in the L2 (`l2_bytes`): a cold mode,
// and more than twice the L2's bytes moved (a smaller output may stay there, written back
// after the events); the compute floor counts always.
std::string impossible_timing(const ResultRow& row, double l2_bytes);

}  // namespace attnbench
