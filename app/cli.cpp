#include "app/cli.hpp"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>

#include "app/device.hpp"
#include "app/ops.hpp"
#include "app/report.hpp"
#include "app/runner.hpp"
#include "kernels/registry.hpp"

namespace attnbench {
namespace {

constexpr int kExitOk = 0, kExitFailed = 1, kExitInput = 2, kExitDevice = 3;

struct Options {
  std::vector<std::string> cases;
  std::vector<std::string> kernels;
  std::vector<std::string> sets;
  std::string format;
  std::string output;
  std::optional<uint64_t> seed;
  std::string mode;
  int device = 0;
  std::string cases_dir;
  bool dry_run = false;
  bool remeasure = false;
  std::string list_what = "all";
  std::string command_line;
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

void add_case_options(CLI::App* cmd, Options& o) {
  cmd->add_option("cases", o.cases, "case files, directories, names under cases/, or `all`")->required();
  cmd->add_option("-k,--kernel", o.kernels, "run only this variant (repeatable)");
  cmd->add_option("--set", o.sets, "override a case key, e.g. shape.seq_q=8192 or dtype=bf16 (repeatable)");
  cmd->add_option("--format", o.format, "table | markdown | csv | json (default: table, or by -o's extension)")
      ->check(CLI::IsMember({"table", "markdown", "md", "csv", "json"}));
  cmd->add_option("-o,--output", o.output, "also write the report to FILE");
  cmd->add_option("--seed", o.seed, "first seed of the verification trials (overrides [verify].seed)");
  cmd->add_option("--device", o.device, "CUDA device index")->check(CLI::NonNegativeNumber);
  cmd->add_option("--cases-dir", o.cases_dir, "where case names and `all` are looked up (default: ./cases)");
  cmd->add_flag("--dry-run", o.dry_run,
                "load and validate the cases, print what would run (as on an H100); needs no GPU");
}

// Loads every case first, so a bad file stops the run before any GPU work.
std::vector<Case> load_cases(const Options& o, const KernelCatalog& catalog) {
  const std::string dir = o.cases_dir.empty() ? default_cases_dir() : o.cases_dir;
  std::vector<Case> cases;
  for (const auto& arg : o.cases)
    for (const auto& path : resolve_case_paths(arg, dir)) cases.push_back(load_case(path, o.sets, catalog));
  // A -k name must exist somewhere: a typo should not silently run nothing.
  for (const auto& k : o.kernels) {
    bool known = false;
    for (const auto& [op, names] : catalog.variants)
      known = known || std::find(names.begin(), names.end(), k) != names.end();
    if (!known) throw InputError("unknown kernel '" + k + "' (see `attnbench list kernels`)");
  }
  return cases;
}

int dry_run(const std::vector<Case>& cases, const Options& o, bool timed) {
  for (const auto& c : cases) {
    for (const auto& p : c.points) {
      std::cout << c.name << (p.label.empty() ? "" : " [" + p.label + "]") << ": " << op_name(p.op) << " "
                << dtype_name(p.dtype);
      auto problem = make_problem(p);
      if (!problem) {
        std::cout << ", no kernels for this op yet\n";
        continue;
      }
      std::vector<std::string> names;
      for (const auto& v : problem->variants(assumed_caps())) names.push_back(v.name);
      std::cout << ", " << human_bytes(static_cast<double>(problem->device_bytes())) << " of tensors, variants:";
      const auto defaults = problem->default_variants(assumed_caps());
      for (const auto& n : select_variants(names, p, o.kernels, timed, defaults)) std::cout << " " << n;
      std::cout << "\n";
    }
  }
  return kExitOk;
}

int run_or_verify(const Options& o, bool timed) {
  const KernelCatalog catalog = kernel_catalog();
  const std::vector<Case> cases = load_cases(o, catalog);
  if (o.dry_run) return dry_run(cases, o, timed);

  Format format = o.format.empty() ? (o.output.empty() ? Format::table : format_for_path(o.output))
                                   : *parse_format(o.format);
  const bool stream_table = format == Format::table || !o.output.empty();
  Gpu gpu(o.device);

  RunOptions ro;
  ro.timed = timed;
  ro.kernels = o.kernels;
  ro.seed = o.seed;
  if (o.mode == "cold") ro.mode = TimingMode::cold;
  if (o.mode == "hot") ro.mode = TimingMode::hot;
  if (o.mode == "graph") ro.mode = TimingMode::graph;
  ro.progress = isatty(STDERR_FILENO);
  TableWriter table(std::cout, timed);
  Runner runner(gpu, ro, [&](const ResultRow& r) {
    if (stream_table) table.row(r);
  });

  RunMeta meta{ATTNBENCH_VERSION, o.command_line, now_iso(), timed ? "run" : "verify", gpu.info(), std::nullopt};
  if (timed) {
    std::cerr << (ro.progress ? "measuring the card's ceilings (cached after the first run)...\r" : "");
    meta.ceilings = gpu.ceilings();
  }
  auto write_outputs = [&] {
    if (!stream_table) write_report(std::cout, format, meta, runner.rows());
    if (!o.output.empty()) {
      std::ofstream out(o.output);
      if (!out) throw InputError(o.output + ": cannot write the report");
      write_report(out, format, meta, runner.rows());
    }
  };
  try {
    for (const auto& c : cases) {
      size_t width = 0;
      for (const auto& p : c.points) width = std::max(width, p.label.size());
      table.begin_case(c.name, c.description, width);
      runner.run_case(c);
    }
  } catch (const CudaError&) {
    write_outputs();  // keep every result taken before the device failed
    throw;
  }
  write_outputs();
  const Tally& t = runner.tally();
  if (!timed) {
    if (t.skipped) std::cout << t.skipped << " skipped\n";
    std::cout << t.passed << " passed, " << t.failed + t.errors << " failed\n";
  }
  if (t.too_large) return kExitInput;
  return t.failed + t.errors > 0 ? kExitFailed : kExitOk;
}

int list(const Options& o) {
  if (o.list_what == "kernels" || o.list_what == "all") {
    for (const auto& f : kernel_families()) {
      std::cout << f.op << "\n";
      for (size_t i = 0; i < f.variants.size(); ++i)
        std::cout << "  " << std::left << std::setw(16) << f.variants[i].name << f.variants[i].note
                  << (i == 0 ? " (baseline)" : "") << "\n";
    }
  }
  if (o.list_what == "cases" || o.list_what == "all") {
    const KernelCatalog catalog = kernel_catalog();
    const std::string dir = o.cases_dir.empty() ? default_cases_dir() : o.cases_dir;
    if (o.list_what == "all") std::cout << "\n";
    for (const auto& path : resolve_case_paths("all", dir)) {
      const Case c = load_case(path, {}, catalog);
      std::cout << std::left << std::setw(36) << std::filesystem::relative(path, dir).string() << " " << std::setw(10)
                << op_name(c.op) << std::setw(5) << std::to_string(c.points.size()) + "pt" << " " << c.description
                << "\n";
    }
  }
  return kExitOk;
}

int info(const Options& o) {
  Gpu gpu(o.device);
  const DeviceInfo& d = gpu.info();
  std::cout << "device " << d.index << ": " << d.name << "\n"
            << "  compute capability " << d.caps.cc_major << "." << d.caps.cc_minor << ", " << d.caps.sm_count
            << " SMs, " << human_bytes(static_cast<double>(d.total_memory)) << " memory ("
            << d.memory_bus_bits << "-bit bus), " << human_bytes(static_cast<double>(d.caps.l2_bytes)) << " L2, "
            << d.caps.smem_per_block_optin / 1024 << " KiB shared memory per block\n"
            << "  driver " << cuda_version_string(d.driver_version) << ", CUDA runtime "
            << cuda_version_string(d.runtime_version) << ", attnbench " << ATTNBENCH_VERSION << "\n";
  std::cout << "measuring ceilings..." << std::flush;
  const Ceilings& c = gpu.ceilings(o.remeasure);
  std::cout << "\r\033[K" << "ceilings (" << c.source << "):\n"
            << "  copy bandwidth   " << fmt_fixed(c.copy_gbps, 0) << " GB/s (device-to-device, read + write)\n"
            << "  read bandwidth   " << fmt_fixed(c.read_gbps, 0) << " GB/s\n"
            << "  write bandwidth  " << fmt_fixed(c.write_gbps, 0) << " GB/s\n"
            << "  fp32 GEMM        " << fmt_fixed(c.fp32_tflops, 1) << " TFLOP/s (cuBLAS, 8192^3, no TF32)\n"
            << "  fp16 GEMM        " << fmt_fixed(c.fp16_tflops, 1) << " TFLOP/s (cuBLAS, 8192^3, fp32 accumulate)\n"
            << "  bf16 GEMM        " << fmt_fixed(c.bf16_tflops, 1) << " TFLOP/s (cuBLAS, 8192^3, fp32 accumulate)\n";
  return kExitOk;
}

}  // namespace

int run_cli(int argc, char** argv) {
  Options o;
  for (int i = 0; i < argc; ++i) o.command_line += (i ? " " : "") + std::string(argv[i]);

  CLI::App app{"attnbench: correctness and speed of attention kernels against an fp64 reference"};
  app.set_version_flag("--version", ATTNBENCH_VERSION);
  app.require_subcommand(1);
  app.footer("Exit codes: 0 all verified, 1 a verification failed, 2 bad input, 3 no GPU or a CUDA error.");
  auto* run = app.add_subcommand("run", "verify and time the cases; print timings, TFLOP/s, GB/s, % of ceiling");
  add_case_options(run, o);
  run->add_option("--mode", o.mode, "timing mode for every case: cold (L2 flushed) | hot | graph")
      ->check(CLI::IsMember({"cold", "hot", "graph"}));
  auto* verify = app.add_subcommand("verify", "check the cases' outputs against the fp64 reference; no timing");
  add_case_options(verify, o);
  auto* lst = app.add_subcommand("list", "list kernel variants and case files");
  lst->add_option("what", o.list_what, "kernels | cases (default: both)")
      ->check(CLI::IsMember({"kernels", "cases", "all"}));
  lst->add_option("--cases-dir", o.cases_dir, "where to look for cases (default: ./cases)");
  auto* inf = app.add_subcommand("info", "the card, and the ceilings attnbench measures on it");
  inf->add_option("--device", o.device, "CUDA device index")->check(CLI::NonNegativeNumber);
  inf->add_flag("--remeasure", o.remeasure, "measure the ceilings again instead of reading the cache");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "attnbench: " << e.what() << " (see attnbench --help)\n";
    return kExitInput;
  }

  try {
    if (*run) return run_or_verify(o, true);
    if (*verify) return run_or_verify(o, false);
    if (*lst) return list(o);
    if (*inf) return info(o);
  } catch (const InputError& e) {
    std::cerr << e.what() << "\n";
    return kExitInput;
  } catch (const NoDevice& e) {
    std::cerr << "attnbench: " << e.what() << "\n";
    return kExitDevice;
  } catch (const CudaError& e) {
    std::cerr << "attnbench: CUDA error: " << e.what() << "\n";
    return kExitDevice;
  } catch (const std::bad_alloc&) {
    std::cerr << "attnbench: out of host memory\n";
    return kExitDevice;
  }
  return kExitInput;
}

}  // namespace attnbench
