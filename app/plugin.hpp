// Users' kernels as variants (docs/plugins.md): a .cu file written against
// kernels/plugin/include/attnbench/plugin.h is compiled with the toolkit's nvcc into a
// shared library (cached by content, compiler and flags), or a prebuilt .so is taken as it
// is; it is loaded with dlopen, and each variant it declares joins its op's table after
// attnbench's own. From there it is one more variant: verified, timed, dumped and compared
// like the built-in ones.
#pragma once
#include <deque>
#include <string>
#include <vector>

#include "app/errors.hpp"
#include "app/python_plugin.hpp"
#include "kernels/common/kernels.hpp"
#include "kernels/plugin/include/attnbench/plugin.h"

namespace attnbench {

struct LoadedPlugin {
  std::string file;                   // as given (absolute when it came from a case file)
  std::string library;                // the shared library loaded: the cache's, or the .so given
  std::vector<std::string> variants;  // "op/name"
};

// Compiles (unless cached) and loads every file, then adds their variants to the ops'
// tables; a file named twice loads once. Must run before any op's variant table is first
// used (the CLI calls it before loading cases). `device` picks the card to compile for;
// without one, the card --dry-run assumes (sm_90a). Throws InputError for a compile
// error (nvcc's messages already on stderr), a missing entry point, an ABI mismatch, an
// unknown op or a name that is taken.
void load_plugins(const std::vector<std::string>& files, int device);

const std::deque<LoadedPlugin>& loaded_plugins();

// Runs `command` through the shell with stderr joined to stdout; returns what it printed.
std::string run_capture(const std::string& command, int& exit_code);

// A copy of `text` that lives as long as the process: the names and notes variants point at.
const char* stable_text(const std::string& text);

// The nvcc target for compute capability major.minor: "90a" on Hopper (wgmma and
// setmaxnreg need it), else major and minor ("80", "89").
std::string plugin_arch(int cc_major, int cc_minor);

attnbench_device abi_device(const DeviceCaps& caps);

inline int32_t abi_dtype(DType t) { return static_cast<int32_t>(t); }

bool is_python_plugin(const std::string& file);

// A plugin variant as a Variant<Params> of its op: `to_abi` turns attnbench's params into
// the ABI's struct for each call. The plugin's library stays loaded for the process, so
// the pointers into it stay valid. A Python variant's failed launch is a VariantError with
// what Python raised (its row's ERROR), and its host overhead is measured
// (Variant::host_overhead_us).
template <class Params, class Abi>
Variant<Params> plugin_variant(const attnbench_variant& v, const char* file, Abi (*to_abi)(const Params&)) {
  const attnbench_variant* pv = &v;
  const std::string note = std::string(v.note ? v.note : "") + " [plugin " + file + "]";
  Variant<Params> out{v.name, stable_text(note), nullptr, nullptr};
  out.plugin = file;
  out.launch = [pv, to_abi](const Params& p, const LaunchContext& ctx) {
    const Abi a = to_abi(p);
    const cudaError_t e = pv->launch(&a, ctx.workspace, ctx.stream);
    if (e == cudaSuccess) return;
    if (const std::string raised = take_python_error(); !raised.empty()) throw VariantError(raised);
    check_cuda(e, (std::string("plugin variant ") + pv->name).c_str());
  };
  if (is_python_plugin(file))
    out.host_overhead_us = [pv, to_abi](const Params& p) {
      const Abi a = to_abi(p);
      return python_overhead_us(pv->op, &a);
    };
  out.supports = [pv, to_abi](const Params& p, const DeviceCaps& caps) -> std::string {
    if (!pv->supports) return "";
    const Abi a = to_abi(p);
    const attnbench_device d = abi_device(caps);
    const char* why = pv->supports(&a, &d);
    return why && *why ? std::string(why) : std::string();
  };
  if (pv->workspace)
    out.workspace = [pv, to_abi](const Params& p) {
      const Abi a = to_abi(p);
      return pv->workspace(&a);
    };
  return out;
}

// The RoPE table as the ABI passes it.
template <class Table>
attnbench_rope abi_rope(const Table& t) {
  return {t.style, t.rotary_dim, t.first, t.rows, reinterpret_cast<const float*>(t.cos_sin)};
}

// The fields decode and paged pass alike: tensors, sizes and the longest context.
template <class Abi, class Params>
void abi_one_query(Abi& a, const Params& p) {
  a.q = p.q;
  a.k_cache = p.k_cache;
  a.v_cache = p.v_cache;
  a.o = p.o;
  a.context_lens = p.context_lens;
  a.batch = p.batch;
  a.heads = p.heads;
  a.kv_heads = p.kv_heads;
  a.head_dim = p.head_dim;
  a.longest_context = p.longest_context;
}

// The score options and storage type attention, decode and paged share.
template <class Abi, class Params>
void abi_score_options(Abi& a, const Params& p) {
  a.window = p.window;
  a.score = {p.score.alibi, p.score.alibi_slopes, p.score.scale, p.score.scale_log2, p.score.softcap, p.score.sinks,
             p.score.sink_logits};
  a.dtype = abi_dtype(p.dtype);
  a.rope = abi_rope(p.rope);
}

}  // namespace attnbench
