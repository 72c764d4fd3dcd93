// attnbench merge (app/merge.cpp): parts of one run back into one report, in the run's
// order, with what no part finished or more than one did, and refusal of parts that are
// not of one run.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "app/errors.hpp"
#include "app/merge.hpp"

namespace attnbench {
namespace {

using json = nlohmann::json;

const std::vector<std::pair<std::string, std::string>> kPoints = {{"a", ""}, {"b", "x=1"}, {"b", "x=2"}, {"c", ""}};

json row(const std::string& c, const std::string& p, const std::string& variant) {
  return {{"case", c}, {"point", p}, {"variant", variant}, {"status", "verified"}};
}

// A part's report: its plan (the whole run's points, `done` of them) and rows for those points.
json part(int64_t index, const std::vector<int64_t>& done, const std::string& version = "0.1.0") {
  RunPlan plan{"shard", index, 2, kPoints, done};
  json r = {{"schema", 4},
            {"attnbench",
             {{"version", version},
              {"mode", "verify"},
              {"timing_mode", "per case"},
              {"complete", true},
              {"load_ms", 1.0},
              {"elapsed_ms", 10.0 + index}}},
            {"device", {{"name", "card"}, {"index", index}}},
            {"plan", plan_json(plan)},
            {"rows", json::array()}};
  for (int64_t k : done)
    for (const char* v : {"naive", "fast"}) r["rows"].push_back(row(kPoints[k].first, kPoints[k].second, v));
  return r;
}

std::vector<std::string> order(const json& report) {
  std::vector<std::string> out;
  for (const json& r : report["rows"])
    out.push_back(r["case"].get<std::string>() + "/" + r["point"].get<std::string>() + "/" +
                  r["variant"].get<std::string>() + "@" + std::to_string(r["part"].get<int>()));
  return out;
}

TEST(Merge, PartsComeBackInTheRunsOrder) {
  const MergeResult m = merge_reports({part(0, {2, 0}), part(1, {3, 1})}, {"p0.json", "p1.json"}, "merge", "now");
  EXPECT_EQ(order(m.report), (std::vector<std::string>{"a//naive@0", "a//fast@0", "b/x=1/naive@1", "b/x=1/fast@1",
                                                       "b/x=2/naive@0", "b/x=2/fast@0", "c//naive@1", "c//fast@1"}));
  EXPECT_TRUE(m.missing.empty());
  EXPECT_TRUE(m.duplicated.empty());
  EXPECT_TRUE(m.report["attnbench"]["complete"].get<bool>());
  EXPECT_FALSE(m.report.contains("plan"));
  EXPECT_EQ(m.report["attnbench"]["elapsed_ms"].get<double>(), 11.0);  // side by side: the longest part
  ASSERT_EQ(m.report["parts"].size(), 2u);
  EXPECT_EQ(m.report["parts"][1]["report"], "p1.json");
  EXPECT_EQ(m.report["parts"][1]["device"]["index"], 1);
  EXPECT_EQ(m.report["parts"][0]["elapsed_ms"].get<double>(), 10.0);  // each part's own run
  EXPECT_EQ(m.report["parts"][1]["elapsed_ms"].get<double>(), 11.0);
}

TEST(Merge, NamesThePointsNoPartFinished) {
  const MergeResult m = merge_reports({part(0, {0, 2}), part(1, {1})}, {"p0", "p1"}, "merge", "now");
  EXPECT_EQ(m.missing, std::vector<std::string>{"c"});
  EXPECT_FALSE(m.report["attnbench"]["complete"].get<bool>());
  EXPECT_EQ(m.report["rows"].size(), 6u);
}

TEST(Merge, KeepsTheFirstPartsRowsOfAPointFinishedTwice) {
  json second = part(1, {1, 2, 3});
  const MergeResult m = merge_reports({part(0, {0, 2}), second}, {"p0", "p1"}, "merge", "now");
  EXPECT_EQ(m.duplicated, std::vector<std::string>{"b [x=2]"});
  int rows_of_b2 = 0;
  for (const json& r : m.report["rows"])
    if (r["point"] == "x=2") {
      ++rows_of_b2;
      EXPECT_EQ(r["part"], 0);
    }
  EXPECT_EQ(rows_of_b2, 2);
}

TEST(Merge, TellsCasesOfOneNameApartByPlanIndex) {
  // Two case files named alike (cases/attention/head-dims.toml, cases/decode/head-dims.toml).
  const std::vector<std::pair<std::string, std::string>> points = {{"same", ""}, {"same", ""}};
  auto make = [&](int64_t index, int64_t k, const char* variant) {
    json r = part(index, {});
    r["plan"] = plan_json(RunPlan{"devices", index, 2, points, {k}});
    json one = row("same", "", variant);
    one["plan_index"] = k;
    r["rows"].push_back(one);
    return r;
  };
  const MergeResult m = merge_reports({make(0, 1, "decode_kernel"), make(1, 0, "attention_kernel")}, {"p0", "p1"},
                                      "merge", "now");
  ASSERT_EQ(m.report["rows"].size(), 2u);
  EXPECT_EQ(m.report["rows"][0]["variant"], "attention_kernel");
  EXPECT_EQ(m.report["rows"][1]["variant"], "decode_kernel");
  EXPECT_TRUE(m.missing.empty());
}

TEST(Merge, RefusesPartsOfDifferentRuns) {
  EXPECT_THROW(merge_reports({part(0, {0}), part(1, {1}, "0.2.0")}, {"p0", "p1"}, "m", "d"), InputError);
  json other = part(1, {1});
  other["plan"]["points"][3] = {"d", ""};
  EXPECT_THROW(merge_reports({part(0, {0}), other}, {"p0", "p1"}, "m", "d"), InputError);
  json unplanned = part(1, {1});
  unplanned.erase("plan");
  try {
    merge_reports({part(0, {0}), unplanned}, {"p0", "p1.json"}, "m", "d");
    FAIL() << "a report without a plan was merged";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("p1.json: error: has no plan"), std::string::npos) << e.what();
  }
  json stray = part(1, {1});
  stray["rows"].push_back(row("zzz", "", "naive"));
  EXPECT_THROW(merge_reports({part(0, {0}), stray}, {"p0", "p1"}, "m", "d"), InputError);
}

}  // namespace
}  // namespace attnbench
