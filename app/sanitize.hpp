// verify --sanitize TOOL: the same verification run again as one child process under NVIDIA's
// compute-sanitizer (memcheck, racecheck, initcheck or synccheck), its findings turned into the
// rows' verdicts. The child prints a marker line before each launch it makes (the point's
// input kernels, then each variant), so that every error the sanitizer reports after a marker
// belongs to that launch: a variant with one is FAILED, its first finding in the reason.
#pragma once
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <tuple>
#include <vector>

namespace attnbench {

// The tools --sanitize takes.
const std::vector<std::string>& sanitizer_tools();

// compute-sanitizer on PATH, else under /usr/local/cuda/bin; "" when neither has it.
std::string find_compute_sanitizer();

// The marker line the child writes (to stderr, flushed) before a launch; `variant` is
// kInputsMarker for the kernels that build a point's inputs.
inline constexpr const char* kMarkerPrefix = "attnbench-sanitize: ";
inline constexpr const char* kInputsMarker = "(inputs)";
std::string sanitize_marker(const std::string& case_name, const std::string& point, const std::string& variant);

// What the sanitizer said after one marker: how many findings and the first one's line.
struct SanitizerFinding {
  int count = 0;
  std::string first;
};
using LaunchKey = std::tuple<std::string, std::string, std::string>;  // case, point, variant

struct SanitizerLog {
  std::map<LaunchKey, SanitizerFinding> by_launch;
  int unattributed = 0;  // findings before any marker (module loading, the ceilings)
  int summary = -1;      // the tool's own total ("ERROR SUMMARY: N", racecheck's hazards); -1: none
};
// Reads the child's merged stdout and stderr. A finding starts with an unindented
// "========= " line that is not a summary or the tool's banner.
SanitizerLog read_sanitizer_log(const std::string& text);

// FAILS every row of `report` (a json report) whose launch has findings, with the tool and the
// first finding in its reason; findings under the inputs' marker fail every variant row of the
// point. Returns how many rows it failed.
int apply_sanitizer_log(nlohmann::json& report, const SanitizerLog& log, const std::string& tool);

// The child's command line: the sanitizer, its options, then `attnbench_argv` (the verify
// command without --sanitize, -o or --format) with the marker flag and a json report to `report`.
std::vector<std::string> sanitizer_argv(const std::string& sanitizer, const std::string& tool,
                                        const std::vector<std::string>& attnbench_argv, const std::string& report);

// Runs argv (argv[0] a path), its stdout and stderr both into `path` in the order written;
// returns its exit code (128 + N for a signal N), or throws InputError when it cannot start.
int run_to_file(const std::vector<std::string>& argv, const std::string& path);

}  // namespace attnbench
