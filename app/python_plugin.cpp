#include "app/python_plugin.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <vector>

#include "app/errors.hpp"
#include "app/plugin.hpp"
#include "app/text.hpp"

namespace attnbench {
namespace fs = std::filesystem;
namespace {

// What the chosen python3 says of itself: where its libpython is, its sys.path (a venv's
// site-packages included) and its executable.
constexpr const char* kQuery = R"py(
import json, os, sys, sysconfig
v = sysconfig.get_config_var
libs = []
for d in (v("LIBDIR"), os.path.join(sys.base_prefix, "lib"), v("LIBPL")):
    for n in (v("INSTSONAME"), v("LDLIBRARY")):
        if d and n and ".so" in n:
            libs.append(os.path.join(d, n))
print(json.dumps({"version": list(sys.version_info[:2]), "shared": bool(v("Py_ENABLE_SHARED")),
                  "libs": libs, "soname": v("INSTSONAME") or "", "executable": sys.executable,
                  "path": [p for p in sys.path if p]}))
)py";

using Init = int (*)(const char*, const char*, const char*, int, char*, size_t);
using Load = const attnbench_plugin* (*)(const char*, char*, size_t);
using TakeError = const char* (*)();
using Overhead = double (*)(int32_t, const void*, int);

struct Bridge {
  std::string library;
  Load load = nullptr;
  TakeError take_error = nullptr;
  Overhead overhead = nullptr;
};

Bridge* bridge = nullptr;  // set once the interpreter runs

std::string python_command() {
  if (const char* env = std::getenv("ATTNBENCH_PYTHON"); env && *env) return env;
  return "python3";
}

// Beside the attnbench executable (build/bin), unless $ATTNBENCH_PYTHON_BRIDGE names it.
fs::path bridge_path() {
  if (const char* env = std::getenv("ATTNBENCH_PYTHON_BRIDGE"); env && *env) return env;
  std::error_code ec;
  return fs::read_symlink("/proc/self/exe", ec).parent_path() / "libattnbench_python.so";
}

// $ATTNBENCH_PYTHON_MODULE, else this source tree's app/python (attnbench.py).
std::string module_dir() {
  if (const char* env = std::getenv("ATTNBENCH_PYTHON_MODULE"); env && *env) return env;
  return std::string(ATTNBENCH_SOURCE_DIR) + "/app/python";
}

Bridge& start(const std::string& file, int device) {
  if (bridge) return *bridge;
  const fs::path library = bridge_path();
  std::error_code ec;
  if (!fs::is_regular_file(library, ec))
    throw InputError(file + ": error: this attnbench was built without its Python bridge (" + library.string() +
                     "): install python3-dev and libdlpack-dev, then build again");
  const std::string python = python_command();
  int code = 0;
  const std::string said = run_capture(shell_quote(python) + " -c " + shell_quote(kQuery), code);
  nlohmann::json info;
  try {
    if (code == 0) info = nlohmann::json::parse(said.substr(said.find('{')));
  } catch (const std::exception&) {
    code = -1;
  }
  if (code != 0 || !info.is_object())
    throw InputError(file + ": error: a Python plugin needs python3 (on PATH, or ATTNBENCH_PYTHON); " + python +
                     " did not run: " + one_line(said));
  const auto version = info["version"].get<std::vector<int>>();
  if (version.size() != 2 || version[0] != 3 || version[1] < 10)
    throw InputError(file + ": error: " + python + " is Python " + std::to_string(version.at(0)) + "." +
                     std::to_string(version.at(1)) + "; the bridge needs 3.10 or newer");
  // Its libpython, global: the bridge's Python symbols resolve against it.
  void* libpython = nullptr;
  std::string why;
  auto candidates = info["libs"].get<std::vector<std::string>>();
  candidates.push_back(info["soname"].get<std::string>());
  for (const std::string& c : candidates) {
    if (c.empty() || libpython) continue;
    libpython = dlopen(c.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (!libpython && why.empty()) why = one_line(dlerror());
  }
  if (!libpython)
    throw InputError(file + ": error: " + python + " has no shared libpython to embed (" +
                     (info["shared"].get<bool>() ? why : std::string("built without --enable-shared")) +
                     "); name one that has, e.g. ATTNBENCH_PYTHON=/usr/bin/python3 with Debian's libpython3-dev");
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) throw InputError(file + ": error: cannot load the Python bridge: " + one_line(dlerror()));
  const auto init = reinterpret_cast<Init>(dlsym(handle, "attnbench_python_init"));
  auto* b = new Bridge;
  b->library = library.string();
  b->load = reinterpret_cast<Load>(dlsym(handle, "attnbench_python_load"));
  b->take_error = reinterpret_cast<TakeError>(dlsym(handle, "attnbench_python_take_error"));
  b->overhead = reinterpret_cast<Overhead>(dlsym(handle, "attnbench_python_overhead_us"));
  if (!init || !b->load || !b->take_error || !b->overhead)
    throw InputError(file + ": error: " + library.string() + " is not this attnbench's Python bridge");
  std::string path;
  for (const auto& p : info["path"]) path += p.get<std::string>() + "\n";
  char error[2048] = "";
  if (init(info["executable"].get<std::string>().c_str(), path.c_str(), module_dir().c_str(), device, error,
           sizeof error) != 0)
    throw InputError(file + ": error: the Python bridge could not start: " + one_line(error));
  bridge = b;
  return *bridge;
}

}  // namespace

const attnbench_plugin* open_python_plugin(const std::string& file, int device, std::string& library) {
  Bridge& b = start(file, device);
  library = b.library;
  char error[2048] = "";
  std::error_code ec;
  const attnbench_plugin* plugin = b.load(fs::absolute(file, ec).c_str(), error, sizeof error);
  if (!plugin) throw InputError(file + ": error: " + one_line(error));
  return plugin;
}

std::string take_python_error() { return bridge ? std::string(bridge->take_error()) : std::string(); }

double python_overhead_us(int32_t op, const void* abi_params) {
  return bridge ? bridge->overhead(op, abi_params, 20) : 0.0;
}

}  // namespace attnbench
