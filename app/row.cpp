#include "app/row.hpp"

#include <algorithm>

#include "app/device.hpp"
#include "app/text.hpp"

namespace attnbench {

const char* status_name(Status s) {
  switch (s) {
    case Status::verified: return "verified";
    case Status::failed: return "FAILED";
    case Status::skipped: return "skipped";
    case Status::error: return "ERROR";
    case Status::peer: return "peer";
  }
  return "?";
}

std::string impossible_timing(const ResultRow& r, double l2_bytes) {
  if (!r.timing || r.timing->ms.median <= 0) return "";
  const bool cold = r.timing->mode == TimingMode::cold || r.timing->mode == TimingMode::graph;
  const bool memory = cold && r.work.bytes > 2 * l2_bytes;
  const double floor = std::max(r.floor_compute_ms, memory ? r.floor_memory_ms : 0.0);
  if (floor <= 0) return "";
  // The ceilings are medians of their own runs, measured once per card (its clock then may
  // not be its clock now): 10% above them, or three times the row's noise, is what a real
  // kernel might reach; past that, nothing real does. What this catches reads far past it.
  const double slack = std::max(0.10, 3 * r.timing->ms.noise);
  const double pct = 100 * floor / r.timing->ms.median;
  if (pct <= 100 * (1 + slack)) return "";
  return "IMPOSSIBLE: median " + fmt_fixed(r.timing->ms.median, 4) + " ms is " + fmt_fixed(pct, 0) +
         "% of the card's " + (floor == r.floor_compute_ms ? "compute" : "memory") + " floor (" +
         fmt_fixed(floor, 4) + " ms): the timed events did not see the work (launched off the stream given, or "
         "skipped)";
}

void derive_rates(ResultRow& r, DType dtype, const Ceilings& c) {
  if (!r.timing || r.timing->ms.median <= 0) return;
  const double ms = r.timing->ms.median;
  r.tflops = r.work.flops / (ms * 1e9);
  r.gbps = r.work.bytes / (ms * 1e6);
  // fp8 e4m3: cuBLASLt's e4m3 GEMM as measured (app/device.cpp). Where it was not (before sm_89,
  // or a report of an older build), the bf16 one doubled, as the tensor cores' dense peak is
  // (1979 against 989 TFLOP/s on an H100 SXM).
  const double fp8_ceiling = c.fp8_tflops > 0 ? c.fp8_tflops : 2 * c.bf16_tflops;
  const double tflops_ceiling = dtype == DType::fp32       ? c.fp32_tflops
                                : dtype == DType::fp16     ? c.fp16_tflops
                                : dtype == DType::fp8_e4m3 ? fp8_ceiling
                                                           : c.bf16_tflops;
  const double gbps_ceiling = r.work.bandwidth == Bandwidth::read ? c.read_gbps : c.copy_gbps;
  r.floor_compute_ms = tflops_ceiling > 0 ? r.work.flops / (tflops_ceiling * 1e9) : 0;
  r.floor_memory_ms = gbps_ceiling > 0 ? r.work.bytes / (gbps_ceiling * 1e6) : 0;
  r.floor_ms = std::max(r.floor_compute_ms, r.floor_memory_ms);
  r.bound = r.floor_compute_ms > r.floor_memory_ms ? "compute" : "memory";
  r.pct_of_floor = r.floor_ms > 0 ? 100.0 * r.floor_ms / ms : 0;
  for (StageTiming& st : r.stages) st.floor_ms = c.read_gbps > 0 ? st.bytes / (c.read_gbps * 1e6) : 0;
}

}  // namespace attnbench
