// A test case: one TOML file (docs/cases.md), validated and expanded into sweep points.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "errors.hpp"
#include "app/shape.hpp"
#include "app/timing.hpp"  // TimingMode, BenchSpec: a case's [bench]
#include "kernels/common/dtype.hpp"

namespace attnbench {

// What one case file may ask for: past these a typo, not a plan, is the likelier cause,
// and the run would not end in a working day.
constexpr int kMaxTrials = 1000;
constexpr double kMaxWarmupMs = 60e3;      // one minute of warm-up per variant and mode
constexpr double kMaxSamplingMs = 600e3;   // ten minutes of sampling per variant and mode
constexpr int64_t kDefaultMaxPoints = 10000;  // sweep points in one run; --max-points raises it
constexpr std::size_t kMaxCaseBytes = 4u << 20;  // a case file, or a --set, is text a person wrote

struct VerifySpec {
  uint64_t seed = 1;  // trials use seed, seed + 1, ...
  int trials = 2;
  // An elementwise tolerance beside the scaled bound (or, for an op without a faithful
  // reference, in place of its default); unset = none (or the dtype's default).
  std::optional<double> atol, rtol;
  int64_t max_rows = 512;            // 0 = all rows
  double bound_factor = 1;           // scales the bound's k_max and k_l2 (app/verify.hpp)
  int repeat = 1;                    // > 1: the last trial's inputs run this many times, outputs bit for bit alike
  std::optional<double> bound_floor; // replaces the bound's minimum floor (relative to rms(ref))
};

// How an input tensor is drawn (docs/cases.md, [inputs]). `op` is the op's own draw (its
// normal or uniform shape and its scale for the tensor); every other word replaces it.
enum class Distribution { op, normal, uniform, large, outliers, pareto, constant };
const char* distribution_name(Distribution d);  // "default" for op, else the case file's word
const std::vector<Distribution>& all_distributions();

struct InputSpec {
  Distribution distribution = Distribution::op;
  std::optional<double> scale;  // unset: the op's own for the tensor (x16 for large)
  double offset = 0;
  // The op's own draw, bit for bit as without [inputs].
  bool is_default() const { return distribution == Distribution::op && !scale && offset == 0; }
};

// A case's [inputs]: the table's own keys for every drawn tensor, and [inputs.NAME] tables
// (already merged over them, key by key) for the tensors they name.
struct InputsSpec {
  InputSpec all;
  std::map<std::string, InputSpec> tensors;
  const InputSpec& of(const std::string& tensor) const {
    const auto it = tensors.find(tensor);
    return it == tensors.end() ? all : it->second;
  }
  bool is_default() const;
  // "" when every tensor takes the op's own draw, else a few words for --dry-run's line:
  // "inputs: large", "inputs: pareto, k constant(scale 0, offset 0.5)".
  std::string summary() const;
};

// One fully resolved point of a case's sweep: everything a run needs.
struct CasePoint {
  std::string label;  // the swept values, "seq_q=1024 dtype=bf16"; empty without a sweep
  // The same as --set overrides ("shape.seq_q=1024", "dtype=bf16"): appended to the
  // case's own, they make a command line that runs this point alone.
  std::vector<std::string> pins;
  std::string op;  // a name in the op registry (app/op.hpp)
  DType dtype = DType::fp32;
  Shape shape;      // every key of the op, defaulted and validated
  std::vector<std::string> kernels;  // empty = every variant that supports the point
  std::string baseline;              // resolved: the case's, or the family's
  VerifySpec verify;
  BenchSpec bench;
  InputsSpec inputs;  // how generate() draws the inputs; default: the op's own draw
  // Its place among all the points of the run, in the order a single run takes them: how
  // the parts of a sharded or multi-GPU run name it (app/shard.hpp's RunPlan). Set by the CLI.
  int64_t run_index = 0;
};

struct Case {
  std::string name, description, file;
  std::string op;
  std::vector<CasePoint> points;  // the cartesian product of [sweep], in file order
  std::vector<std::string> plugins;  // the case's plugins = [...], relative to the case file's folder
};

// `sets` are --set overrides, "key=value" with a TOML value: "shape.seq_q=8192",
// "dtype=\"bf16\"" or "dtype=bf16" (bare words are taken as strings),
// "shape.seq_q=[1024,2048]" (a list on a shape key becomes a sweep).
// Throws InputError with "file:line:col: ..." on any problem.
// Keys and variant names are checked against the op registry.
// `max_points` caps the sweep's points (checked before they are built).
Case load_case(const std::string& path, const std::vector<std::string>& sets, int64_t max_points = kDefaultMaxPoints);
Case parse_case(const std::string& toml_text, const std::string& source, const std::vector<std::string>& sets,
                int64_t max_points = kDefaultMaxPoints);

// The plugin files a case file's top-level plugins = [...] names (relative to its folder),
// after the --set overrides, read before any case loads; a file that does not parse gives
// none (loading it says why).
std::vector<std::string> case_plugin_files(const std::string& path, const std::vector<std::string>& sets = {});

// A case argument to files: a .toml file, a directory (every .toml below it,
// sorted), "all" (every case under cases_dir), or a bare name looked up in cases_dir
// (cases_dir/NAME.toml, cases_dir/NAME/, or a unique NAME.toml anywhere below it).
std::vector<std::string> resolve_case_paths(const std::string& arg, const std::string& cases_dir);

}  // namespace attnbench
