// The run loop (DESIGN.md "Data flows one way"): for each sweep point, inputs
// drawn on the host, the reference on sampled rows, then each variant uploaded,
// poisoned, launched, downloaded, verified and (for `run`) timed.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "app/case.hpp"
#include "app/device.hpp"
#include "app/report.hpp"

namespace attnbench {

struct RunOptions {
  bool timed = true;                 // `run` verifies and times; `verify` only verifies
  std::vector<std::string> kernels;  // -k: overrides the cases' `kernels`
  std::optional<uint64_t> seed;      // --seed: overrides [verify].seed
  std::optional<TimingMode> mode;    // --mode: overrides [bench].mode
  bool progress = false;             // a progress line on stderr
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

  // Throws CudaError when the device is left unusable (after emitting the row).
  void run_case(const Case& c);

  const std::vector<ResultRow>& rows() const { return rows_; }
  const Tally& tally() const { return tally_; }

 private:
  void run_point(const Case& c, const CasePoint& p, size_t index);
  void emit(ResultRow r);
  void progress(const std::string& what) const;

  Gpu& gpu_;
  RunOptions opts_;
  std::function<void(const ResultRow&)> on_row_;
  std::vector<ResultRow> rows_;
  Tally tally_;
  std::string where_;  // "case [point]" for the progress line
};

// The variants a point runs: -k (those of this op), else the case's `kernels`,
// else all; in `run` the baseline too, for the speedup column. Table order.
// `defaults` (the problem's own choice) stands in for the case's `kernels` when it names none.
std::vector<std::string> select_variants(const std::vector<std::string>& all, const CasePoint& p,
                                         const std::vector<std::string>& cli_kernels, bool timed,
                                         const std::vector<std::string>& defaults = {});

std::string human_bytes(double bytes);

}  // namespace attnbench
