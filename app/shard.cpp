#include "app/shard.hpp"

#include <algorithm>
#include <numeric>

#include "app/errors.hpp"
#include "app/problem.hpp"
#include "app/text.hpp"

namespace attnbench {
namespace {

// A whole number of at most 9 digits, or -1.
int64_t small_number(const std::string& s) {
  if (s.empty() || s.size() > 9 || !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return -1;
  return std::stoll(s);
}

// FNV-1a: the same on every machine and build.
uint64_t name_hash(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

}  // namespace

Shard parse_shard(const std::string& text, const std::function<const char*(const char*)>& getenv) {
  Shard s;
  if (text.empty()) {
    const char* count = getenv("SLURM_ARRAY_TASK_COUNT");
    if (!count || !*count) return s;
    const char* id = getenv("SLURM_ARRAY_TASK_ID");
    const char* min = getenv("SLURM_ARRAY_TASK_MIN");
    const int64_t n = small_number(count), i = id ? small_number(id) : -1, lo = min && *min ? small_number(min) : 0;
    if (n < 1 || i < 0 || lo < 0 || i - lo < 0 || i - lo >= n)
      throw InputError("attnbench: error: Slurm's job array (SLURM_ARRAY_TASK_ID " + clipped(id ? id : "unset") +
                       ", SLURM_ARRAY_TASK_MIN " + clipped(min ? min : "unset") + ", SLURM_ARRAY_TASK_COUNT " +
                       clipped(count) + ") is not a task of 0..count-1 from the minimum; give --shard I/N");
    s.index = i - lo;
    s.count = n;
    return s;
  }
  const auto slash = text.find('/');
  const int64_t i = slash == std::string::npos ? -1 : small_number(text.substr(0, slash));
  const int64_t n = slash == std::string::npos ? -1 : small_number(text.substr(slash + 1));
  if (i < 0 || n < 1 || i >= n)
    throw InputError("attnbench: error: --shard " + clipped(text) + ": expected I/N with 0 <= I < N, like 0/4");
  s.index = i;
  s.count = n;
  return s;
}

double point_cost(const CasePoint& p) {
  const Work w = make_problem(p)->work();
  return w.flops + 10.0 * w.bytes;
}

std::vector<std::vector<int64_t>> shard_parts(const std::vector<Case>& cases, int64_t count) {
  struct Item {
    double cost;
    uint64_t hash;
    std::string name;  // case and point: the last tie-break
    size_t c, p;
  };
  std::vector<Item> items;
  std::vector<std::vector<int64_t>> part(cases.size());
  for (size_t c = 0; c < cases.size(); ++c) {
    part[c].assign(cases[c].points.size(), 0);
    for (size_t p = 0; p < cases[c].points.size(); ++p) {
      const std::string name = cases[c].name + "\n" + cases[c].points[p].label;
      items.push_back({point_cost(cases[c].points[p]), name_hash(name), name, c, p});
    }
  }
  std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) {
    if (a.cost != b.cost) return a.cost > b.cost;
    if (a.hash != b.hash) return a.hash < b.hash;
    return a.name < b.name;
  });
  std::vector<double> load(static_cast<size_t>(count), 0.0);
  for (const Item& it : items) {
    const auto least = std::min_element(load.begin(), load.end()) - load.begin();
    load[static_cast<size_t>(least)] += it.cost;
    part[it.c][it.p] = least;
  }
  return part;
}

void keep_shard(std::vector<Case>& cases, const Shard& s) {
  if (!s.on()) return;
  const auto part = shard_parts(cases, s.count);
  std::vector<Case> kept;
  for (size_t c = 0; c < cases.size(); ++c) {
    std::vector<CasePoint> points;
    for (size_t p = 0; p < cases[c].points.size(); ++p)
      if (part[c][p] == s.index) points.push_back(std::move(cases[c].points[p]));
    if (points.empty()) continue;
    cases[c].points = std::move(points);
    kept.push_back(std::move(cases[c]));
  }
  cases = std::move(kept);
}

}  // namespace attnbench
