// `attnbench compare`: verdicts on synthetic sample sets, matching rows, exit codes.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
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

// The same with every sample, as `run` writes it since schema 3.
json sampled(const std::vector<double>& v, const std::string& mode = "cold") {
  json t = timing(v, mode);
  t["samples_ms"] = v;
  return t;
}

// 20 samples whose quartiles are exactly q1, median and q3 (summarize's interpolation puts
// them between samples 4 and 5, 9 and 10, 14 and 15, which are set equal), the rest spread
// evenly between and beyond them.
std::vector<double> quartiles(double q1, double median, double q3) {
  const std::vector<std::pair<int, double>> at = {{0, 2 * q1 - median}, {4, q1},  {5, q1},  {9, median},
                                                  {10, median},         {14, q3}, {15, q3}, {19, 2 * q3 - median}};
  std::vector<double> v(20);
  for (size_t k = 0; k + 1 < at.size(); ++k)
    for (int i = at[k].first; i <= at[k + 1].first; ++i)
      v[static_cast<size_t>(i)] = at[k].second + (at[k + 1].second - at[k].second) * (i - at[k].first) /
                                                     std::max(1, at[k + 1].first - at[k].first);
  return v;
}

json row(const std::string& variant, const json& t, const std::string& status = "verified") {
  json r = {{"case", "softmax-x"}, {"point", "cols=1000"}, {"variant", variant}, {"status", status}};
  if (!t.is_null()) r["timing"] = t;
  return r;
}

json report(std::vector<json> rows, const std::string& card = "NVIDIA H200") {
  return {{"schema", 3},
          {"attnbench", {{"version", "0.2.0"}, {"date", "2026-12-01T00:00:00Z"}, {"mode", "run"}}},
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

TEST(JudgeInterval, TheBandIsOnePlusThresholdAndItsInverse) {
  // At 5% the band is [1/1.05, 1.05] = [0.952, 1.05].
  EXPECT_EQ(judge_interval({1.051, 1.2}, 0.05), Verdict::slow);
  EXPECT_EQ(judge_interval({0.80, 0.951}, 0.05), Verdict::fast);
  EXPECT_EQ(judge_interval({0.953, 1.049}, 0.05), Verdict::same);
  EXPECT_EQ(judge_interval({1 / 1.05, 1.05}, 0.05), Verdict::same);  // the edges belong to the band
  EXPECT_EQ(judge_interval({1.01, 1.06}, 0.05), Verdict::unsure);    // crosses 1.05
  EXPECT_EQ(judge_interval({0.94, 0.99}, 0.05), Verdict::unsure);    // crosses 0.952
  EXPECT_EQ(judge_interval({0.5, 2.0}, 0.05), Verdict::unsure);      // crosses both
  // 0.951 is a 4.9% speed-up by the ratio but 5.1% by 1/ratio: the band is symmetric in
  // ratio, so swapping BASE and NEW swaps SLOW and FAST.
  EXPECT_EQ(judge_interval({1 / 1.2, 1 / 1.051}, 0.05), Verdict::fast);
  // With no threshold nothing is SAME but an interval of exactly 1.
  EXPECT_EQ(judge_interval({0.999, 1.001}, 0), Verdict::unsure);
  EXPECT_EQ(judge_interval({1.001, 1.002}, 0), Verdict::slow);
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
  EXPECT_EQ(c.rows[1].mode, "graph_hot");  // schema 3's graph was warm: schema 4's graph_hot
  EXPECT_EQ(c.rows[1].verdict, Verdict::slow);
  EXPECT_EQ(c.rows[2].point, "cols=2000");
  EXPECT_EQ(c.rows[2].verdict, Verdict::added);
  EXPECT_EQ(c.exit_code(), 1);
}

// A gate must not pass because the run it judges lost rows (a variant now skipped, a case
// dropped): missing rows fail unless allowed; added rows never do.
TEST(Compare, MissingRowsFailUnlessAllowedAddedRowsDoNot) {
  const json base = report({row("naive", timing(samples(3.0, 0.01))), row("old", timing(samples(1.0, 0.01)))});
  const json now = report({row("naive", timing(samples(3.0, 0.01))), row("new", timing(samples(1.0, 0.01)))});
  const CompareResult c = cmp(base, now);
  ASSERT_EQ(c.rows.size(), 3u);
  EXPECT_EQ(c.rows[1].verdict, Verdict::missing);
  EXPECT_EQ(c.rows[2].verdict, Verdict::added);
  EXPECT_EQ(c.exit_code(), 1);
  EXPECT_EQ(c.exit_code(false, true), 0);  // --allow-missing
  EXPECT_EQ(missing_summary(c), "1 row of BASE is missing in NEW: softmax-x cols=1000 old (cold)");
  // Only added: passes.
  EXPECT_EQ(cmp(report({base["rows"][0]}), now).exit_code(), 0);
  // A row still there but no longer timed (skipped now) is missing too.
  const CompareResult skipped =
      cmp(base, report({row("naive", timing(samples(3.0, 0.01))), row("old", nullptr, "skipped")}));
  EXPECT_EQ(skipped.rows[1].verdict, Verdict::missing);
  EXPECT_EQ(skipped.rows[1].note, "no cold timing in NEW (skipped)");
  EXPECT_EQ(skipped.exit_code(), 1);
  // Many missing: the count, three names and how many more.
  std::vector<json> many = {row("naive", timing(samples(3.0, 0.01)))};
  for (int i = 0; i < 5; ++i) many.push_back(row("v" + std::to_string(i), timing(samples(1.0, 0.01))));
  const CompareResult lost = cmp(report(many), report({many[0]}));
  EXPECT_EQ(missing_summary(lost),
            "5 rows of BASE are missing in NEW: softmax-x cols=1000 v0 (cold), softmax-x cols=1000 v1 (cold), "
            "softmax-x cols=1000 v2 (cold) and 2 more");
  std::ostringstream table;
  write_compare(table, lost, CompareOutput{});
  EXPECT_NE(table.str().find("5 rows of BASE are missing in NEW: softmax-x cols=1000 v0 (cold)"), std::string::npos)
      << table.str();
  EXPECT_NE(table.str().find("this fails the comparison (--allow-missing"), std::string::npos) << table.str();
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

TEST(Compare, UnfinishedRunsWarn) {
  json a = report({row("naive", timing(samples(3.0, 0.01)))});
  const json b = report({row("naive", timing(samples(3.0, 0.01)))});
  EXPECT_EQ(cmp(a, b).warning, "");
  a["attnbench"]["complete"] = false;  // what -o holds after a fault or a kill
  const std::string w = compare_reports(a, b, 0.05, "base.json", "new.json").warning;
  EXPECT_NE(w.find("base.json is an unfinished run"), std::string::npos) << w;
  EXPECT_EQ(w.find("new.json"), std::string::npos) << w;
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
  EXPECT_NE(table.str().find("0 FAST, 1 SLOW, 1 SAME, 0 UNSURE (threshold 5%: SLOW above 1.050x, FAST below 0.952x"),
            std::string::npos)
      << table.str();
  EXPECT_NE(md.str().find("| softmax-x | cols=1000 | fast | cold |"), std::string::npos) << md.str();
  EXPECT_NE(md.str().find("**SLOW**"), std::string::npos);
}

// ---- Refusing what compare cannot believe: each class throws one InputError line that
// names the report and, for a row, its case, point, variant and mode.

namespace {

// The message of the InputError `f` throws; a failure when it throws nothing or something else.
template <typename F>
std::string refusal(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    const std::string m = e.what();
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    EXPECT_LE(m.size(), 400u) << m;
    return m;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not an InputError: " << e.what();
    return "";
  }
  ADD_FAILURE() << "accepted";
  return "";
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// Two rows, the second ("fast") the one the tests break.
json good() { return report({row("naive", timing(samples(3.0, 0.01))), row("fast", timing(samples(1.0, 0.01)))}); }

const char* kFastRow = R"(rows[1] (case "softmax-x", point "cols=1000", variant "fast", mode "cold"))";

// compare_reports(good, doc) as the CLI would name them.
std::string refused_as_new(const json& doc) {
  return refusal([&] { compare_reports(good(), doc, 0.05, "base.json", "new.json"); });
}

struct TempDir {
  std::filesystem::path path;
  TempDir() {
    path = std::filesystem::temp_directory_path() /
           ("attnbench-test-compare-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string write(const std::string& name, const std::string& text) const {
    const std::string p = (path / name).string();
    std::ofstream(p, std::ios::binary) << text;
    return p;
  }
};

}  // namespace

TEST(CompareRefuses, SchemaMissingWrongTypeOrUnknown) {
  json r = good();
  // Schema 1 reports read the same keys (only "pipeline" became "stages"): still compared.
  r["schema"] = 1;
  EXPECT_EQ(cmp(r, good()).rows.size(), 2u);
  r["schema"] = 2;
  EXPECT_EQ(cmp(good(), r).exit_code(), 0);

  r["schema"] = 3;
  EXPECT_EQ(cmp(good(), r).exit_code(), 0);

  r["schema"] = 4;
  EXPECT_EQ(cmp(good(), r).exit_code(), 0);

  r["schema"] = 5;
  std::string m = refused_as_new(r);
  EXPECT_TRUE(has(m, "new.json: error: the report has schema 5")) << m;
  EXPECT_TRUE(has(m, "reads schema 1 to 4")) << m;
  for (const json& bad : {json(0), json(-1), json(99999999999LL)}) {
    r["schema"] = bad;
    m = refused_as_new(r);
    EXPECT_TRUE(has(m, "schema " + bad.dump())) << m;
  }
  for (const json& bad : {json("2"), json(2.0), json(2.5), json(nullptr), json::array({2}), json(true)}) {
    r["schema"] = bad;
    m = refused_as_new(r);
    EXPECT_TRUE(has(m, "new.json: error: the report's \"schema\" is ")) << m;
    EXPECT_TRUE(has(m, "not an integer; this build of attnbench reads schema 1 to 4")) << m;
  }
  r.erase("schema");
  m = refusal([&] { cmp(r, good()); });
  EXPECT_TRUE(has(m, "BASE: error: the report has no \"schema\"")) << m;
}

TEST(CompareRefuses, ImpossibleStatistics) {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  struct Bad {
    const char* key;
    json value;
    const char* says;
  };
  const std::vector<Bad> bads = {
      {"median_ms", -1.0, "timing.median_ms is -1: a time cannot be negative"},
      {"median_ms", nan, "timing.median_ms is nan, expected a finite number"},
      {"median_ms", inf, "timing.median_ms is inf, expected a finite number"},
      {"median_ms", -inf, "timing.median_ms is -inf"},
      {"median_ms", "1.0", "timing.median_ms is the string \"1.0\", expected a number"},
      {"median_ms", nullptr, "timing.median_ms is null, expected a number"},
      {"median_ms", 0.0, "timing.median_ms is 0: no kernel runs in no time"},
      {"median_ms", 1e-300, "timing.median_ms is 1e-300"},
      {"median_ms", 1e300, "over 10^9 ms"},
      {"q1_ms", 1.5, "quartiles out of order: q1_ms 1.5, median_ms 1, q3_ms"},
      {"q3_ms", 0.5, "quartiles out of order: q1_ms"},
      {"q1_ms", -0.1, "timing.q1_ms is -0.1: a time cannot be negative"},
      {"min_ms", -0.1, "timing.min_ms is -0.1"},
      {"max_ms", nan, "timing.max_ms is nan"},
      {"noise", -0.01, "timing.noise is -0.01: a spread cannot be negative"},
      {"noise", "low", "timing.noise is the string \"low\""},
      {"samples", -41, "timing.samples is -41, expected a whole number of samples"},
      {"samples", 0, "timing.samples is 0"},
      {"samples", 2.5, "timing.samples is 2.5"},
      {"samples", true, "timing.samples is true, expected a number"},
  };
  for (const Bad& b : bads) {
    json r = good();
    r["rows"][1]["timing"][b.key] = b.value;
    const std::string m = refused_as_new(r);
    EXPECT_TRUE(has(m, std::string("new.json: error: ") + kFastRow + ": ")) << b.key << ": " << m;
    EXPECT_TRUE(has(m, b.says)) << b.key << ": " << m;
    // BASE is checked as well: its median divides the change.
    const std::string mb = refusal([&] { cmp(r, good()); });
    EXPECT_TRUE(has(mb, std::string("BASE: error: ") + kFastRow)) << mb;
  }
  // A timing without a median is not a timing.
  json r = good();
  r["rows"][1]["timing"].erase("median_ms");
  EXPECT_TRUE(has(refused_as_new(r), "timing has no median_ms"));
  // The statistics of every mode are checked, each named by its mode.
  r = good();
  r["rows"][1]["timings"] = {{"cold", timing(samples(1.0, 0.01))}, {"graph", timing(samples(0.5, 0.01), "graph")}};
  r["rows"][1]["timings"]["graph"]["q1_ms"] = 0.9;
  const std::string m = refused_as_new(r);
  EXPECT_TRUE(has(m, R"(variant "fast", mode "graph"): timings.graph has its quartiles out of order)")) << m;
  // Quartiles a rounding error apart, as interpolation may give them, are fine.
  r = good();
  r["rows"][1]["timing"]["q1_ms"] = r["rows"][1]["timing"]["median_ms"].get<double>() * (1 + 1e-14);
  EXPECT_NO_THROW(cmp(good(), r));
  // A good report still compares; before, a negative median read "-10100.0% FAST" and a
  // zero one "+inf%".
  EXPECT_EQ(cmp(good(), good()).count(Verdict::same), 2);
}

TEST(CompareRefuses, ControlCharactersAndHugeStringsArePrintedEscaped) {
  json r = good();
  const std::string evil_case = "\x1b[31msoftmax\x1b[0m", evil_point = "cols=1000|rows=2\nSLOW\r";
  const std::string long_variant = "naive" + std::string(100000, 'v');
  for (auto& x : r["rows"]) {
    x["case"] = evil_case;
    x["point"] = evil_point;
  }
  r["rows"][0]["variant"] = long_variant;
  r["rows"][1]["timing"]["mode"] = "cold\a";
  r["device"]["name"] = "NVIDIA \x1b]0;title\x07H200|" + std::string(100000, 'x');
  r["attnbench"]["version"] = "0.2.0\nFAKE: 0 SLOW";
  json other = r;
  other["device"]["name"] = "NVIDIA \x1b[2JH100";
  const CompareResult c = cmp(r, other);
  // The rows keep their strings as they are, for matching...
  EXPECT_EQ(c.rows.at(0).case_name, evil_case);
  EXPECT_EQ(c.rows.at(0).variant, long_variant);
  // ...and every way of printing them escapes and cuts.
  for (const bool markdown : {false, true}) {
    std::ostringstream out;
    write_compare(out, c, markdown);
    const std::string s = out.str();
    for (char ch : s) {
      const auto u = static_cast<unsigned char>(ch);
      ASSERT_TRUE(u == '\n' || (u >= 0x20 && u != 0x7f)) << "control character " << int(u) << " in\n" << s;
    }
    EXPECT_FALSE(has(s, "FAKE")  && !has(s, "\\nFAKE")) << s;
    std::istringstream lines(s);
    size_t n = 0;
    for (std::string line; std::getline(lines, line); ++n) EXPECT_LE(line.size(), 700u) << line.substr(0, 200);
    EXPECT_LE(n, 16u) << s;  // with the footnotes: these rows have no samples
    EXPECT_FALSE(has(s, std::string(200, 'v'))) << "a long variant name is cut";
    EXPECT_FALSE(has(s, std::string(200, 'x'))) << "a long device name is cut";
    if (markdown) {
      EXPECT_TRUE(has(s, "| \\\\x1b[31msoftmax\\\\x1b[0m | cols=1000\\|rows=2\\\\nSLOW\\\\r |")) << s;
      EXPECT_TRUE(has(s, "H200\\|xxx")) << s;
      EXPECT_TRUE(has(s, "0.2.0\\\\nFAKE")) << s;
      // Every table line has exactly the 11 unescaped '|' of its 10 columns.
      std::istringstream md(s);
      for (std::string line; std::getline(md, line);) {
        if (line.empty() || line[0] != '|') continue;
        int bars = 0;
        for (size_t i = 0; i < line.size(); ++i) {
          if (line[i] == '\\') ++i;
          else if (line[i] == '|') ++bars;
        }
        EXPECT_EQ(bars, 11) << line;
      }
    } else {
      // The case is a heading over its rows.
      EXPECT_TRUE(has(s, "\n\\x1b[31msoftmax\\x1b[0m\n  cols=1000|rows=2\\nSLOW\\r  naive")) << s;
      EXPECT_TRUE(has(s, "cold\\x07")) << s;
      EXPECT_TRUE(has(s, "NVIDIA \\x1b]0;title\\x07H200|xxx")) << s;
    }
  }
  EXPECT_TRUE(has(c.warning, "\\x1b[2JH100")) << c.warning;
  EXPECT_FALSE(has(c.warning, "\x1b")) << c.warning;
  // A bad row quotes its names the same way in the message.
  r["rows"][1]["timing"]["median_ms"] = -1;
  const std::string m = refused_as_new(r);
  EXPECT_TRUE(has(m, R"(case "\x1b[31msoftmax\x1b[0m", point "cols=1000|rows=2\nSLOW\r")")) << m;
  EXPECT_TRUE(has(m, "is -1: a time cannot be negative")) << m;
}

TEST(CompareRefuses, WrongTypesAreInputErrors) {
  struct Bad {
    std::function<void(json&)> change;
    const char* says;
  };
  const std::vector<Bad> bads = {
      {[](json& r) { r = json::array(); }, "not an attnbench json report: the document is an array"},
      {[](json& r) { r = "report"; }, "the document is the string \"report\""},
      {[](json& r) { r["rows"] = json::object(); }, "\"rows\" is an object, expected an array"},
      {[](json& r) { r["rows"] = "[]"; }, "\"rows\" is the string \"[]\", expected an array"},
      {[](json& r) { r.erase("rows"); }, "\"rows\" is missing"},
      {[](json& r) { r["attnbench"] = json::array(); }, "\"attnbench\" is an array, expected an object"},
      {[](json& r) { r["attnbench"]["version"] = 2; }, "attnbench.version is the number 2, expected a string"},
      {[](json& r) { r["device"] = "H200"; }, "\"device\" is the string \"H200\", expected an object"},
      {[](json& r) { r["device"]["name"] = json::array(); }, "device.name is an array, expected a string"},
      {[](json& r) { r["rows"][1] = json::array(); }, "rows[1]: the row is an array, expected an object"},
      {[](json& r) { r["rows"][1]["case"] = 7; }, "rows[1]: case is the number 7, expected a string"},
      {[](json& r) { r["rows"][1].erase("variant"); }, "rows[1]: variant is missing"},
      {[](json& r) { r["rows"][1]["status"] = false; }, "rows[1]: status is false, expected a string"},
      {[](json& r) { r["rows"][1]["reason"] = json::object(); }, "rows[1]: reason is an object"},
      {[](json& r) { r["rows"][1]["timing"] = 1.0; },
       R"(rows[1] (case "softmax-x", point "cols=1000", variant "fast"): timing is the number 1, expected an object)"},
      {[](json& r) { r["rows"][1]["timing"]["mode"] = 1; }, "timing.mode is the number 1, expected a string"},
      {[](json& r) { r["rows"][1]["timings"] = json::array(); }, "timings is an array, expected an object"},
      {[](json& r) { r["rows"][1]["timings"] = {{"cold", "fast"}}; },
       R"(mode "cold"): timings.cold is the string "fast", expected an object)"},
  };
  for (const Bad& b : bads) {
    json r = good();
    b.change(r);
    const std::string m = refused_as_new(r);
    EXPECT_TRUE(has(m, "new.json: error: ")) << m;
    EXPECT_TRUE(has(m, b.says)) << b.says << "\n" << m;
  }
}

TEST(CompareRefuses, NoJsonExceptionEscapesWhateverAFieldHolds) {
  // Every value of a good report, in turn, replaced by every kind of json value: compare
  // either accepts the result or refuses it with an InputError, never anything else.
  json base = good();
  base["rows"][1]["timings"] = {{"cold", timing(samples(1.0, 0.01))}};
  const json flat = base.flatten();
  const std::vector<json> kinds = {nullptr, true, -1, 0, 1e308, "x", json::array(), json::object(),
                                   json::array({1, 2}), json{{"a", 1}}};
  int refused = 0, tried = 0;
  for (const auto& [pointer, value] : flat.items()) {
    for (const json& k : kinds) {
      json r = base;
      r[json::json_pointer(pointer)] = k;
      ++tried;
      try {
        compare_reports(base, r, 0.05);
        compare_reports(r, base, 0.05);
      } catch (const InputError&) {
        ++refused;
      } catch (const std::exception& e) {
        ADD_FAILURE() << pointer << " = " << k.dump() << ": " << e.what();
      }
    }
  }
  EXPECT_GT(refused, tried / 2);
}

TEST(CompareRefuses, ReadingFiles) {
  const TempDir dir;
  const std::string p = dir.path.string();
  std::string m = refusal([&] { read_report(p); });
  EXPECT_EQ(m, p + ": error: is a directory, not a json report");
  m = refusal([&] { read_report(p + "/nope.json"); });
  EXPECT_TRUE(has(m, p + "/nope.json: error: cannot read the report")) << m;
  EXPECT_TRUE(has(refusal([&] { read_report(dir.write("empty.json", "")); }), "empty.json: error: the file is empty"));
  EXPECT_TRUE(has(refusal([&] { read_report(dir.write("blank.json", " \n\t\n")); }), "blank.json: error: the file is empty"));
  m = refusal([&] { read_report(dir.write("bad.json", "{\"schema\": 2,\n \"rows\": [\x1b")); });
  EXPECT_TRUE(has(m, "bad.json: error: not valid json: parse error at line 2")) << m;
  EXPECT_FALSE(has(m, "\x1b")) << m;
  EXPECT_FALSE(has(m, "[json.exception")) << m;
  m = refusal([&] { read_report(dir.write("array.json", "[1, 2]")); });
  EXPECT_TRUE(has(m, "array.json: error: not an attnbench json report: the document is an array")) << m;
  m = refusal([&] { read_report(dir.write("number.json", "3")); });
  EXPECT_TRUE(has(m, "number.json: error: not an attnbench json report: the document is the number 3")) << m;
  // JSON has no infinity; 1e999 would be one, and is refused as it is parsed.
  json r = good();
  r["rows"][1]["timing"]["median_ms"] = 1.0;
  std::string text = r.dump();
  text.replace(text.find("\"median_ms\":1.0"), 15, "\"median_ms\":1e999");
  m = refusal([&] { read_report(dir.write("inf.json", text)); });
  EXPECT_TRUE(has(m, "inf.json: error: not valid json: number overflow parsing '1e999'")) << m;
  // read_report checks the whole report, so the CLI's messages name the file, not BASE / NEW.
  r = good();
  r["rows"][1]["timing"]["q1_ms"] = 2.0;
  m = refusal([&] { read_report(dir.write("quartiles.json", r.dump())); });
  EXPECT_TRUE(has(m, std::string("quartiles.json: error: ") + kFastRow + ": timing has its quartiles")) << m;
  r["rows"][1]["timing"] = "fast";
  m = refusal([&] { read_report(dir.write("typed.json", r.dump())); });
  EXPECT_TRUE(has(m, "typed.json: error: rows[1]")) << m;
  // A path with control characters is printed escaped.
  m = refusal([&] { read_report(p + "/\x1b[2Jnope.json"); });
  EXPECT_TRUE(has(m, "/\\x1b[2Jnope.json: error: cannot read")) << m;
  // A good file reads, and compares.
  const std::string ok = dir.write("ok.json", good().dump(1));
  EXPECT_EQ(cmp(read_report(ok), read_report(ok)).count(Verdict::same), 2);
}

TEST(CompareRefuses, ThresholdOnlyPlainPercentages) {
  for (const char* bad : {"nan", "NaN%", "inf", "infinity", "-1", "-0", "+5", "1001", "1000.5", "1e1", "0x10", "5x",
                          " 5", "5 ", "5%%", "5.5.5", ".", "", "%", "5\n", "99999999999999999999999999999999999"}) {
    const std::string m = refusal([&] { parse_threshold(bad); });
    EXPECT_TRUE(has(m, "--threshold ")) << bad;
    EXPECT_TRUE(has(m, ": error: expected a percentage from 0 to 1000")) << m;
  }
  EXPECT_DOUBLE_EQ(parse_threshold("1000"), 10);
  EXPECT_DOUBLE_EQ(parse_threshold("1000%"), 10);
  EXPECT_DOUBLE_EQ(parse_threshold(".5"), 0.005);
  EXPECT_DOUBLE_EQ(parse_threshold("7."), 0.07);
  // The API refuses what parse_threshold would.
  EXPECT_THROW(cmp(good(), good(), std::nan("")), InputError);
  EXPECT_THROW(cmp(good(), good(), -0.01), InputError);
}

// ---- Verdicts from the samples: the bootstrap interval of NEW / BASE medians.

TEST(CompareSamples, TheNoisyRegressionTheQuartileRuleCalledSameIsUnsure) {
  // BASE: median 1.0, IQR 0.7-1.3; NEW: median 1.25, IQR 0.95-1.6; 20 samples each.
  const std::vector<double> base = quartiles(0.7, 1.0, 1.3), now = quartiles(0.95, 1.25, 1.6);
  const Summary b = summarize(base), n = summarize(now);
  ASSERT_NEAR(b.median, 1.0, 1e-12);
  ASSERT_NEAR(b.q1, 0.7, 1e-12);
  ASSERT_NEAR(b.q3, 1.3, 1e-12);
  ASSERT_NEAR(n.median, 1.25, 1e-12);
  ASSERT_NEAR(n.q1, 0.95, 1e-12);
  ASSERT_NEAR(n.q3, 1.6, 1e-12);
  // Without samples the ranges overlap: SAME, as compare said before.
  const CompareResult old = cmp(report({row("x", timing(base))}), report({row("x", timing(now))}));
  EXPECT_EQ(old.rows.at(0).verdict, Verdict::same);
  EXPECT_FALSE(old.rows.at(0).by_samples);
  // With them, the interval is wide and crosses 1.05: UNSURE, which does not fail...
  const CompareResult c = cmp(report({row("x", sampled(base))}), report({row("x", sampled(now))}));
  const CompareRow& r = c.rows.at(0);
  EXPECT_TRUE(r.by_samples);
  EXPECT_EQ(r.verdict, Verdict::unsure) << r.ratio.lo << " " << r.ratio.hi;
  EXPECT_LT(r.ratio.lo, 1.05);
  EXPECT_GT(r.ratio.hi, 1.05);
  EXPECT_NEAR(r.change, 0.25, 1e-12);
  EXPECT_LT(r.ratio.lo, 1 / 1.05);  // 20 samples this noisy cannot rule out a speed-up either
  EXPECT_EQ(r.note, "the interval crosses 0.952 and 1.050; BASE's noise is above the threshold");
  // BASE's own noise (MAD 0.3 of 1.0) is far above 5%: warned, without changing the verdict.
  EXPECT_TRUE(r.noisy_base);
  EXPECT_TRUE(has(c.noise_warning, "1 row of BASE has noise above the 5% threshold (up to 4")) << c.noise_warning;
  EXPECT_EQ(c.exit_code(), 0);
  // ...unless the gate wants every change decided.
  EXPECT_EQ(c.exit_code(true), 1);
}

TEST(CompareSamples, ATightRegressionIsSlowAndFails) {
  const json base = report({row("x", sampled(quartiles(0.99, 1.0, 1.01)))});
  const json now = report({row("x", sampled(quartiles(1.2375, 1.25, 1.2625)))});
  const CompareResult c = cmp(base, now);
  const CompareRow& r = c.rows.at(0);
  EXPECT_TRUE(r.by_samples);
  EXPECT_EQ(r.verdict, Verdict::slow);
  EXPECT_GT(r.ratio.lo, 1.05);
  EXPECT_LT(r.ratio.lo, 1.25);
  EXPECT_GT(r.ratio.hi, 1.25);
  EXPECT_EQ(c.exit_code(), 1);
  // The same change, the other way: a real speed-up.
  const CompareResult f = cmp(now, base);
  EXPECT_EQ(f.rows.at(0).verdict, Verdict::fast);
  EXPECT_LT(f.rows.at(0).ratio.hi, 1 / 1.05);
  EXPECT_EQ(f.exit_code(), 0);
}

TEST(CompareSamples, TightEqualSamplesAreSame) {
  // Not the same samples: the second set is shifted by a tenth of its spread.
  const json base = report({row("x", sampled(quartiles(0.99, 1.0, 1.01)))});
  const json now = report({row("x", sampled(quartiles(0.991, 1.001, 1.011)))});
  const CompareResult c = cmp(base, now);
  EXPECT_TRUE(c.rows.at(0).by_samples);
  EXPECT_EQ(c.rows.at(0).verdict, Verdict::same);
  EXPECT_GT(c.rows.at(0).ratio.lo, 1 / 1.05);
  EXPECT_LT(c.rows.at(0).ratio.hi, 1.05);
  EXPECT_EQ(c.exit_code(true), 0);
}

TEST(CompareSamples, TheSameInputsGiveTheSameVerdictAndInterval) {
  const json base =
      report({row("a", sampled(quartiles(0.7, 1.0, 1.3))), row("b", sampled(quartiles(0.99, 1.0, 1.01)))});
  const json now =
      report({row("a", sampled(quartiles(0.95, 1.25, 1.6))), row("b", sampled(quartiles(1.2, 1.25, 1.3)))});
  const CompareResult one = cmp(base, now), two = cmp(base, now);
  ASSERT_EQ(one.rows.size(), two.rows.size());
  for (size_t i = 0; i < one.rows.size(); ++i) {
    EXPECT_EQ(one.rows[i].verdict, two.rows[i].verdict);
    EXPECT_EQ(one.rows[i].ratio.lo, two.rows[i].ratio.lo);
    EXPECT_EQ(one.rows[i].ratio.hi, two.rows[i].ratio.hi);
  }
  // A row's interval is its own: the rows around it, and their order, do not move it.
  const CompareResult alone = cmp(report({base["rows"][1]}), report({now["rows"][1]}));
  EXPECT_EQ(alone.rows.at(0).ratio.lo, one.rows.at(1).ratio.lo);
  EXPECT_EQ(alone.rows.at(0).ratio.hi, one.rows.at(1).ratio.hi);
  // A higher confidence gives a wider interval.
  const CompareResult wide = compare_reports(base, now, 0.05, "BASE", "NEW", 0.99);
  EXPECT_LT(wide.rows.at(0).ratio.lo, one.rows.at(0).ratio.lo);
  EXPECT_GT(wide.rows.at(0).ratio.hi, one.rows.at(0).ratio.hi);
}

TEST(CompareSamples, RowsWithoutSamplesFallBackAndSaySo) {
  const std::vector<double> tight = quartiles(0.99, 1.0, 1.01), slower = quartiles(1.2375, 1.25, 1.2625);
  json few = sampled({1.2, 1.25, 1.3});  // 3 samples: too few for an interval
  const json base = report({row("none", timing(tight)), row("one_side", sampled(tight)), row("few", sampled(tight))});
  const json now = report({row("none", timing(slower)), row("one_side", timing(slower)), row("few", few)});
  const CompareResult c = cmp(base, now);
  ASSERT_EQ(c.rows.size(), 3u);
  for (const auto& r : c.rows) {
    EXPECT_FALSE(r.by_samples) << r.variant;
    EXPECT_EQ(r.verdict, Verdict::slow) << r.variant;  // the quartile rule still sees these
  }
  EXPECT_EQ(c.rows[0].note, "no samples in BASE and NEW: by the interquartile ranges");
  EXPECT_EQ(c.rows[1].note, "no samples in NEW: by the interquartile ranges");
  EXPECT_EQ(c.rows[2].note, "3 samples in NEW, fewer than 5: by the interquartile ranges");
  EXPECT_EQ(c.count_by_quartiles(), 3);
  // The verdicts carry a mark, and a footnote says what it means, in both formats.
  std::ostringstream table, md;
  write_compare(table, c, false);
  write_compare(md, c, true);
  // Too long to fit 120 columns beside the row: under it.
  EXPECT_TRUE(has(table.str(), "+25.0%              1.250  SLOW*\n      no samples in BASE and NEW")) << table.str();
  EXPECT_TRUE(has(table.str(), "\n* 3 rows judged without samples (a report without samples_ms, or fewer than 5)"))
      << table.str();
  EXPECT_TRUE(has(md.str(), "| **SLOW**\\* |")) << md.str();
  EXPECT_TRUE(has(md.str(), "\n\\* 3 rows judged without samples")) << md.str();
  // Rows with samples have neither.
  const CompareResult all = cmp(report({row("x", sampled(tight))}), report({row("x", sampled(slower))}));
  std::ostringstream clean;
  write_compare(clean, all, false);
  EXPECT_FALSE(has(clean.str(), "*")) << clean.str();
  EXPECT_TRUE(has(clean.str(), "1.250 (1.2")) << clean.str();
  EXPECT_TRUE(has(clean.str(), "NEW/BASE (95% CI)")) << clean.str();
}

TEST(CompareSamples, ModeAllKeepsTheOwnModesSamplesInTiming) {
  // report.cpp writes a row's own mode twice (timing, timings.cold) and its samples once.
  json base = row("x", sampled(quartiles(0.99, 1.0, 1.01)));
  base["timings"] = {{"cold", timing(quartiles(0.99, 1.0, 1.01))}, {"hot", sampled(quartiles(0.49, 0.5, 0.51), "hot")}};
  json now = row("x", sampled(quartiles(1.2375, 1.25, 1.2625)));
  now["timings"] = {{"cold", timing(quartiles(1.2375, 1.25, 1.2625))},
                    {"hot", sampled(quartiles(0.49, 0.5, 0.51), "hot")}};
  const CompareResult c = cmp(report({base}), report({now}));
  ASSERT_EQ(c.rows.size(), 2u);
  EXPECT_TRUE(c.rows[0].by_samples);
  EXPECT_EQ(c.rows[0].verdict, Verdict::slow);
  EXPECT_TRUE(c.rows[1].by_samples);
  EXPECT_EQ(c.rows[1].verdict, Verdict::same);
  // Samples that cannot be the cold timing's are refused, not used.
  now["timing"]["samples_ms"][0] = 1.0;
  now["timing"]["samples_ms"].erase(1);
  now["timing"]["samples"] = 19;
  const std::string m = refusal([&] { compare_reports(report({base}), report({now}), 0.05, "b", "n.json"); });
  EXPECT_TRUE(has(m, "n.json: error: rows[0] (case \"softmax-x\", point \"cols=1000\", variant \"x\"): "
                     "timing.samples_ms does not belong to timings.cold"))
      << m;
}

TEST(CompareRefuses, SamplesThatDoNotFitTheirStatistics) {
  struct Bad {
    std::function<void(json&)> change;
    const char* says;
  };
  const std::vector<Bad> bads = {
      {[](json& t) { t["samples_ms"] = "1,2,3"; },
       "timing.samples_ms is the string \"1,2,3\", expected an array of times"},
      {[](json& t) { t["samples_ms"][3] = "1.0"; }, "timing.samples_ms[3] is the string \"1.0\", expected a number"},
      {[](json& t) { t["samples_ms"][3] = -1.0; }, "timing.samples_ms[3] is -1: not a time a kernel takes"},
      {[](json& t) { t["samples_ms"][0] = 0.0; }, "timing.samples_ms[0] is 0: not a time a kernel takes"},
      {[](json& t) { t["samples_ms"][0] = std::nan(""); }, "timing.samples_ms[0] is nan"},
      {[](json& t) { t["samples_ms"].erase(0); }, "timing.samples_ms holds 19 times, but samples is 20"},
      {[](json& t) { t["median_ms"] = 1.001; }, "timing.samples_ms has the median 1, but median_ms is 1.001"},
  };
  for (const Bad& b : bads) {
    json r = good();
    r["rows"][1]["timing"] = sampled(quartiles(0.99, 1.0, 1.01));
    EXPECT_NO_THROW(cmp(good(), r));
    b.change(r["rows"][1]["timing"]);
    const std::string m = refused_as_new(r);
    EXPECT_TRUE(has(m, std::string("new.json: error: ") + kFastRow + ": " + b.says)) << m;
  }
}

TEST(CompareRefuses, ConfidenceOnlyFrom50To99Point9Percent) {
  EXPECT_DOUBLE_EQ(parse_confidence("0.95"), 0.95);
  EXPECT_DOUBLE_EQ(parse_confidence("95%"), 0.95);
  EXPECT_DOUBLE_EQ(parse_confidence("0.5"), 0.5);
  EXPECT_DOUBLE_EQ(parse_confidence("99.9%"), 0.999);
  EXPECT_DOUBLE_EQ(parse_confidence(".9"), 0.9);
  for (const char* bad : {"0", "1", "1.0", "95", "0.4", "49%", "100%", "0.9995", "-0.9", "+0.9", "nan", "inf", "1e-1",
                          "0.95x", " 0.95", "", "%", "0.9.5", "95%%"}) {
    const std::string m = refusal([&] { parse_confidence(bad); });
    EXPECT_TRUE(has(m, std::string("--confidence ") + bad + ": error: expected a fraction from 0.5 to 0.999 or a "
                                                            "percentage from 50% to 99.9%, like 0.95 or 95%"))
        << m;
  }
  // The API refuses what parse_confidence would.
  EXPECT_THROW(compare_reports(good(), good(), 0.05, "BASE", "NEW", 1.0), InputError);
  EXPECT_THROW(compare_reports(good(), good(), 0.05, "BASE", "NEW", std::nan("")), InputError);
}

// Schema 4's graph is cold (rotating copies of the inputs); the warm graph of schemas 1-3
// is read as graph_hot, so an old report's graph rows meet a new one's graph_hot rows and
// never its cold graph rows.
TEST(Compare, OldWarmGraphIsNewGraphHot) {
  json old_row = row("warp_online", nullptr);
  old_row["timings"] = {{"graph", timing(samples(0.5, 0.01), "graph")}};
  json new_row = row("warp_online", nullptr);
  new_row["timings"] = {{"graph", timing(samples(0.9, 0.01), "graph")},
                        {"graph_hot", timing(samples(0.5, 0.01), "graph_hot")}};
  json new_report = report({new_row});
  new_report["schema"] = 4;
  const CompareResult c = cmp(report({old_row}), new_report);
  ASSERT_EQ(c.rows.size(), 2u);
  EXPECT_EQ(c.rows[0].mode, "graph_hot");
  EXPECT_EQ(c.rows[0].verdict, Verdict::same);
  EXPECT_EQ(c.rows[1].mode, "graph");
  EXPECT_EQ(c.rows[1].verdict, Verdict::added);
}

// --pair: a peer's row (tools/peers.py --report, status "peer") against one of ours, judged
// by the same bootstrap, and named after NEW's variant with BASE's in the note.
TEST(Compare, PairsAPeerRowWithOurs) {
  json peer = row("torch_sdpa_cudnn", sampled(samples(1.0, 0.01)), "peer");
  json ours = row("flash_wgmma", sampled(samples(0.8, 0.01)));
  json ours_base = report({peer});
  ours_base["schema"] = 4;
  const CompareResult c = compare_reports(ours_base, report({ours}), 0.05, "BASE", "NEW", 0.95,
                                          {{"torch_sdpa_cudnn", "flash_wgmma"}});
  ASSERT_EQ(c.rows.size(), 1u);
  EXPECT_EQ(c.rows[0].variant, "flash_wgmma");
  EXPECT_EQ(c.rows[0].verdict, Verdict::fast);
  EXPECT_TRUE(c.rows[0].by_samples);
  EXPECT_NE(c.rows[0].note.find("BASE: torch_sdpa_cudnn"), std::string::npos) << c.rows[0].note;
  // Without the pair the two rows do not meet: nothing in common to compare.
  EXPECT_THROW(compare_reports(ours_base, report({ours}), 0.05), InputError);
}

TEST(Compare, PairSyntax) {
  EXPECT_EQ(parse_pair("a=b"), std::make_pair(std::string("a"), std::string("b")));
  for (const char* bad : {"a", "=b", "a=", "a=b=c", ""}) EXPECT_THROW(parse_pair(bad), InputError) << bad;
}

// --pair names must be variants of their side's report: a typo used to match no row and
// pass silently.
TEST(Compare, PairNamingAVariantNotInItsReportIsRefused) {
  const json base = report({row("torch_sdpa_cudnn", sampled(samples(1.0, 0.01)), "peer")});
  const json now = report({row("flash_wgmma", sampled(samples(0.8, 0.01))), row("naive", sampled(samples(9, 0.1)))});
  std::string m = refusal([&] {
    compare_reports(base, now, 0.05, "base.json", "new.json", 0.95, {{"torch_sdpa_cudnn", "flash_wgma"}});
  });
  EXPECT_EQ(m,
            "compare: error: --pair torch_sdpa_cudnn=flash_wgma: NEW (new.json) has no variant \"flash_wgma\" "
            "(did you mean flash_wgmma?); its variants: flash_wgmma, naive");
  m = refusal([&] { compare_reports(base, now, 0.05, "base.json", "new.json", 0.95, {{"cudnn", "flash_wgmma"}}); });
  EXPECT_TRUE(has(m,
                  "--pair cudnn=flash_wgmma: BASE (base.json) has no variant \"cudnn\"; its variants: "
                  "torch_sdpa_cudnn"))
      << m;
  // A variant that is in the other report only is still refused: each side names its own.
  m = refusal([&] { compare_reports(base, now, 0.05, "base.json", "new.json", 0.95, {{"flash_wgmma", "naive"}}); });
  EXPECT_TRUE(has(m, "BASE (base.json) has no variant \"flash_wgmma\"")) << m;
  // Both there: accepted.
  EXPECT_EQ(
      compare_reports(base, now, 0.05, "b", "n", 0.95, {{"torch_sdpa_cudnn", "flash_wgmma"}}).rows[0].base_variant,
      "torch_sdpa_cudnn");
}

TEST(Golden, FileNameRule) {
  EXPECT_EQ(golden_file_name("NVIDIA H100 80GB HBM3"), "nvidia-h100-80gb-hbm3.json");
  EXPECT_EQ(golden_file_name("NVIDIA H200"), "nvidia-h200.json");
  EXPECT_EQ(golden_file_name("NVIDIA A100-SXM4-80GB"), "nvidia-a100-sxm4-80gb.json");
  EXPECT_EQ(golden_file_name("  NVIDIA  GH200 (480GB) "), "nvidia-gh200-480gb.json");  // runs of others: one '-'
  EXPECT_EQ(golden_file_name("../../etc/passwd"), "etc-passwd.json");                  // never a path
  EXPECT_EQ(golden_file_name("Ünïcode GPU"), "n-code-gpu.json");                       // ASCII letters and digits only
  EXPECT_EQ(golden_file_name(""), "");
  EXPECT_EQ(golden_file_name("--"), "");
}

TEST(Golden, PicksTheFileOfNewsCardOrListsTheDirectory) {
  TempDir dir;
  const std::string h200 = dir.write("nvidia-h200.json", good().dump());
  dir.write("nvidia-h100-80gb-hbm3.json", good().dump());
  dir.write("README.md", "goldens");
  const json on_h200 = report({row("naive", timing(samples(3.0, 0.01)))}, "NVIDIA H200");
  EXPECT_EQ(find_golden(dir.path.string(), on_h200, "new.json"), h200);
  const json on_h100 = report({row("naive", timing(samples(3.0, 0.01)))}, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(find_golden(dir.path.string(), on_h100, "new.json"), (dir.path / "nvidia-h100-80gb-hbm3.json").string());
  const json on_a100 = report({row("naive", timing(samples(3.0, 0.01)))}, "NVIDIA A100-SXM4-80GB");
  std::string m = refusal([&] { find_golden(dir.path.string(), on_a100, "new.json"); });
  EXPECT_TRUE(has(m,
                  ": no golden file nvidia-a100-sxm4-80gb.json for new.json's card \"NVIDIA A100-SXM4-80GB\"; the "
                  "directory holds README.md, nvidia-h100-80gb-hbm3.json, nvidia-h200.json"))
      << m;
  json no_card = on_a100;
  no_card.erase("device");
  m = refusal([&] { find_golden(dir.path.string(), no_card, "new.json"); });
  EXPECT_TRUE(has(m, "new.json names no card (device.name)")) << m;
  m = refusal([&] { find_golden(h200, on_h200, "new.json"); });
  EXPECT_TRUE(has(m, "nvidia-h200.json: not a directory")) << m;
  TempDir empty;
  m = refusal([&] { find_golden(empty.path.string(), on_h200, "new.json"); });
  EXPECT_TRUE(has(m, "the directory holds no files")) << m;
}

// What issue 46 asks of the gate: against its golden, at a golden's 10%, a run 15% slower
// fails and one that moved within the noise passes.
TEST(Golden, FifteenPercentSlowerFailsWithinTheNoisePasses) {
  const std::vector<double> tight = quartiles(0.99, 1.0, 1.01);
  std::vector<double> slower, wiggle;
  for (double x : tight) slower.push_back(x * 1.15), wiggle.push_back(x * 1.005);
  const json golden = report({row("x", sampled(tight)), row("noisy", sampled(quartiles(0.7, 1.0, 1.3)))});
  const CompareResult slow =
      cmp(golden, report({row("x", sampled(slower)), row("noisy", sampled(quartiles(0.7, 1.0, 1.3)))}), 0.10);
  EXPECT_EQ(slow.rows[0].verdict, Verdict::slow);
  EXPECT_NEAR(slow.rows[0].change, 0.15, 1e-6);
  EXPECT_EQ(slow.exit_code(), 1);
  // 0.5% on the tight row, 25% on one whose own spread is +-30%: nothing decided against it.
  const CompareResult ok =
      cmp(golden, report({row("x", sampled(wiggle)), row("noisy", sampled(quartiles(0.95, 1.25, 1.6)))}), 0.10);
  EXPECT_EQ(ok.rows[0].verdict, Verdict::same);
  EXPECT_EQ(ok.rows[1].verdict, Verdict::unsure);
  EXPECT_EQ(ok.exit_code(), 0);
  // The noisy golden row is named in the warning; the tight one is not flagged.
  EXPECT_FALSE(ok.rows[0].noisy_base);
  EXPECT_TRUE(ok.rows[1].noisy_base);
  EXPECT_TRUE(has(ok.noise_warning, "above the 10% threshold")) << ok.noise_warning;
  EXPECT_TRUE(has(ok.noise_warning, "softmax-x cols=1000 noisy (cold)")) << ok.noise_warning;
  EXPECT_EQ(cmp(report({row("x", sampled(tight))}), report({row("x", sampled(wiggle))}), 0.10).noise_warning, "");
}

// A note many rows share is printed once, under the table, and the rows carry its mark.
TEST(CompareOutputs, SharedNotesBecomeOneFootnoteAndTheTableFits120Columns) {
  std::vector<json> b, n;
  for (int i = 0; i < 12; ++i) {
    b.push_back(row("variant_" + std::to_string(i), timing(samples(1.0, 0.01))));
    n.push_back(row("variant_" + std::to_string(i), timing(samples(1.0 + 0.001 * i, 0.01))));
  }
  b[0]["case"] = n[0]["case"] = "attention-bf16-b4-h16-s4096-d128";
  const CompareResult c = cmp(report(b), report(n));
  std::ostringstream out;
  write_compare(out, c, CompareOutput{});
  const std::string s = out.str();
  const std::string reason = "no samples in BASE and NEW: by the interquartile ranges";
  size_t count = 0;
  for (size_t at = s.find(reason); at != std::string::npos; at = s.find(reason, at + 1)) ++count;
  EXPECT_EQ(count, 1u) << s;
  EXPECT_TRUE(has(s, "\n¹ " + reason + " (12 rows)\n")) << s;
  EXPECT_TRUE(has(s, "SAME*  ¹")) << s;
  std::istringstream lines(s);
  for (std::string line; std::getline(lines, line);) {
    size_t columns = 0;
    for (char ch : line) columns += (ch & 0xC0) != 0x80;
    EXPECT_LE(columns, 120u) << line;
  }
  // The case once, as a heading.
  EXPECT_TRUE(has(s, "\nattention-bf16-b4-h16-s4096-d128\n  cols=1000  variant_0 ")) << s;
  // Markdown too; the row keeps its whole note for the API, csv and json.
  std::ostringstream md;
  write_compare(md, c, true);
  EXPECT_TRUE(has(md.str(), "| SAME\\* | ¹")) << md.str();
  EXPECT_TRUE(has(c.rows[0].note, reason)) << c.rows[0].note;
}

TEST(CompareOutputs, JsonIsTheDocumentedObject) {
  const json base = report({row("naive", sampled(quartiles(0.99, 1.0, 1.01))), row("gone", timing(samples(1, 0.01)))});
  const json now = report({row("naive", sampled(quartiles(1.2375, 1.25, 1.2625)))});
  CompareResult c = cmp(base, now);
  CompareOutput how;
  how.format = Format::json;
  std::ostringstream out;
  write_compare(out, c, how);
  const json j = json::parse(out.str());
  EXPECT_EQ(j["compare"], 1);
  EXPECT_EQ(j["threshold"], 0.05);
  EXPECT_EQ(j["base"]["device"], "NVIDIA H200");
  EXPECT_TRUE(j["golden"].is_null());
  ASSERT_EQ(j["rows"].size(), 2u);
  const json& r = j["rows"][0];
  EXPECT_EQ(r["verdict"], "SLOW");
  EXPECT_NEAR(r["change"].get<double>(), 0.25, 1e-9);
  EXPECT_TRUE(r["by_samples"].get<bool>());
  EXPECT_GT(r["ratio"]["lo"].get<double>(), 1.05);
  EXPECT_EQ(r["base"]["samples"], 20);
  EXPECT_EQ(r["new_status"], "verified");
  EXPECT_EQ(j["rows"][1]["verdict"], "missing");
  EXPECT_TRUE(j["rows"][1]["new"].is_null());
  EXPECT_TRUE(j["rows"][1]["change"].is_null());
  EXPECT_EQ(j["counts"]["SLOW"], 1);
  EXPECT_EQ(j["counts"]["missing"], 1);
  EXPECT_TRUE(has(j["missing"].get<std::string>(), "1 row of BASE is missing in NEW: softmax-x cols=1000 gone"));
  EXPECT_EQ(j["exit_code"], 1);
  EXPECT_FALSE(j["passed"].get<bool>());
  // The exit code is the gate's: --allow-missing does not excuse the SLOW row.
  how.allow_missing = true;
  std::ostringstream allowed;
  write_compare(allowed, c, how);
  EXPECT_EQ(json::parse(allowed.str())["exit_code"], 1);
  EXPECT_EQ(json::parse(allowed.str())["allow_missing"], true);
  // Strings go in whole (json escapes them): a script matches the names as the report has them.
  json evil = report({row("naive\x1b[2J", timing(samples(1, 0.01)))});
  std::ostringstream e;
  write_compare(e, cmp(evil, evil), how);
  EXPECT_EQ(json::parse(e.str())["rows"][0]["variant"], "naive\x1b[2J");
  EXPECT_FALSE(has(e.str(), "\x1b")) << "escaped as \\u001b";
}

TEST(CompareOutputs, CsvHasAHeaderAndOneLinePerRow) {
  json base = report({row("naive", timing(samples(1, 0.01))), row("a,\"b\"", timing(samples(1, 0.01)))});
  CompareOutput how;
  how.format = Format::csv;
  std::ostringstream out;
  write_compare(out, cmp(base, base), how);
  std::istringstream lines(out.str());
  std::vector<std::string> v;
  for (std::string line; std::getline(lines, line);) v.push_back(line);
  ASSERT_EQ(v.size(), 3u) << out.str();
  EXPECT_EQ(v[0].rfind("case,point,variant,base_variant,mode,verdict,by_samples,change,ratio_lo,ratio_hi,", 0), 0u);
  EXPECT_EQ(v[1].rfind("softmax-x,cols=1000,naive,,cold,SAME,0,0.0,,,", 0), 0u) << v[1];
  EXPECT_TRUE(has(v[2], "softmax-x,cols=1000,\"a,\"\"b\"\"\",,cold,SAME")) << v[2];
}
