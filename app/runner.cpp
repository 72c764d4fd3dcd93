#include "app/runner.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <unistd.h>

#include "app/ops.hpp"

namespace attnbench {

std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) {
    b /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u ? "%.1f %s" : "%.0f %s", b, units[u]);
  return buf;
}

std::vector<std::string> select_variants(const std::vector<std::string>& all, const CasePoint& p,
                                         const std::vector<std::string>& cli_kernels, bool timed,
                                         const std::vector<std::string>& defaults) {
  auto in = [](const std::vector<std::string>& v, const std::string& x) {
    return std::find(v.begin(), v.end(), x) != v.end();
  };
  std::vector<std::string> out;
  for (const auto& name : all) {
    const std::vector<std::string>& chosen = p.kernels.empty() ? defaults : p.kernels;
    const bool wanted = !cli_kernels.empty() ? in(cli_kernels, name) : chosen.empty() || in(chosen, name);
    if (wanted || (timed && name == p.baseline)) out.push_back(name);
  }
  // A -k list naming none of this op's variants means the user is not asking about this op.
  if (!cli_kernels.empty() && std::none_of(out.begin(), out.end(), [&](const std::string& n) {
        return in(cli_kernels, n);
      }))
    out.clear();
  return out;
}

void Runner::emit(ResultRow r) {
  switch (r.status) {
    case Status::verified: ++tally_.passed; break;
    case Status::failed: ++tally_.failed; break;
    case Status::skipped: ++tally_.skipped; break;
    case Status::error: ++tally_.errors; break;
  }
  rows_.push_back(r);
  if (opts_.progress) std::fputs("\r\033[K", stderr);
  if (on_row_) on_row_(rows_.back());
}

void Runner::progress(const std::string& what) const {
  if (!opts_.progress) return;
  std::fprintf(stderr, "\r\033[K%s: %s", where_.c_str(), what.c_str());
  std::fflush(stderr);
}

void Runner::run_case(const Case& c) {
  for (size_t i = 0; i < c.points.size(); ++i) run_point(c, c.points[i], i);
}

void Runner::run_point(const Case& c, const CasePoint& p, size_t index) {
  where_ = c.name + (p.label.empty() ? "" : " [" + p.label + "]") +
           (c.points.size() > 1 ? " (" + std::to_string(index + 1) + "/" + std::to_string(c.points.size()) + ")" : "");
  ResultRow base;
  base.case_name = c.name;
  base.point = p.label;
  base.op = op_name(p.op);
  base.dtype = dtype_name(p.dtype);

  auto problem = make_problem(p);
  if (!problem) {
    if (opts_.kernels.empty()) {
      ResultRow r = base;
      r.variant = "-";
      r.reason = std::string("no kernels for op ") + op_name(p.op) + " yet";
      emit(r);
    }
    return;
  }
  const std::vector<VariantChoice> choices = problem->variants(gpu_.info().caps);
  std::vector<std::string> names;
  for (const auto& v : choices) names.push_back(v.name);
  const std::vector<std::string> selected =
      select_variants(names, p, opts_.kernels, opts_.timed, problem->default_variants(gpu_.info().caps));
  if (selected.empty()) return;

  // Rows are filled in table order; `runnable` indexes into them.
  std::vector<ResultRow> rows;
  std::vector<size_t> runnable;
  std::size_t workspace = 0;
  for (const auto& name : selected) {
    const auto& v = *std::find_if(choices.begin(), choices.end(), [&](const VariantChoice& x) { return x.name == name; });
    ResultRow r = base;
    r.variant = name;
    r.baseline = name == p.baseline;
    r.work = problem->work();
    r.tol = default_tolerance(p.dtype);
    if (p.verify.atol) r.tol.atol = *p.verify.atol;
    if (p.verify.rtol) r.tol.rtol = *p.verify.rtol;
    if (!v.skip.empty()) {
      r.status = Status::skipped;
      r.reason = v.skip;
    } else {
      runnable.push_back(rows.size());
      workspace = std::max(workspace, problem->workspace(name));
    }
    rows.push_back(r);
  }

  // Refuse before allocating: a failed cudaMalloc halfway through says less.
  const double need = static_cast<double>(problem->device_bytes() + workspace);
  const double free = static_cast<double>(gpu_.free_memory());
  if (!runnable.empty() && need > 0.95 * free) {
    for (size_t i : runnable) {
      rows[i].status = Status::error;
      rows[i].reason = "too large for the card: needs " + human_bytes(need) + " of device memory (" +
                       std::to_string(static_cast<uint64_t>(need)) + " bytes), " + human_bytes(free) + " free on " +
                       gpu_.info().name;
    }
    tally_.too_large = true;
    runnable.clear();
  }

  if (!runnable.empty()) {
    progress("allocating " + human_bytes(need));
    problem->allocate();
    DeviceBuffer ws(workspace);
    const LaunchContext ctx = gpu_.context(ws.get());
    const int trials = std::max(1, p.verify.trials);
    const uint64_t seed0 = opts_.seed.value_or(p.verify.seed);

    // Verify: fresh inputs per trial, every variant against the same reference.
    for (int t = 0; t < trials; ++t) {
      const uint64_t seed = seed0 + static_cast<uint64_t>(t);
      progress("trial " + std::to_string(t + 1) + ": inputs and reference");
      problem->generate(seed, ctx);
      const ref::Rows check_rows =
          sample_rows(problem->output_rows(), p.verify.max_rows, seed, problem->must_check_rows());
      const ref::Matrix want = problem->reference(check_rows);
      for (size_t i : runnable) {
        ResultRow& r = rows[i];
        if (r.status == Status::error) continue;
        progress("trial " + std::to_string(t + 1) + ": " + r.variant);
        try {
          problem->poison_output(gpu_.stream());
          problem->launch(r.variant, ctx);
          gpu_.synchronize();
        } catch (const CudaError& e) {
          r.status = Status::error;
          r.reason = e.what();
          // A sticky error (an illegal address) leaves the context unusable: stop here, keep what we have.
          if (cudaDeviceSynchronize() != cudaSuccess) {
            for (auto& x : rows) emit(x);
            throw;
          }
          cudaGetLastError();
          continue;
        }
        const Comparison cmp = problem->check(check_rows, want, r.tol);
        if (r.cmp)
          r.cmp->merge(cmp);
        else
          r.cmp = cmp;
        r.trials = t + 1;
        r.status = r.cmp->passed() ? Status::verified : Status::failed;
        if (r.cmp->worst_row >= 0) r.worst = to_string(problem->coord(r.cmp->worst_row, r.cmp->worst_col));
      }
    }

    if (opts_.timed) {
      BenchSpec spec = p.bench;
      if (opts_.mode) spec.mode = *opts_.mode;
      const Ceilings& ceil = gpu_.ceilings();
      std::optional<double> baseline_ms;
      for (size_t i : runnable) {
        ResultRow& r = rows[i];
        // A wrong answer's speed means nothing, except the baseline's, which the speedups need.
        if (r.status != Status::verified && !r.baseline) continue;
        if (r.status == Status::error) continue;
        progress("timing " + r.variant);
        r.pipeline = problem->time_steps(r.variant, gpu_, spec, ctx);
        r.timing = r.pipeline ? r.pipeline->ttft : time_launch(gpu_, [&] { problem->launch(r.variant, ctx); }, spec);
        derive_rates(r, p.dtype, ceil);
        if (r.baseline) baseline_ms = r.timing->ms.median;
      }
      if (baseline_ms)
        for (auto& r : rows)
          if (r.timing) r.speedup = *baseline_ms / r.timing->ms.median;
    }
  }
  for (auto& r : rows) emit(r);
}

}  // namespace attnbench
