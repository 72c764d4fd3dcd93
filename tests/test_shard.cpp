// --shard I/N: the parts partition the points (each exactly once), do not depend on the order
// the cases come in, balance the estimated cost, and Slurm's job array fills in I and N.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "app/case.hpp"
#include "app/errors.hpp"
#include "app/shard.hpp"

namespace attnbench {
namespace {

std::vector<Case> some_cases() {
  return {
      parse_case("op = \"softmax\"\n[shape]\nrows = 64\n[sweep]\ncols = [8, 100, 1000, 4096, 33]\ndtype = "
                 "[\"fp32\", \"bf16\"]\n",
                 "cases/softmax.toml", {}),
      parse_case("op = \"attention\"\n[shape]\nbatch = 2\nheads = 4\nhead_dim = 64\n[sweep]\nseq_q = [16, 128, "
                 "1024, 77]\ncausal = [false, true]\n",
                 "cases/attention.toml", {}),
      parse_case("op = \"gemm\"\n[shape]\nm = 512\nn = 512\n[sweep]\nk = [64, 512, 4096]\n", "cases/gemm.toml", {})};
}

// case name + point label -> the part it ran in.
std::map<std::string, int64_t> parts_of(std::vector<Case> cases, int64_t count) {
  std::map<std::string, int64_t> where;
  for (int64_t i = 0; i < count; ++i) {
    std::vector<Case> mine = cases;
    keep_shard(mine, {i, count});
    for (const Case& c : mine)
      for (const CasePoint& p : c.points) {
        const std::string key = c.name + " [" + p.label + "]";
        EXPECT_EQ(where.count(key), 0u) << key << " in parts " << where[key] << " and " << i;
        where[key] = i;
      }
  }
  return where;
}

TEST(Shard, PartsAreAPartition) {
  const std::vector<Case> cases = some_cases();
  size_t points = 0;
  for (const Case& c : cases) points += c.points.size();
  for (int64_t n : {1, 2, 3, 5, 8, 40})
    EXPECT_EQ(parts_of(cases, n).size(), points) << "N = " << n;  // every point once (duplicates fail above)
}

TEST(Shard, OrderOfTheCasesDoesNotMatter) {
  std::vector<Case> cases = some_cases();
  const auto forward = parts_of(cases, 3);
  std::reverse(cases.begin(), cases.end());
  for (Case& c : cases) std::reverse(c.points.begin(), c.points.end());
  EXPECT_EQ(parts_of(cases, 3), forward);
}

TEST(Shard, PartsAreBalanced) {
  const std::vector<Case> cases = some_cases();
  for (int64_t n : {2, 3, 4}) {
    const auto part = shard_parts(cases, n);
    std::vector<double> load(static_cast<size_t>(n), 0.0);
    double largest = 0;
    for (size_t c = 0; c < cases.size(); ++c)
      for (size_t p = 0; p < cases[c].points.size(); ++p) {
        const double cost = point_cost(cases[c].points[p]);
        load[static_cast<size_t>(part[c][p])] += cost;
        largest = std::max(largest, cost);
      }
    const auto [lo, hi] = std::minmax_element(load.begin(), load.end());
    // Each point goes to the least loaded part: no part ends more than one point above another.
    EXPECT_LE(*hi - *lo, largest) << "N = " << n;
  }
}

TEST(Shard, ParsesIOverNAndSlurm) {
  const auto none = [](const char*) -> const char* { return nullptr; };
  const Shard s = parse_shard("2/5", none);
  EXPECT_EQ(s.index, 2);
  EXPECT_EQ(s.count, 5);
  EXPECT_FALSE(parse_shard("", none).on());
  for (const char* bad : {"5/5", "1", "a/2", "-1/3", "1/0", "/3", "1/"})
    EXPECT_THROW(parse_shard(bad, none), InputError) << bad;
  const auto slurm = [](const char* name) -> const char* {
    const std::string n = name;
    return n == "SLURM_ARRAY_TASK_ID"      ? "7"
           : n == "SLURM_ARRAY_TASK_MIN"   ? "5"
           : n == "SLURM_ARRAY_TASK_COUNT" ? "4"
                                           : nullptr;
  };
  const Shard task = parse_shard("", slurm);
  EXPECT_EQ(task.index, 2);  // task 7 of 5..8
  EXPECT_EQ(task.count, 4);
  EXPECT_EQ(parse_shard("0/2", slurm).count, 2);  // --shard wins over the environment
  const auto past = [](const char* name) -> const char* {
    const std::string n = name;
    return n == "SLURM_ARRAY_TASK_ID" ? "9" : n == "SLURM_ARRAY_TASK_COUNT" ? "4" : nullptr;
  };
  EXPECT_THROW(parse_shard("", past), InputError);
}

}  // namespace
}  // namespace attnbench
