// Derived rates and the four report formats.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "app/compare.hpp"
#include "app/errors.hpp"
#include "app/report.hpp"
#include "app/runner.hpp"
#include "app/text.hpp"
#include "tests/test_card.hpp"

using namespace attnbench;

namespace {

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
  t.samples = {ms, ms, ms};
  t.ms = summarize(t.samples);
  r.timing = t;
  return r;
}

RunMeta meta(const std::string& mode) {
  RunMeta m;
  m.version = "0.1.0";
  m.command_line = "attnbench run x";
  m.date = "2026-11-26T00:00:00Z";
  m.mode = mode;
  m.ceilings = test_card();
  return m;
}

}  // namespace

TEST(DeriveRates, ComputeBoundGemm) {
  // 1.4 TFLOP in 4 ms = 350 TFLOP/s; floor = 1.4e12 / 700e12 s = 2 ms -> 50%.
  ResultRow r = timed_row("mma", 4.0, 1.4e12, 1e9);
  derive_rates(r, DType::bf16, test_card());
  EXPECT_NEAR(r.tflops, 350, 1e-9);
  EXPECT_NEAR(r.gbps, 250, 1e-9);
  EXPECT_NEAR(r.floor_ms, 2.0, 1e-12);
  EXPECT_NEAR(r.pct_of_floor, 50, 1e-9);
  EXPECT_EQ(r.bound, "compute");
}

TEST(DeriveRates, Fp8UsesItsMeasuredCeilingElseTwiceBf16) {
  // 1.4 TFLOP in 2 ms: against twice bf16's 700 (no fp8 measured), the floor is 1 ms -> 50%;
  // against a measured fp8 GEMM of 1120 TFLOP/s it is 1.25 ms -> 62.5%.
  ResultRow r = timed_row("flash_ws", 2.0, 1.4e12, 1e9);
  derive_rates(r, DType::fp8_e4m3, test_card());
  EXPECT_NEAR(r.pct_of_floor, 50, 1e-9);
  Ceilings measured = test_card();
  measured.fp8_tflops = 1120;
  derive_rates(r, DType::fp8_e4m3, measured);
  EXPECT_NEAR(r.floor_ms, 1.25, 1e-12);
  EXPECT_NEAR(r.pct_of_floor, 62.5, 1e-9);
  derive_rates(r, DType::bf16, measured);  // the 16-bit rows keep theirs
  EXPECT_NEAR(r.floor_ms, 2.0, 1e-12);
}

TEST(DeriveRates, MemoryBoundUsesTheOpsBandwidth) {
  ResultRow r = timed_row("warp_online", 1.0, 0, 3e9);  // 3 GB in 1 ms
  derive_rates(r, DType::fp32, test_card());
  EXPECT_EQ(r.bound, "memory");
  EXPECT_NEAR(r.pct_of_floor, 100, 1e-9);  // copy ceiling 3000 GB/s
  r.work.bandwidth = Bandwidth::read;
  derive_rates(r, DType::fp32, test_card());
  EXPECT_NEAR(r.pct_of_floor, 100 * 3000.0 / 3300.0, 1e-9);
}

TEST(Report, JsonHoldsMetaRowsAndNullForInfiniteErrors) {
  ResultRow ok = timed_row("mma", 2.0, 1e12, 1e9);
  ok.speedup = 1.5;
  derive_rates(ok, DType::bf16, test_card());
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

// The json report's layout, as docs/measuring.md documents it (schema 3).
TEST(Report, JsonSchema) {
  ResultRow r = timed_row("mma", 2.0, 1e12, 1e9);
  r.command = "attnbench run cases/gemm/square.toml --set dtype=bf16 -k mma --mode all";
  r.timing->samples = {2.0, 2.0, 2.0};
  Timing graph = *r.timing;
  graph.mode = TimingMode::graph;
  graph.launches_per_sample = 50;
  r.other_modes = {graph};
  derive_rates(r, DType::bf16, test_card());
  RunMeta m = meta("run");
  m.timing_mode = "all";
  m.device = DeviceInfo{};
  m.device->name = "NVIDIA H200";
  m.device->driver_version = 13000;
  m.device->runtime_version = 13000;
  std::ostringstream out;
  write_report(out, Format::json, m, {r});
  const auto j = nlohmann::json::parse(out.str());

  using T = nlohmann::json::value_t;
  auto has = [](const nlohmann::json& o, const std::string& key, std::initializer_list<T> types) {
    ASSERT_TRUE(o.contains(key)) << key << " missing in " << o.dump();
    bool ok = false;
    for (T t : types) ok = ok || o[key].type() == t;
    EXPECT_TRUE(ok) << key << " has the wrong type: " << o[key].dump();
  };
  const std::initializer_list<T> number = {T::number_float, T::number_integer, T::number_unsigned};
  const std::initializer_list<T> integer = {T::number_integer, T::number_unsigned};
  has(j, "schema", integer);
  EXPECT_EQ(j["schema"], kJsonSchema);
  for (const char* k : {"version", "command", "date", "mode", "timing_mode"}) has(j["attnbench"], k, {T::string});
  for (const char* k : {"name", "driver", "cuda_runtime", "compute_capability"}) has(j["device"], k, {T::string});
  for (const char* k : {"copy_gbps", "read_gbps", "write_gbps", "fp32_tflops", "fp16_tflops", "bf16_tflops",
                        "tf32_tflops", "mma_sync_bf16_tflops", "wgmma_bf16_tflops"})
    has(j["ceilings"], k, number);
  for (const char* k : {"hbm_gbps", "fp32_tflops", "tf32_tflops", "fp16_tflops", "bf16_tflops"})
    has(j["datasheet"], k, number);
  const auto& row = j["rows"].at(0);
  for (const char* k : {"case", "point", "op", "dtype", "variant", "status", "command", "bound"})
    has(row, k, {T::string});
  has(row, "baseline", {T::boolean});
  for (const char* k :
       {"flops", "bytes", "tflops", "gbps", "floor_ms", "floor_compute_ms", "floor_memory_ms", "pct_of_floor"})
    has(row, k, number);
  for (const char* k : {"median_ms", "min_ms", "max_ms", "q1_ms", "q3_ms", "mean_ms", "noise", "elapsed_ms"})
    has(row["timing"], k, number);
  has(row["timing"], "samples", integer);
  has(row["timing"], "launches_per_sample", integer);
  // Every sample, by default; the own mode's once, in `timing`.
  has(row["timing"], "samples_ms", {T::array});
  EXPECT_EQ(row["timing"]["samples_ms"].size(), 3u);
  EXPECT_FALSE(row["timings"]["cold"].contains("samples_ms"));
  EXPECT_EQ(row["timings"]["graph"]["samples_ms"].size(), 3u);
  EXPECT_EQ(row["command"], r.command);
  // Every mode measured, by name; the row's own mode is also `timing`.
  EXPECT_EQ(row["timings"]["cold"]["median_ms"], row["timing"]["median_ms"]);
  EXPECT_EQ(row["timings"]["graph"]["launches_per_sample"], 50);
  EXPECT_EQ(row["bound"], "compute");
  EXPECT_NEAR(row["pct_of_floor"].get<double>(), 100 * 1e12 / 700e12 * 1e3 / 2.0, 1e-9);
}

TEST(Datasheet, ByDeviceName) {
  EXPECT_EQ(datasheet_for("NVIDIA H100 80GB HBM3")->card, "H100 SXM5");
  EXPECT_DOUBLE_EQ(datasheet_for("NVIDIA H100 80GB HBM3")->bf16_tflops, 989.4);
  EXPECT_EQ(datasheet_for("NVIDIA H100 PCIe")->card, "H100 PCIe");
  EXPECT_EQ(datasheet_for("NVIDIA H100 NVL")->card, "H100 NVL");
  EXPECT_DOUBLE_EQ(datasheet_for("NVIDIA H200")->hbm_gbps, 4800);
  EXPECT_EQ(datasheet_for("NVIDIA H200 NVL")->card, "H200 NVL");
  EXPECT_EQ(datasheet_for("NVIDIA A100-SXM4-80GB")->card, "A100 80GB SXM4");
  EXPECT_FALSE(datasheet_for("NVIDIA GeForce RTX 4090").has_value());
}

TEST(Report, SamplesAreKeptByDefaultAndToSevenDigits) {
  ResultRow r = timed_row("mma", 2.0, 1e12, 1e9);
  // As CUDA events give them: floats, here with a double's tail that means nothing.
  r.timing->samples = {0.012345678901234, 1.5, 2.0000000001};
  r.timing->samples_mhz = {1980, 0, 1755};
  r.timing->clock = summarize_clocks(r.timing->samples_mhz, 1980);
  std::ostringstream out;
  write_report(out, Format::json, meta("run"), {r});
  auto t = nlohmann::json::parse(out.str())["rows"][0]["timing"];
  EXPECT_EQ(t["samples_ms"], nlohmann::json::parse("[0.01234568, 1.5, 2.0]")) << t.dump();
  // The clock per sample, in whole MHz, 0 where NVML gave no reading; one per sample.
  EXPECT_EQ(t["samples_mhz"], nlohmann::json::parse("[1980, 0, 1755]")) << t.dump();
  // --no-samples: the statistics only.
  RunMeta m = meta("run");
  m.keep_samples = false;
  std::ostringstream small;
  write_report(small, Format::json, m, {r});
  t = nlohmann::json::parse(small.str())["rows"][0]["timing"];
  EXPECT_FALSE(t.contains("samples_ms")) << t.dump();
  EXPECT_FALSE(t.contains("samples_mhz")) << t.dump();
  EXPECT_EQ(t["samples"], 3);
}

TEST(Report, CompareReadsWhatRunWrites) {
  ResultRow r = timed_row("mma", 2.0, 1e12, 1e9);
  // Enough samples for the bootstrap, in every mode: --mode all keeps the cold ones in
  // `timing` only, and compare must find them there.
  for (int i = 0; i < 30; ++i) r.timing->samples.push_back(2.0 + 0.001 * (i % 7));
  r.timing->ms = summarize(r.timing->samples);
  Timing hot = *r.timing;
  hot.mode = TimingMode::hot;
  r.other_modes = {hot};
  std::ostringstream out;
  write_report(out, Format::json, meta("run"), {r});
  const auto j = nlohmann::json::parse(out.str());
  const CompareResult c = compare_reports(j, j, 0.05);
  ASSERT_EQ(c.rows.size(), 2u);
  EXPECT_EQ(c.rows[0].mode, "cold");
  EXPECT_EQ(c.rows[1].mode, "hot");
  for (const auto& x : c.rows) {
    EXPECT_EQ(x.verdict, Verdict::same);
    EXPECT_TRUE(x.by_samples) << x.mode;
  }
}

TEST(Report, AllModesSideBySide) {
  ResultRow r = timed_row("mma", 2.0, 1e12, 1e9);
  Timing graph = *r.timing;
  graph.mode = TimingMode::graph;
  graph.ms = summarize({1.5, 1.5});
  r.other_modes = {graph};
  derive_rates(r, DType::bf16, test_card());
  std::ostringstream out;
  TableWriter t(out, true, true, wide_table_columns());
  t.row(r);
  const std::string s = out.str();
  EXPECT_NE(s.find("hot ms"), std::string::npos) << s;
  EXPECT_NE(s.find("graph ms"), std::string::npos);
  EXPECT_NE(s.find("1.5000"), std::string::npos);  // graph's median
  EXPECT_NE(s.find("floor ms"), std::string::npos);
  EXPECT_NE(s.find("% floor"), std::string::npos);
  // The default layout keeps the modes' medians beside the cold one: they are what --mode all asks for.
  std::ostringstream plain;
  TableWriter(plain, true, true).row(r);
  EXPECT_NE(plain.str().find("graph hot ms"), std::string::npos) << plain.str();
  EXPECT_NE(plain.str().find("1.5000"), std::string::npos);
  EXPECT_EQ(plain.str().find("floor ms"), std::string::npos) << plain.str();
}

TEST(Report, ClockColumnAndThrottleNote) {
  ResultRow r = timed_row("mma", 2.0, 1e12, 1e9);
  derive_rates(r, DType::bf16, test_card());
  std::ostringstream none;
  TableWriter(none, true, false, wide_table_columns()).row(r);
  EXPECT_NE(none.str().find("MHz"), std::string::npos);
  r.timing->clock = summarize_clocks({1980, 1980, 1500}, 1980);
  std::ostringstream out;
  TableWriter(out, true, false, wide_table_columns()).row(r);
  EXPECT_NE(out.str().find("1820!"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("\n      1 of 3 samples ran below 90% of the 1980 MHz SM clock"), std::string::npos);
  // The default layout has no clock column, but the row's note under it still says it was throttled.
  std::ostringstream plain;
  TableWriter(plain, true).row(r);
  EXPECT_EQ(plain.str().find("1820"), std::string::npos) << plain.str();
  EXPECT_NE(plain.str().find("\n      1 of 3 samples ran below 90% of the 1980 MHz SM clock"), std::string::npos);
  std::ostringstream js;
  write_report(js, Format::json, meta("run"), {r});
  const auto j = nlohmann::json::parse(js.str());
  EXPECT_EQ(j["rows"][0]["timing"]["clock"]["low_samples"], 1);
  EXPECT_DOUBLE_EQ(j["rows"][0]["timing"]["clock"]["mean_mhz"].get<double>(), 1820);
}

TEST(ReproduceCommand, PinsThePointAndTheVariant) {
  RunOptions o;
  o.program = "build/bin/attnbench";
  o.sets = {"verify.trials=5", "shape.seq_q=[1024,2048]"};
  o.seed = 7;
  o.device = 1;
  CasePoint p;
  p.pins = {"shape.seq_q=2048", "shape.context=[1,7]", "dtype=bf16"};
  EXPECT_EQ(reproduce_command(o, "cases/attention/gqa.toml", p, "flash_mma"),
            "build/bin/attnbench run cases/attention/gqa.toml --set verify.trials=5 --set 'shape.seq_q=[1024,2048]' "
            "--set shape.seq_q=2048 --set 'shape.context=[1,7]' --set dtype=bf16 -k flash_mma --mode cold --seed 7 "
            "--device 1");
  o.all_modes = true;
  o.seed.reset();
  o.device = 0;
  o.sets.clear();
  p.pins.clear();
  EXPECT_EQ(reproduce_command(o, "my cases/x.toml", p, "naive+naive"),
            "build/bin/attnbench run 'my cases/x.toml' -k naive+naive --mode all");
  o.timed = false;
  EXPECT_EQ(reproduce_command(o, "x.toml", p, "naive"), "build/bin/attnbench verify x.toml -k naive");
}

TEST(Progress, ElapsedAndTimeLeft) {
  EXPECT_EQ(format_duration(42), "0:42");
  EXPECT_EQ(format_duration(3725), "1:02:05");
  // 3 of 12 points in 30 s: 90 s left.
  EXPECT_EQ(progress_line("softmax [cols=1000]", "timing warp_online (cold)", 30, 3, 12, 200),
            "[4/12] softmax [cols=1000]: timing warp_online (cold)  0:30 elapsed, ~1:30 left");
  EXPECT_EQ(progress_line("x", "y", 5, 0, 12, 200), "[1/12] x: y  0:05 elapsed");
  const std::string cut = progress_line(std::string(100, 'c'), "timing", 30, 3, 12, 60);
  EXPECT_LE(cut.size(), 60u);
  EXPECT_NE(cut.find("~1:30 left"), std::string::npos);
}

TEST(ReproduceCommand, ShellQuote) {
  EXPECT_EQ(shell_quote("shape.seq_q=8192"), "shape.seq_q=8192");
  EXPECT_EQ(shell_quote("a b"), "'a b'");
  EXPECT_EQ(shell_quote("it's"), "'it'\\''s'");
  EXPECT_EQ(shell_quote(""), "''");
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
  // The row says FAILED and points to its footnote, which waits for the case's last row.
  EXPECT_NE(out.str().find("FAILED [1]"), std::string::npos) << out.str();
  EXPECT_EQ(out.str().find("4 of 100"), std::string::npos) << out.str();
  t.finish();
  const std::string s = out.str();
  EXPECT_NE(s.find("\n  [1] FAILED: 4 of 100"), std::string::npos) << s;
  EXPECT_NE(s.find("(0, 1, 2, 3)"), std::string::npos);
  EXPECT_NE(s.find("(mma)\n"), std::string::npos) << s;
}

TEST(Report, FormatNames) {
  EXPECT_EQ(parse_format("json"), Format::json);
  EXPECT_EQ(parse_format("md"), Format::markdown);
  EXPECT_FALSE(parse_format("xml").has_value());
  EXPECT_EQ(format_for_path("out/results.json"), Format::json);
  EXPECT_EQ(format_for_path("r.csv"), Format::csv);
  EXPECT_EQ(format_for_path("r.txt"), Format::table);
}

// An op of several stages: every stage's times under the row in the table, and a
// "stages" list in json (schema 2), the same for every op.
TEST(Report, StagesUnderTheRowAndInJson) {
  ResultRow r = timed_row("flash_mma+split_kv", 0.25, 1e12, 1e9);
  r.op = "pipeline";
  r.stages = {{"TTFT", "prompt's cache writes + prefill", summarize({0.25, 0.25}), 0.25, 2},
              {"TBT", "cache append + decode", summarize({0.02, 0.02, 0.03}), 0.03, 3}};
  r.verify_time.reference_ms = 12;
  derive_rates(r, DType::bf16, test_card());
  std::ostringstream out;
  TableWriter(out, true).row(r);
  EXPECT_NE(out.str().find("TTFT mean 0.2500 ms"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("TBT mean 0.0233 ms, p50 0.0200, p99 0.0300 over 3 runs (cache append + decode)"),
            std::string::npos)
      << out.str();
  std::ostringstream js;
  write_report(js, Format::json, meta("run"), {r});
  const auto j = nlohmann::json::parse(js.str());
  ASSERT_EQ(j["rows"][0]["stages"].size(), 2u);
  EXPECT_EQ(j["rows"][0]["stages"][1]["name"], "TBT");
  EXPECT_EQ(j["rows"][0]["stages"][1]["runs"], 3);
  EXPECT_DOUBLE_EQ(j["rows"][0]["stages"][1]["p99_ms"].get<double>(), 0.03);
  EXPECT_DOUBLE_EQ(j["rows"][0]["verify_time"]["reference_ms"].get<double>(), 12);
  EXPECT_FALSE(j["rows"][0].contains("pipeline"));
}

// `run --profile`: a profiled row has no time to show, so it shows none: "profiled" where the
// median would be, "-" for every rate and speedup, and the NVTX ranges to hand to ncu.
TEST(Report, ProfiledRowsShowNoTimings) {
  ResultRow r = timed_row("mma", 2.0, 1e12, 1e9);
  r.timing.reset();
  r.profiled = ncu_nvtx_include(nvtx_ranges(r.case_name, r.point, r.variant));
  std::ostringstream table;
  TableWriter(table, true, false, wide_table_columns()).row(r);
  const std::string t = table.str();
  // After the errors: "profiled", then a "-" for each of noise, TFLOP/s, GB/s, floor, %, speedup and MHz.
  EXPECT_TRUE(std::regex_search(t, std::regex(R"(mma +verified +0\.00e\+00 +0\.00e\+00 +- +profiled( +-){12}\n)"))) << t;
  EXPECT_NE(t.find("\n      profiled: --nvtx-include 'gemm-case/layout=nt dtype=bf16/mma/'\n"), std::string::npos) << t;
  // A variant's profile note (Variant::profile_note, which the runner puts in the row's note)
  // follows the ranges, on a line of its own.
  ResultRow noted = r;
  noted.timing_note = "ncu --metrics l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum";
  std::ostringstream table2;
  TableWriter(table2, true, false, wide_table_columns()).row(noted);
  const std::string t2 = table2.str();
  const size_t ranges = t2.find("profiled: --nvtx-include 'gemm-case/layout=nt dtype=bf16/mma/';\n");
  ASSERT_NE(ranges, std::string::npos) << t2;
  EXPECT_NE(t2.find("      ncu --metrics l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum\n", ranges),
            std::string::npos)
      << t2;

  std::ostringstream md;
  RunMeta m = meta("run");
  m.timing_mode = "profile";
  write_report(md, Format::markdown, m, {r});
  EXPECT_NE(md.str().find("| verified | 0.00e+00 | 0.00e+00 | - | profiled | - | - | - | - | - | - | - |"),
            std::string::npos)
      << md.str();
  EXPECT_NE(md.str().find("launched once under `run --profile`"), std::string::npos);
  EXPECT_EQ(md.str().find("% floor: floor over the median"), std::string::npos) << "the timing legend in a profile";

  std::ostringstream js;
  write_report(js, Format::json, m, {r});
  const auto j = nlohmann::json::parse(js.str());
  EXPECT_EQ(j["attnbench"]["timing_mode"], "profile");
  EXPECT_EQ(j["rows"][0]["profiled"], "gemm-case/layout=nt dtype=bf16/mma/");
  EXPECT_FALSE(j["rows"][0].contains("timing"));
  EXPECT_FALSE(j["rows"][0].contains("speedup"));
  // Nothing in a profile is a timing compare could judge.
  EXPECT_THROW(compare_reports(j, j, 0.05), InputError);
}

TEST(Profile, NvtxRangesAsNsightComputeNamesThem) {
  EXPECT_EQ(nvtx_ranges("softmax", "", "naive"), (std::vector<std::string>{"softmax", "naive"}));
  EXPECT_EQ(nvtx_ranges("gqa", "seq_q=1024", "flash_mma"),
            (std::vector<std::string>{"gqa", "seq_q=1024", "flash_mma"}));
  EXPECT_EQ(ncu_nvtx_include({"gqa", "seq_q=1024", "flash_mma"}), "gqa/seq_q=1024/flash_mma/");
  // ncu's quantifiers in a name are escaped, so that the name matches itself.
  EXPECT_EQ(ncu_nvtx_include(nvtx_ranges("paged", "context=[1,7] dtype=bf16", "flash_mma+split_kv")),
            "paged/context=\\[1,7\\] dtype=bf16/flash_mma\\+split_kv/");
  EXPECT_EQ(ncu_nvtx_include({"a/b*c@d\\e"}), "a\\/b\\*c\\@d\\\\e/");
}

TEST(ReproduceCommand, ProfileInsteadOfAMode) {
  RunOptions o;
  o.program = "attnbench";
  o.profile = true;
  CasePoint p;
  p.pins = {"shape.cols=1000"};
  EXPECT_EQ(reproduce_command(o, "cases/smoke/softmax.toml", p, "warp_online"),
            "attnbench run cases/smoke/softmax.toml --set shape.cols=1000 -k warp_online --profile");
}

// -o after each point: what ReportFile writes is what write_report writes for the same rows
// (json: the same document; csv: the same text), with rows rendered only once.
TEST(Report, ReportFileWritesWhatWriteReportWrites) {
  const std::string dir = ::testing::TempDir();
  for (Format f : {Format::json, Format::csv, Format::markdown}) {
    const std::string path = dir + "/report_file_test" + std::to_string(static_cast<int>(f));
    ReportFile file(path, f);
    std::vector<ResultRow> rows;
    RunMeta m = meta("run");
    for (int n = 0; n < 3; ++n) {
      rows.push_back(timed_row("v" + std::to_string(n), 1.0 + n, 1e12, 1e9));
      m.complete = n == 2;
      m.elapsed_ms = 10.0 * n;
      file.write(m, rows);
      std::ifstream in(path);
      std::stringstream got;
      got << in.rdbuf();
      std::ostringstream want;
      write_report(want, f, m, rows);
      if (f == Format::json) {
        const auto j = nlohmann::json::parse(got.str());
        EXPECT_EQ(j, nlohmann::json::parse(want.str()));
        EXPECT_EQ(j["rows"].size(), rows.size());
        EXPECT_EQ(j["attnbench"]["complete"], n == 2);
      } else {
        EXPECT_EQ(got.str(), want.str());
      }
    }
    std::remove(path.c_str());
  }
}

// A json report of no rows is still a document.
TEST(Report, JsonOfNoRowsParses) {
  std::ostringstream out;
  write_report(out, Format::json, meta("verify"), {});
  const auto j = nlohmann::json::parse(out.str());
  EXPECT_TRUE(j["rows"].is_array());
  EXPECT_TRUE(j["rows"].empty());
}

TEST(Footprint, ShortKernelNames) {
  EXPECT_EQ(short_kernel_name("void attnbench::flash_mma_kernel<128, true>(attnbench::AttentionParams)"),
            "flash_mma_kernel");
  EXPECT_EQ(short_kernel_name("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1"),
            "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1");
  EXPECT_EQ(short_kernel_name("softmax_rows(float const*, float*, int)"), "softmax_rows");
  EXPECT_EQ(short_kernel_name("ns::inner::k<int>"), "k");
  EXPECT_EQ(short_kernel_name("void attnbench::decode_impl::(anonymous namespace)::naive_kernel<float, false, false>("
                              "attnbench::decode_impl::Decode, float*, long)"),
            "naive_kernel");
}

// The footprint in each format: every kernel's figures in the table (joined by '/'),
// the csv columns (joined by ';') and the json object; unknown figures stay unknown.
TEST(Footprint, InEveryFormat) {
  ResultRow r = timed_row("split_kv", 1.0, 1e9, 1e9);
  Footprint f;
  f.sm_count = 132;
  KernelFootprint a;
  a.name = "split_kernel";
  a.blocks = 264;
  a.threads = 128;
  a.registers = 96;
  a.static_smem = 0;
  a.dynamic_smem = 48 * 1024;
  a.local_bytes = 0;
  a.blocks_per_sm = 2;
  KernelFootprint b;  // a kernel whose attributes could not be read
  b.name = "combine";
  b.blocks = 64;
  b.threads = 256;
  f.kernels = {a, b};
  r.footprint = f;
  r.tensor_bytes = 3 << 20;
  r.workspace_bytes = 1 << 20;

  std::ostringstream table;
  write_report(table, Format::table, meta("run"), {r}, wide_table_columns());
  EXPECT_NE(table.str().find("regs"), std::string::npos);
  EXPECT_TRUE(std::regex_search(table.str(), std::regex(R"(96/\?\s+48K/\?\s+2/\?\s+1\.00/\?\s+4\.0 MiB)")))
      << table.str();

  std::ostringstream csv;
  write_report(csv, Format::csv, meta("run"), {r});
  EXPECT_NE(csv.str().find(",split_kernel;combine,96;-1,49152;-1,2;-1,1;-1,3145728,1048576"), std::string::npos)
      << csv.str();

  std::ostringstream js;
  write_report(js, Format::json, meta("run"), {r});
  const auto j = nlohmann::json::parse(js.str())["rows"][0]["footprint"];
  EXPECT_EQ(j["tensor_bytes"], 3 << 20);
  EXPECT_EQ(j["workspace_bytes"], 1 << 20);
  ASSERT_EQ(j["kernels"].size(), 2u);
  EXPECT_EQ(j["kernels"][0]["registers"], 96);
  EXPECT_EQ(j["kernels"][0]["dynamic_smem"], 48 * 1024);
  EXPECT_DOUBLE_EQ(j["kernels"][0]["waves"].get<double>(), 1.0);
  EXPECT_FALSE(j["kernels"][1].contains("registers"));
  EXPECT_FALSE(j["kernels"][1].contains("waves"));

  // A launch that could not be captured says why, and the table shows dashes.
  r.footprint->kernels.clear();
  r.footprint->error = "its launch cannot be captured: operation not permitted when stream is capturing";
  std::ostringstream js2;
  write_report(js2, Format::json, meta("run"), {r});
  EXPECT_NE(nlohmann::json::parse(js2.str())["rows"][0]["footprint"]["error"].get<std::string>().find("captured"),
            std::string::npos);
}

// Throttling in each format: dropped samples, NVML's reasons by name, and an interleaved
// run's speedup interval.
TEST(Report, ThrottlingAndSpeedupInterval) {
  ResultRow r = timed_row("mma", 2.0, 1e12, 1e9);
  r.timing->dropped = 3;
  r.timing->throttle_reasons = 0x4 | 0x20 | 0x1;  // power cap, thermal; idle is not a reason
  r.timing->clock = ClockStats{10, 2, 1700, 1980};
  r.speedup = 1.5;
  r.speedup_ci = Interval{1.4, 1.6};
  r.rounds = 3;
  std::ostringstream table;
  write_report(table, Format::table, meta("run"), {r});
  EXPECT_NE(table.str().find("1.50x [1.40-1.60]"), std::string::npos) << table.str();
  // The note is longer than a line: folded where its parts meet.
  EXPECT_NE(table.str().find("\n      3 throttled samples dropped and taken again;\n      2 of 10 samples ran below 90% "
                             "of the 1980 MHz SM clock (throttled) (sw_power_cap, sw_thermal_slowdown)\n"),
            std::string::npos)
      << table.str();
  std::ostringstream js;
  write_report(js, Format::json, meta("run"), {r});
  const auto row = nlohmann::json::parse(js.str())["rows"][0];
  EXPECT_EQ(row["timing"]["dropped_samples"], 3);
  EXPECT_EQ(row["timing"]["throttle_reasons"], nlohmann::json({"sw_power_cap", "sw_thermal_slowdown"}));
  EXPECT_EQ(row["speedup_ci"], nlohmann::json({1.4, 1.6}));
  EXPECT_EQ(row["rounds"], 3);
  // Without --interleave the table shows the speedup alone.
  r.rounds = 1;
  std::ostringstream plain;
  write_report(plain, Format::table, meta("run"), {r});
  EXPECT_EQ(plain.str().find("[1.40-1.60]"), std::string::npos);
}

TEST(Timing, MergeKeepsEverySampleAndSummarisesAgain) {
  Timing a, b;
  a.samples = {1.0, 1.0, 1.0};
  a.samples_mhz = {1980, 1980, 1980};
  a.clock = summarize_clocks(a.samples_mhz, 1980);
  a.ms = summarize(a.samples);
  a.dropped = 1;
  b.samples = {3.0, 3.0};
  b.samples_mhz = {1500, 1500};
  b.throttle_reasons = 0x4;
  b.dropped = 2;
  b.clock_gave_up = true;
  merge_timing(a, b);
  EXPECT_EQ(a.samples.size(), 5u);
  EXPECT_DOUBLE_EQ(a.ms.median, 1.0);
  EXPECT_DOUBLE_EQ(a.ms.max, 3.0);
  EXPECT_EQ(a.clock.samples, 5);
  EXPECT_EQ(a.clock.low_samples, 2);
  EXPECT_EQ(a.dropped, 3);
  EXPECT_EQ(a.throttle_reasons, 0x4u);
  EXPECT_TRUE(a.clock_gave_up);
}

// Dropped samples alone (none kept below 90%): the note names the drops and the reasons.
TEST(Report, DroppedSamplesAlone) {
  ResultRow r = timed_row("wgmma", 2.0, 1e12, 1e9);
  r.timing->dropped = 4;
  r.timing->throttle_reasons = 0x4;
  r.timing->clock = ClockStats{10, 0, 1950, 1980};
  std::ostringstream table;
  write_report(table, Format::table, meta("run"), {r});
  EXPECT_NE(table.str().find("      4 throttled samples dropped and taken again (sw_power_cap)\n"), std::string::npos)
      << table.str();
}

// A variant that means nothing for a point (an unfused-RoPE baseline without RoPE) is left
// out of its rows unless the case or -k names it exactly; a glob does not.
TEST(SelectVariants, InapplicableOnlyWhenNamed) {
  const std::vector<VariantChoice> all = {{"naive", "", "", true},
                                          {"flash_mma", "", "", true},
                                          {"flash_mma_rope_first", "", "only for cases with rope", false}};
  CasePoint p;
  p.baseline = "naive";
  EXPECT_EQ(select_variants(all, p, {}, false), (std::vector<std::string>{"naive", "flash_mma"}));
  EXPECT_EQ(select_variants(all, p, {{"flash*"}, {}}, false), (std::vector<std::string>{"flash_mma"}));
  EXPECT_EQ(select_variants(all, p, {{"flash_mma_rope_first"}, {}}, false),
            (std::vector<std::string>{"flash_mma_rope_first"}));
  p.kernels = {"flash_mma", "flash_mma_rope_first"};
  EXPECT_EQ(select_variants(all, p, {}, true), (std::vector<std::string>{"naive", "flash_mma", "flash_mma_rope_first"}));
}

// A median below the card's floor (past its noise) fails the row; the memory floor counts only
// cold and past twice the L2.
TEST(Report, ImpossibleTimings) {
  ResultRow r;
  r.timing = Timing{};
  r.timing->mode = TimingMode::cold;
  r.timing->ms.median = 1.0;
  r.timing->ms.noise = 0.01;
  r.work.bytes = 1e9;
  r.floor_memory_ms = 1.09;  // 109%: within the 10% slack
  EXPECT_EQ(impossible_timing(r, 50e6), "");
  r.floor_memory_ms = 1.2;
  EXPECT_NE(impossible_timing(r, 50e6).find("IMPOSSIBLE: median 1.0000 ms is 120% of the card's memory floor"),
            std::string::npos);
  EXPECT_EQ(impossible_timing(r, 600e6), "");  // 1 GB moved, under twice a 600 MB L2: may sit there
  r.timing->mode = TimingMode::hot;
  EXPECT_EQ(impossible_timing(r, 50e6), "");
  r.floor_compute_ms = 2.0;  // compute counts in every mode
  EXPECT_NE(impossible_timing(r, 50e6).find("200% of the card's compute floor"), std::string::npos);
  r.timing->ms.noise = 0.5;  // three times the noise: 250% allowed
  EXPECT_EQ(impossible_timing(r, 50e6), "");
}

// ---- The run and verify table within a terminal (issue 46) ----

namespace {

// The rows `run cases/perf/attention-bf16-b4-h16-s4096-d128.toml` prints, with everything a
// row can carry at its widest: every timing figure, a throttled clock, an interleaved
// speedup's interval, a footprint of two kernels, long variant names (a plugin's), skip
// reasons shared by several rows and a failure's long reason.
std::vector<ResultRow> perf_attention_rows() {
  const Ceilings card = test_card();
  std::vector<ResultRow> rows;
  const double flops = 4.0 * 4 * 16 * 4096.0 * 4096 * 128, bytes = 4.0 * 4 * 16 * 4096 * 128 * 2;
  for (const std::string point : {"causal=false", "causal=true"}) {
    auto timed = [&](const std::string& variant, double ms) {
      ResultRow r = timed_row(variant, ms, flops, bytes);
      r.case_name = "attention-bf16-b4-h16-s4096-d128";
      r.point = point;
      r.op = "attention";
      r.cmp->max_abs = 3.03e-4;
      r.cmp->rel_l2 = 2.31e-3;
      r.cmp->bound = Bound{};
      r.cmp->margin = 0.41;
      r.timing->ms = summarize({ms * 0.99, ms, ms * 1.01});
      r.timing->clock = ClockStats{180, 81, 1877, 1980};
      r.timing->dropped = 2;
      r.timing->throttle_reasons = 0x4;
      r.speedup = 613.27 / ms;
      r.speedup_ci = Interval{613.27 / ms * 0.98, 613.27 / ms * 1.02};
      r.rounds = 3;
      Footprint f;
      f.sm_count = 132;
      KernelFootprint k;
      k.name = "flash_ws_kernel";
      k.blocks = 2048;
      k.threads = 384;
      k.registers = 168;
      k.static_smem = 0;
      k.dynamic_smem = 196 * 1024;
      k.local_bytes = 0;
      k.blocks_per_sm = 1;
      f.kernels = {k, k};
      r.footprint = f;
      r.tensor_bytes = uint64_t{512} << 20;
      r.workspace_bytes = uint64_t{4096} << 20;
      derive_rates(r, DType::bf16, card);
      rows.push_back(r);
    };
    auto skipped = [&](const std::string& variant, const std::string& why) {
      ResultRow r;
      r.case_name = "attention-bf16-b4-h16-s4096-d128";
      r.point = point;
      r.op = "attention";
      r.variant = variant;
      r.status = Status::skipped;
      r.reason = why;
      rows.push_back(r);
    };
    timed("naive", 613.2693);
    rows.back().baseline = true;
    timed("cublas", 12.8327);
    skipped("flash_fp32", "fp32 only (fp16/bf16: flash_mma)");
    timed("flash_mma", 1.4414);
    timed("flash_ws_rope_first", 0.9876);
    timed("my_plugin_flash_attention_v2", 1.1234);
    if (point == "causal=true") {
      skipped("flash_wgmma", "needs head_dim <= 128");
      skipped("flash_ws", "needs head_dim <= 128");
      continue;
    }
    timed("flash_wgmma", 1.2577);
    timed("flash_ws", 0.9528);
    // A failure's reason: the errors against their bound, the mismatches and the worst element.
    ResultRow& bad = rows.back();
    bad.status = Status::failed;
    bad.cmp->bound = Bound{4, 2, 1.2e-4, 9.1e-4, 0.12, 2.5, 0, 0, 4.8e-4, 1.82e-3};
    bad.cmp->margin = 12.5;
    bad.cmp->max_abs = 6e-3;
    bad.cmp->mismatches = 1234;
    bad.cmp->elements_checked = 1048576;
    bad.cmp->worst_row = 17;
    bad.worst = "(3, 15, 4095, 127)";
    bad.cmp->worst_got = 0.5;
    bad.cmp->worst_ref = 0.25;
    bad.tol = {1e-2, 1e-2};
  }
  return rows;
}

// As `run` and `verify` print a case: its title with the description, every row, the footnotes.
std::string render(const std::vector<ResultRow>& rows, bool timed, TableColumns cols = default_table_columns()) {
  std::ostringstream out;
  TableWriter t(out, timed, false, std::move(cols));
  t.begin_case(rows.front().case_name,
               "FA2-style prefill, bf16 b4 h16 seq 4096 d128: flash_mma against PyTorch's FA2 (peers.py)", 12);
  for (const ResultRow& r : rows) t.row(r);
  t.finish();
  return out.str();
}

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> lines;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  return lines;
}

// The table's header line (after the case's title, which may take two lines).
std::string header_of(const std::string& table) {
  for (const std::string& l : lines_of(table))
    if (l.rfind("  point ", 0) == 0) return l;
  return "";
}

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST(Table, DefaultFitsOneHundredTwentyColumns) {
  const std::vector<ResultRow> rows = perf_attention_rows();
  for (bool timed : {true, false}) {
    const std::string s = render(rows, timed);
    for (const std::string& line : lines_of(s)) EXPECT_LE(line.size(), 120u) << "\n" << line << "\n\n" << s;
    // Each row one line, its reason a footnote.
    size_t rows = 0;
    for (const std::string& l : lines_of(s)) rows += l.rfind("  causal=", 0) == 0;
    EXPECT_EQ(rows, 16u) << s;
  }
  const std::string run = header_of(render(rows, true));
  EXPECT_TRUE(std::regex_search(
      run, std::regex(R"(^  point +variant +status +margin +median ms +noise +TFLOP/s +GB/s +% floor +speedup$)")))
      << run;
  const std::string verify = header_of(render(rows, false));
  EXPECT_TRUE(std::regex_search(
      verify, std::regex(R"(^  point +variant +status +max abs err +rel L2 err +margin +rows checked$)")))
      << verify;
}

TEST(Table, WideShowsTheFootprintAndTheClock) {
  const std::vector<ResultRow> rows = perf_attention_rows();
  const std::string plain = render(rows, true);
  const std::string wide = render(rows, true, wide_table_columns());
  for (const char* h : {"max abs err", "rel L2 err", "floor ms", "MHz", "regs", "smem", "blk/SM", "waves", "memory"}) {
    EXPECT_NE(header_of(wide).find(h), std::string::npos) << h << "\n" << wide;
    EXPECT_EQ(header_of(plain).find(h), std::string::npos) << h << "\n" << plain;
  }
  // flash_mma's row, causal=false: the clock with its throttle mark, each kernel's figures.
  EXPECT_TRUE(std::regex_search(wide, std::regex(R"(causal=false +flash_mma +verified .* 1877! +168/168 +196K/196K +1/1 +16/16 +4\.5 GiB\n)")))
      << wide;
  // verify --wide: the footprint too, and still no timing.
  const std::string verify = render(rows, false, wide_table_columns());
  EXPECT_NE(header_of(verify).find("blk/SM"), std::string::npos) << verify;
  EXPECT_EQ(header_of(verify).find("median"), std::string::npos) << verify;
}

TEST(Table, ReasonsAreFootnotesPrintedOncePerCase) {
  const std::string s = render(perf_attention_rows(), true);
  // Each row says why by a mark; the text is under the case's last row, once, with the variants it is for.
  EXPECT_TRUE(std::regex_search(s, std::regex(R"(\n  causal=false +flash_fp32 +skipped \[1\]\n)"))) << s;
  EXPECT_TRUE(std::regex_search(s, std::regex(R"(\n  causal=true +flash_fp32 +skipped \[1\]\n)"))) << s;
  EXPECT_TRUE(std::regex_search(s, std::regex(R"(\n  causal=false +flash_ws +FAILED \[2\] +12 +)"))) << s;
  EXPECT_TRUE(std::regex_search(s, std::regex(R"(\n  causal=true +flash_wgmma +skipped \[3\]\n)"))) << s;
  EXPECT_TRUE(std::regex_search(s, std::regex(R"(\n  causal=true +flash_ws +skipped \[3\]\n)"))) << s;
  EXPECT_EQ(count(s, "fp32 only"), 1u) << s;
  EXPECT_EQ(count(s, "needs head_dim <= 128"), 1u) << s;
  EXPECT_NE(s.find("\n  [1] skipped: fp32 only (fp16/bf16: flash_mma) (flash_fp32)\n"), std::string::npos) << s;
  EXPECT_NE(s.find("\n  [3] skipped: needs head_dim <= 128 (flash_wgmma, flash_ws)\n"), std::string::npos) << s;
  EXPECT_GT(s.find("\n  [1] "), s.rfind("causal=true")) << "footnotes come after the rows\n" << s;
  // The failure's reason is folded: every word kept, in order, each line within 118 columns.
  const size_t at = s.find("\n  [2] FAILED: "), end = s.find("\n  [3] ");
  ASSERT_NE(at, std::string::npos) << s;
  const std::vector<std::string> note = lines_of(s.substr(at + 1, end - at - 1));
  EXPECT_GT(note.size(), 1u) << s;
  std::string words;
  for (const std::string& l : note) {
    EXPECT_LE(l.size(), 118u) << l;
    EXPECT_EQ(l.rfind(&l == &note.front() ? "  [2] " : "      ", 0), 0u) << l;
    words += (words.empty() ? "" : " ") + l.substr(6);
  }
  EXPECT_NE(words.find("error 12x its bound (max abs 6.00e-03 against 4.80e-04, rel L2 2.31e-03 against 1.82e-03; "
                       "an honest kernel in the dtype: 1.20e-04, 9.10e-04); 1234 of 1048576 checked elements outside 1.00e-02 + 1.00e-02*|ref|; worst (3, 15, 4095, 127): "
                       "got 0.5, want 0.25"),
            std::string::npos)
      << words;
  EXPECT_EQ(words.substr(words.size() - 10), "(flash_ws)") << words;
}

// Footnotes belong to their case: printed before the next case's title, numbered afresh, and by
// the writer's destructor when nothing called finish().
TEST(Table, FootnotesEndEachCase) {
  ResultRow a;
  a.case_name = "one";
  a.variant = "v";
  a.reason = "why one";
  ResultRow b = a;
  b.case_name = "two";
  b.reason = "why two";
  std::ostringstream out;
  {
    TableWriter t(out, true);
    t.row(a);
    t.row(b);
  }
  EXPECT_TRUE(std::regex_search(out.str(), std::regex(R"(skipped \[1\]\n  \[1\] skipped: why one \(v\)\n\ntwo\n)")))
      << out.str();
  EXPECT_NE(out.str().find("  [1] skipped: why two (v)\n"), std::string::npos) << out.str();
  EXPECT_EQ(out.str().find("[2]"), std::string::npos) << out.str();
}

TEST(Table, ColumnsList) {
  const std::vector<ResultRow> rows = perf_attention_rows();
  // In the order given, each once; the groups expand for the table's mode.
  std::string h = header_of(render(rows, true, parse_table_columns("speedup, median,tflops,speedup")));
  EXPECT_TRUE(std::regex_search(h, std::regex(R"(^  point +variant +status +speedup +median ms +TFLOP/s$)"))) << h;
  h = header_of(render(rows, true, parse_table_columns("default,footprint")));
  EXPECT_TRUE(std::regex_search(h, std::regex(R"( +speedup +regs +smem +blk/SM +waves +memory$)"))) << h;
  // verify has no timing: those columns are left out, the others stay.
  h = header_of(render(rows, false, parse_table_columns("median,margin,regs")));
  EXPECT_TRUE(std::regex_search(h, std::regex(R"(^  point +variant +status +margin +regs$)"))) << h;
  // The modes' medians only where --mode all measured them.
  h = header_of(render(rows, true, parse_table_columns("median,modes")));
  EXPECT_TRUE(std::regex_search(h, std::regex(R"( +status +median ms$)"))) << h;
  const std::vector<std::string> names = table_column_names();
  for (const char* n : {"default", "wide", "footprint", "modes", "max_abs", "rel_l2", "margin", "rows", "median", "noise",
                        "hot", "graph", "graph_hot", "tflops", "gbps", "floor", "pct_floor", "speedup", "mhz", "regs",
                        "smem", "blk_sm", "waves", "memory"})
    EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
  EXPECT_EQ(names.size(), 24u);
}

TEST(Table, UnknownColumnsAreRefused) {
  auto message = [](const std::string& list) {
    try {
      parse_table_columns(list);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  const std::string all = "(columns: default, wide, footprint, modes, max_abs, rel_l2, margin, rows, median, noise, hot, "
                          "graph, graph_hot, tflops, gbps, floor, pct_floor, speedup, mhz, regs, smem, blk_sm, waves, "
                          "memory)";
  EXPECT_EQ(message("median,bogus"), "--columns: unknown column 'bogus' " + all);
  EXPECT_EQ(message("medain"), "--columns: unknown column 'medain' (did you mean median? " + all.substr(1));
  EXPECT_EQ(message("Median"), "--columns: unknown column 'Median' (did you mean median? " + all.substr(1));
  for (const char* empty : {"", " ", "median,,tflops", "median,", ",median"})
    EXPECT_EQ(message(empty).rfind("--columns: an empty name in '", 0), 0u) << "'" << empty << "': " << message(empty);
}

// Markdown (and so `report`'s page) and csv keep every column and the reason in the row,
// whatever the terminal's table shows.
TEST(Table, MarkdownKeepsEveryColumn) {
  std::ostringstream md;
  write_report(md, Format::markdown, meta("run"), perf_attention_rows());
  EXPECT_NE(md.str().find("| case | point | variant | status | max abs err | rel L2 err | margin | median ms | noise | "
                          "TFLOP/s | GB/s | floor ms | % floor | speedup | MHz | regs | smem | blk/SM | waves | memory "
                          "| note |"),
            std::string::npos)
      << md.str();
  EXPECT_EQ(count(md.str(), "| skipped | - |"), 4u) << md.str();
  EXPECT_EQ(count(md.str(), "needs head_dim <= 128 |\n"), 2u) << md.str();
}
