// decode family: one new query token per sequence attends to its whole KV cache
// (the step that dominates generation; bound by memory bandwidth). Writing new tokens'
// K/V rows into the cache is cache_append's (kernels/cache_append).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/common/kernels.hpp"
#include "kernels/common/rope.hpp"
#include "kernels/common/score.hpp"

namespace attnbench {

// Sequence b attends to cache rows [0, context_lens[b]); its query sits at position
// context_lens[b] - 1, so ALiBi adds -alibi_slopes[h] * (context_lens[b] - 1 - j) to key j
// (the score options: kernels/common/score.hpp).
// Query head h reads kv head h / (heads / kv_heads).
struct DecodeParams {
  const void* q;                // [batch, heads, head_dim]
  const void* k_cache;          // [batch, max_context, kv_heads, head_dim]
  const void* v_cache;          // [batch, max_context, kv_heads, head_dim]
  void* o;                      // [batch, heads, head_dim]
  const int32_t* context_lens;  // [batch], on the device; every entry in [1, max_context]
  int64_t batch = 1, heads = 1, kv_heads = 1, head_dim = 64, max_context = 1;
  // The longest context_lens entry, known on the host: split counts are chosen from it
  // without reading the device array.
  int64_t longest_context = 1;
  // window > 0: the query sees only its last `window` keys, context_lens[b] - window to
  // context_lens[b] - 1 (itself included); kernels skip the rest.
  int64_t window = 0;
  ScoreParams score;
  // RoPE: the query is rotated at its position (context_lens[b] - 1) in the kernel; the cache
  // holds keys rotated when they were stored. The table covers positions [0, max context).
  RopeTable rope;
  DType dtype = DType::fp32;
  // The kernel may be launched to start while the kernel ahead of it runs (programmatic
  // dependent launch; the split kernels then wait for it before reading anything): a caller
  // whose kernel ahead is short and allows it (the pipeline's cache append) gains the launch.
  // Behind a GPT-2 step's QKV projection it measured 2-8% slower (bench notes, run 138).
  bool launch_early = false;
  // The step's new K and V rows, [batch, kv_heads, head_dim], which the decode kernel stores
  // into the cache at row context_lens[b] - 1 itself before it reads that row (the key turned
  // at that position with RoPE, as cache_append stores it): the pipeline's append folded into
  // the decode launch. Only for a variant decode_folds_append names; k_cache and v_cache must
  // then be writable. Null: the cache holds the row already.
  const void* k_new = nullptr;
  const void* v_new = nullptr;
};

inline void finish_decode_params(DecodeParams& p) { finish_score(p.score, p.head_dim); }

const std::vector<Variant<DecodeParams>>& decode_variants();

// Whether `variant` stores DecodeParams::k_new and v_new itself when it runs p (else the
// caller appends them first, with cache_append).
bool decode_folds_append(const std::string& variant, const DecodeParams& p);

}  // namespace attnbench
