#include "app/devices.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "app/device.hpp"
#include "app/errors.hpp"
#include "app/text.hpp"

extern char** environ;

namespace attnbench {
namespace {

// An exclusive lock on a file for as long as it lives.
class LockedFile {
 public:
  explicit LockedFile(const std::string& path) : fd_(open(path.c_str(), O_RDWR)) {
    if (fd_ < 0) throw InputError("error: cannot open the claims file " + path);
    flock(fd_, LOCK_EX);
  }
  ~LockedFile() {
    flock(fd_, LOCK_UN);
    close(fd_);
  }
  int fd() const { return fd_; }

 private:
  int fd_;
};

std::string last_line(const std::string& path) {
  std::ifstream in(path);
  std::string line, last;
  while (std::getline(in, line))
    if (!line.empty()) last = line;
  return last;
}

}  // namespace

std::vector<int> parse_devices(const std::string& text) {
  std::vector<int> out;
  if (text == "all") {
    const int n = device_count_or_throw();
    for (int i = 0; i < n; ++i) out.push_back(i);
    return out;
  }
  std::stringstream in(text);
  std::set<int> seen;
  for (std::string item; std::getline(in, item, ',');) {
    const bool digits = !item.empty() && item.size() <= 4 &&
                        std::all_of(item.begin(), item.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!digits || !seen.insert(std::stoi(item)).second)
      throw InputError("error: --devices " + clipped(text) +
                       ": expected all, or distinct GPU indices separated by commas (0,2,3)");
    out.push_back(std::stoi(item));
  }
  if (out.empty() || text.back() == ',')
    throw InputError("error: --devices " + clipped(text) + ": expected all, or GPU indices separated by commas");
  return out;
}

void create_claims(const std::string& path, int64_t points) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  const std::string zeros(static_cast<size_t>(points), '\0');
  out << zeros;
  if (!out) throw InputError("error: cannot write the claims file " + path);
}

bool PointClaims::claim(int64_t index) const {
  const LockedFile f(path_);
  unsigned char owner = 0;
  if (pread(f.fd(), &owner, 1, index) != 1) throw InputError("error: the claims file " + path_ + " is too short");
  if (owner != 0) return false;
  owner = static_cast<unsigned char>(worker_ + 1);
  if (pwrite(f.fd(), &owner, 1, index) != 1) throw InputError("error: cannot write the claims file " + path_);
  return true;
}

std::vector<uint8_t> read_claims(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

WorkerSpec parse_worker(const std::string& text) {
  WorkerSpec w;
  const auto slash = text.find('/'), colon = text.find(':');
  if (slash == std::string::npos || colon == std::string::npos || colon < slash)
    throw InputError("error: --worker " + clipped(text) + ": expected I/N:CLAIMS (attnbench's own use)");
  w.index = std::stoi(text.substr(0, slash));
  w.count = std::stoi(text.substr(slash + 1, colon - slash - 1));
  w.claims = text.substr(colon + 1);
  return w;
}

std::vector<Worker> run_workers(const std::vector<std::string>& argv, const std::vector<int>& devices,
                                const std::string& dir, const std::string& claims,
                                const std::function<void(const std::vector<Worker>&)>& progress) {
  std::vector<Worker> workers(devices.size());
  std::vector<pid_t> pids(devices.size(), -1);
  for (size_t i = 0; i < devices.size(); ++i) {
    Worker& w = workers[i];
    w.device = devices[i];
    const std::string stem = dir + "/worker-" + std::to_string(i);
    w.report = stem + ".json";
    w.out = stem + ".out";
    w.err = stem + ".err";
    std::vector<std::string> args = argv;
    for (const std::string& a :
         {std::string("--device"), std::to_string(w.device), std::string("--worker"),
          std::to_string(i) + "/" + std::to_string(devices.size()) + ":" + claims, std::string("-o"), w.report})
      args.push_back(a);
    std::vector<char*> cargs;
    for (auto& a : args) cargs.push_back(a.data());
    cargs.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, w.out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, w.err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int rc = posix_spawn(&pids[i], cargs[0], &actions, nullptr, cargs.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) {
      pids[i] = -1;
      w.last_error = "could not start a worker: " + std::string(strerror(rc));
    }
  }
  // Polled every 20 ms (the run's end waits on it), the progress line redrawn every 100 ms.
  for (int tick = 0;; ++tick) {
    bool running = false, ended = false;
    for (size_t i = 0; i < workers.size(); ++i) {
      if (pids[i] < 0) continue;
      int status = 0;
      const pid_t r = waitpid(pids[i], &status, WNOHANG);
      if (r == 0) {
        running = true;
        continue;
      }
      workers[i].exit_code = r < 0 ? 3 : WIFEXITED(status) ? WEXITSTATUS(status) : 3;
      if (workers[i].exit_code != 0 && workers[i].exit_code != 1) {
        workers[i].last_error = last_line(workers[i].err);
        if (r > 0 && WIFSIGNALED(status))
          workers[i].last_error = "killed by signal " + std::to_string(WTERMSIG(status));
      }
      pids[i] = -1;
      ended = true;
    }
    if (progress && (ended || tick % 5 == 0)) progress(workers);
    if (!running) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return workers;
}

}  // namespace attnbench
