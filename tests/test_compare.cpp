// `attnbench compare`: verdicts on synthetic sample sets, matching rows, exit codes.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "app/compare.hpp"
#include "app/errors.hpp"
#include "app/stats.hpp"

using namespace attnbench;
using nlohmann::json;

namespace {

// `n` samples spread evenly over [center - spread, center + spread].
std::vector<double> samples(double center, double spread, int n = 41) {
  std::vector<double> v;
  for (int i = 0; i < n; ++i) v.push_back(center - spread + 2 * spread * i / (n - 1));
  return v;
}

TimingStats stats(const std::vector<double>& v) {
  const Summary s = summarize(v);
  return {s.median, s.q1, s.q3, s.noise, s.samples};
}

json timing(const std::vector<double>& v, const std::string& mode = "cold") {
  const Summary s = summarize(v);
  return {{"mode", mode}, {"median_ms", s.median}, {"min_ms", s.min}, {"max_ms", s.max}, {"q1_ms", s.q1},
          {"q3_ms", s.q3}, {"noise", s.noise},     {"samples", s.samples}};
}

json row(const std::string& variant, const json& t, const std::string& status = "verified") {
  json r = {{"case", "softmax-x"}, {"point", "cols=1000"}, {"variant", variant}, {"status", status}};
  if (!t.is_null()) r["timing"] = t;
  return r;
}

json report(std::vector<json> rows, const std::string& card = "NVIDIA H200") {
  return {{"attnbench", {{"version", "0.2.0"}, {"date", "2026-12-01T00:00:00Z"}, {"mode", "run"}}},
          {"device", {{"name", card}, {"driver", "13.0"}}},
          {"rows", rows}};
}

CompareResult cmp(const json& base, const json& now, double threshold = 0.05) {
  return compare_reports(base, now, threshold);
}

}  // namespace

TEST(Judge, TightAndClearlyApart) {
  const TimingStats base = stats(samples(1.0, 0.01)), slower = stats(samples(1.10, 0.01)),
                    faster = stats(samples(0.90, 0.01));
  double overlap = -1;
  EXPECT_EQ(judge(base, slower, 0.05, &overlap), Verdict::slow);
  EXPECT_EQ(overlap, 0);
  EXPECT_EQ(judge(base, faster, 0.05), Verdict::fast);
  EXPECT_EQ(judge(base, base, 0.05, &overlap), Verdict::same);
  EXPECT_EQ(overlap, 1);
}

TEST(Judge, OverlappingRangesAreSameEvenPastTheThreshold) {
  // 10% slower by the median, but the spread is +-30%: the ranges overlap, that is noise.
  double overlap = 0;
  EXPECT_EQ(judge(stats(samples(1.0, 0.3)), stats(samples(1.1, 0.3)), 0.05, &overlap), Verdict::same);
  EXPECT_GT(overlap, 0.5);
  EXPECT_LT(overlap, 1.0);
}

TEST(Judge, ApartButWithinTheThresholdIsSame) {
  // 3% slower, ranges apart (spread 0.5%): real, but below the 5% a CI job cares about.
  EXPECT_EQ(judge(stats(samples(1.0, 0.005)), stats(samples(1.03, 0.005)), 0.05), Verdict::same);
  EXPECT_EQ(judge(stats(samples(1.0, 0.005)), stats(samples(1.03, 0.005)), 0.02), Verdict::slow);
}

TEST(Judge, ZeroWidthRanges) {
  const TimingStats a{1.0, 1.0, 1.0, 0, 1}, b{1.2, 1.2, 1.2, 0, 1};
  double overlap = -1;
  EXPECT_EQ(judge(a, b, 0.05, &overlap), Verdict::slow);
  EXPECT_EQ(overlap, 0);
  EXPECT_EQ(judge(a, a, 0.05, &overlap), Verdict::same);
  EXPECT_EQ(overlap, 1);
}

TEST(Compare, ARunAgainstItselfIsSameEverywhere) {
  const json r = report({row("naive", timing(samples(3.0, 0.02))), row("warp_online", timing(samples(0.26, 0.001)))});
  const CompareResult c = cmp(r, r);
  ASSERT_EQ(c.rows.size(), 2u);
  for (const auto& x : c.rows) EXPECT_EQ(x.verdict, Verdict::same) << x.variant;
  EXPECT_EQ(c.exit_code(), 0);
  EXPECT_TRUE(c.warning.empty());
}

TEST(Compare, SlowFailsFastDoesNot) {
  const json base = report({row("naive", timing(samples(3.0, 0.01))), row("warp_online", timing(samples(0.26, 0.001)))});
  const json faster = report({row("naive", timing(samples(3.0, 0.01))), row("warp_online", timing(samples(0.2, 0.001)))});
  const json slower = report({row("naive", timing(samples(3.0, 0.01))), row("warp_online", timing(samples(0.3, 0.001)))});
  const CompareResult f = cmp(base, faster);
  EXPECT_EQ(f.rows.at(1).verdict, Verdict::fast);
  EXPECT_NEAR(f.rows.at(1).change, 0.2 / 0.26 - 1, 1e-9);
  EXPECT_EQ(f.exit_code(), 0);
  const CompareResult s = cmp(base, slower);
  EXPECT_EQ(s.rows.at(0).verdict, Verdict::same);
  EXPECT_EQ(s.rows.at(1).verdict, Verdict::slow);
  EXPECT_EQ(s.exit_code(), 1);
  // A higher threshold lets the same change through.
  EXPECT_EQ(cmp(base, slower, 0.20).exit_code(), 0);
}

TEST(Compare, MatchesByCasePointVariantAndMode) {
  json base_row = row("warp_online", nullptr);
  base_row["timings"] = {{"cold", timing(samples(1.0, 0.01))}, {"graph", timing(samples(0.5, 0.01), "graph")}};
  json new_row = row("warp_online", nullptr);
  new_row["timings"] = {{"cold", timing(samples(1.0, 0.01))}, {"graph", timing(samples(0.8, 0.01), "graph")}};
  json other_point = row("warp_online", timing(samples(9.0, 0.01)));
  other_point["point"] = "cols=2000";
  const CompareResult c = cmp(report({base_row}), report({other_point, new_row}));
  ASSERT_EQ(c.rows.size(), 3u);
  EXPECT_EQ(c.rows[0].mode, "cold");
  EXPECT_EQ(c.rows[0].verdict, Verdict::same);
  EXPECT_EQ(c.rows[1].mode, "graph");
  EXPECT_EQ(c.rows[1].verdict, Verdict::slow);
  EXPECT_EQ(c.rows[2].point, "cols=2000");
  EXPECT_EQ(c.rows[2].verdict, Verdict::added);
  EXPECT_EQ(c.exit_code(), 1);
}

TEST(Compare, MissingAndAddedRowsDoNotFail) {
  const json base = report({row("naive", timing(samples(3.0, 0.01))), row("old", timing(samples(1.0, 0.01)))});
  const json now = report({row("naive", timing(samples(3.0, 0.01))), row("new", timing(samples(1.0, 0.01)))});
  const CompareResult c = cmp(base, now);
  ASSERT_EQ(c.rows.size(), 3u);
  EXPECT_EQ(c.rows[1].verdict, Verdict::missing);
  EXPECT_EQ(c.rows[2].verdict, Verdict::added);
  EXPECT_EQ(c.exit_code(), 0);
}

TEST(Compare, AFailedVerificationInNewFails) {
  const json base = report({row("naive", timing(samples(3.0, 0.01))), row("fast", timing(samples(1.0, 0.01)))});
  json broken = row("fast", nullptr, "FAILED");
  broken["reason"] = "12 of 4096 checked elements outside";
  const CompareResult c = cmp(base, report({row("naive", timing(samples(3.0, 0.01))), broken}));
  EXPECT_EQ(c.rows[1].verdict, Verdict::failed);
  EXPECT_EQ(c.rows[1].note, "12 of 4096 checked elements outside");
  EXPECT_EQ(c.exit_code(), 1);
}

TEST(Compare, DifferentCardsWarn) {
  const json a = report({row("naive", timing(samples(3.0, 0.01)))}, "NVIDIA H100 80GB HBM3");
  const json b = report({row("naive", timing(samples(3.0, 0.01)))}, "NVIDIA H200");
  EXPECT_NE(cmp(a, b).warning.find("different cards"), std::string::npos);
}

TEST(Compare, BadInput) {
  const json ok = report({row("naive", timing(samples(3.0, 0.01)))});
  EXPECT_THROW(cmp(json::object(), ok), InputError);
  EXPECT_THROW(cmp(ok, json::array()), InputError);
  // Nothing timed in common: probably the wrong file, so say so instead of passing.
  EXPECT_THROW(cmp(ok, report({row("other", timing(samples(3.0, 0.01)))})), InputError);
  EXPECT_THROW(cmp(ok, report({row("naive", nullptr, "verified")})), InputError);
}

TEST(Compare, ThresholdIsInPercent) {
  EXPECT_DOUBLE_EQ(parse_threshold("5"), 0.05);
  EXPECT_DOUBLE_EQ(parse_threshold("2.5%"), 0.025);
  EXPECT_DOUBLE_EQ(parse_threshold("0"), 0);
  EXPECT_THROW(parse_threshold("five"), InputError);
  EXPECT_THROW(parse_threshold("-1"), InputError);
  EXPECT_THROW(parse_threshold("%"), InputError);
}

TEST(Compare, TableAndMarkdown) {
  const json base = report({row("naive", timing(samples(3.0, 0.01))), row("fast", timing(samples(1.0, 0.01)))});
  const json now = report({row("naive", timing(samples(3.0, 0.01))), row("fast", timing(samples(1.2, 0.01)))});
  const CompareResult c = cmp(base, now);
  std::ostringstream table, md;
  write_compare(table, c, false);
  write_compare(md, c, true);
  EXPECT_NE(table.str().find("BASE: NVIDIA H200, driver 13.0"), std::string::npos) << table.str();
  EXPECT_NE(table.str().find("SLOW"), std::string::npos);
  EXPECT_NE(table.str().find("+20.0%"), std::string::npos);
  EXPECT_NE(table.str().find("0 FAST, 1 SLOW, 1 SAME (threshold 5%"), std::string::npos) << table.str();
  EXPECT_NE(md.str().find("| softmax-x | cols=1000 | fast | cold |"), std::string::npos) << md.str();
  EXPECT_NE(md.str().find("**SLOW**"), std::string::npos);
}
