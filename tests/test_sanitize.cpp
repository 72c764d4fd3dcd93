// verify --sanitize's parts that need no GPU: reading compute-sanitizer's output between the
// child's markers, turning findings into verdicts, and the child's command line.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "app/sanitize.hpp"

using namespace attnbench;

namespace {
// A child's merged stdout and stderr as memcheck leaves it: a finding's first line is
// unindented after "========= ", its details indented.
std::string log_text() {
  return "========= COMPUTE-SANITIZER\n" +
         sanitize_marker("softmax", "cols=33", kInputsMarker) + "\n" +
         sanitize_marker("softmax", "cols=33", "naive") + "\n" +
         sanitize_marker("softmax", "cols=33", "mine") + "\n"
         "========= Invalid __global__ write of size 4 bytes\n"
         "=========     at void softmax_rows<float>(const float *, float *, long, long)+0x2f0\n"
         "=========     by thread (31,0,0) in block (0,0,0)\n"
         "========= Invalid __global__ write of size 4 bytes\n"
         "=========     at void softmax_rows<float>(const float *, float *, long, long)+0x2f0\n"
         "  softmax [cols=33] mine FAILED ...\n" +
         sanitize_marker("softmax", "cols=1000", kInputsMarker) + "\n"
         "========= Uninitialized __global__ memory read of size 4 bytes\n" +
         sanitize_marker("softmax", "cols=1000", "naive") + "\n"
         "========= ERROR SUMMARY: 3 errors\n";
}

nlohmann::json report() {
  nlohmann::json r;
  r["rows"] = nlohmann::json::array();
  for (const char* point : {"cols=33", "cols=1000"})
    for (const char* variant : {"naive", "mine"}) r["rows"].push_back({{"case", "softmax"}, {"point", point},
                                                                      {"variant", variant}, {"status", "verified"}});
  r["rows"].push_back({{"case", "softmax"}, {"point", "cols=33"}, {"variant", "skipper"}, {"status", "skipped"}});
  return r;
}
}  // namespace

TEST(Sanitize, FindingsBelongToTheLaunchBeforeThem) {
  const SanitizerLog log = read_sanitizer_log(log_text());
  EXPECT_EQ(log.summary, 3);
  EXPECT_EQ(log.unattributed, 0);
  ASSERT_EQ(log.by_launch.size(), 2u);
  const SanitizerFinding& mine = log.by_launch.at({"softmax", "cols=33", "mine"});
  EXPECT_EQ(mine.count, 2);
  EXPECT_EQ(mine.first, "Invalid __global__ write of size 4 bytes");
  EXPECT_EQ(log.by_launch.at({"softmax", "cols=1000", kInputsMarker}).count, 1);
  EXPECT_EQ(log.by_launch.count({"softmax", "cols=33", "naive"}), 0u);
}

TEST(Sanitize, FindingsFailTheirRowsOnly) {
  nlohmann::json r = report();
  EXPECT_EQ(apply_sanitizer_log(r, read_sanitizer_log(log_text()), "memcheck"), 3);
  const auto row = [&](size_t i) { return r["rows"][i]; };
  EXPECT_EQ(row(0)["status"], "verified");  // cols=33 naive: nothing after its marker
  EXPECT_EQ(row(1)["status"], "FAILED");
  EXPECT_EQ(row(1)["reason"],
            "compute-sanitizer memcheck: 2 findings, the first: Invalid __global__ write of size 4 bytes");
  // cols=1000: the inputs' kernels had a finding, so every variant of the point fails, saying where.
  EXPECT_EQ(row(2)["status"], "FAILED");
  EXPECT_NE(row(2)["reason"].get<std::string>().find("1 in the kernels that build the point's inputs"),
            std::string::npos);
  EXPECT_EQ(row(3)["status"], "FAILED");
  EXPECT_EQ(row(4)["status"], "skipped");  // never launched: nothing to judge
}

TEST(Sanitize, FindingsBeforeAnyMarkerAreCountedApart) {
  const SanitizerLog log = read_sanitizer_log("========= Program hit cudaErrorInvalidValue on CUDA API call\n" +
                                              sanitize_marker("c", "", "v") + "\n========= RACECHECK SUMMARY: 0 hazards\n");
  EXPECT_EQ(log.unattributed, 1);
  EXPECT_TRUE(log.by_launch.empty());
  EXPECT_EQ(log.summary, 0);
}

TEST(Sanitize, ChildCommandLine) {
  const auto argv = sanitizer_argv("/cuda/compute-sanitizer", "racecheck", {"/bin/attnbench", "verify", "smoke"}, "/t/r.json");
  const std::vector<std::string> want = {"/cuda/compute-sanitizer", "--tool", "racecheck", "--print-limit", "10000",
                                         "--racecheck-report", "hazard", "/bin/attnbench", "verify", "smoke",
                                         "--sanitize-markers", "--format", "json", "-o", "/t/r.json"};
  EXPECT_EQ(argv, want);
}

TEST(Sanitize, RunToFileKeepsBothStreamsInOrder) {
  const std::string path = ::testing::TempDir() + "/sanitize-run.txt";
  EXPECT_EQ(run_to_file({"/bin/sh", "-c", "echo one; echo two >&2; echo three; exit 7"}, path), 7);
  std::ifstream in(path);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "one\ntwo\nthree\n");
}
