// The score options every head-based op shares (attention, decode, paged and the ops built on
// them): one struct from the case to the kernels' arguments, so that a new option is a field
// here, its derivation in score_args, its math in mask.cuh, and its reading, reference and ABI
// copies (app/ops/heads.*, reference/common.hpp, the plugin ABI): docs/design.md, "adding a
// score option". Host and device code both include this; it holds no device code.
#pragma once
#include <cmath>
#include <cstdint>
#include <string>

#include "kernels/common/host_device.hpp"
#include "kernels/common/kernels.hpp"

namespace attnbench {

// A score s = scale · q·k becomes softcap · tanh(s / softcap) when softcap > 0; then ALiBi adds
// -alibi_slopes[h] · |query position - key position| when alibi; then the masks. With sinks,
// head h's softmax has one more logit, sink_logits[h] (in score units), that joins its max and
// its denominator but has no value (gpt-oss's attention sinks). The flags say what is on before
// the device arrays exist (supports() is asked before allocation).
struct ScoreParams {
  bool alibi = false;
  const float* alibi_slopes = nullptr;  // [heads], on the device; read only with alibi
  float softcap = 0;                    // 0 = none
  float scale = 0;                      // the softmax scale; 0 = 1/sqrt(head_dim) (finish_score)
  float scale_log2 = 0;                 // scale · log2(e) (times an fp8 descale): kernels use exp2
  bool sinks = false;
  const float* sink_logits = nullptr;   // [heads], on the device; read only with sinks
};

// Fills scale (when 0) and scale_log2; fp8 attention folds its descale_q and descale_k into
// the exp2 units (multiplied in this order: the rounding the kernels were measured with).
inline void finish_score(ScoreParams& s, int64_t head_dim, float descale_q = 1, float descale_k = 1) {
  if (s.scale == 0) s.scale = 1.0f / __builtin_sqrtf(static_cast<float>(head_dim));
  s.scale_log2 = s.scale * descale_q * descale_k * kLog2e;
}

// What a kernel reads of the options, in the units of the raw scores it computes: `unit` is
// what turns one into s (the scale, or scale · k_scale for an fp8 cache's codes). A kernel
// parameter struct holds it as `score`, where its flattened fields were (decode and paged kept
// every parameter offset; the tensor-core prefill's alibi_scale now follows it).
struct ScoreArgs {
  bool alibi;
  const float* slopes;  // [heads] ALiBi slopes
  float cap, inv_cap;   // soft-capping in raw score units (softcap / unit) and its inverse; 0, 0 = none
  const float* sinks;   // [heads] sink logits in score units (not raw: no unit), or null (plus_sink)
};
inline ScoreArgs score_args(const ScoreParams& s, float unit) {
  return {s.alibi, s.alibi_slopes, s.softcap > 0 ? s.softcap / unit : 0.f, s.softcap > 0 ? unit / s.softcap : 0.f,
          s.sinks ? s.sink_logits : nullptr};
}

// Why no kernel can take these options ("" = every kernel can); after finish_score.
inline std::string score_reason(const ScoreParams& s) {
  if (!(s.softcap >= 0) || !std::isfinite(s.softcap)) return "softcap must be a finite number >= 0";
  if (!(s.scale > 0) || !std::isfinite(s.scale)) return "scale must be a finite number > 0";
  return {};
}

// Why a rung that does not take every option refuses these ("" = it can run them): paged's v1
// and v2, vLLM's kernels as they were before sinks, leave attention sinks to paged_flash.
inline std::string score_unimplemented(const ScoreParams& s) {
  if (s.sinks) return "attention sinks: vLLM's v1/v2 as they were have none (paged_flash takes them)";
  return {};
}

// Whether the options ask for per-score work (the tensor-core rungs' masked path).
inline bool score_has_terms(const ScoreParams& s) { return s.alibi || s.softcap > 0; }

}  // namespace attnbench
