#include "app/sanitize.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include <filesystem>
#include <optional>
#include <nlohmann/json.hpp>
#include <sstream>

#include "app/errors.hpp"

extern char** environ;

namespace attnbench {

const std::vector<std::string>& sanitizer_tools() {
  static const std::vector<std::string> tools = {"memcheck", "racecheck", "initcheck", "synccheck"};
  return tools;
}

std::string find_compute_sanitizer() {
  namespace fs = std::filesystem;
  if (const char* path = std::getenv("PATH")) {
    std::stringstream dirs(path);
    std::string dir;
    while (std::getline(dirs, dir, ':'))
      if (!dir.empty() && fs::exists(fs::path(dir) / "compute-sanitizer")) return (fs::path(dir) / "compute-sanitizer").string();
  }
  const fs::path fallback = "/usr/local/cuda/bin/compute-sanitizer";
  return fs::exists(fallback) ? fallback.string() : "";
}

std::string sanitize_marker(const std::string& case_name, const std::string& point, const std::string& variant) {
  return kMarkerPrefix + case_name + "\t" + point + "\t" + variant;
}

SanitizerLog read_sanitizer_log(const std::string& text) {
  SanitizerLog log;
  std::optional<LaunchKey> current;
  std::istringstream in(text);
  std::string line;
  const std::string banner = "========= ";
  while (std::getline(in, line)) {
    if (line.rfind(kMarkerPrefix, 0) == 0) {
      const std::string rest = line.substr(std::char_traits<char>::length(kMarkerPrefix));
      const size_t a = rest.find('\t'), b = a == std::string::npos ? a : rest.find('\t', a + 1);
      if (b != std::string::npos) current = LaunchKey{rest.substr(0, a), rest.substr(a + 1, b - a - 1), rest.substr(b + 1)};
      continue;
    }
    if (line.rfind(banner, 0) != 0 || line.size() <= banner.size() || line[banner.size()] == ' ') continue;
    const std::string what = line.substr(banner.size());
    // The totals at the end: memcheck's, initcheck's and synccheck's, and racecheck's.
    for (const char* total : {"ERROR SUMMARY: ", "RACECHECK SUMMARY: "})
      if (what.rfind(total, 0) == 0) {
        log.summary = std::max(log.summary, 0) + std::atoi(what.c_str() + std::char_traits<char>::length(total));
        goto next;
      }
    if (what.rfind("COMPUTE-SANITIZER", 0) == 0 || what.rfind("Target application returned", 0) == 0 ||
        what.rfind("This application", 0) == 0)
      continue;
    if (current) {
      SanitizerFinding& f = log.by_launch[*current];
      if (f.count++ == 0) f.first = what;
    } else {
      ++log.unattributed;
    }
  next:;
  }
  return log;
}

int apply_sanitizer_log(nlohmann::json& report, const SanitizerLog& log, const std::string& tool) {
  int failed = 0;
  for (auto& row : report["rows"]) {
    const std::string c = row.value("case", ""), p = row.value("point", ""), v = row.value("variant", "");
    const auto own = log.by_launch.find({c, p, v});
    const auto inputs = log.by_launch.find({c, p, kInputsMarker});
    const bool mine = own != log.by_launch.end(), theirs = inputs != log.by_launch.end();
    const std::string status = row.value("status", "");
    if ((!mine && !theirs) || (status != "verified" && status != "FAILED")) continue;
    const int count = (mine ? own->second.count : 0) + (theirs ? inputs->second.count : 0);
    const std::string why = "compute-sanitizer " + tool + ": " + std::to_string(count) + " finding" +
                            (count == 1 ? "" : "s") +
                            (theirs ? " (" + std::to_string(inputs->second.count) +
                                          " in the kernels that build the point's inputs)"
                                    : "") +
                            ", the first: " + (mine ? own->second.first : inputs->second.first);
    const std::string before = row.value("reason", "");
    row["reason"] = before.empty() ? why : before + "; " + why;
    if (status == "verified") ++failed;
    row["status"] = "FAILED";
  }
  return failed;
}

int run_to_file(const std::vector<std::string>& argv, const std::string& path) {
  std::vector<char*> cargs;
  for (const std::string& a : argv) cargs.push_back(const_cast<char*>(a.c_str()));
  cargs.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, cargs[0], &actions, nullptr, cargs.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw InputError("cannot start " + argv[0] + ": " + std::strerror(rc));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

std::vector<std::string> sanitizer_argv(const std::string& sanitizer, const std::string& tool,
                                        const std::vector<std::string>& attnbench_argv, const std::string& report) {
  std::vector<std::string> out = {sanitizer, "--tool", tool, "--print-limit", "10000"};
  if (tool == "racecheck") out.insert(out.end(), {"--racecheck-report", "hazard"});
  out.insert(out.end(), attnbench_argv.begin(), attnbench_argv.end());
  out.insert(out.end(), {"--sanitize-markers", "--format", "json", "-o", report});
  return out;
}

}  // namespace attnbench
