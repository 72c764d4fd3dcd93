// write_reports DIR: json reports of every shape `run` and `verify` write, through the same
// write_report, for tests/check_schema.py to hold against docs/report.schema.json. Reports
// from a GPU cannot be made on a machine without one; these carry every key and every
// optional part (--mode all, clocks, stages, errors, skips, an unfinished run, a verify
// run, --no-samples, a card without a datasheet), so a key the report gains without the
// schema fails that check.
#include <cmath>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "app/clocks.hpp"
#include "app/report.hpp"
#include "app/stats.hpp"

using namespace attnbench;

namespace {

Ceilings h200_ceilings() {
  Ceilings c;
  c.copy_gbps = 4100;
  c.read_gbps = 4400;
  c.write_gbps = 4200;
  c.fp32_tflops = 51;
  c.tf32_tflops = 380;
  c.fp16_tflops = 720;
  c.bf16_tflops = 730;
  c.mma_sync_bf16_tflops = 610;
  c.wgmma_bf16_tflops = 880;
  return c;
}

DeviceInfo card(const std::string& name, bool nvml) {
  DeviceInfo d;
  d.name = name;
  d.caps.sm_count = 132;
  d.caps.cc_major = 9;
  d.caps.l2_bytes = 50 << 20;
  d.total_memory = std::size_t(141) << 30;
  d.driver_version = 13000;
  d.runtime_version = 13000;
  d.pci_bus_id = "00000000:19:00.0";
  d.sm_clock_max_mhz = nvml ? 1980 : 0;
  d.nvml = nvml;
  return d;
}

// A timing as time_launch leaves it: samples in order, their statistics, and with NVML
// a clock reading per sample (one failed: 0).
Timing timing(TimingMode mode, double ms, bool nvml, int launches = 1) {
  Timing t;
  t.mode = mode;
  for (int i = 0; i < 40; ++i) t.samples.push_back(ms * (1 + 0.003 * std::sin(i)));
  t.ms = summarize(t.samples);
  t.elapsed_ms = 120;
  t.launches_per_sample = launches;
  if (nvml) {
    t.samples_mhz.assign(t.samples.size(), 1980);
    t.samples_mhz[7] = 1500;
    t.samples_mhz[9] = 0;
    t.clock = summarize_clocks(t.samples_mhz, 1980);
  }
  return t;
}

ResultRow checked_row(const std::string& variant, Status status) {
  ResultRow r;
  r.case_name = "attention-causal";
  r.point = "seq=2048";
  r.op = "attention";
  r.dtype = "bf16";
  r.variant = variant;
  r.status = status;
  r.command = "build/bin/attnbench run cases/attention/causal.toml --set shape.seq=2048 -k " + variant;
  r.cmp = Comparison{};
  r.cmp->rows_checked = 512;
  r.cmp->rows_total = 65536;
  r.cmp->elements_checked = 65536;
  r.cmp->max_abs = 1.2e-3;
  r.cmp->max_rel = 4e-3;
  r.cmp->rel_l2 = 2e-4;
  r.cmp->worst_row = 17;
  r.cmp->worst_got = 0.51;
  r.cmp->worst_ref = 0.5093;
  r.worst = "(0, 3, 17, 64)";
  r.tol = {8e-3, 1.6e-2};
  r.trials = 2;
  r.verify_time = {12, 30, 450, 100, 3, 700, 8};
  r.work = {2.2e11, 5e7, Bandwidth::copy};
  return r;
}

std::vector<ResultRow> run_rows(bool nvml, bool all_modes) {
  std::vector<ResultRow> rows;
  ResultRow base = checked_row("naive", Status::verified);
  base.baseline = true;
  base.timing = timing(TimingMode::cold, 2.0, nvml);
  ResultRow fast = checked_row("flash_mma", Status::verified);
  fast.timing = timing(TimingMode::cold, 0.4, nvml);
  if (all_modes) {
    fast.other_modes = {timing(TimingMode::hot, 0.35, nvml), timing(TimingMode::graph, 0.38, nvml, 3),
                        timing(TimingMode::graph_hot, 0.33, nvml, 3)};
    fast.other_modes[1].copies = 12;
    base.other_modes = {timing(TimingMode::hot, 1.9, nvml)};
    // --interleave 3 with --min-clock: rounds, the speedup's interval, dropped samples.
    fast.rounds = base.rounds = 3;
    fast.speedup_ci = Interval{4.8, 5.2};
    base.timing->dropped = 4;
    base.timing->throttle_reasons = 0x4;
    base.timing->clock_gave_up = true;
  }
  // The kernels the variant launched, one of them a library's whose attributes were not read.
  Footprint f;
  f.sm_count = 132;
  KernelFootprint k;
  k.name = "flash_mma_kernel";
  k.blocks = 512;
  k.threads = 256;
  k.registers = 168;
  k.static_smem = 0;
  k.dynamic_smem = 96 * 1024;
  k.local_bytes = 0;
  k.blocks_per_sm = 2;
  KernelFootprint lib;
  lib.name = "sm90_xmma_gemm";
  lib.blocks = 132;
  lib.threads = 384;
  f.kernels = {k, lib};
  fast.footprint = f;
  fast.tensor_bytes = 1 << 26;
  fast.workspace_bytes = 0;
  Footprint none;
  none.sm_count = 132;
  none.error = "its launch cannot be captured: operation not permitted when stream is capturing";
  base.footprint = none;
  base.tensor_bytes = 1 << 26;
  base.workspace_bytes = 1 << 28;
  // A kernel that got wrong answers, one unbounded (JSON null).
  ResultRow wrong = checked_row("broken", Status::failed);
  wrong.cmp->mismatches = 12;
  wrong.cmp->nonfinite = 3;
  wrong.cmp->max_abs = INFINITY;
  wrong.cmp->rel_l2 = NAN;
  wrong.cmp->worst_got = NAN;
  // Verified, timed, then caught wrong on its last timed launch: FAILED with a timing.
  ResultRow cheat = checked_row("cheat", Status::failed);
  cheat.reason = "verified, but the output of its last timed launch (cold) is wrong";
  cheat.timing = timing(TimingMode::cold, 0.1, nvml);
  ResultRow skipped = checked_row("wgmma", Status::skipped);
  skipped.cmp.reset();
  skipped.reason = "needs sm_90a";
  ResultRow error = checked_row("trap", Status::error);
  error.cmp.reset();
  error.reason = "an illegal memory access was encountered";
  // An op of several stages: the first stage's timing is the row's.
  ResultRow pipeline = checked_row("flash_mma+split_kv", Status::verified);
  pipeline.case_name = "pipeline";
  pipeline.op = "pipeline";
  pipeline.timing = timing(TimingMode::cold, 1.1, nvml);
  pipeline.stages = {{"TTFT", "cache append + prefill attention", summarize(pipeline.timing->samples), 1.2, 40},
                     {"TBT", "cache append + decode", summarize({0.05, 0.051, 0.052}), 0.052, 96}};
  // A model's decode step also names the bytes it reads (its floor) and the tokens it makes.
  pipeline.stages.back().bytes = 1.2e8;
  pipeline.stages.back().tokens = 8;
  for (ResultRow* r : {&base, &fast, &cheat, &pipeline}) derive_rates(*r, DType::bf16, h200_ceilings());
  for (ResultRow* r : {&base, &fast, &cheat, &pipeline}) r->speedup = base.timing->ms.median / r->timing->ms.median;
  return {base, fast, wrong, cheat, skipped, error, pipeline};
}

RunMeta meta(const std::string& mode, const std::string& card_name, bool nvml) {
  RunMeta m;
  m.version = "0.1.0";
  m.command_line = "build/bin/attnbench " + mode + " cases/attention -o report.json";
  m.date = "2026-12-01T00:00:00Z";
  m.mode = mode;
  m.load_ms = 4.5;
  m.elapsed_ms = 61000;
  m.device = card(card_name, nvml);
  if (mode == "run") m.ceilings = h200_ceilings();
  return m;
}

bool write(const std::string& path, const RunMeta& m, const std::vector<ResultRow>& rows) {
  std::ofstream out(path);
  write_report(out, Format::json, m, rows);
  out.close();
  if (!out) std::cerr << "write_reports: cannot write " << path << "\n";
  return static_cast<bool>(out);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: write_reports DIR\n";
    return 2;
  }
  const std::string dir = argv[1];
  bool ok = true;
  // --mode all on an H200 with NVML: every key there is.
  RunMeta all = meta("run", "NVIDIA H200", true);
  all.timing_mode = "all";
  ok &= write(dir + "/run-all-modes.json", all, run_rows(true, true));
  // One mode, a card without a datasheet and without NVML, --no-samples.
  RunMeta plain = meta("run", "NVIDIA GeForce RTX 4090", false);
  plain.keep_samples = false;
  ok &= write(dir + "/run-no-samples.json", plain, run_rows(false, false));
  // A run stopped by a fault: what -o holds then.
  RunMeta stopped = meta("run", "NVIDIA H100 80GB HBM3", true);
  stopped.complete = false;
  stopped.timing_mode = "hot";
  std::vector<ResultRow> first = run_rows(true, false);
  first.resize(2);
  // The fault's variant, and one after it that never ran: skipped, with no reason.
  ResultRow fault = checked_row("test_trap", Status::error);
  fault.cmp.reset();
  fault.reason = "an illegal memory access was encountered";
  ResultRow never = checked_row("warp_online", Status::skipped);
  never.cmp.reset();
  first.push_back(fault);
  first.push_back(never);
  ok &= write(dir + "/run-unfinished.json", stopped, first);
  // verify: no ceilings, no timings.
  std::vector<ResultRow> checked = run_rows(true, false);
  for (ResultRow& r : checked) {
    r.timing.reset();
    r.other_modes.clear();
    r.stages.clear();
    r.speedup.reset();
    r.tflops = r.gbps = r.floor_ms = r.floor_compute_ms = r.floor_memory_ms = r.pct_of_floor = 0;
    r.bound.clear();
  }
  ok &= write(dir + "/verify.json", meta("verify", "NVIDIA H200", true), checked);
  // run --profile: verified rows, each with the NVTX ranges of its one launch, no timing, no ceilings.
  RunMeta profile = meta("run", "NVIDIA H100 80GB HBM3", true);
  profile.timing_mode = "profile";
  profile.keep_samples = false;
  profile.ceilings.reset();
  std::vector<ResultRow> profiled = checked;
  for (ResultRow& r : profiled)
    if (r.status == Status::verified) r.profiled = r.case_name + "/" + r.point + "/" + r.variant + "/";
  ok &= write(dir + "/run-profile.json", profile, profiled);
  return ok ? 0 : 1;
}
