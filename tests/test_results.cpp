// `attnbench report`: rows read back from json print as `run` printed them, the page's
// layout, and the protocol with the plot script (app/results.hpp).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "app/results.hpp"
#include "tests/test_card.hpp"

using namespace attnbench;
namespace fs = std::filesystem;

namespace {

ResultRow row(const std::string& case_name, const std::string& point, const std::string& variant, double ms) {
  ResultRow r;
  r.case_name = case_name;
  r.point = point;
  r.op = "gemm";
  r.dtype = "bf16";
  r.variant = variant;
  r.status = Status::verified;
  r.cmp = Comparison{};
  r.cmp->elements_checked = 1000;
  r.cmp->rows_checked = 8;
  r.cmp->rows_total = 64;
  r.cmp->max_abs = 1.5e-3;
  r.cmp->rel_l2 = 2.25e-4;
  r.trials = 2;
  r.tol = {8e-3, 1.6e-2};
  r.work = {2e12, 3e9, Bandwidth::copy};
  Timing t;
  t.ms = summarize({ms, ms * 1.01, ms * 0.99, ms * 1.02});
  t.clock = summarize_clocks({1980, 1500}, 1980);
  r.timing = t;
  derive_rates(r, DType::bf16, test_card());
  return r;
}

// Every kind of row the formats print differently.
std::vector<ResultRow> all_kinds() {
  ResultRow base = row("gemm-case", "n=1024", "naive", 8.0);
  base.baseline = true;
  ResultRow fast = row("gemm-case", "n=1024", "mma", 2.0);
  Timing hot = *fast.timing;
  hot.mode = TimingMode::hot;
  hot.ms = summarize({1.5, 1.5});
  fast.other_modes = {hot};
  for (ResultRow* r : {&base, &fast}) r->speedup = base.timing->ms.median / r->timing->ms.median;
  ResultRow failed = row("gemm-case", "n=1024", "reg_tiled", 3.0);
  failed.status = Status::failed;
  failed.timing.reset();
  failed.cmp->mismatches = 7;
  failed.cmp->nonfinite = 2;
  failed.cmp->max_abs = INFINITY;
  failed.cmp->worst_row = 5;
  failed.cmp->worst_got = 1.25;
  failed.cmp->worst_ref = 1.5;
  failed.worst = "(0, 0, 5, 3)";
  ResultRow skipped;
  skipped.case_name = "gemm-case";
  skipped.point = "n=1024";
  skipped.variant = "wgmma";
  skipped.status = Status::skipped;
  skipped.reason = "needs sm_90a";
  ResultRow staged = row("pipeline | case", "", "flash_mma+split_kv", 0.25);
  staged.stages = {{"TTFT", "prefill", summarize({0.25, 0.25}), 0.25, 2},
                   {"TBT", "cache append + decode", summarize({0.02, 0.03}), 0.03, 2}};
  ResultRow profiled = row("softmax", "cols=1000", "warp_online", 1.0);
  profiled.timing.reset();
  profiled.profiled = "softmax/cols=1000/warp_online/";
  return {base, fast, failed, skipped, staged, profiled};
}

nlohmann::json as_json(const std::vector<ResultRow>& rows) {
  RunMeta m;
  m.version = "0.1.0";
  m.mode = "run";
  m.date = "2026-11-26T00:00:00Z";
  m.ceilings = test_card();
  m.device = DeviceInfo{};
  m.device->name = "NVIDIA H100 80GB HBM3";
  m.device->caps.sm_count = 132;
  m.device->driver_version = 13000;
  m.device->runtime_version = 13000;
  std::ostringstream out;
  write_report(out, Format::json, m, rows);
  return nlohmann::json::parse(out.str());
}

std::string markdown(const std::vector<ResultRow>& rows) {
  std::ostringstream out;
  write_markdown_table(out, rows, true);
  write_markdown_legend(out, rows, true);
  return out.str();
}

std::string table(const std::vector<ResultRow>& rows) {
  std::ostringstream out;
  TableWriter t(out, true, true);
  for (const auto& r : rows) t.row(r);
  return out.str();
}

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

// The page's tables are the markdown format's: read back from json, every kind of row prints
// exactly as it did from the run's own rows (and so does the terminal table).
TEST(Results, RowsReadBackPrintAsRunPrintedThem) {
  const std::vector<ResultRow> rows = all_kinds();
  const std::vector<ResultRow> back = rows_from_json(as_json(rows));
  ASSERT_EQ(back.size(), rows.size());
  EXPECT_EQ(markdown(back), markdown(rows));
  EXPECT_EQ(table(back), table(rows));
  // The parts a mistake would lose, named, so that a failure says what.
  EXPECT_NE(markdown(back).find("| 2.0100 | 1.5% | 1.5000 |"), std::string::npos) << markdown(back);
  EXPECT_NE(markdown(back).find("4.00x"), std::string::npos);
  EXPECT_NE(markdown(back).find("7 of 1000 checked elements"), std::string::npos);
  EXPECT_NE(markdown(back).find("TBT mean 0.0250 ms"), std::string::npos);
  EXPECT_NE(markdown(back).find("| profiled |"), std::string::npos);
  EXPECT_TRUE(std::isinf(back[2].cmp->max_abs));
}

// A peer report's rows (tools/peers.py --report) read back as peer rows with their timing,
// not as errors.
TEST(Results, PeerRowsReadAsPeerRows) {
  const auto doc = nlohmann::json::parse(R"({"rows": [
    {"case": "mha-x", "point": "", "variant": "torch_sdpa_flash_layer", "status": "peer",
     "timing": {"mode": "cold", "median_ms": 0.084, "q1_ms": 0.083, "q3_ms": 0.085, "samples": 5},
     "tflops": 307.6, "gbps": 207}]})");
  const std::vector<ResultRow> rows = rows_from_json(doc);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].status, Status::peer);
  ASSERT_TRUE(rows[0].timing.has_value());
  EXPECT_NE(markdown(rows).find("| torch_sdpa_flash_layer | peer |"), std::string::npos) << markdown(rows);
}

// Hand-written or damaged reports: a value of the wrong type reads as absent, never throws.
TEST(Results, WrongTypesReadAsAbsent) {
  const auto doc = nlohmann::json::parse(R"({"rows": [
    {"case": "c", "variant": "v", "status": "verified", "verify": "x", "timing": 5, "tflops": "fast",
     "baseline": "yes", "stages": {"a": 1}, "speedup": null},
    {"case": 7, "variant": ["v"], "status": "weird", "timing": {"median_ms": "1", "clock": []}},
    3, "row"]})");
  std::vector<ResultRow> rows;
  ASSERT_NO_THROW(rows = rows_from_json(doc));
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_FALSE(rows[0].cmp.has_value());
  EXPECT_FALSE(rows[0].timing.has_value());
  EXPECT_FALSE(rows[0].baseline);
  EXPECT_FALSE(rows[0].speedup.has_value());
  EXPECT_EQ(rows[1].case_name, "");
  EXPECT_EQ(rows[1].status, Status::error);
  EXPECT_EQ(rows[1].timing->ms.median, 0);
  EXPECT_NO_THROW(markdown(rows));
  EXPECT_TRUE(rows_from_json(nlohmann::json::array()).empty());
}

TEST(Results, PageHasTheCardACaseSectionEachAndTheLegendOnce) {
  const nlohmann::json run = as_json(all_kinds());
  Plots plots;
  plots.throughput["gemm-case"] = "throughput-gemm-case.png";
  std::ostringstream out;
  write_results_page(out, run, "run.json", std::nullopt, "", plots, "attnbench report run.json -o page");
  const std::string s = out.str();
  EXPECT_EQ(s.rfind("# attnbench results: NVIDIA H100 80GB HBM3\n", 0), 0u) << s;
  EXPECT_NE(s.find("- **card:** NVIDIA H100 80GB HBM3, 132 SMs"), std::string::npos);
  EXPECT_NE(s.find("2026-11-26T00:00:00Z, attnbench 0.1.0"), std::string::npos);
  EXPECT_NE(s.find("copy 3000, read 3300"), std::string::npos);
  // One section per case, in the report's order; a case's plot under its heading, above its table.
  const size_t gemm = s.find("\n## gemm-case\n"), pipeline = s.find("\n## pipeline \\| case\n"),
               softmax = s.find("\n## softmax\n");
  ASSERT_NE(gemm, std::string::npos) << s;
  ASSERT_NE(pipeline, std::string::npos) << s;
  ASSERT_NE(softmax, std::string::npos) << s;
  EXPECT_LT(gemm, pipeline);
  EXPECT_LT(pipeline, softmax);
  const size_t image = s.find("![gemm-case: throughput of each variant](throughput-gemm-case.png)");
  EXPECT_GT(image, gemm);
  EXPECT_LT(image, s.find("| case | point |", gemm));
  EXPECT_EQ(count(s, "]("), 1u) << "an image for a case without a plot";
  EXPECT_EQ(count(s, "| case | point | variant |"), 3u);
  EXPECT_EQ(count(s, "`*` baseline"), 1u);
  // The gemm table holds the gemm rows only.
  const std::string gemm_part = s.substr(gemm, pipeline - gemm);
  EXPECT_EQ(count(gemm_part, "\n| gemm-case |"), 4u) << gemm_part;
  EXPECT_EQ(s.find("No plots"), std::string::npos);
}

TEST(Results, PageSaysWhyThereAreNoPlotsAndWhatToRun) {
  Plots plots;
  plots.missing = "matplotlib is not installed for /usr/bin/python3";
  std::ostringstream out;
  write_results_page(out, as_json(all_kinds()), "run.json", std::nullopt, "", plots, "attnbench report run.json -o p");
  EXPECT_NE(out.str().find("> No plots: matplotlib is not installed for /usr/bin/python3. The tables are complete "
                           "without them; to add them, make that work and run `attnbench report run.json -o p` again."),
            std::string::npos)
      << out.str();
  EXPECT_EQ(out.str().find("]("), std::string::npos);
}

TEST(Results, PageWithACompareSection) {
  const nlohmann::json run = as_json(all_kinds());
  Plots plots;
  plots.compare = "compare.png";
  std::ostringstream out;
  write_results_page(out, run, "run.json", compare_reports(run, run, 0.05, "base.json", "run.json"), "base.json", plots,
                     "x");
  const std::string s = out.str();
  const size_t section = s.find("\n## Compared with base.json\n");
  ASSERT_NE(section, std::string::npos) << s;
  EXPECT_GT(s.find("](compare.png)"), section);
  EXPECT_NE(s.find("| case | point | variant | mode | BASE ms (q1-q3) |", section), std::string::npos);
  EXPECT_NE(s.find("0 FAST, 0 SLOW, 4 SAME"), std::string::npos) << s;
}

// Strings from a report cannot break the page: control characters escaped, markdown inert.
TEST(Results, HostileNamesStayText) {
  ResultRow r = row("a\x1b[31m*b*\n# c", "", "v", 1.0);
  std::ostringstream out;
  write_results_page(out, as_json({r}), "run.json", std::nullopt, "", Plots{}, "x");
  EXPECT_NE(out.str().find("\n## a\\\\x1b\\[31m\\*b\\*\\\\n\\# c\n"), std::string::npos) << out.str();
  EXPECT_EQ(out.str().find('\x1b'), std::string::npos);
}

// The plot script reads the report schemas this build writes: it must be checked, and its
// NEWEST_SCHEMA raised, when kJsonSchema is (as compare's kNewestSchema is).
TEST(Results, PlotScriptReadsTheNewestSchema) {
  std::ifstream in(std::string(ATTNBENCH_SOURCE_DIR) + "/app/plot/attnbench_plot.py");
  ASSERT_TRUE(in.good());
  std::stringstream text;
  text << in.rdbuf();
  std::smatch m;
  const std::string s = text.str();
  ASSERT_TRUE(std::regex_search(s, m, std::regex(R"(\nOLDEST_SCHEMA, NEWEST_SCHEMA = (\d+), (\d+)\n)")));
  EXPECT_EQ(std::stoi(m[2]), kJsonSchema)
      << "app/plot/attnbench_plot.py: check what it reads, then raise NEWEST_SCHEMA";
}

TEST(Results, PlotToolFlagThenEnvironmentThenSourceTree) {
  ::unsetenv("ATTNBENCH_PLOT_SCRIPT");
  ::unsetenv("ATTNBENCH_PYTHON");
  EXPECT_EQ(plot_tool("").script, std::string(ATTNBENCH_SOURCE_DIR) + "/app/plot/attnbench_plot.py");
  EXPECT_EQ(plot_tool("").python, "python3");
  ::setenv("ATTNBENCH_PLOT_SCRIPT", "/env/plot.py", 1);
  ::setenv("ATTNBENCH_PYTHON", "/opt/py/bin/python3", 1);
  EXPECT_EQ(plot_tool("").script, "/env/plot.py");
  EXPECT_EQ(plot_tool("/flag/plot.py").script, "/flag/plot.py");
  EXPECT_EQ(plot_tool("").python, "/opt/py/bin/python3");
  ::unsetenv("ATTNBENCH_PLOT_SCRIPT");
  ::unsetenv("ATTNBENCH_PYTHON");
}

// The protocol with the script, with `sh` standing in for python: its exit code and
// plots.json decide what the page shows.
class PlotScript : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("attnbench-results-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  Plots draw(const std::string& body) {
    const fs::path script = dir_ / "plot.sh";
    std::ofstream(script) << body;
    return draw_plots({"sh", script.string()}, "run.json", "base.json", "", (dir_ / "out").string());
  }
  fs::path dir_;
};

TEST_F(PlotScript, ManifestReadAndArgumentsPassed) {
  const Plots p = draw(
      "mkdir -p \"${1#--output=}\"\n"
      "[ \"$2\" = --compare=base.json ] && [ \"$3\" = -- ] && [ \"$4\" = run.json ] || exit 9\n"
      "echo '{\"throughput\": {\"softmax\": \"throughput-softmax.png\", \"evil\": \"../x.png\"}, "
      "\"compare\": \"compare.png\"}' > \"${1#--output=}/plots.json\"\n");
  EXPECT_EQ(p.missing, "");
  ASSERT_EQ(p.throughput.size(), 1u) << "a file outside the directory was linked";
  EXPECT_EQ(p.throughput.at("softmax"), "throughput-softmax.png");
  EXPECT_EQ(p.compare, "compare.png");
}

TEST_F(PlotScript, NoMatplotlibIsSaidInItsOwnWords) {
  const Plots p = draw("echo 'attnbench_plot: matplotlib is not installed for sh' >&2; exit 3\n");
  EXPECT_EQ(p.missing, "matplotlib is not installed for sh");
  EXPECT_TRUE(p.throughput.empty());
}

TEST_F(PlotScript, FailureAndMissingManifest) {
  EXPECT_EQ(draw("echo 'Traceback...'; echo 'ValueError: x' >&2; exit 1\n").missing,
            "the plot script failed (exit 1): ValueError: x");
  EXPECT_NE(draw("exit 0\n").missing.find("wrote no readable"), std::string::npos);
  // A plots.json left by an earlier page is not taken for this one's.
  fs::create_directories(dir_ / "out");
  std::ofstream(dir_ / "out" / "plots.json") << R"({"throughput": {"old": "old.png"}})";
  EXPECT_NE(draw("exit 0\n").missing.find("wrote no readable"), std::string::npos);
}

TEST_F(PlotScript, MissingScriptOrInterpreter) {
  EXPECT_NE(draw_plots({"sh", (dir_ / "nope.py").string()}, "r", "", "", dir_.string())
                .missing.find("the plot script is not at"),
            std::string::npos);
  std::ofstream(dir_ / "plot.py") << "";
  EXPECT_NE(draw_plots({(dir_ / "no-python").string(), (dir_ / "plot.py").string()}, "r", "", "", dir_.string())
                .missing.find("could not be started (No such file or directory; name the interpreter with "
                              "$ATTNBENCH_PYTHON)"),
            std::string::npos);
}
