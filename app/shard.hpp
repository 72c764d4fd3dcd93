// --shard I/N: one of N disjoint parts of a run's sweep points, so that N processes (a Slurm
// job array, one task a GPU) together run every point exactly once. A point's part depends
// only on the set of points, never on the order the cases were named in: points are taken
// largest estimated cost first (ties by a hash of the case and point names), each given to the
// part with the least cost so far, which also balances the parts.
#pragma once
#include <cstdint>
#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <utility>
#include <vector>

#include "app/case.hpp"

namespace attnbench {

struct Shard {
  int64_t index = 0, count = 1;  // part `index` of `count`; count 1: the whole run
  bool on() const { return count > 1; }
  std::string label() const { return std::to_string(index) + "/" + std::to_string(count); }
};

// "I/N" with 0 <= I < N. Empty text: Slurm's job array when SLURM_ARRAY_TASK_COUNT is set
// (I = SLURM_ARRAY_TASK_ID - SLURM_ARRAY_TASK_MIN), else the whole run. `getenv` is the
// environment to read (std::getenv, or a test's). InputError naming what is wrong otherwise.
Shard parse_shard(const std::string& text, const std::function<const char*(const char*)>& getenv);

// What the point costs to verify and time, for balancing only: its FLOPs plus ten times its
// bytes (a byte moved costs about what ten operations do on the host and the card alike).
double point_cost(const CasePoint& p);

// The part of every point of `cases`, in the cases' order: part[c][p] for point p of case c.
std::vector<std::vector<int64_t>> shard_parts(const std::vector<Case>& cases, int64_t count);

// A part of a run (a --shard, a --devices worker), as its json report records it: the whole
// run's points, in the order a single run takes them, and which of them this part finished.
// `attnbench merge` checks the parts against each other with it (app/merge.hpp).
struct RunPlan {
  std::string by;      // "shard" or "devices"
  int64_t index = 0;   // this part's number
  int64_t count = 1;   // how many parts
  std::vector<std::pair<std::string, std::string>> points;  // (case, point) of the whole run, in order
  std::vector<int64_t> done;  // indices into points this part finished
};

// The plan as the json report keeps it (key "plan"); app/merge.cpp.
nlohmann::json plan_json(const RunPlan& plan);

// Keeps the points of part s.index only; cases left without a point are dropped.
void keep_shard(std::vector<Case>& cases, const Shard& s);

}  // namespace attnbench
