#include "app/runner.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <future>
#include <map>
#include <set>
#include <fnmatch.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "app/dump.hpp"
#include "app/op.hpp"
#include "app/problem.hpp"
#include "app/sanitize.hpp"
#include "app/text.hpp"

namespace attnbench {

namespace {
double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

std::string host_overhead_note(double host_us, const Timing& t) {
  if (host_us <= 0) return "";
  std::string note = "host: " + fmt_fixed(host_us, 1) + " us a launch in Python";
  const bool graphed = t.mode == TimingMode::graph || t.mode == TimingMode::graph_hot;
  if (!graphed && t.ms.median * 1e3 < 5 * host_us) note += ", over a fifth of the median: --mode graph leaves it out";
  return note;
}

bool glob_match(const std::string& pattern, const std::string& name) {
  return fnmatch(pattern.c_str(), name.c_str(), 0) == 0;
}

bool VariantFilter::picks(const std::string& name) const {
  return std::any_of(only.begin(), only.end(), [&](const std::string& g) { return glob_match(g, name); });
}

bool VariantFilter::excludes(const std::string& name) const {
  return std::any_of(exclude.begin(), exclude.end(), [&](const std::string& g) { return glob_match(g, name); });
}

std::vector<std::string> select_variants(const std::vector<VariantChoice>& all, const CasePoint& p,
                                         const VariantFilter& cli, bool timed,
                                         const std::vector<std::string>& defaults) {
  auto in = [](const std::vector<std::string>& v, const std::string& x) {
    return std::find(v.begin(), v.end(), x) != v.end();
  };
  std::vector<std::string> out;
  for (const auto& choice : all) {
    const std::string& name = choice.name;
    // A variant that means nothing here runs only when named exactly (a glob does not name it).
    if (!choice.applies && !in(p.kernels, name) && !in(cli.only, name)) continue;
    const std::vector<std::string>& chosen = p.kernels.empty() ? defaults : p.kernels;
    const bool wanted = !cli.only.empty() ? cli.picks(name) : chosen.empty() || in(chosen, name);
    if ((wanted || (timed && name == p.baseline)) && !cli.excludes(name)) out.push_back(name);
  }
  // A -k list matching none of this op's variants means the user is not asking about this op.
  if (!cli.only.empty() && std::none_of(out.begin(), out.end(), [&](const std::string& n) { return cli.picks(n); }))
    out.clear();
  return out;
}

std::string reproduce_command(const RunOptions& o, const std::string& case_file, const CasePoint& p,
                              const std::string& variant) {
  std::string cmd = shell_quote(o.program) + (o.timed ? " run " : " verify ") + shell_quote(case_file);
  for (const auto& s : o.sets) cmd += " --set " + shell_quote(s);
  for (const auto& s : p.pins) cmd += " --set " + shell_quote(s);
  cmd += " -k " + shell_quote(variant);
  if (o.timed && o.profile) cmd += " --profile";
  if (o.timed && !o.profile)
    cmd += std::string(" --mode ") + (o.all_modes ? "all" : mode_name(o.mode.value_or(p.bench.mode)));
  if (o.seed) cmd += " --seed " + std::to_string(*o.seed);
  if (o.device) cmd += " --device " + std::to_string(o.device);
  return cmd;
}

void Runner::emit(ResultRow r) {
  switch (r.status) {
    case Status::verified: ++tally_.passed; break;
    case Status::failed: ++tally_.failed; break;
    case Status::skipped: ++tally_.skipped; break;
    case Status::error: ++tally_.errors; break;
    case Status::peer: break;  // never run here: only read from peer reports
  }
  rows_.push_back(r);
  if (opts_.progress) std::fputs("\r\033[K", stderr);
  if (on_row_) on_row_(rows_.back());
}

std::string progress_line(const std::string& where, const std::string& what, double elapsed_s, size_t done,
                          size_t total, size_t width) {
  std::string line = (total ? "[" + std::to_string(std::min(done + 1, total)) + "/" + std::to_string(total) + "] "
                            : std::string()) +
                     where + ": " + what;
  std::string clock = "  " + format_duration(elapsed_s) + " elapsed";
  if (done > 0 && total > done)
    clock += ", ~" + format_duration(elapsed_s / static_cast<double>(done) * static_cast<double>(total - done)) + " left";
  // The times matter more than the end of a long case name: cut the name, keep them.
  if (width > clock.size() + 8 && line.size() + clock.size() > width) line = line.substr(0, width - clock.size() - 4) + "...";
  return line + clock;
}

void Runner::progress(const std::string& what) const {
  if (!opts_.progress) return;
  winsize ws{};
  const size_t width = ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 ? ws.ws_col - 1 : 119;
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  std::fprintf(stderr, "\r\033[K%s",
               progress_line(where_, what, elapsed, done_points_, total_points_, width).c_str());
  std::fflush(stderr);
}

void Runner::mark(const Case& c, const CasePoint& p, const std::string& launch) const {
  if (!opts_.sanitize_markers) return;
  std::fprintf(stderr, "%s\n", sanitize_marker(c.name, p.label, launch).c_str());
  std::fflush(stderr);
}

void Runner::run_case(const Case& c) {
  for (size_t i = 0; i < c.points.size(); ++i) {
    if (claim_ && !claim_(c.points[i])) continue;
    variant_.clear();
    try {
      run_point(c, c.points[i], i);
    } catch (const CudaError& e) {
      // One line that says where: the case, the point and the variant that faulted.
      const CasePoint& p = c.points[i];
      throw CudaError(c.name + (p.label.empty() ? "" : " [" + p.label + "]") +
                      (variant_.empty() ? "" : " " + variant_) + ": " + e.what() +
                      " (the device is unusable; the rows finished before are in the report)");
    }
    ++done_points_;
    if (opts_.progress_lines) {
      // The same line as the live display's, once per point and never rewritten: for Slurm and CI logs.
      const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
      const size_t n = done_points_, total = std::max(total_points_, n);
      std::string line = "[" + std::to_string(n) + "/" + std::to_string(total) + "] " + where_ + ": done  " +
                         format_duration(elapsed) + " elapsed";
      if (total > n) line += ", ~" + format_duration(elapsed / static_cast<double>(n) * static_cast<double>(total - n)) + " left";
      std::fprintf(stderr, "%s\n", line.c_str());
      std::fflush(stderr);
    }
    if (on_point_) on_point_(c, i);
  }
}

// One sweep point on its way through run_point's stages: what they share, passed from one
// stage to the next.
struct Runner::PointRun {
  const Case& c;
  const CasePoint& p;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  ResultRow base;  // what every row of the point shares
  std::unique_ptr<Problem> problem;
  // Rows are filled in table order; `runnable` indexes into them.
  std::vector<ResultRow> rows;
  std::vector<size_t> runnable;
  std::vector<std::string> nondeterministic;  // variants declared so ([verify] repeat reports, not fails)
  std::size_t workspace = 0;  // the largest of the runnable variants'
  double need = 0;            // device bytes: the point's tensors and that workspace
  std::vector<ResultRow> setup_rows;  // the kernels that built the inputs, checked
  // The point's share of the verification's wall time; the reference's own time overlaps the launches, and
  // reference_wait_ms is what was left of it when they were done.
  double inputs_ms = 0, reference_ms = 0, reference_wait_ms = 0, allocate_ms = 0;
  // Set while the point is on the device (on_device): the launch context over its
  // workspace, and --dump's writer (null without --dump).
  const LaunchContext* ctx = nullptr;
  PointDump* dump = nullptr;
  // The scaled bound's constants: the output dtype's, times the case's bound_factor.
  BoundRule rule;
  // The last trial's checked rows and reference: the inputs stay on the device, so the
  // timed launches' output is verified against them too.
  ref::Rows last_rows;
  std::map<std::string, ref::Matrix> last_wants;  // by rounding path (Problem::rounding_path)
  std::map<std::string, Bound> last_bounds;
};

// The scaled bound of `variant`'s rounding path, or null (an op without a faithful reference).
static const Bound* bound_of(const std::map<std::string, Bound>& bounds, const Problem& problem, const std::string& variant) {
  const auto it = bounds.find(problem.rounding_path(variant));
  return it == bounds.end() ? nullptr : &it->second;
}

// One verification trial: the rows it checks, and the fp64 reference on them, computed on
// the host while the variants run on the device.
struct Runner::Trial {
  int t;  // from 0
  uint64_t seed;
  const ref::Rows check_rows;
  double reference_own_ms = 0;
  // By rounding path (Problem::rounding_path), one for each the runnable variants follow: the
  // reference, and the scaled bound where the op has a faithful reference.
  std::map<std::string, ref::Matrix> wants;
  std::map<std::string, Bound> bounds;
  std::future<void> pending;
  bool ready = false;
  std::vector<std::pair<size_t, Problem::Readback>> outputs;  // (row, its output), to judge
  // Waits for the references the first time it is asked.
  void wait() {
    if (!ready) pending.get();
    ready = true;
  }
  // The reference of `variant`'s rounding path, waited for when first asked for.
  const ref::Matrix& reference(const Problem& problem, const std::string& variant) {
    wait();
    return wants.at(problem.rounding_path(variant));
  }
};

void Runner::run_point(const Case& c, const CasePoint& p, size_t index) {
  PointRun run{c, p};  // the point's wall time starts here
  where_ = c.name + (p.label.empty() ? "" : " [" + p.label + "]") +
           (c.points.size() > 1 ? " (" + std::to_string(index + 1) + "/" + std::to_string(c.points.size()) + ")" : "");
  run.base.case_name = c.name;
  run.base.point = p.label;
  run.base.op = p.op;
  run.base.dtype = dtype_name(p.dtype);
  if (opts_.plan_rows) run.base.plan_index = p.run_index;

  run.problem = make_problem(p);
  if (!plan_rows(run)) return;
  refuse_if_too_large(run);
  if (!run.runnable.empty()) on_device(run);
  release_and_emit(run);
}

// A row per selected variant, in table order: a variant that cannot run this point is
// skipped with its reason, the others are runnable. False: no variant selected, no rows.
bool Runner::plan_rows(PointRun& run) {
  const CasePoint& p = run.p;
  const std::vector<VariantChoice> choices = run.problem->variants(gpu_.info().caps);
  // A profile has no speedup column: the baseline runs only when asked for.
  const std::vector<std::string> selected = select_variants(choices, p, opts_.kernels, opts_.timed && !opts_.profile,
                                                            run.problem->default_variants(gpu_.info().caps));
  if (selected.empty()) return false;

  for (const auto& name : selected) {
    const auto& v = *std::find_if(choices.begin(), choices.end(), [&](const VariantChoice& x) { return x.name == name; });
    ResultRow r = run.base;
    r.variant = name;
    r.baseline = name == p.baseline;
    r.command = reproduce_command(opts_, run.c.file, p, name);
    r.work = run.problem->work();
    // With a faithful reference the scaled bound decides, and an elementwise tolerance joins it
    // only when the case asks for one; without, the op's elementwise tolerance decides.
    const bool elementwise = !run.problem->has_faithful() || p.verify.atol || p.verify.rtol;
    r.tol = elementwise ? run.problem->tolerance() : no_elementwise();
    if (p.verify.atol) r.tol.atol = *p.verify.atol;
    if (p.verify.rtol) r.tol.rtol = *p.verify.rtol;
    if (!v.deterministic) run.nondeterministic.push_back(name);
    if (v.skip.rfind(kSupportsError, 0) == 0) {  // asking failed (a Python supports() raised)
      r.status = Status::error;
      r.reason = v.skip.substr(std::string(kSupportsError).size());
    } else if (!v.skip.empty()) {
      r.status = Status::skipped;
      r.reason = v.skip;
    } else {
      run.runnable.push_back(run.rows.size());
      run.workspace = std::max(run.workspace, run.problem->workspace(name));
    }
    run.rows.push_back(r);
  }
  return true;
}

// Refuse before allocating: a failed cudaMalloc halfway through says less.
void Runner::refuse_if_too_large(PointRun& run) {
  run.need = static_cast<double>(run.problem->device_bytes() + run.workspace);
  const double free = static_cast<double>(gpu_.free_memory());
  if (!run.runnable.empty() && run.need > 0.95 * free) {
    for (size_t i : run.runnable) {
      run.rows[i].status = Status::error;
      run.rows[i].reason = "too large for the card: needs " + human_bytes(run.need) + " of device memory (" +
                           std::to_string(static_cast<uint64_t>(run.need)) + " bytes), " + human_bytes(free) +
                           " free on " + gpu_.info().name;
    }
    tally_.too_large = true;
    run.runnable.clear();
  }
}

// The point on the device: its tensors and workspace allocated, then the stages that
// launch, in order. The workspace and the dump's writer last as long as this call: they
// are gone before the point's tensors are freed (release_and_emit).
void Runner::on_device(PointRun& run) {
  progress("allocating " + human_bytes(run.need));
  const auto a0 = std::chrono::steady_clock::now();
  run.problem->allocate();
  DeviceBuffer ws(run.workspace);
  run.allocate_ms = ms_since(a0);
  const LaunchContext ctx = gpu_.context(ws.get());
  run.ctx = &ctx;
  std::optional<PointDump> dump;
  if (!opts_.dump_dir.empty()) dump.emplace(opts_.dump_dir, run.c, run.p, opts_.dump_failures_only);
  run.dump = dump ? &*dump : nullptr;

  verify(run);
  check_repeat(run);
  check_footprint(run);
  if (dump) dump_dirs_.insert(dump_dirs_.end(), dump->dirs().begin(), dump->dirs().end());
  if (opts_.profile)
    profile_variants(run);
  else if (opts_.timed)
    time_variants(run);
  run.ctx = nullptr;
  run.dump = nullptr;
}

// Verify: fresh inputs per trial, every variant against the same reference.
void Runner::verify(PointRun& run) {
  const int trials = std::max(1, run.p.verify.trials);
  run.rule = default_bound_rule(run.problem->output_tensor().dtype);
  run.rule.k_max *= run.p.verify.bound_factor;
  run.rule.k_l2 *= run.p.verify.bound_factor;
  if (run.p.verify.bound_floor) run.rule.min_floor = *run.p.verify.bound_floor;
  for (int t = 0; t < trials; ++t) verify_trial(run, t, t + 1 == trials);
  variant_.clear();
}

// One trial: inputs from the trial's seed, then every runnable variant launched on them and
// judged against the reference; the last trial's checked rows and reference are kept.
void Runner::verify_trial(PointRun& run, int t, bool last) {
  const uint64_t seed = opts_.seed.value_or(run.p.verify.seed) + static_cast<uint64_t>(t);
  generate_inputs(run, t, seed);
  Problem& problem = *run.problem;
  Trial trial{t, seed, sample_rows(problem.output_rows(), run.p.verify.max_rows, seed, problem.must_check_rows())};
  // The fp64 reference runs on the host while the variants run on the device; each
  // variant's output is read back as it finishes and judged once the reference is there.
  // A dump writes each variant's output with the reference beside it, so it waits first.
  // The faithful reference, where the op has one, runs in the same task and sets the trial's
  // bound. Both are computed for each rounding path the runnable variants follow (one, but for
  // mha's two steps).
  std::set<std::string> paths;
  for (size_t i : run.runnable) paths.insert(problem.rounding_path(run.rows[i].variant));
  if (paths.empty()) paths.insert("");
  trial.pending = std::async(std::launch::async, [&problem, &trial, &rule = run.rule, paths] {
    const auto r0 = std::chrono::steady_clock::now();
    for (const std::string& path : paths) {
      const ref::Matrix& m = trial.wants[path] = problem.reference(trial.check_rows, path);
      if (problem.has_faithful()) trial.bounds[path] = problem.faithful_bound(m, trial.check_rows, rule, path);
    }
    trial.reference_own_ms = ms_since(r0);
  });
  if (run.dump) trial.wait();
  for (size_t i : run.runnable) verify_launch(run, trial, i);
  judge_outputs(run, trial);
  if (last) {
    run.last_rows = trial.check_rows;
    run.last_wants = std::move(trial.wants);
    run.last_bounds = trial.bounds;
  }
}

// The trial's inputs, drawn from its seed, and the kernels that built them (setup checks)
// as rows of their own, checked bit for bit.
void Runner::generate_inputs(PointRun& run, int t, uint64_t seed) {
  progress("trial " + std::to_string(t + 1) + ": inputs");
  auto t0 = std::chrono::steady_clock::now();
  mark(run.c, run.p, kInputsMarker);
  run.problem->generate(seed, *run.ctx);
  run.inputs_ms += ms_since(t0);
  for (const SetupCheck& s : run.problem->setup_checks()) {
    auto row = std::find_if(run.setup_rows.begin(), run.setup_rows.end(),
                            [&](const ResultRow& x) { return x.variant == s.kernel + " (setup)"; });
    if (row == run.setup_rows.end()) {
      ResultRow r = run.base;
      r.variant = s.kernel + " (setup)";
      r.reason = "writes this point's inputs; checked bit for bit";
      run.setup_rows.push_back(r);
      row = run.setup_rows.end() - 1;
    }
    if (row->cmp)
      row->cmp->merge(s.cmp);
    else
      row->cmp = s.cmp;
    row->trials = t + 1;
    row->status = row->cmp->mismatches == 0 && row->cmp->elements_checked > 0 ? Status::verified : Status::failed;
  }
}

// One variant's launch in a trial, on a poisoned output, read back to be judged with the
// others once the reference is there. A launch that fails marks its row; the others still
// run, unless the device is left unusable.
void Runner::verify_launch(PointRun& run, Trial& trial, size_t i) {
  ResultRow& r = run.rows[i];
  if (r.status == Status::error) return;
  progress("trial " + std::to_string(trial.t + 1) + ": " + r.variant);
  variant_ = r.variant;
  const auto v0 = std::chrono::steady_clock::now();
  try {
    run.problem->poison_output(gpu_.stream());
    mark(run.c, run.p, r.variant);
    run.problem->launch(r.variant, *run.ctx);
    gpu_.synchronize();
  } catch (const CudaError& e) {
    r.status = Status::error;
    r.reason = e.what();
    // A sticky error (an illegal address) leaves the context unusable: stop here, keep what we have.
    // The variants read back before it are judged first.
    if (cudaDeviceSynchronize() != cudaSuccess) {
      judge_outputs(run, trial);
      for (auto& x : run.rows) emit(x);
      throw;
    }
    cudaGetLastError();
    return;
  } catch (const VariantError& e) {  // a Python launch raised: its row's error, the device is fine
    r.status = Status::error;
    r.reason = e.what();
    return;
  } catch (const std::exception& e) {
    // A launcher refusing params its supports() let through: this variant's bug,
    // reported on its row; the others still run.
    r.status = Status::error;
    r.reason = std::string("the launcher refused the point: ") + e.what();
    return;
  }
  trial.outputs.emplace_back(i, run.problem->read_back(trial.check_rows));
  r.verify_time.check_ms += ms_since(v0);
  if (run.dump) {
    const ref::Matrix& want = trial.reference(*run.problem, r.variant);
    const Comparison cmp = run.problem->judge(trial.outputs.back().second, trial.check_rows, want, r.tol,
                                              bound_of(trial.bounds, *run.problem, r.variant));
    run.dump->add(*run.problem, trial.seed, trial.check_rows, want, r.variant, cmp, r.tol, r.command);
  }
}

// The outputs read back so far, judged against the reference (waited for here).
void Runner::judge_outputs(PointRun& run, Trial& trial) {
  progress("trial " + std::to_string(trial.t + 1) + ": waiting for the reference");
  const auto w0 = std::chrono::steady_clock::now();
  trial.wait();
  run.reference_wait_ms += ms_since(w0);
  run.reference_ms += trial.reference_own_ms;
  for (const auto& [i, output] : trial.outputs) {
    ResultRow& r = run.rows[i];
    const Comparison cmp =
        run.problem->judge(output, trial.check_rows, trial.reference(*run.problem, r.variant), r.tol,
                           bound_of(trial.bounds, *run.problem, r.variant));
    if (r.cmp)
      r.cmp->merge(cmp);
    else
      r.cmp = cmp;
    r.trials = trial.t + 1;
    r.status = r.cmp->passed() ? Status::verified : Status::failed;
    if (r.cmp->worst_row >= 0) r.worst = to_string(run.problem->coord(r.cmp->worst_row, r.cmp->worst_col));
  }
  trial.outputs.clear();
}

// [verify] repeat: the last trial's inputs again, and every run's whole output bit for bit
// the first's. A race or an unordered floating-point reduction shows as a spread here even
// where every run is within the bound.
void Runner::check_repeat(PointRun& run) {
  const CasePoint& p = run.p;
  if (p.verify.repeat > 1)
    for (size_t i : run.runnable) {
      ResultRow& r = run.rows[i];
      if (r.status != Status::verified) continue;
      variant_ = r.variant;
      std::vector<float> first;
      int64_t differ = 0;
      double spread = 0;
      for (int n = 0; n < p.verify.repeat; ++n) {
        progress("repeat " + std::to_string(n + 1) + "/" + std::to_string(p.verify.repeat) + ": " + r.variant);
        run.problem->poison_output(gpu_.stream());
        mark(run.c, p, r.variant);
        run.problem->launch(r.variant, *run.ctx);
        gpu_.synchronize();
        std::vector<float> out = run.problem->download_output();
        if (n == 0) {
          first = std::move(out);
          continue;
        }
        int64_t here = 0;
        for (size_t e = 0; e < out.size(); ++e)
          if (std::memcmp(&out[e], &first[e], sizeof(float)) != 0) {
            ++here;
            spread = std::max(spread, std::fabs(static_cast<double>(out[e]) - first[e]));
          }
        differ = std::max(differ, here);
      }
      const bool promised = std::find(run.nondeterministic.begin(), run.nondeterministic.end(), r.variant) ==
                            run.nondeterministic.end();
      if (differ > 0 && !promised) {
        // Declared nondeterministic: the spread is the finding, reported beside the verdict.
        if (r.cmp)
          r.cmp->note += (r.cmp->note.empty() ? "" : "; ") + std::string("declared nondeterministic: ") +
                       std::to_string(differ) + " of " + std::to_string(first.size()) + " output elements differ over " +
                       std::to_string(p.verify.repeat) + " runs (largest difference " + fmt_sci(spread) + ")";
      } else if (differ > 0) {
        r.status = Status::failed;
        r.reason = "not deterministic: " + std::to_string(differ) + " of " + std::to_string(first.size()) +
                   " output elements differ between runs on the same inputs (" + std::to_string(p.verify.repeat) +
                   " runs, largest difference " + fmt_sci(spread) + ")";
      } else if (r.cmp) {
        r.cmp->note += (r.cmp->note.empty() ? "" : "; ") + std::string("bit for bit alike over ") +
                       std::to_string(p.verify.repeat) + " runs";
      }
    }
  variant_.clear();
}

// Each variant's kernels as launched on this point, from a capture of its stages (each
// stage's first run): nothing is executed. So the output, poisoned before, must still be
// all NaN after it: an element written meanwhile was written by work the variant launched
// on a stream of its own, which the timing events on attnbench's stream would not see.
void Runner::check_footprint(PointRun& run) {
  Problem* problem = run.problem.get();
  for (size_t i : run.runnable) {
    ResultRow& r = run.rows[i];
    r.tensor_bytes = problem->device_bytes();
    r.workspace_bytes = problem->workspace(r.variant);
    if (r.status == Status::error) continue;
    const std::vector<Stage> stages = problem->stages(r.variant, *run.ctx);
    // NaN everywhere, whatever the op's own poison is: a cache op's restores the cache, whose
    // finite values would all count as written (run 260 failed every cache op so).
    problem->Problem::poison_output(gpu_.stream());
    gpu_.synchronize();
    variant_ = r.variant;
    r.footprint = capture_footprint(gpu_.stream(), gpu_.info().caps.sm_count, [&] {
      for (const Stage& st : stages)
        if (st.runs > 0) st.run(0);
    });
    check_cuda(cudaDeviceSynchronize(), "after capturing a variant's launch");
    if (!r.footprint->error.empty()) continue;  // nothing to conclude from a launch that cannot be captured
    const int64_t written = problem->output_tensor().count - problem->read_back({}).nonfinite;
    if (written > 0 && r.status == Status::verified) {
      r.status = Status::failed;
      r.reason = "launches work off the stream it is given: while its launch was only being captured on that "
                 "stream, " + std::to_string(written) + " output elements were written, so attnbench's events "
                 "would time nothing (docs/measuring.md, What a variant may not do)";
    }
  }
  variant_.clear();
}

// The output of a launch after verification: poisoned before it, it must verify again,
// so a timed or profiled launch that skips work (a cached result, work done only while
// being checked) fails instead of yielding a speed or a profile.
void Runner::check_again(PointRun& run, ResultRow& r, const std::string& which) {
  gpu_.synchronize();
  const Comparison after =
      run.problem->check(run.last_rows, run.last_wants.at(run.problem->rounding_path(r.variant)), r.tol,
                         bound_of(run.last_bounds, *run.problem, r.variant));
  if (after.passed() || r.status != Status::verified) return;
  r.status = Status::failed;
  r.reason = "verified, but the output of its " + which + " is wrong: " +
             (after.within_bound() ? std::to_string(after.mismatches) + " of " +
                                         std::to_string(after.elements_checked) + " checked elements off, "
                                   : "error " + fmt_margin(after.margin) + " of its bound, ") +
             std::to_string(after.nonfinite) + " NaN/Inf" + (after.also_wrong.empty() ? "" : ", " + after.also_wrong);
}

// --profile: each verified variant once inside its NVTX ranges, from a poisoned output
// that must verify again.
void Runner::profile_variants(PointRun& run) {
  for (size_t i : run.runnable) {
    ResultRow& r = run.rows[i];
    if (r.status != Status::verified) continue;  // a profile of a wrong answer explains nothing
    gpu_.reset_persisting_l2();
    variant_ = r.variant;
    progress("profiling " + r.variant);
    const std::vector<std::string> ranges = nvtx_ranges(run.c.name, run.p.label, r.variant);
    profile_stages(gpu_, run.problem->stages(r.variant, *run.ctx), ranges,
                   [&] { run.problem->poison_output(gpu_.stream()); });
    r.profiled = ncu_nvtx_include(ranges);
    r.timing_note = run.problem->profile_note(r.variant);  // the row's note after its ranges
    check_again(run, r, "profiled launch");
  }
}

// `run`: the verified variants (and the baseline) timed in every mode asked for, over
// --interleave's rounds, then their rates and speedups.
void Runner::time_variants(PointRun& run) {
  const CasePoint& p = run.p;
  BenchSpec spec = p.bench;
  if (opts_.mode) spec.mode = *opts_.mode;
  spec.min_clock = opts_.min_clock;
  std::vector<TimingMode> modes = {spec.mode};
  if (opts_.all_modes) modes = {TimingMode::cold, TimingMode::hot, TimingMode::graph, TimingMode::graph_hot};
  const Ceilings& ceil = gpu_.ceilings();
  // Graph mode's cold launches: enough copies of the point's tensors that together they
  // are over twice the L2 (none beyond the point's own when it is that large already).
  Rotation rotation;
  if (std::find(modes.begin(), modes.end(), TimingMode::graph) != modes.end()) {
    const double bytes = std::max<double>(1, static_cast<double>(run.problem->device_bytes()));
    const int want = static_cast<int>(std::min(1000.0, std::ceil(2.0 * gpu_.info().caps.l2_bytes / bytes)));
    rotation.copies = run.problem->make_copies(std::max(1, want), gpu_.stream());
    rotation.use = [&run](int i) { run.problem->use_copy(i); };
  }
  // A wrong answer's speed means nothing, except the baseline's, which the speedups need.
  std::vector<size_t> timed;
  for (size_t i : run.runnable)
    if ((run.rows[i].status == Status::verified || run.rows[i].baseline) && run.rows[i].status != Status::error)
      timed.push_back(i);
  // --interleave: the sampling budget cut into rounds, the variants in a seeded random
  // order each round (as Google Benchmark's random interleaving), every round's samples
  // merged, so that a drift of clock or heat falls on all variants alike.
  const int rounds = std::max(1, opts_.interleave);
  BenchSpec round_spec = spec;
  round_spec.min_time_ms = spec.min_time_ms / rounds;
  round_spec.max_time_ms = spec.max_time_ms / rounds;
  SplitMix order_rng(opts_.seed.value_or(p.verify.seed) ^ 0x1a7e41ea5eull);
  for (int round = 0; round < rounds; ++round) {
    std::vector<size_t> order = timed;
    if (rounds > 1)
      for (size_t k = order.size(); k > 1; --k) std::swap(order[k - 1], order[order_rng.bits() % k]);
    for (size_t i : order) {
      ResultRow& r = run.rows[i];
      if (r.status == Status::error) continue;  // raised in an earlier round
      try {
        time_variant(run, r, modes, round_spec, round, rounds, rotation);
      } catch (const VariantError& e) {  // a Python launch that raised only now: its row, not the run
        r.status = Status::error;
        r.reason = e.what();
        r.timing.reset();
        r.other_modes.clear();
      }
    }
  }
  rate_variants(run, timed, rounds, ceil);
  run.problem->drop_copies();
}

// One variant in one round, in each mode: the first round's timings become the row's, a
// later round's samples merge into them. The last timed launch of each must verify again.
void Runner::time_variant(PointRun& run, ResultRow& r, const std::vector<TimingMode>& modes, BenchSpec round_spec,
                          int round, int rounds, const Rotation& rotation) {
  gpu_.reset_persisting_l2();
  const std::vector<std::string> nvtx = nvtx_ranges(run.c.name, run.p.label, r.variant);
  const std::vector<Stage> stages = run.problem->stages(r.variant, *run.ctx);
  variant_ = r.variant;
  // The first mode is the row's: its median makes the rates, the floor and the speedup.
  size_t other = 0;
  for (TimingMode m : modes) {
    // Later stages are timed run by run, which a graph replay cannot do.
    if (stages.size() > 1 && (m == TimingMode::graph || m == TimingMode::graph_hot)) continue;
    round_spec.mode = m;
    progress("timing " + r.variant + " (" + mode_name(m) + (rounds > 1 ? ", round " + std::to_string(round + 1) + "/" + std::to_string(rounds) : "") + ")");
    std::vector<StageTiming> stage_times;  // a multi-stage op's stages: the first round's
    const bool first_mode = round == 0 ? !r.timing : r.timing->mode == m;
    // The last timed launch starts from a poisoned output and must verify.
    Timing t = time_stages(gpu_, stages, round_spec, nvtx, first_mode && round == 0 ? &stage_times : nullptr,
                           [&] { run.problem->poison_output(gpu_.stream()); }, &rotation);
    check_again(run, r, std::string("last timed launch (") + mode_name(m) + ")");
    if (round > 0) {
      merge_timing(first_mode ? *r.timing : r.other_modes[other++], std::move(t));
    } else if (r.timing) {
      r.other_modes.push_back(std::move(t));
    } else {
      r.timing = std::move(t);
      r.stages = std::move(stage_times);
    }
  }
}

// The timed rows' notes, rates and floors (a median below the floor fails its row), and
// their speedups over the baseline.
void Runner::rate_variants(PointRun& run, const std::vector<size_t>& timed, int rounds, const Ceilings& ceil) {
  std::vector<ResultRow>& rows = run.rows;
  for (size_t i : timed)
    if (rows[i].timing) {
      rows[i].timing_note = run.problem->timing_note(rows[i].variant, *run.ctx);
      const std::string host = host_overhead_note(run.problem->host_overhead_us(rows[i].variant), *rows[i].timing);
      if (!host.empty()) rows[i].timing_note += (rows[i].timing_note.empty() ? "" : "; ") + host;
    }
  std::optional<size_t> base;
  for (size_t i : timed) {
    if (!rows[i].timing) continue;  // a multi-stage op asked for a graph mode only
    derive_rates(rows[i], run.p.dtype, ceil);
    rows[i].rounds = rounds;
    const std::string impossible = impossible_timing(rows[i], static_cast<double>(gpu_.info().caps.l2_bytes));
    if (!impossible.empty() && rows[i].status == Status::verified) {
      rows[i].status = Status::failed;
      rows[i].reason = impossible;
    }
    if (rows[i].baseline) base = i;
  }
  // Speedup over the baseline, with a 95% bootstrap interval when both have the samples.
  if (base)
    for (size_t i : timed) {
      ResultRow& r = rows[i];
      if (!r.timing) continue;
      const Timing& b = *rows[*base].timing;
      r.speedup = b.ms.median / r.timing->ms.median;
      if (i == *base || b.samples.size() < kMinBootstrapSamples || r.timing->samples.size() < kMinBootstrapSamples)
        continue;
      const Interval ratio = median_ratio_interval(b.samples, r.timing->samples, 0.95);  // row over baseline
      r.speedup_ci = Interval{1 / ratio.hi, 1 / ratio.lo};
    }
}

// The point's buffers freed, its wall times on every row, the rows emitted.
void Runner::release_and_emit(PointRun& run) {
  // Freeing a point's buffers is part of its cost (device memory is returned synchronously).
  const auto r0 = std::chrono::steady_clock::now();
  run.problem.reset();
  const double release_ms = ms_since(r0);
  const double point_ms = ms_since(run.start);
  for (auto* group : {&run.setup_rows, &run.rows})
    for (auto& r : *group) {
      r.verify_time.release_ms = release_ms;
      r.verify_time.inputs_ms = run.inputs_ms;
      r.verify_time.reference_ms = run.reference_ms;
      r.verify_time.reference_wait_ms = run.reference_wait_ms;
      r.verify_time.allocate_ms = run.allocate_ms;
      r.verify_time.point_ms = point_ms;
    }
  // Setup rows first: they wrote the inputs the variants read.
  for (auto& r : run.setup_rows) emit(r);
  for (auto& r : run.rows) emit(r);
}

}  // namespace attnbench
