// Parts of one run, put back together: the reports of `--shard I/N` runs (a Slurm job array)
// and of `--devices` workers. Each part's json report carries the run's plan: every point the
// whole run was asked for, in the order a single run takes them, and which of them the part
// finished. `attnbench merge` and `--devices` both build the whole report from the parts
// here, in the plan's order, and say which points no part finished or more than one did.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "app/shard.hpp"

namespace attnbench {

struct MergeResult {
  nlohmann::json report;
  std::vector<std::string> missing;     // "case [point]" that no part finished
  std::vector<std::string> duplicated;  // finished by more than one part (the first part's rows kept)
};

// `names` label the parts in messages (their files). Throws InputError when a part has no
// plan, or the parts differ in attnbench version, mode or plan (not parts of one run). The
// parts are taken by value: their rows are moved into the result.
MergeResult merge_reports(std::vector<nlohmann::json> parts, const std::vector<std::string>& names,
                          const std::string& command_line, const std::string& date);

}  // namespace attnbench
