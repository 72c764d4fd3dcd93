#include "app/output.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "app/errors.hpp"
#include "app/text.hpp"

namespace attnbench {
namespace {

namespace fs = std::filesystem;

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw InputError(clipped(path, 200) + ": error: " + what);
}

fs::path parent_of(const std::string& path) {
  const fs::path parent = fs::path(path).parent_path();
  return parent.empty() ? fs::path(".") : parent;
}

void check_writable_dir(const fs::path& dir, const std::string& path, const std::string& flag) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) fail(path, flag + ": the directory " + clipped(dir.string(), 200) + " does not exist");
  if (!fs::is_directory(dir, ec)) fail(path, flag + ": " + clipped(dir.string(), 200) + " is not a directory");
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    fail(path, flag + ": cannot write in " + clipped(dir.string(), 200) + " (" + std::strerror(errno) + ")");
}

}  // namespace

void check_output_file(const std::string& path, const std::string& flag) {
  if (path.empty()) fail(path, flag + " needs a file name");
  std::error_code ec;
  if (fs::is_directory(path, ec)) fail(path, flag + ": is a directory, not a file");
  if (fs::exists(path, ec)) {
    if (::access(path.c_str(), W_OK) != 0) fail(path, flag + ": cannot write it (" + std::strerror(errno) + ")");
    if (!fs::is_regular_file(path, ec)) return;  // a device or a pipe: written in place
  }
  check_writable_dir(parent_of(path), path, flag);
}

void check_output_dir(const std::string& dir, const std::string& flag) {
  if (dir.empty()) fail(dir, flag + " needs a directory name");
  std::error_code ec;
  if (fs::exists(dir, ec)) {
    if (!fs::is_directory(dir, ec)) fail(dir, flag + ": exists and is not a directory");
    check_writable_dir(dir, dir, flag);
    return;
  }
  check_writable_dir(parent_of(dir), dir, flag);
}

void write_file(const std::string& path, const std::function<void(std::ostream&)>& write) {
  std::error_code ec;
  const bool in_place = fs::exists(path, ec) && !fs::is_regular_file(path, ec);
  const std::string target = in_place ? path : path + ".partial";
  {
    std::ofstream out(target, std::ios::binary | std::ios::trunc);
    if (!out) fail(path, std::string("cannot open for writing (") + std::strerror(errno) + ")");
    write(out);
    out.flush();
    if (!out) fail(path, std::string("writing failed (") + std::strerror(errno) + ")");
    out.close();
    if (!out) fail(path, std::string("closing failed (") + std::strerror(errno) + ")");
  }
  if (!in_place && std::rename(target.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(target.c_str());
    fail(path, "cannot replace it (" + why + ")");
  }
}

}  // namespace attnbench
