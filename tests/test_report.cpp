// Derived rates and the four report formats.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "app/report.hpp"

using namespace attnbench;

namespace {

Ceilings card() {
  Ceilings c;
  c.copy_gbps = 3000;
  c.read_gbps = 3300;
  c.fp32_tflops = 50;
  c.fp16_tflops = 700;
  c.bf16_tflops = 700;
  return c;
}

ResultRow timed_row(const std::string& variant, double ms, double flops, double bytes) {
  ResultRow r;
  r.case_name = "gemm-case";
  r.point = "layout=nt dtype=bf16";
  r.op = "gemm";
  r.dtype = "bf16";
  r.variant = variant;
  r.status = Status::verified;
  r.cmp = Comparison{};
  r.cmp->elements_checked = 10;
  r.cmp->rows_checked = 2;
  r.cmp->rows_total = 4;
  r.trials = 1;
  r.work = {flops, bytes, Bandwidth::copy};
  Timing t;
  t.ms = summarize({ms, ms, ms});
  r.timing = t;
  return r;
}

RunMeta meta(const std::string& mode) {
  RunMeta m;
  m.version = "0.1.0";
  m.command_line = "attnbench run x";
  m.date = "2026-11-26T00:00:00Z";
  m.mode = mode;
  m.ceilings = card();
  return m;
}

}  // namespace

TEST(DeriveRates, ComputeBoundGemm) {
  // 1.4 TFLOP in 4 ms = 350 TFLOP/s; floor = 1.4e12 / 700e12 s = 2 ms -> 50%.
  ResultRow r = timed_row("mma", 4.0, 1.4e12, 1e9);
  derive_rates(r, DType::bf16, card());
  EXPECT_NEAR(r.tflops, 350, 1e-9);
  EXPECT_NEAR(r.gbps, 250, 1e-9);
  EXPECT_NEAR(r.floor_ms, 2.0, 1e-12);
  EXPECT_NEAR(r.pct_of_ceiling, 50, 1e-9);
  EXPECT_EQ(r.bound, "compute");
}

TEST(DeriveRates, MemoryBoundUsesTheOpsBandwidth) {
  ResultRow r = timed_row("warp_online", 1.0, 0, 3e9);  // 3 GB in 1 ms
  derive_rates(r, DType::fp32, card());
  EXPECT_EQ(r.bound, "memory");
  EXPECT_NEAR(r.pct_of_ceiling, 100, 1e-9);  // copy ceiling 3000 GB/s
  r.work.bandwidth = Bandwidth::read;
  derive_rates(r, DType::fp32, card());
  EXPECT_NEAR(r.pct_of_ceiling, 100 * 3000.0 / 3300.0, 1e-9);
}

TEST(Report, JsonHoldsMetaRowsAndNullForInfiniteErrors) {
  ResultRow ok = timed_row("mma", 2.0, 1e12, 1e9);
  ok.speedup = 1.5;
  derive_rates(ok, DType::bf16, card());
  ResultRow bad = ok;
  bad.variant = "naive";
  bad.status = Status::failed;
  bad.cmp->max_abs = INFINITY;
  bad.cmp->mismatches = 3;
  ResultRow skip;
  skip.variant = "reg_tiled";
  skip.status = Status::skipped;
  skip.reason = "fp32 only";
  std::ostringstream out;
  write_report(out, Format::json, meta("run"), {ok, bad, skip});
  const auto j = nlohmann::json::parse(out.str());
  EXPECT_EQ(j["attnbench"]["version"], "0.1.0");
  EXPECT_EQ(j["attnbench"]["command"], "attnbench run x");
  EXPECT_DOUBLE_EQ(j["ceilings"]["bf16_tflops"].get<double>(), 700);
  ASSERT_EQ(j["rows"].size(), 3u);
  EXPECT_EQ(j["rows"][0]["status"], "verified");
  EXPECT_DOUBLE_EQ(j["rows"][0]["timing"]["median_ms"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(j["rows"][0]["speedup"].get<double>(), 1.5);
  EXPECT_NEAR(j["rows"][0]["tflops"].get<double>(), 500, 1e-9);
  EXPECT_TRUE(j["rows"][1]["verify"]["max_abs"].is_null());
  EXPECT_EQ(j["rows"][1]["verify"]["mismatches"], 3);
  EXPECT_EQ(j["rows"][2]["reason"], "fp32 only");
  EXPECT_FALSE(j["rows"][2].contains("timing"));
}

TEST(Report, CsvHasOneLinePerRowAndQuotesCommas) {
  ResultRow r = timed_row("mma", 2.0, 1e12, 1e9);
  r.point = "context=[1,7] dtype=bf16";
  std::ostringstream out;
  write_report(out, Format::csv, meta("run"), {r, r});
  std::istringstream in(out.str());
  std::string header, line;
  std::getline(in, header);
  const auto columns = std::count(header.begin(), header.end(), ',');
  int lines = 0;
  while (std::getline(in, line)) {
    ++lines;
    EXPECT_NE(line.find("\"context=[1,7] dtype=bf16\""), std::string::npos);
  }
  EXPECT_EQ(lines, 2);
  EXPECT_GT(columns, 30);
}

TEST(Report, MarkdownIsATableAndEscapesPipes) {
  ResultRow r = timed_row("mma", 2.0, 1e12, 1e9);
  r.status = Status::skipped;
  r.reason = "needs k % 8 | n % 8";
  std::ostringstream out;
  write_report(out, Format::markdown, meta("run"), {r});
  const std::string s = out.str();
  EXPECT_NE(s.find("| case |"), std::string::npos);
  EXPECT_NE(s.find("needs k % 8 \\| n % 8"), std::string::npos);
}

TEST(Report, TableShowsWhyARowFailed) {
  ResultRow r = timed_row("mma", 2.0, 1e12, 1e9);
  r.status = Status::failed;
  r.timing.reset();
  r.cmp->mismatches = 4;
  r.cmp->elements_checked = 100;
  r.cmp->worst_row = 3;
  r.worst = "(0, 1, 2, 3)";
  r.tol = {1e-3, 1e-2};
  std::ostringstream out;
  TableWriter t(out, true);
  t.row(r);
  const std::string s = out.str();
  EXPECT_NE(s.find("FAILED"), std::string::npos);
  EXPECT_NE(s.find("4 of 100"), std::string::npos);
  EXPECT_NE(s.find("(0, 1, 2, 3)"), std::string::npos);
}

TEST(Report, FormatNames) {
  EXPECT_EQ(parse_format("json"), Format::json);
  EXPECT_EQ(parse_format("md"), Format::markdown);
  EXPECT_FALSE(parse_format("xml").has_value());
  EXPECT_EQ(format_for_path("out/results.json"), Format::json);
  EXPECT_EQ(format_for_path("r.csv"), Format::csv);
  EXPECT_EQ(format_for_path("r.txt"), Format::table);
}
