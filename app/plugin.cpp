#include "app/plugin.hpp"

#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <regex>
#include <sstream>

#include "app/device.hpp"
#include "app/op.hpp"
#include "app/problem.hpp"
#include "app/text.hpp"

namespace attnbench {
namespace fs = std::filesystem;
namespace {

std::deque<LoadedPlugin>& registry() {
  static std::deque<LoadedPlugin> loaded;
  return loaded;
}

std::string read_all(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// FNV-1a: the cache key needs to be stable across builds and runs, not secret.
uint64_t fnv1a(uint64_t h, const std::string& bytes) {
  for (unsigned char c : bytes) h = (h ^ c) * 1099511628211ull;
  return h;
}

// The file and every file it includes with quotes that sits beside it (recursively): the
// sources whose text the cached library was built from.
void gather_sources(const fs::path& file, std::vector<fs::path>& seen) {
  std::error_code ec;
  const fs::path canonical = fs::weakly_canonical(file, ec);
  if (std::find(seen.begin(), seen.end(), canonical) != seen.end()) return;
  seen.push_back(canonical);
  static const std::regex include(R"re(^\s*#\s*include\s*"([^"]+)")re");
  std::istringstream lines(read_all(canonical));
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (!std::regex_search(line, m, include)) continue;
    const fs::path next = canonical.parent_path() / m[1].str();
    if (fs::is_regular_file(next, ec)) gather_sources(next, seen);
  }
}

// $ATTNBENCH_NVCC, else the nvcc attnbench was built with, else nvcc on PATH.
std::string nvcc_path() {
  if (const char* env = std::getenv("ATTNBENCH_NVCC"); env && *env) return env;
  std::error_code ec;
  if (fs::is_regular_file(ATTNBENCH_NVCC_DEFAULT, ec)) return ATTNBENCH_NVCC_DEFAULT;
  return "nvcc";
}

// $ATTNBENCH_PLUGIN_INCLUDE, else the source tree's: the header attnbench itself was built with.
std::string include_dir() {
  if (const char* env = std::getenv("ATTNBENCH_PLUGIN_INCLUDE"); env && *env) return env;
  return std::string(ATTNBENCH_SOURCE_DIR) + "/kernels/plugin/include";
}

std::vector<std::string> split_words(const char* text) {
  std::vector<std::string> out;
  std::istringstream in(text ? text : "");
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// The card the run will use, else the one --dry-run assumes.
std::string card_arch(int device) {
  int count = 0, major = 0, minor = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || device >= count ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess) {
    cudaGetLastError();  // no card here: not an error for a dry run or a listing
    const DeviceCaps assumed = assumed_caps();
    return plugin_arch(assumed.cc_major, assumed.cc_minor);
  }
  return plugin_arch(major, minor);
}

// A .cu file's library in the cache, compiled now unless an identical build is there.
fs::path compile(const fs::path& file, const std::string& arch) {
  const std::string nvcc = nvcc_path();
  int code = 0;
  const std::string version = run_capture(shell_quote(nvcc) + " --version", code);
  if (code != 0)
    throw InputError(file.string() + ": error: cannot run nvcc (" + nvcc + "), which compiles plugins; " +
                     "set ATTNBENCH_NVCC to the toolkit's nvcc");
  std::vector<std::string> flags = {"-O3",
                                    "-std=c++17",
                                    "-lineinfo",
                                    "-shared",
                                    "-Xcompiler=-fPIC",
                                    "-gencode=arch=compute_" + arch + ",code=sm_" + arch,
                                    "-I" + include_dir()};
  for (const auto& f : split_words(std::getenv("ATTNBENCH_PLUGIN_FLAGS"))) flags.push_back(f);

  uint64_t key = fnv1a(14695981039346656037ull, version);
  for (const auto& f : flags) key = fnv1a(key, f + '\n');
  std::vector<fs::path> sources;
  gather_sources(file, sources);
  gather_sources(fs::path(include_dir()) / "attnbench" / "plugin.h", sources);
  for (const auto& s : sources) key = fnv1a(fnv1a(key, s.string()), read_all(s));
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(key));
  const fs::path dir = cache_dir() / "plugins";
  const fs::path library = dir / (file.stem().string() + "-" + hex + ".so");
  std::error_code ec;
  if (fs::is_regular_file(library, ec)) return library;

  fs::create_directories(dir, ec);
  if (ec) throw InputError(dir.string() + ": error: cannot make the plugin cache directory: " + ec.message());
  // Built under a name of this process's own, then renamed: workers compiling the same
  // file at once each produce a whole library, and the last rename wins.
  const fs::path partial = library.string() + ".partial." + std::to_string(getpid());
  std::string command = shell_quote(nvcc);
  for (const auto& f : flags) command += " " + shell_quote(f);
  command += " " + shell_quote(file.string()) + " -o " + shell_quote(partial.string());
  // Progress, as the run's own progress line: on a terminal only, so that logs and error
  // output stay one line per problem.
  if (isatty(STDERR_FILENO)) std::cerr << "attnbench: compiling plugin " << file.string() << " for sm_" << arch << "\n";
  const std::string messages = run_capture(command, code);
  std::cerr << messages;
  if (code != 0) {
    fs::remove(partial, ec);
    throw InputError(file.string() + ": error: nvcc could not compile the plugin (exit " + std::to_string(code) +
                     "; its messages are above)");
  }
  fs::rename(partial, library, ec);
  if (ec) throw InputError(library.string() + ": error: cannot store the compiled plugin: " + ec.message());
  return library;
}

bool valid_name(const char* name) {
  if (!name || !*name) return false;
  const std::string s = name;
  return s.size() <= 64 && std::all_of(s.begin(), s.end(),
                                       [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

std::string plugin_ops_list() {
  std::string out;
  for (const OpSpec& op : ops())
    if (op.plugin_op) out += (out.empty() ? "" : ", ") + op.name + " (" + std::to_string(op.plugin_op) + ")";
  return out;
}

// Loads one library; its table, unchecked.
const attnbench_plugin* open_library(const std::string& file, const std::string& library) {
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) throw InputError(file + ": error: cannot load the plugin: " + one_line(dlerror()));
  using Entry = const attnbench_plugin* (*)();
  const auto entry = reinterpret_cast<Entry>(dlsym(handle, ATTNBENCH_PLUGIN_ENTRY));
  if (!entry)
    throw InputError(file + ": error: the plugin has no " ATTNBENCH_PLUGIN_ENTRY
                            "; declare its variants with ATTNBENCH_PLUGIN(table) from attnbench/plugin.h");
  const attnbench_plugin* plugin = entry();
  if (!plugin) throw InputError(file + ": error: " ATTNBENCH_PLUGIN_ENTRY " returned null");
  return plugin;
}

// Checks what a plugin declares, a library's or a Python file's; registers nothing yet.
const attnbench_plugin* checked(const std::string& file, const attnbench_plugin* plugin) {
  if (plugin->abi_version != ATTNBENCH_PLUGIN_ABI_VERSION)
    throw InputError(file + ": error: the plugin was built for plugin ABI version " +
                     std::to_string(plugin->abi_version) + "; this attnbench takes version " +
                     std::to_string(ATTNBENCH_PLUGIN_ABI_VERSION) +
                     " (rebuild it with this attnbench's attnbench/plugin.h)");
  if (plugin->count < 1 || plugin->count > 1000 || !plugin->variants)
    throw InputError(file + ": error: the plugin declares " + std::to_string(plugin->count) +
                     " variants; it must declare 1 to 1000");
  for (int32_t i = 0; i < plugin->count; ++i) {
    const attnbench_variant& v = plugin->variants[i];
    const std::string which =
        "variant " + std::to_string(i) + (valid_name(v.name) ? " (" + std::string(v.name) + ")" : "");
    if (!valid_name(v.name))
      throw InputError(file + ": error: " + which + ": its name must be 1 to 64 letters, digits or _");
    if (!v.launch) throw InputError(file + ": error: " + which + " has no launch function");
    if (v.note && (std::strlen(v.note) > 200 || std::any_of(v.note, v.note + std::strlen(v.note), [](char c) {
                     return static_cast<unsigned char>(c) < 0x20;
                   })))
      throw InputError(file + ": error: " + which + ": its note must be one line of at most 200 bytes");
    const bool known = std::any_of(ops().begin(), ops().end(),
                                   [&](const OpSpec& op) { return op.plugin_op != 0 && op.plugin_op == v.op; });
    if (!known)
      throw InputError(file + ": error: " + which + " is for op " + std::to_string(v.op) +
                       ", which takes no plugins; the ops that do: " + plugin_ops_list());
  }
  return plugin;
}

}  // namespace

// Runs `command` through the shell with stderr joined to stdout; returns what it printed.
std::string run_capture(const std::string& command, int& exit_code) {
  std::string out;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (!pipe) {
    exit_code = -1;
    return out;
  }
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, pipe)) > 0;) out.append(buf, n);
  const int status = pclose(pipe);
  exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

bool is_python_plugin(const std::string& file) { return fs::path(file).extension() == ".py"; }

std::string plugin_arch(int cc_major, int cc_minor) {
  return std::to_string(cc_major) + std::to_string(cc_minor) + (cc_major == 9 && cc_minor == 0 ? "a" : "");
}

attnbench_device abi_device(const DeviceCaps& caps) {
  return {caps.sm_count, caps.cc_major, caps.cc_minor, caps.smem_per_block_optin, caps.l2_bytes, caps.total_memory};
}

const std::deque<LoadedPlugin>& loaded_plugins() { return registry(); }

void load_plugins(const std::vector<std::string>& files, int device) {
  std::string arch;
  std::map<std::string, std::string> owner;  // "op/name" -> the file that declared it
  for (const auto& p : registry())
    for (const auto& v : p.variants) owner[v] = p.file;
  std::vector<std::pair<LoadedPlugin*, const attnbench_plugin*>> opened;
  for (const std::string& file : files) {
    std::error_code ec;
    const fs::path path(file);
    if (!fs::is_regular_file(path, ec)) throw InputError(file + ": error: no such plugin file");
    const std::string canonical = fs::weakly_canonical(path, ec).string();
    if (std::any_of(registry().begin(), registry().end(),
                    [&](const LoadedPlugin& p) { return fs::weakly_canonical(p.file, ec).string() == canonical; }))
      continue;
    const std::string ext = path.extension().string();
    if (ext != ".cu" && ext != ".so" && ext != ".py")
      throw InputError(file + ": error: a plugin is a .cu file (compiled here), a .so built from one, or a .py file");
    LoadedPlugin loaded;
    loaded.file = file;
    const attnbench_plugin* plugin = nullptr;
    if (ext == ".py") {
      plugin = checked(file, open_python_plugin(file, device, loaded.library));
    } else {
      if (ext == ".cu") {
        if (arch.empty()) arch = card_arch(device);
        loaded.library = compile(path, arch).string();
      } else {
        loaded.library = fs::absolute(path, ec).string();
      }
      plugin = checked(file, open_library(file, loaded.library));
    }
    for (int32_t i = 0; i < plugin->count; ++i) {
      const attnbench_variant& v = plugin->variants[i];
      const OpSpec* op = nullptr;
      for (const OpSpec& o : ops())
        if (o.plugin_op == v.op) op = &o;
      const std::string key = op->name + "/" + v.name;
      if (owner.count(key))
        throw InputError(file + ": error: variant " + v.name + " of op " + op->name + " is also declared by " +
                         owner[key] + "; plugin variants need names of their own");
      owner[key] = file;
      loaded.variants.push_back(key);
    }
    registry().push_back(std::move(loaded));
    opened.emplace_back(&registry().back(), plugin);
  }
  for (const auto& [loaded, plugin] : opened) {
    const std::string label = fs::path(loaded->file).filename().string();
    for (int32_t i = 0; i < plugin->count; ++i) {
      const attnbench_variant& v = plugin->variants[i];
      for (const OpSpec& op : ops())
        if (op.plugin_op == v.op) op.add_plugin(v, stable_text(label));
    }
  }
  // A plugin variant named like one of attnbench's own would make the name ambiguous.
  for (const auto& [loaded, plugin] : opened)
    for (int32_t i = 0; i < plugin->count; ++i) {
      const attnbench_variant& v = plugin->variants[i];
      for (const OpSpec& op : ops()) {
        if (op.plugin_op != v.op) continue;
        const auto names = op.variant_names();
        if (std::count(names.begin(), names.end(), std::string(v.name)) > 1)
          throw InputError(loaded->file + ": error: op " + op.name + " already has a variant named " + v.name +
                           "; give the plugin's variant a name of its own");
      }
    }
}

const char* stable_text(const std::string& text) {
  static std::deque<std::string> kept;
  kept.push_back(text);
  return kept.back().c_str();
}

}  // namespace attnbench
