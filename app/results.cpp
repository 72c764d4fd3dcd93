#include "app/results.hpp"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <ostream>

#include "app/text.hpp"

extern char** environ;

namespace attnbench {
namespace {

using nlohmann::json;

// Tolerant readers: a report written by hand, or by another version, may lack any key.
const json* member(const json& o, const char* key) {
  if (!o.is_object()) return nullptr;
  const auto it = o.find(key);
  return it == o.end() ? nullptr : &*it;
}

const json* object_at(const json& o, const char* key) {
  const json* j = member(o, key);
  return j && j->is_object() ? j : nullptr;
}

// A number; null (how the report writes an unbounded error) reads as infinity.
double number(const json& o, const char* key, double absent = 0) {
  const json* j = member(o, key);
  if (j && j->is_null()) return std::numeric_limits<double>::infinity();
  return j && j->is_number() ? j->get<double>() : absent;
}

int64_t integer(const json& o, const char* key) {
  const double v = number(o, key);
  return std::isfinite(v) && std::fabs(v) < 9e18 ? static_cast<int64_t>(v) : 0;
}

// Strings from a report are shown on the page: control characters escaped, length bounded.
std::string text(const json& o, const char* key, std::size_t max = 2000) {
  const json* j = member(o, key);
  return j && j->is_string() ? clipped(j->get<std::string>(), max) : std::string();
}

Status status_of(const std::string& s) {
  for (Status st : {Status::verified, Status::failed, Status::skipped, Status::error, Status::peer})
    if (s == status_name(st)) return st;
  return Status::error;
}

Timing timing_of(const json& t) {
  Timing out;
  const std::string mode = text(t, "mode");
  for (TimingMode m : {TimingMode::cold, TimingMode::hot, TimingMode::graph, TimingMode::graph_hot})
    if (mode == mode_name(m)) out.mode = m;
  out.ms.median = number(t, "median_ms");
  out.ms.min = number(t, "min_ms");
  out.ms.max = number(t, "max_ms");
  out.ms.q1 = number(t, "q1_ms");
  out.ms.q3 = number(t, "q3_ms");
  out.ms.mean = number(t, "mean_ms");
  out.ms.noise = number(t, "noise");
  out.ms.samples = integer(t, "samples");
  out.elapsed_ms = number(t, "elapsed_ms");
  out.launches_per_sample =
      static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(integer(t, "launches_per_sample"), 1 << 30)));
  out.hold_timeouts = integer(t, "hold_timeouts");
  if (const json* c = object_at(t, "clock")) {
    out.clock.mean_mhz = number(*c, "mean_mhz");
    out.clock.max_mhz = number(*c, "max_mhz");
    out.clock.samples = integer(*c, "samples");
    out.clock.low_samples = integer(*c, "low_samples");
  }
  return out;
}

Comparison comparison_of(const json& v, ResultRow& r) {
  Comparison c;
  c.max_abs = number(v, "max_abs");
  c.max_rel = number(v, "max_rel");
  c.rel_l2 = number(v, "rel_l2");
  c.mismatches = integer(v, "mismatches");
  c.elements_checked = integer(v, "elements_checked");
  c.rows_checked = integer(v, "rows_checked");
  c.rows_total = integer(v, "rows_total");
  c.nonfinite = integer(v, "nonfinite");
  if (const json* w = object_at(v, "worst")) {
    r.worst = text(*w, "at", 200);
    c.worst_row = r.worst.empty() ? -1 : 0;  // the row's coordinates are in `worst`; only "there is one" matters here
    c.worst_got = number(*w, "got");
    c.worst_ref = number(*w, "ref");
  }
  r.tol = {number(v, "atol"), number(v, "rtol")};
  r.trials = static_cast<int>(std::min<int64_t>(integer(v, "trials"), 1 << 30));
  if (v.contains("note")) c.note = text(v, "note", 2000);
  if (const json* b = object_at(v, "bound")) {
    Bound bound;
    bound.k_max = number(*b, "k_max");
    bound.k_l2 = number(*b, "k_l2");
    bound.faithful_max = number(*b, "faithful_max");
    bound.faithful_l2 = number(*b, "faithful_l2");
    bound.rms = number(*b, "rms");
    bound.largest = number(*b, "largest");
    bound.floor = number(*b, "floor");
    bound.score_floor = number(*b, "score_floor");
    bound.allowed_max = number(*b, "allowed_max");
    bound.allowed_l2 = number(*b, "allowed_l2");
    c.bound = bound;
    c.margin = number(v, "margin");
  }
  return c;
}

ResultRow row_of(const json& j) {
  ResultRow r;
  r.case_name = text(j, "case", 400);
  r.point = text(j, "point", 400);
  r.op = text(j, "op", 100);
  r.dtype = text(j, "dtype", 100);
  r.variant = text(j, "variant", 200);
  const json* base = member(j, "baseline");
  r.baseline = base && base->is_boolean() && base->get<bool>();
  r.status = status_of(text(j, "status"));
  r.reason = text(j, "reason");
  r.command = text(j, "command");
  if (const json* v = object_at(j, "verify")) r.cmp = comparison_of(*v, r);
  r.work.flops = number(j, "flops");
  r.work.bytes = number(j, "bytes");
  if (const json* t = object_at(j, "timing")) {
    r.timing = timing_of(*t);
    if (const json* all = object_at(j, "timings"))
      for (const auto& [mode, t2] : all->items())
        if (t2.is_object() && mode != mode_name(r.timing->mode)) r.other_modes.push_back(timing_of(t2));
  }
  r.tflops = number(j, "tflops");
  r.gbps = number(j, "gbps");
  r.floor_ms = number(j, "floor_ms");
  r.floor_compute_ms = number(j, "floor_compute_ms");
  r.floor_memory_ms = number(j, "floor_memory_ms");
  r.pct_of_floor = number(j, "pct_of_floor");
  r.bound = text(j, "bound", 20);
  if (const json* s = member(j, "speedup"); s && s->is_number()) r.speedup = s->get<double>();
  if (const json* stages = member(j, "stages"); stages && stages->is_array())
    for (const json& st : *stages) {
      StageTiming s;
      s.name = text(st, "name", 100);
      s.what = text(st, "what", 400);
      s.ms.mean = number(st, "mean_ms");
      s.ms.median = number(st, "p50_ms");
      s.p99 = number(st, "p99_ms");
      s.ms.min = number(st, "min_ms");
      s.ms.max = number(st, "max_ms");
      s.runs = integer(st, "runs");
      s.floor_ms = number(st, "floor_ms");
      if (const double rate = number(st, "tokens_per_s"); rate > 0) s.tokens = rate * s.ms.mean / 1e3;
      r.stages.push_back(s);
    }
  r.profiled = text(j, "profiled", 1000);
  r.timing_note = text(j, "timing_note", 2000);
  return r;
}

// Text for a markdown line outside a table: no line breaks (printable has escaped them),
// nothing that opens an image, a link or emphasis by accident.
std::string md_text(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (std::strchr("\\`*_[]<>|#", c)) out += '\\';
    out += c;
  }
  return out;
}

std::string fixed(double v, int decimals) { return v > 0 ? fmt_fixed(v, decimals) : "-"; }

void write_header(std::ostream& out, const json& run, const std::string& run_name) {
  const json empty = json::object();
  const json* dev = object_at(run, "device");
  const json* meta = object_at(run, "attnbench");
  const json& d = dev ? *dev : empty;
  const json& m = meta ? *meta : empty;
  const std::string card = text(d, "name", 200);
  out << "# attnbench results" << (card.empty() ? "" : ": " + md_text(card)) << "\n\n";
  if (dev)
    out << "- **card:** " << md_text(card) << ", " << integer(d, "sm_count") << " SMs, compute capability "
        << md_text(text(d, "compute_capability", 20)) << ", driver " << md_text(text(d, "driver", 20))
        << ", CUDA runtime " << md_text(text(d, "cuda_runtime", 20)) << "\n";
  out << "- **run:** " << md_text(text(m, "date", 60)) << ", attnbench " << md_text(text(m, "version", 60))
      << ", timing mode " << md_text(text(m, "timing_mode", 40)) << " (report " << md_text(clipped(run_name, 200))
      << ")\n";
  if (const json* c = object_at(run, "ceilings")) {
    out << "- **measured ceilings:** copy " << fixed(number(*c, "copy_gbps"), 0) << ", read "
        << fixed(number(*c, "read_gbps"), 0) << ", write " << fixed(number(*c, "write_gbps"), 0)
        << " GB/s; cuBLAS GEMM fp32 " << fixed(number(*c, "fp32_tflops"), 1) << ", tf32 "
        << fixed(number(*c, "tf32_tflops"), 1) << ", fp16 " << fixed(number(*c, "fp16_tflops"), 1) << ", bf16 "
        << fixed(number(*c, "bf16_tflops"), 1) << " TFLOP/s; bf16 mma.sync "
        << fixed(number(*c, "mma_sync_bf16_tflops"), 1) << ", wgmma " << fixed(number(*c, "wgmma_bf16_tflops"), 1)
        << (c->contains("fp8_tflops") ? "; cuBLASLt fp8 e4m3 " + fixed(number(*c, "fp8_tflops"), 1) : std::string())
        << " TFLOP/s\n";
  }
  const std::string command = text(m, "command");
  if (!command.empty()) out << "\n```sh\n" << command << "\n```\n";
  const json* complete = member(m, "complete");
  if (complete && complete->is_boolean() && !complete->get<bool>())
    out << "\n> This run did not finish (`\"complete\": false`): the rows below are those it finished.\n";
  if (text(m, "timing_mode") == "profile")
    out << "\n> A `run --profile` report: each variant was launched once for a profiler, not timed, so the "
           "rows have no timings and there are no throughput plots.\n";
}

// Markdown's image syntax, alt text escaped; the file name is the script's, plain ASCII.
void write_image(std::ostream& out, const std::string& alt, const std::string& file) {
  out << "\n![" << md_text(alt) << "](" << file << ")\n";
}

}  // namespace

std::vector<ResultRow> rows_from_json(const nlohmann::json& report) {
  std::vector<ResultRow> rows;
  if (const json* all = member(report, "rows"); all && all->is_array())
    for (const json& j : *all)
      if (j.is_object()) rows.push_back(row_of(j));
  return rows;
}

PlotTool plot_tool(const std::string& script_flag) {
  PlotTool t;
  const char* python = std::getenv("ATTNBENCH_PYTHON");
  t.python = python && *python ? python : "python3";
  const char* script = std::getenv("ATTNBENCH_PLOT_SCRIPT");
  t.script = !script_flag.empty() ? script_flag
             : script && *script  ? std::string(script)
                                  : std::string(ATTNBENCH_SOURCE_DIR) + "/app/plot/attnbench_plot.py";
  return t;
}

namespace {

// Runs argv without a shell, its stdout and stderr together into `output` (the first 64 KiB).
// Returns the exit code, 128 + the signal, or -errno when it could not be started.
int run_program(const std::vector<std::string>& argv, std::string& output) {
  int fds[2];
  if (pipe(fds) != 0) return -errno;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDERR_FILENO);
  posix_spawn_file_actions_addclose(&actions, fds[0]);
  posix_spawn_file_actions_addclose(&actions, fds[1]);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int spawned = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  if (spawned != 0) {
    close(fds[0]);
    return -spawned;
  }
  char buf[4096];
  ssize_t n = 0;
  while ((n = read(fds[0], buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR))
    if (n > 0 && output.size() < (64u << 10)) output.append(buf, static_cast<std::size_t>(n));
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

// The last line a program printed, without the script's "attnbench_plot: " prefix.
std::string last_line(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  s = s.substr(s.find_last_of('\n') == std::string::npos ? 0 : s.find_last_of('\n') + 1);
  const std::string prefix = "attnbench_plot: ";
  if (s.rfind(prefix, 0) == 0) s.erase(0, prefix.size());
  return clipped(s, 300);
}

}  // namespace

Plots draw_plots(const PlotTool& tool, const std::string& run, const std::string& base, const std::string& peers,
                 const std::string& dir) {
  namespace fs = std::filesystem;
  Plots p;
  std::error_code ec;
  if (!fs::is_regular_file(tool.script, ec)) {
    p.missing = "the plot script is not at " + clipped(tool.script, 200) +
                " (give its path with --plot-script or $ATTNBENCH_PLOT_SCRIPT)";
    return p;
  }
  const fs::path manifest = fs::path(dir) / "plots.json";
  fs::remove(manifest, ec);  // an earlier page's must not stand in for this one's
  // name=value and "--" before the run: a path that starts with '-' stays a path.
  std::vector<std::string> argv = {tool.python, tool.script, "--output=" + dir};
  if (!base.empty()) argv.push_back("--compare=" + base);
  if (!peers.empty()) argv.push_back("--peers=" + peers);
  argv.insert(argv.end(), {"--", run});
  std::string output;
  const int rc = run_program(argv, output);
  if (rc < 0) {
    p.missing = clipped(tool.python, 200) + " could not be started (" + std::strerror(-rc) +
                "; name the interpreter with $ATTNBENCH_PYTHON)";
    return p;
  }
  if (rc == 3) {  // the script's code for "no matplotlib"
    p.missing = last_line(output);
    return p;
  }
  if (rc != 0) {
    p.missing = "the plot script failed (exit " + std::to_string(rc) + "): " + last_line(output);
    return p;
  }
  std::ifstream in(manifest);
  const json m = in ? json::parse(in, nullptr, /*allow_exceptions=*/false) : json();
  if (!m.is_object()) {
    p.missing = "the plot script wrote no readable " + manifest.string();
    return p;
  }
  // File names only, inside DIR: the page links them as they are.
  const auto plain = [](const json& f) {
    return f.is_string() && !f.get<std::string>().empty() &&
           f.get<std::string>().find_first_not_of(
               "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789=.,_-") == std::string::npos;
  };
  if (const json* t = object_at(m, "throughput"))
    for (const auto& [name, file] : t->items())
      if (plain(file)) p.throughput[clipped(name, 400)] = file.get<std::string>();
  if (const json* c = member(m, "compare"); c && plain(*c)) p.compare = c->get<std::string>();
  return p;
}

void write_results_page(std::ostream& out, const nlohmann::json& run, const std::string& run_name,
                        const std::optional<CompareResult>& compared, const std::string& base_name, const Plots& plots,
                        const std::string& redo) {
  write_header(out, run, run_name);
  if (!plots.missing.empty())
    out << "\n> No plots: " << md_text(plots.missing) << ". The tables are complete without them; to add them, "
        << "make that work and run `" << redo << "` again.\n";

  const json* meta = object_at(run, "attnbench");
  const bool timed = meta && text(*meta, "mode") == "run";
  const std::vector<ResultRow> rows = rows_from_json(run);
  write_markdown_legend(out, rows, timed);
  std::vector<std::string> cases;
  for (const auto& r : rows)
    if (std::find(cases.begin(), cases.end(), r.case_name) == cases.end()) cases.push_back(r.case_name);
  for (const auto& c : cases) {
    out << "\n## " << md_text(c) << "\n";
    if (const auto it = plots.throughput.find(c); it != plots.throughput.end())
      write_image(out, c + ": throughput of each variant", it->second);
    std::vector<ResultRow> of_case;
    for (const auto& r : rows)
      if (r.case_name == c) of_case.push_back(r);
    out << "\n";
    write_markdown_table(out, of_case, timed);
  }
  if (rows.empty()) out << "\nThe report has no rows.\n";
  if (compared) {
    out << "\n## Compared with " << md_text(clipped(base_name, 200)) << "\n";
    if (!plots.compare.empty()) write_image(out, "each row's median over " + base_name + "'s", plots.compare);
    out << "\n";
    write_compare(out, *compared, true);
  }
}

}  // namespace attnbench
