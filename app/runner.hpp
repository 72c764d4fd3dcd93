// The run loop (docs/design.md): for each sweep point, inputs
// drawn on the host, the reference on sampled rows, then each variant uploaded,
// poisoned, launched, downloaded, verified and (for `run`) timed.
#pragma once
#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "app/case.hpp"
#include "app/device.hpp"
#include "app/problem.hpp"  // VariantChoice
#include "app/row.hpp"

namespace attnbench {

// -k and --exclude: shell-style patterns (`flash_*`, `paged_v?`) over variant names.
struct VariantFilter {
  std::vector<std::string> only;     // -k: run only variants matching one of these; empty = no -k
  std::vector<std::string> exclude;  // --exclude: never run variants matching one of these
  bool picks(const std::string& name) const;     // matches a -k pattern
  bool excludes(const std::string& name) const;  // matches an --exclude pattern
};
// fnmatch(3): `*`, `?` and `[...]`; a name without them matches only itself.
bool glob_match(const std::string& pattern, const std::string& name);

struct RunOptions {
  bool timed = true;                 // `run` verifies and times; `verify` only verifies
  VariantFilter kernels;  // -k (overrides the cases' `kernels`) and --exclude
  std::optional<uint64_t> seed;      // --seed: overrides [verify].seed
  std::optional<TimingMode> mode;    // --mode: overrides [bench].mode
  bool all_modes = false;            // --mode all: cold, hot, graph and graph_hot, side by side
  double min_clock = 0;              // --min-clock, as a fraction of the maximum SM clock
  int interleave = 1;                // --interleave: rounds over the point's variants
  // --profile (with timed): after verification, one warm-up and one launch per variant inside
  // its NVTX ranges, for Nsight Compute or Nsight Systems; nothing is timed, no baseline added.
  bool profile = false;
  bool progress = false;             // a progress line on stderr, rewritten in place (a terminal)
  bool progress_lines = false;       // --progress always: a line per finished point (a log file)
  // verify --sanitize's child: a marker line on stderr before every launch (app/sanitize.hpp).
  bool sanitize_markers = false;
  bool plan_rows = false;            // a part of a run: rows carry their point's plan index
  std::string dump_dir;              // --dump: inputs, outputs and reference as .npy (app/dump.hpp)
  bool dump_failures_only = false;   // --dump-failures: only variants that failed
  // How this run was asked for, so that every row can carry the command that redoes it.
  std::string program = "attnbench";
  std::vector<std::string> sets;
  int device = 0;
};

struct Tally {
  int passed = 0, failed = 0, skipped = 0, errors = 0;
  bool too_large = false;  // a point was refused for the card's memory (exit 2)
};

class Runner {
 public:
  // on_row is called as soon as each row is final.
  Runner(Gpu& gpu, RunOptions opts, std::function<void(const ResultRow&)> on_row)
      : gpu_(gpu), opts_(std::move(opts)), on_row_(std::move(on_row)) {}

  // Called after each point's rows were emitted (the CLI rewrites -o then).
  // Called after each point of a case that ran (`point`: its index in the case).
  void set_on_point(std::function<void(const Case& c, size_t point)> f) { on_point_ = std::move(f); }
  // Asked before each point: false passes it over (a --devices worker whose point another
  // worker took). Unset: every point runs.
  void set_claim(std::function<bool(const CasePoint& p)> f) { claim_ = std::move(f); }
  // The points the whole run will take, for the progress line's "[k/N]" and time left.
  void set_total_points(size_t n) { total_points_ = n; }
  // Throws CudaError when the device is left unusable (after emitting the row).
  void run_case(const Case& c);

  const std::vector<ResultRow>& rows() const { return rows_; }
  const Tally& tally() const { return tally_; }
  // Where --dump wrote, one directory per point and seed.
  const std::vector<std::string>& dump_dirs() const { return dump_dirs_; }

 private:
  // A point's stages, in the order run_point runs them (runner.cpp). PointRun carries the
  // point's state from one to the next; Trial is one verification trial's.
  struct PointRun;
  struct Trial;
  void run_point(const Case& c, const CasePoint& p, size_t index);
  bool plan_rows(PointRun& run);           // a row per selected variant; false: none selected
  void refuse_if_too_large(PointRun& run);  // before allocating
  void on_device(PointRun& run);           // allocate, then the stages below that launch
  void verify(PointRun& run);              // the trials
  void verify_trial(PointRun& run, int t, bool last);
  void generate_inputs(PointRun& run, int t, uint64_t seed);
  void verify_launch(PointRun& run, Trial& trial, size_t i);
  void judge_outputs(PointRun& run, Trial& trial);
  void check_repeat(PointRun& run);     // [verify] repeat
  void check_footprint(PointRun& run);  // the capture guard and each variant's footprint
  void check_again(PointRun& run, ResultRow& r, const std::string& which);
  void profile_variants(PointRun& run);  // --profile
  void time_variants(PointRun& run);     // run
  void time_variant(PointRun& run, ResultRow& r, const std::vector<TimingMode>& modes, BenchSpec round_spec,
                    int round, int rounds, const Rotation& rotation);
  void rate_variants(PointRun& run, const std::vector<size_t>& timed, int rounds, const Ceilings& ceil);
  void release_and_emit(PointRun& run);
  void emit(ResultRow r);
  void progress(const std::string& what) const;
  void mark(const Case& c, const CasePoint& p, const std::string& launch) const;

  Gpu& gpu_;
  RunOptions opts_;
  std::function<void(const ResultRow&)> on_row_;
  std::function<void(const Case&, size_t)> on_point_;
  std::function<bool(const CasePoint&)> claim_;
  std::vector<ResultRow> rows_;
  std::string variant_;  // the variant being launched or timed, for a fault's message
  Tally tally_;
  std::string where_;  // "case [point]" for the progress line
  size_t total_points_ = 0, done_points_ = 0;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::vector<std::string> dump_dirs_;
};

// The variants a point runs: -k's matches (of this op), else the case's `kernels`,
// else all; in `run` the baseline too, for the speedup column; less --exclude's
// matches, the baseline included. Table order. `defaults` (the problem's own choice)
// stands in for the case's `kernels` when it names none. A variant that does not apply to
// the point (VariantChoice::applies) is left out unless the case's kernels or -k name it
// exactly.
std::vector<std::string> select_variants(const std::vector<VariantChoice>& all, const CasePoint& p,
                                         const VariantFilter& cli, bool timed,
                                         const std::vector<std::string>& defaults = {});

// The note of a timed row whose launch spends host time before its kernels are queued (a
// Python plugin's, host_us > 0): how much, and, where that is over a fifth of the median in
// a mode that times the launch call, that graph mode times the kernels without it. "" when
// host_us is 0.
std::string host_overhead_note(double host_us, const Timing& t);

// The one-line progress display: "[3/12] case [point]: timing v (cold)  0:42 elapsed,
// ~1:24 left", the time left estimated from the points done so far, cut to `width`.
std::string progress_line(const std::string& where, const std::string& what, double elapsed_s, size_t done,
                          size_t total, size_t width);

// The command that runs one variant on one sweep point again, alone: the case file,
// the run's own --set overrides, then the point's (later ones win), -k, the mode.
std::string reproduce_command(const RunOptions& o, const std::string& case_file, const CasePoint& p,
                              const std::string& variant);

}  // namespace attnbench
