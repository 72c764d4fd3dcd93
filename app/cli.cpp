#include "app/cli.hpp"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cctype>
#include <chrono>
#include <cstring>
#include <functional>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <future>
#include <iomanip>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <iostream>
#include <nlohmann/json.hpp>

#include "app/build_info.hpp"
#include "app/compare.hpp"
#include "app/device.hpp"
#include "app/devices.hpp"
#include "app/sanitize.hpp"
#include "app/merge.hpp"
#include "app/host_memory.hpp"
#include "app/output.hpp"
#include "app/plugin.hpp"
#include "app/text.hpp"
#include "app/op.hpp"
#include "app/problem.hpp"
#include "app/report.hpp"
#include "app/shard.hpp"
#include "app/results.hpp"
#include "app/runner.hpp"
#include "app/timing.hpp"
#include "reference/parallel.hpp"

namespace attnbench {
namespace {

constexpr int kExitOk = 0, kExitFailed = 1, kExitInput = 2, kExitDevice = 3;

struct Options {
  std::vector<std::string> cases;
  std::vector<std::string> kernels, exclude;
  std::vector<std::string> sets;
  std::vector<std::string> plugins;  // --plugin
  std::string format;
  std::string output;
  std::string seed;  // parsed as a case file's [verify].seed is: 0 .. 2^63 - 1
  int64_t max_points = kDefaultMaxPoints;
  std::string shard;  // --shard I/N
  std::string devices;  // --devices all | 0,2,3
  std::string worker;   // --worker I/N:CLAIMS, a --devices worker (hidden)
  std::vector<std::string> argv;
  std::string mode;
  double min_clock_pct = 0;  // --min-clock
  int interleave = 1;        // --interleave
  bool no_samples = false, keep_samples = false;  // --keep-samples: the default since schema 3, still accepted
  bool profile = false;
  std::string flush = "read";
  std::string dump, dump_failures;
  int device = 0;
  std::string cases_dir;
  bool dry_run = false;
  std::string progress = "auto";  // --progress auto | always | never
  bool wide = false;              // --wide
  std::string columns;            // --columns LIST
  std::string sanitize;           // verify --sanitize TOOL (app/sanitize.hpp)
  bool sanitize_markers = false;  // its child (hidden)
  bool remeasure = false;
  std::string list_what = "all";
  std::string base_report, new_report, threshold = "5", confidence = "0.95";
  bool fail_on_unsure = false;
  bool allow_missing = false;               // compare --allow-missing
  std::vector<std::string> compare_files;   // compare's BASE.json NEW.json, or NEW.json with --golden
  std::string golden;                       // compare --golden DIR
  std::string compare_threshold;            // compare --threshold; "" = 5%, 10% with --golden
  std::vector<std::string> pairs;  // compare --pair
  std::vector<std::string> merge_inputs;  // merge
  std::string run_report, peers, plot_script;  // report
  std::string command_line, program = "attnbench";
};

// cases/ next to the working directory, else the source tree this binary was built from.
std::string default_cases_dir() {
  if (const char* env = std::getenv("ATTNBENCH_CASES"); env && *env) return env;
  if (std::filesystem::is_directory("cases")) return "cases";
  return std::string(ATTNBENCH_SOURCE_DIR) + "/cases";
}

std::string now_iso() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

void add_plugin_option(CLI::App* cmd, Options& o) {
  cmd->add_option("--plugin", o.plugins,
                  "also run the variants of your kernel file FILE.cu (compiled with nvcc, cached) or FILE.so "
                  "(docs/plugins.md); repeatable")
      ->type_name("FILE")
      ->allow_extra_args(false);
}

// Plugins first, from --plugin and every selected case file's plugins key: the case
// loader checks kernel names against the op's variants, theirs included.
void load_plugin_files(const Options& o, const std::vector<std::string>& case_files) {
  std::vector<std::string> files = o.plugins;
  for (const auto& path : case_files)
    for (const auto& f : case_plugin_files(path, o.sets)) files.push_back(f);
  if (!files.empty()) load_plugins(files, o.device);
}

void add_case_options(CLI::App* cmd, Options& o) {
  cmd->add_option("cases", o.cases, "case files, directories, names under cases/, or `all`")->required();
  // One value per flag, each flag repeatable: `-k a perf` is the kernel a on the case perf, not
  // two kernel names (CLI11's vectors would take every word up to the next option).
  cmd->add_option("-k,--kernel", o.kernels,
                  "run only the variants this names; a shell pattern such as 'flash_*' (repeatable)")
      ->type_name("NAME")
      ->allow_extra_args(false);
  cmd->add_option("--exclude", o.exclude, "never run the variants this names or matches (repeatable)")
      ->type_name("NAME")
      ->allow_extra_args(false);
  cmd->add_option("--set", o.sets,
                  "override a case key: shape.seq_q=8192, dtype=bf16, 'dtype=[bf16,fp16]' or "
                  "shape.seq_q=1024:16384:x2 sweep (repeatable)")
      ->type_name("KEY=VALUE")
      ->allow_extra_args(false);
  add_plugin_option(cmd, o);
  cmd->add_option("--format", o.format, "table | markdown | csv | json (default: table, or by -o's extension)")
      ->check(CLI::IsMember({"table", "markdown", "md", "csv", "json"}));
  cmd->add_option("-o,--output", o.output, "also write the report to FILE");
  cmd->add_option("--seed", o.seed, "first seed of the verification trials, 0 to 2^63-1 (overrides [verify].seed)");
  cmd->add_option("--max-points", o.max_points,
                  "most sweep points the run may take (default " + std::to_string(kDefaultMaxPoints) + ")")
      ->check(CLI::Range(int64_t{1}, int64_t{10'000'000}));
  auto* device = cmd->add_option("--device", o.device, "CUDA device index")->check(CLI::NonNegativeNumber);
  cmd->add_option("--devices", o.devices,
                  "spread the points over these GPUs, one worker process each, and print one report as a "
                  "single GPU would: all, or indices such as 0,2,3 (docs/cluster.md)")
      ->excludes(device)
      ->type_name("LIST");
  cmd->add_option("--worker", o.worker, "a --devices worker (attnbench's own use)")->group("");
  cmd->add_option("--shard", o.shard,
                  "run part I of N of the points (0 <= I < N; parts are disjoint, balanced by cost and "
                  "independent of the cases' order); default: Slurm's job array task, when there is one");
  cmd->add_option("--cases-dir", o.cases_dir, "where case names and `all` are looked up (default: ./cases)");
  cmd->add_option("--dump", o.dump, "write inputs, outputs and the reference of every point as .npy files to DIR");
  cmd->add_option("--dump-failures", o.dump_failures, "as --dump, only for variants that fail verification")
      ->excludes("--dump");
  cmd->add_flag("--dry-run", o.dry_run,
                "load and validate the cases, print what would run (as on an H100) and why the rest would "
                "not; needs no GPU (--format json: as one document)");
  cmd->add_flag("--wide", o.wide, "the table with every column: the footprint, clocks, floor (docs/cli.md)");
  cmd->add_option("--columns", o.columns,
                  "the table's columns, e.g. default,mhz or variant,status,median (docs/cli.md, The table)")
      ->type_name("LIST");
  cmd->add_option("--progress", o.progress,
                  "auto (default): a live line where stderr is a terminal; always: also a line per point where "
                  "it is not (Slurm, CI logs); never")
      ->check(CLI::IsMember({"auto", "always", "never"}))
      ->type_name("WHEN");
}

// The same rule as [verify].seed in a case file, so both accept the same numbers.
std::optional<uint64_t> parse_seed(const std::string& text) {
  if (text.empty()) return std::nullopt;
  const bool digits = text.size() <= 19 && std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
  const uint64_t seed = digits ? std::stoull(text) : 0;
  if (!digits || seed > static_cast<uint64_t>(INT64_MAX))
    throw InputError("attnbench: error: --seed " + clipped(text) + ": expected an integer from 0 to " +
                     std::to_string(INT64_MAX));
  return seed;
}

// Outputs are checked before any case loads: a typo in -o must not cost the run.
// -o's extension names its format unless --format does: a file called v.json that holds a table
// (or an unknown extension that silently gets one) is refused before the run.
void check_output_extension(const Options& o) {
  if (o.output.empty() || !o.format.empty()) return;
  const std::string ext = std::filesystem::path(o.output).extension().string();
  for (const char* known : {"", ".json", ".csv", ".md", ".txt", ".log"})
    if (ext == known) return;
  throw InputError("-o " + clipped(o.output) + ": error: no report format has the extension '" + clipped(ext) +
                   "' (.json, .csv, .md, or .txt for the table; or name one with --format)");
}

// The table's columns: --wide, --columns LIST, or both (docs/cli.md, "The table").
TableColumns table_columns(const Options& o) {
  if (!o.columns.empty()) return parse_table_columns(o.wide ? "wide," + o.columns : o.columns);
  return o.wide ? wide_table_columns() : default_table_columns();
}

void check_outputs(const Options& o) {
  check_output_extension(o);
  (void)table_columns(o);  // a bad --columns name, before any case loads
  if (!o.output.empty()) check_output_file(o.output, "-o");
  if (!o.dump.empty()) check_output_dir(o.dump, "--dump");
  if (!o.dump_failures.empty()) check_output_dir(o.dump_failures, "--dump-failures");
}

// The points of these cases, all told.
int64_t cases_points(const std::vector<Case>& cases) {
  int64_t n = 0;
  for (const Case& c : cases) n += static_cast<int64_t>(c.points.size());
  return n;
}

// Loads every case first, so a bad file stops the run before any GPU work. `plan` gets the
// whole run's points when this process runs a part of it (--shard, a --devices worker).
std::vector<Case> load_cases(const Options& o, std::optional<RunPlan>& plan) {
  const std::string dir = o.cases_dir.empty() ? default_cases_dir() : o.cases_dir;
  std::vector<std::string> paths;
  for (const auto& arg : o.cases)
    for (const auto& path : resolve_case_paths(arg, dir)) paths.push_back(path);
  load_plugin_files(o, paths);
  std::vector<Case> cases;
  int64_t points = 0;
  for (const auto& path : paths) {
    cases.push_back(load_case(path, o.sets, o.max_points - points));
    points += static_cast<int64_t>(cases.back().points.size());
  }
  RunPlan whole;
  for (Case& c : cases)
    for (CasePoint& p : c.points) {
      p.run_index = static_cast<int64_t>(whole.points.size());
      whole.points.emplace_back(c.name, p.label);
    }
  // A --shard part of a --devices run (a Slurm task on a node of several GPUs): the workers
  // share the shard's points, and the parent's report is the shard's part of the whole run.
  const Shard shard = parse_shard(o.shard, [](const char* name) -> const char* { return std::getenv(name); });
  if (shard.on()) {
    whole.by = "shard";
    whole.index = shard.index;
    whole.count = shard.count;
    plan = whole;
    const int64_t all = cases_points(cases);
    keep_shard(cases, shard);
    const int64_t mine = cases_points(cases);
    if (o.worker.empty()) std::cerr << "shard " << shard.label() << ": " << mine << " of " << all << " points\n";
  }
  if (!o.worker.empty()) {
    const WorkerSpec w = parse_worker(o.worker);
    whole.by = "devices";
    whole.index = w.index;
    whole.count = w.count;
    plan = whole;
  }
  // A -k or --exclude pattern must match some variant: a typo should not silently run nothing (or everything).
  for (const auto* list : {&o.kernels, &o.exclude})
    for (const auto& k : *list) {
      bool known = false;
      std::vector<std::string> names;
      for (const OpSpec& op : ops())
        for (const auto& name : op.variant_names()) {
          known = known || glob_match(k, name);
          names.push_back(name);
        }
      std::sort(names.begin(), names.end());
      names.erase(std::unique(names.begin(), names.end()), names.end());
      if (!known)
        throw InputError("attnbench: error: " + std::string(list == &o.kernels ? "-k" : "--exclude") +
                         ": no kernel matches '" + clipped(k) + "'" +
                         hint(k, names, "`attnbench list kernels` lists them"));
    }
  return cases;
}

// What a run would do, without a GPU: each point with the variants that would run, then
// "N points, M rows, K skipped" and why each skipped variant would not run, each reason once
// (as footnotes the points' lines refer to). `--format json` (or -o FILE.json) gives the same
// as one document (docs/cli.md, "--dry-run").
int dry_run(const std::vector<Case>& cases, const Options& o, bool timed) {
  const bool baseline = timed && !o.profile;  // the speedup column's: a profile has none
  nlohmann::json points = nlohmann::json::array();
  std::vector<std::string> reasons;  // footnotes, in order of first use
  std::map<std::string, std::vector<std::string>> skipped_by_reason;  // reason -> variants
  int64_t rows = 0, skipped = 0;
  std::ostringstream text;
  for (const auto& c : cases) {
    for (const auto& p : c.points) {
      auto problem = make_problem(p);
      const std::vector<VariantChoice> choices = problem->variants(assumed_caps());
      const auto defaults = problem->default_variants(assumed_caps());
      nlohmann::json point = {{"case", c.name},
                              {"point", p.label},
                              {"op", p.op},
                              {"dtype", dtype_name(p.dtype)},
                              {"tensor_bytes", problem->device_bytes()},
                              {"inputs", p.inputs.is_default() ? "" : p.inputs.summary()},
                              {"variants", nlohmann::json::array()},
                              {"skipped", nlohmann::json::array()}};
      std::string runs, skips;
      for (const auto& n : select_variants(choices, p, {o.kernels, o.exclude}, baseline, defaults)) {
        const std::string& skip =
            std::find_if(choices.begin(), choices.end(), [&](const VariantChoice& v) { return v.name == n; })->skip;
        if (skip.empty()) {
          point["variants"].push_back(n);
          runs += " " + n;
          ++rows;
          continue;
        }
        point["skipped"].push_back({{"variant", n}, {"reason", skip}});
        ++skipped;
        auto at = std::find(reasons.begin(), reasons.end(), skip);
        if (at == reasons.end()) at = reasons.insert(reasons.end(), skip);
        auto& names = skipped_by_reason[skip];
        if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
        skips += " " + n + " [" + std::to_string(at - reasons.begin() + 1) + "]";
      }
      text << c.name << (p.label.empty() ? "" : " [" + p.label + "]") << ": " << p.op << " " << dtype_name(p.dtype)
           << ", " << human_bytes(static_cast<double>(problem->device_bytes())) << " of tensors"
           << (p.inputs.is_default() ? "" : ", " + p.inputs.summary()) << ", variants:" << (runs.empty() ? " none" : runs)
           << (skips.empty() ? "" : "; skips" + skips);
      if (o.profile) {
        const std::string ranges = ncu_nvtx_include(nvtx_ranges(c.name, p.label, "VARIANT"));
        point["nvtx_include"] = ranges;
        text << "; --profile: one launch per variant (after a warm-up) in NVTX ranges " << shell_quote(ranges);
      }
      text << "\n";
      points.push_back(std::move(point));
    }
  }
  text << points.size() << " point" << (points.size() == 1 ? "" : "s") << ", " << rows << " row"
       << (rows == 1 ? "" : "s") << " to " << (timed ? "run" : "verify") << ", " << skipped << " skipped\n";
  for (size_t i = 0; i < reasons.size(); ++i)
    text << "[" << i + 1 << "] " << comma_list(skipped_by_reason[reasons[i]]) << ": " << reasons[i] << "\n";
  const nlohmann::json doc = {{"attnbench", build_identity()},
                              {"command", o.command_line},
                              {"mode", timed ? "run" : "verify"},
                              {"dry_run", true},
                              {"points", std::move(points)},
                              {"summary", {{"points", cases_points(cases)}, {"rows", rows}, {"skipped", skipped}}}};
  const bool json = o.format == "json" || (o.format.empty() && !o.output.empty() && format_for_path(o.output) == Format::json);
  std::cout << (o.format == "json" ? doc.dump(1) + "\n" : text.str());
  if (!o.output.empty())
    write_file(o.output, [&](std::ostream& out) { out << (json ? doc.dump(1) + "\n" : text.str()); });
  return kExitOk;
}

// Every point as a case of its own, the costliest first (ties in run order): a --devices
// worker asks for points in this order, so that the long ones start early and the short ones
// fill in at the end.
std::vector<Case> costliest_first(std::vector<Case> cases) {
  std::vector<Case> out;
  for (const Case& c : cases)
    for (const CasePoint& p : c.points) {
      Case one = c;
      one.points = {p};
      out.push_back(std::move(one));
    }
  std::stable_sort(out.begin(), out.end(), [](const Case& a, const Case& b) {
    return point_cost(a.points[0]) > point_cost(b.points[0]);
  });
  return out;
}

// The arguments a worker gets: the run's own, less what the parent alone handles.
std::vector<std::string> worker_argv(const Options& o) {
  std::vector<std::string> out;
  char self[4096] = {};
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  out.push_back(n > 0 ? std::string(self, static_cast<size_t>(n)) : o.argv.at(0));
  for (size_t i = 1; i < o.argv.size(); ++i) {
    const std::string& a = o.argv[i];
    if (a == "--devices" || a == "-o" || a == "--output" || a == "--format") {
      ++i;
      continue;
    }
    if (a.rfind("--devices=", 0) == 0 || a.rfind("--output=", 0) == 0 || a.rfind("--format=", 0) == 0 ||
        (a.rfind("-o", 0) == 0 && a.size() > 2))
      continue;
    out.push_back(a);
  }
  return out;
}

// A whole run's json report (--devices' merged parts, --sanitize's child) printed as a single run
// would: a table grouped by case (`case_of(i)`: row i's case), or the format asked for, and -o in
// -o's; for verify, the closing "N passed, M failed". Returns the rows' tally.
Tally print_json_report(const Options& o, bool timed, const nlohmann::json& report,
                        const std::function<const Case*(size_t)>& case_of) {
  const Format format = o.format.empty() ? Format::table : *parse_format(o.format);
  const Format file_format = o.format.empty() ? format_for_path(o.output) : format;
  const std::vector<ResultRow> result = rows_from_json(report);
  RunMeta meta;  // the text formats' header; json is the report itself
  meta.version = ATTNBENCH_VERSION;
  meta.command_line = o.command_line;
  meta.mode = timed ? "run" : "verify";
  const auto write_as = [&](std::ostream& out, Format f) {
    if (f == Format::json)
      out << report.dump(1) << "\n";
    else
      write_report(out, f, meta, result, table_columns(o));
  };
  if (format == Format::table || !o.output.empty()) {
    TableWriter table(std::cout, timed, o.mode == "all", table_columns(o));
    const Case* current = nullptr;
    for (size_t i = 0; i < result.size(); ++i) {
      const Case* c = case_of(i);
      if (c && c != current) {
        current = c;
        size_t width = 0;
        for (const auto& p : c->points) width = std::max(width, p.label.size());
        table.begin_case(c->name, c->description, width);
      }
      table.row(result[i]);
    }
  } else {
    write_as(std::cout, format);
  }
  if (!o.output.empty()) write_file(o.output, [&](std::ostream& out) { write_as(out, file_format); });
  Tally t;
  for (const ResultRow& r : result) {
    if (r.status == Status::verified) ++t.passed;
    if (r.status == Status::failed) ++t.failed;
    if (r.status == Status::skipped) ++t.skipped;
    if (r.status == Status::error) ++t.errors;
  }
  if (!timed) {
    if (t.skipped) std::cout << t.skipped << " skipped\n";
    std::cout << t.passed << " passed, " << t.failed + t.errors << " failed\n";
  }
  return t;
}

// verify --sanitize: the same verification as one child under compute-sanitizer, its findings
// made the rows' verdicts (app/sanitize.hpp).
int verify_sanitized(const Options& o, const std::vector<Case>& cases) {
  const std::string sanitizer = find_compute_sanitizer();
  if (sanitizer.empty())
    throw InputError("--sanitize: compute-sanitizer is on neither PATH nor /usr/local/cuda/bin (the CUDA toolkit "
                     "has it)");
  (void)device_count_or_throw();  // no GPU: the usual one line, exit 3
  char tmpl[] = "/tmp/attnbench-sanitize-XXXXXX";
  if (!mkdtemp(tmpl)) throw InputError(std::string("--sanitize: cannot make a folder in /tmp: ") + std::strerror(errno));
  const std::string dir = tmpl, report_path = dir + "/report.json", log_path = dir + "/log.txt";
  std::vector<std::string> child = worker_argv(o);
  for (size_t i = 1; i < child.size(); ++i)
    if (child[i] == "--sanitize") {
      child.erase(child.begin() + static_cast<std::ptrdiff_t>(i), child.begin() + static_cast<std::ptrdiff_t>(i) + 2);
      break;
    } else if (child[i].rfind("--sanitize=", 0) == 0) {
      child.erase(child.begin() + static_cast<std::ptrdiff_t>(i));
      break;
    }
  const std::vector<std::string> argv = sanitizer_argv(sanitizer, o.sanitize, child, report_path);
  std::cerr << "--sanitize " << o.sanitize << ": verifying under compute-sanitizer (many times slower than without)\n";
  const int rc = run_to_file(argv, log_path);
  std::ifstream log_file(log_path);
  const std::string log_text((std::istreambuf_iterator<char>(log_file)), std::istreambuf_iterator<char>());
  nlohmann::json report;
  try {
    report = nlohmann::json::parse(std::ifstream(report_path));
  } catch (const std::exception&) {
    throw CudaError("--sanitize: the run under compute-sanitizer left no report (exit " + std::to_string(rc) +
                    "); its output is in " + log_path);
  }
  const SanitizerLog log = read_sanitizer_log(log_text);
  const int failed = apply_sanitizer_log(report, log, o.sanitize);
  const Tally t = print_json_report(o, false, report, [&](size_t i) -> const Case* {
    const std::string name = report["rows"][i].value("case", "");
    const auto c = std::find_if(cases.begin(), cases.end(), [&](const Case& x) { return x.name == name; });
    return c == cases.end() ? nullptr : &*c;
  });
  int found = log.unattributed;
  for (const auto& [key, f] : log.by_launch) found += f.count;
  std::cerr << "compute-sanitizer " << o.sanitize << ": " << found << " finding(s)"
            << (log.summary >= 0 ? " (its summary: " + std::to_string(log.summary) + ")" : std::string()) << ", "
            << failed << " row(s) failed for them";
  if (log.unattributed) std::cerr << ", " << log.unattributed << " outside every launch of a point";
  if (found > 0 || (rc != 0 && rc != kExitFailed)) {
    std::cerr << "; its output: " << log_path << "\n";
  } else {
    std::cerr << "\n";
    std::filesystem::remove_all(dir);
  }
  if (log.unattributed && t.failed + t.errors == 0) return kExitFailed;
  return t.failed + t.errors > 0 ? kExitFailed : kExitOk;
}

// --devices: one worker per GPU, then one report from their parts (app/devices.hpp).
int run_on_devices(const Options& o, bool timed, const std::vector<Case>& cases,
                   const std::optional<RunPlan>& shard_plan, std::chrono::steady_clock::time_point start) {
  const int64_t total = cases_points(cases);  // this run's points (a shard's, with --shard)
  // Claims and rows are indexed by the points' places in the whole run.
  const int64_t places = shard_plan ? static_cast<int64_t>(shard_plan->points.size()) : total;
  if (o.dry_run) {  // needs no GPU, so `all` is not counted here
    const std::vector<int> listed = o.devices == "all" ? std::vector<int>{} : parse_devices(o.devices);
    dry_run(cases, o, timed);
    if (o.format == "json") return kExitOk;
    if (listed.empty()) {
      std::cout << "--devices all: one worker on each GPU the run finds";
    } else {
      std::cout << "--devices: " << listed.size() << " worker(s), one on each of GPU";
      for (size_t i = 0; i < listed.size(); ++i) std::cout << (i ? ", " : " ") << listed[i];
    }
    std::cout << "; they take the " << total << " points costliest first, each point once\n";
    return kExitOk;
  }
  const std::vector<int> devices = parse_devices(o.devices);
  // No GPU: the one line, as a single run says it. The check starts the CUDA driver (0.4 s on
  // a two-H100 host, run 185), so it runs beside the workers' start, not before it; `all` has
  // made it already to count the GPUs.
  std::future<void> gpu_check = std::async(std::launch::async, [] { (void)device_count_or_throw(); });
  // The workers' reports sit beside -o, so that a killed run leaves its parts for
  // `attnbench merge`; without -o, in a folder removed at the end.
  std::string dir;
  if (!o.output.empty()) {
    dir = o.output + ".parts";
    std::filesystem::create_directories(dir);
  } else {
    char tmpl[] = "/tmp/attnbench-devices-XXXXXX";
    if (!mkdtemp(tmpl)) throw InputError("error: cannot make a folder for the workers' reports");
    dir = tmpl;
  }
  const std::string claims = dir + "/claims";
  create_claims(claims, places);
  const bool progress = isatty(STDERR_FILENO);
  const auto show = [&](const std::vector<Worker>& workers) {
    if (!progress) return;
    const std::vector<uint8_t> taken = read_claims(claims);
    std::string line = "\r\033[K" + std::to_string(std::count_if(taken.begin(), taken.end(), [](uint8_t b) {
                         return b != 0;
                       })) + " of " + std::to_string(total) + " points started:";
    for (size_t i = 0; i < workers.size(); ++i)
      line += " GPU " + std::to_string(workers[i].device) + " " +
              std::to_string(std::count(taken.begin(), taken.end(), static_cast<uint8_t>(i + 1))) +
              (workers[i].exit_code >= 0 ? " (done)" : "");
    std::cerr << line << std::flush;
  };
  // Each worker's fp64 references use every core (reference/parallel.hpp): while one worker
  // waits on its GPU the other's references take the cores. Splitting the cores between the
  // workers (ATTNBENCH_HOST_THREADS) made two-GPU verify all slower: 1.64x against 1.79x.
  const std::vector<Worker> workers = run_workers(worker_argv(o), devices, dir, claims, show);
  if (progress) std::cerr << "\r\033[K";
  try {
    gpu_check.get();
  } catch (const NoDevice&) {
    std::filesystem::remove_all(dir);  // the workers found no GPU either: nothing to keep
    throw;
  }

  // The parts are parsed side by side: each is megabytes of json, and the parse is the
  // larger part of what the workers leave to this process.
  std::vector<nlohmann::json> parsed(workers.size());
  parallel_for(static_cast<int64_t>(workers.size()), kParallelWork, [&](int64_t i) {
    std::ifstream in(workers[i].report);
    parsed[i] = in ? nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false)
                   : nlohmann::json(nlohmann::json::value_t::discarded);
  });
  std::vector<nlohmann::json> parts;
  std::vector<std::string> names;
  for (size_t i = 0; i < workers.size(); ++i) {
    nlohmann::json& j = parsed[i];
    if (j.is_discarded()) continue;
    parts.push_back(std::move(j));
    names.push_back("GPU " + std::to_string(workers[i].device));
  }
  const size_t part_count = parts.size();
  std::string failures;
  for (const Worker& w : workers)
    if (w.exit_code != 0 && w.exit_code != 1)
      failures += (failures.empty() ? "" : "; ") + std::string("GPU ") + std::to_string(w.device) + ": " +
                  (w.last_error.empty() ? "exit " + std::to_string(w.exit_code) : w.last_error);
  if (parts.empty()) throw CudaError("no worker finished a point (" + failures + ")");
  MergeResult merged = merge_reports(std::move(parts), names, o.command_line, now_iso());
  // Rows by their point's place in the run; a point no worker finished gets an ERROR row
  // saying which worker stopped and why.
  const std::vector<uint8_t> taken = read_claims(claims);
  std::vector<std::vector<nlohmann::json>> by_point(static_cast<size_t>(places));
  for (auto& r : merged.report["rows"]) by_point.at(r.value("plan_index", int64_t{0})).push_back(std::move(r));
  nlohmann::json rows = nlohmann::json::array();
  for (const Case& c : cases)
    for (const CasePoint& p : c.points) {
      for (auto& r : by_point[p.run_index]) rows.push_back(std::move(r));
      if (!by_point[p.run_index].empty()) continue;
      const uint8_t owner = p.run_index < static_cast<int64_t>(taken.size()) ? taken[p.run_index] : 0;
      ResultRow r;
      r.case_name = c.name;
      r.point = p.label;
      r.op = p.op;
      r.dtype = dtype_name(p.dtype);
      r.variant = "-";
      r.status = Status::error;
      r.plan_index = p.run_index;
      if (owner == 0) {
        r.reason = "not run: every worker stopped (" + failures + ")";
      } else {
        const Worker& w = workers[owner - 1];
        r.reason = "the worker on GPU " + std::to_string(w.device) + " stopped: " + w.last_error;
      }
      rows.push_back(row_json(r, false));
    }
  merged.report["rows"] = std::move(rows);
  // With --shard, the whole is this shard's part of the run, for `attnbench merge`.
  if (shard_plan) {
    RunPlan part = *shard_plan;
    for (const Case& c : cases)
      for (const CasePoint& p : c.points)
        if (!by_point[p.run_index].empty()) part.done.push_back(p.run_index);
    merged.report["plan"] = plan_json(part);
  }
  merged.report["attnbench"]["elapsed_ms"] =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();

  const Tally t = print_json_report(o, timed, merged.report, [&](size_t i) {
    const int64_t k = merged.report["rows"][i].value("plan_index", int64_t{0});
    return &*std::find_if(cases.begin(), cases.end(), [&](const Case& x) {
      return !x.points.empty() && x.points.front().run_index <= k && k <= x.points.back().run_index;
    });
  });
  // A failed worker's report and stderr stay for a look; otherwise the parts are merged and gone.
  if (failures.empty()) std::filesystem::remove_all(dir);
  std::cerr << "devices";
  for (const Worker& w : workers) std::cerr << " " << w.device;
  std::cerr << ": " << part_count << " worker report(s) merged, " << total << " points\n";
  if (!failures.empty()) {
    std::cerr << "attnbench: CUDA error: a worker stopped (" << one_line(failures)
              << "); the others went on, every finished row is in the report, and the workers' files are in "
              << dir << "\n";
    return kExitDevice;
  }
  return t.failed + t.errors > 0 ? kExitFailed : kExitOk;
}

int run_or_verify(const Options& o, bool timed) {
  const auto start = std::chrono::steady_clock::now();
  const auto ms_since_start = [&] {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  };
  check_outputs(o);
  const std::optional<uint64_t> seed = parse_seed(o.seed);
  std::optional<RunPlan> plan;
  std::vector<Case> cases = load_cases(o, plan);
  const double load_ms = ms_since_start();
  if (!o.devices.empty()) return run_on_devices(o, timed, cases, plan, start);
  if (o.dry_run) return dry_run(cases, o, timed);
  if (!o.sanitize.empty()) return verify_sanitized(o, cases);
  // A --devices worker takes the costliest points first, each only if no other worker has.
  std::optional<PointClaims> claims;
  if (!o.worker.empty()) {
    claims.emplace(parse_worker(o.worker).claims, static_cast<int>(plan->index));
    cases = costliest_first(std::move(cases));
  }

  Format format = o.format.empty() ? (o.output.empty() ? Format::table : format_for_path(o.output))
                                   : *parse_format(o.format);
  const bool stream_table = format == Format::table || !o.output.empty();
  Gpu gpu(o.device);
  gpu.set_flush_writes(o.flush == "write");

  RunOptions ro;
  ro.timed = timed;
  ro.kernels = {o.kernels, o.exclude};
  ro.seed = seed;
  if (o.mode == "cold") ro.mode = TimingMode::cold;
  if (o.mode == "hot") ro.mode = TimingMode::hot;
  if (o.mode == "graph") ro.mode = TimingMode::graph;
  if (o.mode == "graph_hot") ro.mode = TimingMode::graph_hot;
  if (o.mode == "all") ro.mode = TimingMode::cold;  // the row's own mode; hot and graph beside it
  ro.all_modes = o.mode == "all";
  ro.min_clock = o.min_clock_pct / 100;
  ro.interleave = o.interleave;
  ro.profile = o.profile;
  ro.program = o.program;
  ro.sets = o.sets;
  ro.device = o.device;
  ro.dump_dir = o.dump.empty() ? o.dump_failures : o.dump;
  ro.dump_failures_only = !o.dump_failures.empty();
  // --progress: auto draws the live line where stderr is a terminal; always writes a line per
  // point instead where it is not (a Slurm or CI log), the live line where it is.
  const bool terminal = isatty(STDERR_FILENO);
  ro.progress = !o.sanitize_markers && o.progress != "never" && terminal;
  ro.progress_lines = !o.sanitize_markers && o.progress == "always" && !terminal;
  ro.sanitize_markers = o.sanitize_markers;
  ro.plan_rows = plan.has_value();
  TableWriter table(std::cout, timed, ro.all_modes, table_columns(o));
  Runner runner(gpu, ro, [&](const ResultRow& r) {
    if (stream_table) table.row(r);
  });

  RunMeta meta;
  meta.version = ATTNBENCH_VERSION;
  meta.command_line = o.command_line;
  meta.date = now_iso();
  meta.mode = timed ? "run" : "verify";
  meta.timing_mode = o.profile ? "profile" : o.mode;
  meta.keep_samples = !o.no_samples && !o.profile;
  meta.load_ms = load_ms;
  meta.device = gpu.info();
  meta.plan = plan;
  for (const LoadedPlugin& p : loaded_plugins()) meta.plugins.push_back({p.file, p.library, p.variants});
  if (timed && !o.profile) {  // a profile has no rates, and its ceiling kernels would only slow a profiler down
    std::cerr << (ro.progress ? "measuring the card's ceilings (cached after the first run)...\r" : "");
    meta.ceilings = gpu.ceilings();
  }
  // -o is rewritten whole as points finish (at most once a second) and at the end: a fault
  // leaves every finished row on disk, a kill or Ctrl-C those up to a second before, in a
  // document that parses.
  ReportFile file(o.output, format, table_columns(o));
  auto write_file_report = [&](bool complete) {
    if (o.output.empty()) return;
    meta.elapsed_ms = ms_since_start();
    meta.complete = complete;
    file.write(meta, runner.rows());
  };
  auto write_outputs = [&](bool complete) {
    meta.elapsed_ms = ms_since_start();
    if (!stream_table) write_report(std::cout, format, meta, runner.rows());
    write_file_report(complete);
  };
  // The report on disk as points finish, so that a run killed midway keeps its results: at
  // most once a second, since rewriting the growing report after each of verify all's 900
  // points took 8-11 s of its 88 (bench notes, run 136). The end and a fault write it whole.
  auto last_write = std::chrono::steady_clock::now();
  runner.set_on_point([&](const Case& c, size_t i) {
    if (meta.plan) meta.plan->done.push_back(c.points[i].run_index);
    if (std::chrono::steady_clock::now() - last_write < std::chrono::seconds(1)) return;
    write_file_report(false);
    last_write = std::chrono::steady_clock::now();
  });
  if (claims) runner.set_claim([&](const CasePoint& p) { return claims->claim(p.run_index); });
  runner.set_total_points(static_cast<size_t>(cases_points(cases)));
  try {
    for (const auto& c : cases) {
      size_t width = 0;
      for (const auto& p : c.points) width = std::max(width, p.label.size());
      table.begin_case(c.name, c.description, width);
      runner.run_case(c);
    }
  } catch (const CudaError&) {
    write_outputs(false);  // keep every result taken before the device failed
    throw;
  }
  write_outputs(true);
  if (stream_table) table.finish();  // the last case's footnotes, before the tally
  if (!ro.dump_dir.empty())
    std::cerr << "attnbench: dumped " << runner.dump_dirs().size() << " point(s) as .npy under " << ro.dump_dir
              << " (manifest.json in each)\n";
  const Tally& t = runner.tally();
  if (!timed) {
    if (t.skipped) std::cout << t.skipped << " skipped\n";
    std::cout << t.passed << " passed, " << t.failed + t.errors << " failed\n";
  }
  if (t.too_large) return kExitInput;
  return t.failed + t.errors > 0 ? kExitFailed : kExitOk;
}

int list(const Options& o) {
  // Everything is gathered first: a bad cases directory is one line, not the kernel table and then an error.
  std::ostringstream out;
  const std::string dir = o.cases_dir.empty() ? default_cases_dir() : o.cases_dir;
  const bool cases = o.list_what == "cases" || o.list_what == "all";
  load_plugin_files(o, cases ? resolve_case_paths("all", dir) : std::vector<std::string>{});
  nlohmann::json doc = {{"attnbench", build_identity()}};  // --format json: the same, as one document
  if (o.list_what == "kernels" || o.list_what == "all") {
    doc["ops"] = nlohmann::json::array();
    for (const OpSpec& op : ops()) {
      const std::vector<VariantInfo> variants = op.variants();
      nlohmann::json names = nlohmann::json::array();
      for (size_t i = 0; i < variants.size(); ++i)
        names.push_back({{"name", variants[i].name}, {"note", variants[i].note}, {"baseline", i == 0}});
      doc["ops"].push_back({{"name", op.name}, {"summary", op.summary}, {"variants", std::move(names)}});
      out << op.name << ": " << op.summary << "\n";
      size_t width = 18;  // names line up; a long pair name widens its op's column
      for (const auto& v : variants) width = std::max(width, v.name.size());
      for (size_t i = 0; i < variants.size(); ++i)
        out << "  " << std::left << std::setw(static_cast<int>(width + 2)) << variants[i].name << variants[i].note
            << (i == 0 ? " [baseline]" : "") << "\n";
    }
  }
  if (cases) {
    if (o.list_what == "all") out << "\n";
    doc["cases"] = nlohmann::json::array();
    for (const auto& path : resolve_case_paths("all", dir)) {
      const Case c = load_case(path, {});
      doc["cases"].push_back({{"file", std::filesystem::relative(path, dir).generic_string()},
                              {"name", c.name},
                              {"op", c.op},
                              {"points", c.points.size()},
                              {"description", c.description}});
      out << std::left << std::setw(36) << std::filesystem::relative(path, dir).string() << " " << std::setw(10)
          << c.op << std::setw(5) << std::to_string(c.points.size()) + "pt" << " " << c.description << "\n";
    }
  }
  std::cout << (o.format == "json" ? doc.dump(1) + "\n" : out.str());
  return kExitOk;
}

int info(const Options& o) {
  Gpu gpu(o.device);
  const DeviceInfo& d = gpu.info();
  if (o.format == "json") {  // a report without rows: the same device, ceilings and datasheet keys
    RunMeta meta;
    meta.version = ATTNBENCH_VERSION;
    meta.command_line = o.command_line;
    meta.date = now_iso();
    meta.mode = "info";
    meta.device = d;
    meta.ceilings = gpu.ceilings(o.remeasure);
    write_report(std::cout, Format::json, meta, {});
    return kExitOk;
  }
  std::cout << "device " << d.index << ": " << d.name << "\n"
            << "  compute capability " << d.caps.cc_major << "." << d.caps.cc_minor << ", " << d.caps.sm_count
            << " SMs, " << human_bytes(static_cast<double>(d.total_memory)) << " memory ("
            << d.memory_bus_bits << "-bit bus), " << human_bytes(static_cast<double>(d.caps.l2_bytes)) << " L2, "
            << d.caps.smem_per_block_optin / 1024 << " KiB shared memory per block\n"
            << "  driver " << cuda_version_string(d.driver_version) << ", CUDA runtime "
            << cuda_version_string(d.runtime_version) << ", attnbench " << ATTNBENCH_VERSION << "\n";
  std::cout << "measuring ceilings..." << std::flush;
  const Ceilings& c = gpu.ceilings(o.remeasure);
  const std::optional<Datasheet> sheet = datasheet_for(d.name);
  std::cout << "\r\033[K" << "ceilings (" << c.source << ")"
            << (sheet ? ", beside NVIDIA's datasheet for the " + sheet->card + " (dense)" : std::string()) << ":\n";
  auto line = [&](const std::string& what, double measured, int decimals, const std::string& unit, double datasheet,
                  const std::string& how) {
    std::cout << "  " << std::left << std::setw(17) << what << std::right << std::setw(8)
              << (measured > 0 ? fmt_fixed(measured, decimals) : std::string("-")) << " " << std::left
              << std::setw(8) << unit << std::right << std::setw(9)
              << (datasheet > 0 ? fmt_fixed(datasheet, decimals) : std::string("")) << "  " << how << "\n";
  };
  std::cout << "  " << std::left << std::setw(17) << "" << std::right << std::setw(8) << "measured" << std::setw(18)
            << (sheet ? "datasheet" : "") << "\n";
  line("copy bandwidth", c.copy_gbps, 0, "GB/s", sheet ? sheet->hbm_gbps : 0, "device-to-device, read + write");
  line("read bandwidth", c.read_gbps, 0, "GB/s", sheet ? sheet->hbm_gbps : 0, "");
  line("write bandwidth", c.write_gbps, 0, "GB/s", sheet ? sheet->hbm_gbps : 0, "");
  line("fp32 GEMM", c.fp32_tflops, 1, "TFLOP/s", sheet ? sheet->fp32_tflops : 0, "cuBLAS, 8192^3, no TF32");
  line("tf32 GEMM", c.tf32_tflops, 1, "TFLOP/s", sheet ? sheet->tf32_tflops : 0, "cuBLAS, 8192^3, fp32 data");
  line("fp16 GEMM", c.fp16_tflops, 1, "TFLOP/s", sheet ? sheet->fp16_tflops : 0, "cuBLAS, 8192^3, fp32 accumulate");
  line("bf16 GEMM", c.bf16_tflops, 1, "TFLOP/s", sheet ? sheet->bf16_tflops : 0, "cuBLAS, 8192^3, fp32 accumulate");
  line("fp8 e4m3 GEMM", c.fp8_tflops, 1, "TFLOP/s", sheet ? 2 * sheet->bf16_tflops : 0,
       c.fp8_tflops > 0 ? "cuBLASLt, 8192^3, A^T B, bf16 out, fp32 accumulate" : "not measured (needs sm_89)");
  line("bf16 mma.sync", c.mma_sync_bf16_tflops, 1, "TFLOP/s", sheet ? sheet->bf16_tflops : 0,
       c.mma_sync_bf16_tflops > 0 ? "m16n8k16 from registers only" : "not measured (needs sm_80)");
  line("bf16 wgmma", c.wgmma_bf16_tflops, 1, "TFLOP/s", sheet ? sheet->bf16_tflops : 0,
       c.wgmma_bf16_tflops > 0 ? "m64n256k16, A from registers, B from one shared tile"
                               : "not measured (needs a build for sm_90a on an sm_90 card)");
  return kExitOk;
}

// Pure json, so CI can gate on it without a GPU: exit 1 when anything is SLOW or FAILED,
// or missing in NEW (unless --allow-missing), or UNSURE with --fail-on-unsure.
int compare(const Options& o) {
  const std::vector<std::string>& files = o.compare_files;
  if (o.golden.empty() ? files.size() != 2 : files.size() != 1)
    throw InputError(o.golden.empty() ? "compare: error: expected BASE.json NEW.json (or --golden DIR NEW.json)"
                                      : "compare: error: with --golden DIR give only NEW.json: BASE is DIR's file for "
                                        "NEW's card");
  if (!o.output.empty()) check_output_file(o.output, "-o");
  // A golden was measured on another machine of the same model, on another day: 10%, as
  // vLLM's attention benchmark gate uses, where two runs on one machine take 5%.
  const std::string threshold_text =
      !o.compare_threshold.empty() ? o.compare_threshold : o.golden.empty() ? "5" : "10";
  const double threshold = parse_threshold(threshold_text), confidence = parse_confidence(o.confidence);
  VariantPairs pairs;
  for (const std::string& p : o.pairs) pairs.push_back(parse_pair(p));
  const std::string& new_path = files.back();
  const nlohmann::json now = read_report(new_path);
  const std::string base_path = o.golden.empty() ? files.front() : find_golden(o.golden, now, new_path);
  CompareResult r = compare_reports(read_report(base_path), now, threshold, base_path, new_path, confidence, pairs);
  r.golden = o.golden;
  // stdout in --format (table by default); -o in the format its extension names (.json,
  // .csv, .md), else in --format's, as run's -o.
  CompareOutput how;
  how.fail_on_unsure = o.fail_on_unsure;
  how.allow_missing = o.allow_missing;
  how.format = o.format.empty() ? Format::table : *parse_format(o.format);
  write_compare(std::cout, r, how);
  if (!o.output.empty()) {
    CompareOutput file = how;
    if (const Format f = format_for_path(o.output); f != Format::table) file.format = f;
    write_file(o.output, [&](std::ostream& out) { write_compare(out, r, file); });
  }
  if (!r.warning.empty()) std::cerr << "attnbench: warning: " << r.warning << "\n";
  if (!r.noise_warning.empty()) std::cerr << "attnbench: warning: " << r.noise_warning << "\n";
  return r.exit_code(o.fail_on_unsure, o.allow_missing);
}

// One report from the parts of a run. The merged report is written even when points are
// missing or duplicated (they are listed, and it says it is not complete), with exit 1.
int merge(const Options& o) {
  check_output_file(o.output, "-o");
  // Parsed side by side (a part of verify all is megabytes of json); the first unreadable
  // part, in the order given, is the error.
  const int64_t n = static_cast<int64_t>(o.merge_inputs.size());
  std::vector<nlohmann::json> parts(static_cast<size_t>(n));
  std::vector<std::exception_ptr> errors(static_cast<size_t>(n));
  parallel_for(n, kParallelWork, [&](int64_t i) {
    try {
      parts[i] = read_report(o.merge_inputs[i]);
    } catch (...) {
      errors[i] = std::current_exception();
    }
  });
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
  const size_t part_count = parts.size();
  const MergeResult r = merge_reports(std::move(parts), o.merge_inputs, o.command_line, now_iso());
  write_file(o.output, [&](std::ostream& out) { out << r.report.dump(1) << "\n"; });
  const auto list = [](const std::vector<std::string>& v) {
    std::string s;
    for (size_t i = 0; i < v.size() && i < 10; ++i) s += (i ? ", " : "") + v[i];
    return s + (v.size() > 10 ? ", ... (" + std::to_string(v.size()) + " in all)" : "");
  };
  std::cout << "merged " << part_count << " report(s): " << r.report["rows"].size() << " rows into " << o.output
            << "\n";
  if (!r.missing.empty()) std::cout << r.missing.size() << " point(s) no part finished: " << list(r.missing) << "\n";
  if (!r.duplicated.empty())
    std::cout << r.duplicated.size() << " point(s) finished by more than one part (the first part's rows kept): "
              << list(r.duplicated) << "\n";
  return r.missing.empty() && r.duplicated.empty() ? kExitOk : kExitFailed;
}

// DIR/Results.md from a json report, with the plot script's PNGs beside it when it can run.
// The page is written either way; without plots it says why, and so does stderr.
int report(const Options& o) {
  check_output_dir(o.output, "-o");
  const nlohmann::json run = read_report(o.run_report);
  std::optional<CompareResult> compared;
  if (!o.base_report.empty())
    compared =
        compare_reports(read_report(o.base_report), run, parse_threshold(o.threshold), o.base_report, o.run_report);
  // The peers file's contents are the plot script's to read; that it is there is checked here.
  if (!o.peers.empty() && (!std::filesystem::is_regular_file(o.peers) || !std::ifstream(o.peers)))
    throw InputError(clipped(o.peers, 200) + ": error: cannot read the peers file");
  // ... and that it is json with rows (an attnbench report or tools/peers.py --json): a
  // malformed one would otherwise only cost the plots, with exit 0.
  if (!o.peers.empty()) {
    std::ifstream in(o.peers);
    const nlohmann::json peers = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (peers.is_discarded())
      throw InputError(clipped(o.peers, 200) + ": error: the peers file is not json");
    if (!peers.is_object() || !peers.contains("rows") || !peers["rows"].is_array())
      throw InputError(clipped(o.peers, 200) +
                       ": error: the peers file has no \"rows\" array (expected an attnbench json report or "
                       "peers.py --json)");
  }
  std::filesystem::create_directories(o.output);
  const Plots plots = draw_plots(plot_tool(o.plot_script), o.run_report, o.base_report, o.peers, o.output);
  const std::string page = (std::filesystem::path(o.output) / "Results.md").string();
  write_file(page, [&](std::ostream& out) {
    write_results_page(out, run, o.run_report, compared, o.base_report, plots, o.command_line);
  });
  if (!plots.missing.empty()) std::cerr << "attnbench: warning: no plots: " << one_line(plots.missing) << "\n";
  if (compared && !compared->warning.empty()) std::cerr << "attnbench: warning: " << compared->warning << "\n";
  const size_t images = plots.throughput.size() + !plots.compare.empty();
  std::cout << "wrote " << page << (plots.missing.empty() ? " and " + std::to_string(images) + " plot(s)" : "") << "\n";
  return kExitOk;
}

// One style for every input error: "WHERE: error: what" where the fault has a place (a case
// file's line and column, a --set, a report), else "attnbench: error: what".
std::string error_line(const std::string& what) {
  if (what.rfind("attnbench: ", 0) == 0) return what;
  if (what.rfind("error: ", 0) == 0) return "attnbench: " + what;
  const size_t at = what.find(": error: ");
  if (at != std::string::npos && at > 0) return what;
  return "attnbench: error: " + what;
}

// The one place an exception becomes an exit code and one line on stderr: whatever
// was thrown, attnbench never ends in std::terminate.
int report_exception(const std::exception_ptr& error) {
  const auto say = [](const std::string& what) { std::cerr << one_line(what) << "\n"; };
  try {
    std::rethrow_exception(error);
  } catch (const InputError& e) {
    say(error_line(e.what()));
    return kExitInput;
  } catch (const NoDevice& e) {
    say(std::string("attnbench: ") + e.what());
    return kExitDevice;
  } catch (const CudaError& e) {
    say(std::string("attnbench: CUDA error: ") + e.what());
    return kExitDevice;
  } catch (const std::bad_alloc&) {
    // Sizes are checked before anything large is allocated, so what is left is a run
    // asking for more host memory than this machine has: the input's doing.
    const std::size_t asked = last_failed_allocation();
    say("attnbench: error: out of host memory" +
        (asked ? " (an allocation of " + human_bytes(static_cast<double>(asked)) + " failed)" : std::string()));
    return kExitInput;
  } catch (const std::length_error& e) {
    say(std::string("attnbench: error: a size too large for host memory (") + e.what() + ")");
    return kExitInput;
  } catch (const std::invalid_argument& e) {
    // A kernel's launcher refusing what it was given: the input asked for something it lacks.
    say(std::string("attnbench: error: ") + e.what());
    return kExitInput;
  } catch (const std::filesystem::filesystem_error& e) {
    say(std::string("attnbench: error: ") + e.what());
    return kExitInput;
  } catch (const std::ios_base::failure& e) {
    say(std::string("attnbench: error: reading or writing a file: ") + e.what());
    return kExitInput;
  } catch (const nlohmann::json::exception& e) {
    say(std::string("attnbench: error: bad json: ") + e.what());
    return kExitInput;
  } catch (const std::exception& e) {
    say(std::string("attnbench: internal error: ") + e.what());
    return kExitDevice;
  } catch (...) {
    say("attnbench: internal error: an unknown exception");
    return kExitDevice;
  }
}

// The subcommands, in --help's order.
std::vector<std::string> subcommand_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands({})) names.push_back(sub->get_name());
  return names;
}

// `attnbench help [SUBCOMMAND]`, `attnbench runn`, `attnbench -V`: answered here, with a
// suggestion; nullopt when argv[1] is a subcommand (or --help, --version) for CLI11 to parse.
std::optional<int> before_subcommand(CLI::App& app, int argc, char** argv) {
  if (argc < 2) return std::nullopt;  // CLI11: "A subcommand is required", and the usage
  const std::string first = argv[1];
  const std::vector<std::string> names = subcommand_names(app);
  const bool known = std::find(names.begin(), names.end(), first) != names.end();
  if (known || first == "-h" || first == "--help" || first == "--version") return std::nullopt;
  if (first == "help") {  // git's and cargo's convention
    const std::string which = argc > 2 ? argv[2] : "";
    if (which.empty()) {
      std::cout << app.help();
      return kExitOk;
    }
    if (std::find(names.begin(), names.end(), which) != names.end()) {
      std::cout << app.get_subcommand(which)->help();
      return kExitOk;
    }
    std::cerr << "attnbench: error: no subcommand '" << clipped(which) << "'"
              << hint(which, names, "subcommands: " + comma_list(names)) << "\n";
    return kExitInput;
  }
  if (first.rfind('-', 0) == 0) {
    std::cerr << "attnbench: error: unknown option '" << clipped(first) << "'"
              << hint(first, {"--help", "--version"}, "options come after the subcommand, as in attnbench run CASE -k NAME")
              << "\n";
    return kExitInput;
  }
  std::cerr << "attnbench: error: unknown subcommand '" << clipped(first) << "'"
            << hint(first, names, "subcommands: " + comma_list(names)) << "\n";
  return kExitInput;
}

// "The following argument was not expected: --kernels" gets " (did you mean --kernel?)" from the
// subcommand's own options.
std::string option_hint(const CLI::App& app, const CLI::ParseError& e) {
  if (dynamic_cast<const CLI::ExtrasError*>(&e) == nullptr || app.get_subcommands().empty()) return "";
  const CLI::App* sub = app.get_subcommands().front();
  std::vector<std::string> options;
  for (const CLI::Option* opt : sub->get_options()) {
    for (const std::string& l : opt->get_lnames()) options.push_back("--" + l);
    for (const std::string& n : opt->get_snames()) options.push_back("-" + n);
  }
  for (const std::string& extra : sub->remaining()) {
    const std::string word = extra.substr(0, extra.find('='));
    if (word.rfind('-', 0) != 0) continue;
    const std::vector<std::string> near = near_names(word, options);
    if (!near.empty()) return " (did you mean " + or_list(near) + "?)";
  }
  return "";
}

// CLI11's messages start with a capital; ours, after "error: ", do not.
std::string lower_first_word(std::string s) {
  if (s.size() > 1 && std::isupper(static_cast<unsigned char>(s[0])) && std::islower(static_cast<unsigned char>(s[1])))
    s[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(s[0])));
  return s;
}

}  // namespace

int run_cli(int argc, char** argv) {
  Options o;
  for (int i = 0; i < argc; ++i) o.command_line += (i ? " " : "") + shell_quote(argv[i]);
  o.argv.assign(argv, argv + argc);
  if (argc > 0) o.program = argv[0];

  CLI::App app{"attnbench: correctness and speed of attention kernels against an fp64 reference", "attnbench"};
  app.set_version_flag("--version", version_text());
  app.require_subcommand(1);
  app.footer(
      "Exit codes: 0 all verified, 1 a verification failed (compare: a row got SLOW or FAILED), 2 bad input, 3 no GPU "
      "or a CUDA error.");
  auto* run = app.add_subcommand("run", "verify and time the cases; print timings, TFLOP/s, GB/s, % of ceiling");
  add_case_options(run, o);
  auto* mode = run->add_option("--mode", o.mode,
                               "timing mode for every case: cold (L2 flushed) | hot (L2 warm) | graph (cold launches "
                               "replayed from a CUDA graph, no launch overhead) | graph_hot (the graph, L2 warm) | "
                               "all (side by side)")
                   ->check(CLI::IsMember({"cold", "hot", "graph", "graph_hot", "all"}));
  auto* no_samples = run->add_flag("--no-samples", o.no_samples,
                                   "json: leave the timing samples out (smaller; compare then judges by the quartiles "
                                   "alone)");
  auto* keep = run->add_flag("--keep-samples", o.keep_samples,
                             "json: keep every timing sample (the default; kept for old scripts)")
                   ->excludes("--no-samples");
  auto* flush =
      run->add_option("--flush", o.flush,
                      "cold mode's L2 flush: read (default: leaves clean lines) | write (zeroes a buffer, as "
                      "Triton's do_bench and peers.py do; its dirty lines' write-back lands in the timed kernel)")
          ->check(CLI::IsMember({"read", "write"}));
  auto* min_clock =
      run->add_option("--min-clock", o.min_clock_pct,
                      "drop a sample whose SM clock read below PCT% of the maximum, cool down 50 ms and take it "
                      "again (8 in a row: the clock is what this load runs at, and the samples are kept); NVML's "
                      "throttle reasons are reported. Default 0: keep every sample, flag those below 90%")
          ->check(CLI::Range(0.0, 100.0))
          ->type_name("PCT");
  auto* interleave =
      run->add_option("--interleave", o.interleave,
                      "time each point's variants in N rounds, the variants in a seeded random order each round, "
                      "so that drift (clocks, heat) falls on all alike; speedups get a 95% bootstrap interval")
          ->check(CLI::Range(1, 100))
          ->type_name("N");
  // Timing flags mean nothing without timing: refused rather than silently ignored.
  run->add_flag("--profile", o.profile,
                "for Nsight Compute / Systems: verify, then one warm-up and one launch per variant inside NVTX "
                "ranges case/point/variant; no timing, hold or flush (docs/profiling.md)")
      ->excludes(mode)
      ->excludes(keep)
      ->excludes(no_samples)
      ->excludes(flush)
      ->excludes(min_clock)
      ->excludes(interleave);
  auto* verify = app.add_subcommand("verify", "check the cases' outputs against the fp64 reference; no timing");
  add_case_options(verify, o);
  verify
      ->add_option("--sanitize", o.sanitize,
                   "verify again under compute-sanitizer (memcheck | racecheck | initcheck | synccheck) and fail "
                   "every variant it reports, its first finding in the row (docs/measuring.md)")
      ->check(CLI::IsMember(sanitizer_tools()))
      ->excludes("--devices")
      ->type_name("TOOL");
  verify->add_flag("--sanitize-markers", o.sanitize_markers, "--sanitize's child (attnbench's own use)")->group("");
  auto* lst = app.add_subcommand("list", "list kernel variants and case files");
  lst->add_option("what", o.list_what, "kernels | cases (default: both)")
      ->check(CLI::IsMember({"kernels", "cases", "all"}));
  lst->add_option("--cases-dir", o.cases_dir, "where to look for cases (default: ./cases)");
  add_plugin_option(lst, o);
  lst->add_option("--format", o.format, "table (default) | json")->check(CLI::IsMember({"table", "json"}));
  auto* cmp =
      app.add_subcommand("compare", "compare two json reports; exit 1 when a row got SLOW or FAILED or went "
                                    "missing (needs no GPU)");
  cmp->add_option("reports", o.compare_files, "BASE.json NEW.json: the reference report and the one to judge; "
                                              "NEW.json alone with --golden")
      ->required()
      ->expected(1, 2);
  cmp->add_option("--golden", o.golden,
                  "DIR: BASE is DIR's golden report for NEW's card, named after its device name lowercased, every "
                  "run of other characters '-': nvidia-h100-80gb-hbm3.json (default threshold then 10%)")
      ->type_name("DIR");
  cmp->add_option("--threshold", o.compare_threshold,
                  "smallest change in % called FAST or SLOW (default 5; 10 with --golden)");
  cmp->add_option("--pair", o.pairs,
                  "BASE_VARIANT=NEW_VARIANT: match BASE's rows of one variant with NEW's of another, e.g. a peer "
                  "library's (tools/peers.py --report) with ours: --pair torch_sdpa_cudnn=flash_wgmma; repeatable");
  cmp->add_option("--confidence", o.confidence,
                  "confidence of the bootstrap interval of the median ratio: 0.5 to 0.999, or 50% to 99.9% "
                  "(default 0.95)");
  cmp->add_flag("--fail-on-unsure", o.fail_on_unsure, "exit 1 when a row is UNSURE, as for SLOW");
  cmp->add_flag("--allow-missing", o.allow_missing,
                "exit 0 though rows of BASE are missing in NEW (by default they fail the comparison)");
  cmp->add_option("--format", o.format, "table | markdown | csv | json on stdout (default: table)")
      ->check(CLI::IsMember({"table", "markdown", "md", "csv", "json"}));
  cmp->add_option("-o,--output", o.output,
                  "also write the comparison to FILE, in the format its extension names (.json, .csv, .md), else "
                  "--format's");
  auto* mrg = app.add_subcommand(
      "merge", "one json report from the parts of a run (--shard I/N, --devices); needs no GPU");
  mrg->add_option("reports", o.merge_inputs, "the parts' json reports")->required();
  mrg->add_option("-o,--output", o.output, "the merged json report")->required();
  auto* rep = app.add_subcommand("report",
                                 "write DIR/Results.md: a run's tables and plots, optionally against a base run "
                                 "(needs no GPU)");
  rep->add_option("run", o.run_report, "the run's json report")->required();
  rep->add_option("--compare", o.base_report, "a json report to compare the run with: a table and a plot");
  rep->add_option("--threshold", o.threshold, "with --compare: smallest change in % called FAST or SLOW (default 5)");
  rep->add_option("--peers", o.peers,
                  "rows to plot beside the run's: an attnbench json report, or tools/peers.py --json");
  rep->add_option("-o,--output", o.output, "the directory for Results.md and the plots (made if its parent exists)")
      ->required();
  rep->add_option(
      "--plot-script", o.plot_script,
      "the plot script (default: $ATTNBENCH_PLOT_SCRIPT, else app/plot/attnbench_plot.py of the source tree)");
  auto* inf = app.add_subcommand("info", "the card, and the ceilings attnbench measures on it");
  inf->add_option("--device", o.device, "CUDA device index")->check(CLI::NonNegativeNumber);
  inf->add_flag("--remeasure", o.remeasure, "measure the ceilings again instead of reading the cache");
  inf->add_option("--format", o.format, "table (default) | json: a report without rows (docs/report.schema.json)")
      ->check(CLI::IsMember({"table", "json"}));

  // What comes before the subcommand, checked before CLI11 sees it: its own message for a
  // mistyped subcommand or an option there is only "A subcommand is required".
  if (const std::optional<int> early = before_subcommand(app, argc, argv)) return *early;
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "attnbench: error: " << lower_first_word(e.what()) << option_hint(app, e) << " (see attnbench "
              << (app.get_subcommands().empty() ? std::string() : app.get_subcommands().front()->get_name() + " ")
              << "--help)\n";
    return kExitInput;
  }

  try {
    if (*run) return run_or_verify(o, true);
    if (*verify) return run_or_verify(o, false);
    if (*lst) return list(o);
    if (*inf) return info(o);
    if (*cmp) return compare(o);
    if (*rep) return report(o);
    if (*mrg) return merge(o);
  } catch (...) {
    return report_exception(std::current_exception());
  }
  return kExitInput;
}

}  // namespace attnbench
