// ragged rung 2, separate: the engine's simple way. A serving engine without a mixed-batch
// kernel splits the batch by kind and calls its prefill kernel and its decode kernel apart (vLLM
// V0, early SGLang); this rung does that with attnbench's own dense kernels, reused through
// their variant tables (kernels/attention, kernels/decode), none copied. They read contiguous
// K/V, so the contexts are gathered out of the paged cache first. Per launch:
//   1. one gather (this file): every sequence's keys and values, found through its block table,
//      copied into dense K and V in the workspace: the non-decodes' contexts packed one after
//      another ([keys, kv_heads, head_dim], what AttentionParams reads at batch 1), the decodes'
//      side by side at the stride of the longest decode context ([decodes, stride, kv_heads,
//      head_dim], DecodeParams' cache; the padding is neither written nor read). An fp8 cache is
//      widened to the query's dtype on the way, since no dense kernel takes an fp8 cache beside
//      16-bit queries (attention's fp8 path wants q, k and v all e4m3; decode has none): K's codes
//      exactly (every e4m3 value is an fp16 and a bf16 value) with k_scale folded into the
//      softmax scale, V's as code · v_scale rounded to the dtype. With RoPE the gather also turns
//      the non-decodes' queries at their positions into a packed copy of q, because the dense
//      prefill kernels would turn K as well and the cache's keys are turned already (decode's
//      RoPE means what the ragged op's does: its kernel turns the query at context - 1). Decodes
//      that are not consecutive in the batch have their query rows (and context lengths) copied
//      side by side too, for the decode kernel's [batch, heads, head_dim].
//   2. all decodes (query_len 1) in ONE launch of the fastest decode variant that runs them
//      (split_kv on the cards we build for), and for scattered decodes a launch that copies their
//      output rows back into o; consecutive ones are read and written in place.
//   3. every other sequence (a chunked prefill, a speculative verification, a fresh prefill) as
//      a launch of its own of the fastest dense attention variant that runs it (flash_ws on
//      Hopper at head_dim 64/128/256): seq_q = query_len, seq_k = context_len, causal aligned
//      bottom-right (exactly the ragged semantics), q and o straight at its packed rows.
// "Fastest" is the last of a table's own variants whose supports() takes the shape (a plugin's
// never, an unfused-RoPE baseline only when nothing else runs), chosen per shape on the card
// the launch runs on, so the options reach the dense kernels through their own params (window,
// and ALiBi, softcap and sinks in ScoreParams); a part no dense variant runs is refused with
// that table's reason. The workspace function is not told the card: it sizes for the dense
// choices on sm_90 and on sm_80, and supports() refuses a card whose choices need more.
// From rung 1: the keys are no longer read once per query token and head; the dense kernels'
// tiles, tensor cores and split-KV do the attention.
// Why it is slow: each key and value is read from the cache, written to the workspace and read
// again, three times the bytes of a kernel that reads the cache itself; each non-decode
// sequence is a launch of its own, and the short ones (a 4-token verification is one 128-row
// query tile per head, nearly all masked) cannot fill the card, so many verifications make a
// string of near-empty launches one after another; the host walks the batch and the tables
// each launch. Rungs 3 and 4 (3_varlen.cu, 4_split_kv.cu) read the cache where it lies, each
// byte once, in one launch (and a combine), with the long contexts split over blocks.
// H100, run 271: all-decode 1.112 ms (967 GB/s), the serving mix 0.893, 4 x 4096 causal prefill 0.638
// (431 TFLOP/s: flash_ws), 533 sequences 0.527 ms.
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/attention/attention.hpp"
#include "kernels/common/dispatch.cuh"
#include "kernels/common/rope.cuh"
#include "kernels/common/storage.cuh"
#include "kernels/decode/decode.hpp"
#include "kernels/ragged/rungs.hpp"

namespace attnbench::ragged_impl {
namespace {

constexpr int kThreads = 256;
constexpr int kVectorsPerThread = 4;  // 16-byte stores of K (and of V) per gather thread for the longest context

// ---------------------------------------------------------------------------------------------
// The host's plan: the batch split by kind, the workspace laid out, the dense variants chosen.

// The batch split by kind, from the host's copy of the lengths.
struct Split {
  std::vector<int> prefills;  // sequences with query_len > 1, in batch order
  std::vector<int> decodes;   // query_len == 1
  int64_t prefill_keys = 0;   // their contexts, packed one after another
  int64_t decode_stride = 0;  // keys per decode in its region: the longest decode context
  bool decodes_in_place = true;  // consecutive in the batch: q, o and context_lens read where they are
};

Split split_batch(const RaggedParams& p) {
  Split s;
  for (int b = 0; b < static_cast<int>(p.batch); ++b) {
    const int query_len = p.host_cu_seqlens_q[b + 1] - p.host_cu_seqlens_q[b];
    const int context = p.host_context_lens[b];
    if (query_len == 1) {
      if (!s.decodes.empty() && s.decodes.back() != b - 1) s.decodes_in_place = false;
      s.decodes.push_back(b);
      s.decode_stride = std::max<int64_t>(s.decode_stride, context);
    } else {
      s.prefills.push_back(b);
      s.prefill_keys += context;
    }
  }
  return s;
}

// Byte offsets into the workspace, each piece 256-byte aligned; `inner` is the dense variants'
// own workspace, one launch after another on the stream, so the largest of them.
struct Layout {
  std::size_t k_pre = 0, v_pre = 0;      // [prefill_keys, kv_heads, head_dim], dtype
  std::size_t k_dec = 0, v_dec = 0;      // [decodes, decode_stride, kv_heads, head_dim], dtype
  std::size_t q_rot = 0;                 // [total_queries, heads, head_dim]: q turned (RoPE only)
  std::size_t q_dec = 0, o_dec = 0;      // [decodes, heads, head_dim] (scattered decodes only)
  std::size_t context_dec = 0, row_dec = 0;  // [decodes] int32: context, packed row (scattered only)
  std::size_t inner = 0, total = 0;
};

Layout lay_out(const RaggedParams& p, const Split& s) {
  Layout at;
  const std::size_t e = dtype_bytes(p.dtype), row = static_cast<std::size_t>(p.kv_heads * p.head_dim) * e;
  const std::size_t q_row = static_cast<std::size_t>(p.heads * p.head_dim) * e;
  const std::size_t decodes = s.decodes.size();
  std::size_t end = 0;
  const auto take = [&](std::size_t bytes) {
    const std::size_t at_ = end;
    end += round_up_256(bytes);
    return at_;
  };
  at.k_pre = take(static_cast<std::size_t>(s.prefill_keys) * row);
  at.v_pre = take(static_cast<std::size_t>(s.prefill_keys) * row);
  at.k_dec = take(decodes * static_cast<std::size_t>(s.decode_stride) * row);
  at.v_dec = take(decodes * static_cast<std::size_t>(s.decode_stride) * row);
  if (p.rope.on() && !s.prefills.empty()) at.q_rot = take(static_cast<std::size_t>(p.total_queries) * q_row);
  if (!s.decodes_in_place) {
    at.q_dec = take(decodes * q_row);
    at.o_dec = take(decodes * q_row);
    at.context_dec = take(decodes * sizeof(int32_t));
    at.row_dec = take(decodes * sizeof(int32_t));
  }
  at.inner = at.total = end;
  return at;
}

// ws + offset, or null before the workspace exists (supports and workspace ask without one).
char* in(char* ws, std::size_t offset) { return ws ? ws + offset : nullptr; }
template <class Ptr>
Ptr rows(Ptr base, int64_t row, int64_t row_elems, DType dtype) {  // row `row` of a packed tensor
  using Byte = std::conditional_t<std::is_const_v<std::remove_pointer_t<Ptr>>, const char, char>;
  return base ? static_cast<Ptr>(static_cast<Byte*>(base) + row * row_elems * static_cast<int64_t>(dtype_bytes(dtype)))
              : nullptr;
}

// The score options as the dense kernels take them: an fp8 cache's k_scale in the scale (the
// gather keeps K's codes), the scale_log2 their finish_* derives from it.
ScoreParams dense_score(const RaggedParams& p) {
  ScoreParams s = p.score;
  if (p.kv_dtype == DType::fp8_e4m3) s.scale *= p.k_scale;
  s.scale_log2 = 0;
  return s;
}

// All decodes as one DecodeParams batch over their region of the workspace.
DecodeParams decode_params(const RaggedParams& p, const Split& s, const Layout& at, char* ws) {
  DecodeParams d{};
  const int64_t first = s.decodes.front();
  if (s.decodes_in_place) {
    const int64_t row = p.host_cu_seqlens_q[first];
    d.q = rows(p.q, row, p.heads * p.head_dim, p.dtype);
    d.o = rows(p.o, row, p.heads * p.head_dim, p.dtype);
    d.context_lens = p.context_lens ? p.context_lens + first : nullptr;
  } else {
    d.q = in(ws, at.q_dec);
    d.o = in(ws, at.o_dec);
    d.context_lens = reinterpret_cast<const int32_t*>(in(ws, at.context_dec));
  }
  d.k_cache = in(ws, at.k_dec);
  d.v_cache = in(ws, at.v_dec);
  d.batch = static_cast<int64_t>(s.decodes.size());
  d.heads = p.heads;
  d.kv_heads = p.kv_heads;
  d.head_dim = p.head_dim;
  d.max_context = s.decode_stride;
  d.longest_context = s.decode_stride;
  d.window = p.window;
  d.score = dense_score(p);
  d.rope = p.rope;  // the query turned at context - 1 by the kernel; the keys are the cache's
  d.dtype = p.dtype;
  finish_decode_params(d);
  return d;
}

// Non-decode sequence b (the i-th of them, its context at `first_key` of the packed region) as
// one dense, causal, bottom-right attention over its own K and V.
AttentionParams prefill_params(const RaggedParams& p, int b, int64_t first_key, const Layout& at, char* ws) {
  AttentionParams a{};
  const int64_t row = p.host_cu_seqlens_q[b];
  a.q = rows(p.rope.on() ? static_cast<const void*>(in(ws, at.q_rot)) : p.q, row, p.heads * p.head_dim, p.dtype);
  a.o = rows(p.o, row, p.heads * p.head_dim, p.dtype);
  a.k = rows(static_cast<const void*>(in(ws, at.k_pre)), first_key, p.kv_heads * p.head_dim, p.dtype);
  a.v = rows(static_cast<const void*>(in(ws, at.v_pre)), first_key, p.kv_heads * p.head_dim, p.dtype);
  a.batch = 1;
  a.heads = p.heads;
  a.kv_heads = p.kv_heads;
  a.seq_q = p.host_cu_seqlens_q[b + 1] - row;
  a.seq_k = p.host_context_lens[b];
  a.head_dim = p.head_dim;
  a.causal = true;  // bottom-right: query t at seq_k - seq_q + t
  a.window = p.window;
  a.score = dense_score(p);
  a.rope = {};  // the queries were turned by the gather; the cache's keys already are
  a.dtype = p.dtype;
  finish_attention_params(a);
  return a;
}

// The fastest variant of a dense table that runs p (fastest_variant's rule); null with `why` the
// baseline's reason when none does.
template <class P>
const Variant<P>* fastest(const std::vector<Variant<P>>& table, const P& p, const DeviceCaps& caps, std::string& why) {
  const Variant<P>* v = fastest_variant(table, [&](const Variant<P>& x) { return x.supports(p, caps); });
  if (!v) why = std::string(table.front().name) + ": " + table.front().supports(p, caps);
  return v;
}

template <class P>
std::size_t workspace_of(const Variant<P>* v, const P& p) {
  return v && v->workspace ? v->workspace(p) : 0;
}

struct Plan {
  Split split;
  Layout at;
  const Variant<DecodeParams>* decode = nullptr;
  std::vector<const Variant<AttentionParams>*> prefill;  // per split.prefills
  std::string why;  // not empty: a part no dense variant runs
};

Plan make_plan(const RaggedParams& p, const DeviceCaps& caps, char* ws) {
  Plan plan;
  plan.split = split_batch(p);
  plan.at = lay_out(p, plan.split);
  std::size_t inner = 0;
  if (!plan.split.decodes.empty()) {
    const DecodeParams d = decode_params(p, plan.split, plan.at, ws);
    std::string why;
    plan.decode = fastest(decode_variants(), d, caps, why);
    if (!plan.decode) {
      plan.why = "the decodes (" + std::to_string(plan.split.decodes.size()) +
                 " of them): no dense decode variant runs them (" + why + ")";
      return plan;
    }
    inner = std::max(inner, workspace_of(plan.decode, d));
  }
  int64_t first_key = 0;
  for (int b : plan.split.prefills) {
    const AttentionParams a = prefill_params(p, b, first_key, plan.at, ws);
    std::string why;
    const Variant<AttentionParams>* v = fastest(attention_variants(), a, caps, why);
    if (!v) {
      plan.why = "sequence " + std::to_string(b) + " (" + std::to_string(a.seq_q) + " queries over " +
                 std::to_string(a.seq_k) + " keys): no dense attention variant runs it (" + why + ")";
      return plan;
    }
    plan.prefill.push_back(v);
    inner = std::max(inner, workspace_of(v, a));
    first_key += a.seq_k;
  }
  plan.at.total = plan.at.inner + inner;
  return plan;
}

// The cards the workspace is sized for (workspace() is not told the card; the dense choice is
// made on the card the launch runs on): Hopper and Ampere, the two attnbench builds for.
DeviceCaps card(int major, int sm_count, std::size_t smem_kb, std::size_t l2_mb) {
  DeviceCaps c;
  c.sm_count = sm_count;
  c.cc_major = major;
  c.smem_per_block_optin = smem_kb * 1024;
  c.l2_bytes = l2_mb << 20;
  c.total_memory = std::size_t{80} << 30;
  return c;
}
const DeviceCaps kSizedFor[] = {card(9, 132, 227, 50), card(8, 108, 163, 40)};

// ---------------------------------------------------------------------------------------------
// The device side: the gather, and the scatter of scattered decodes' outputs.

// What the gather reads and writes; T is the query's dtype, the workspace's.
struct Gather {
  const int32_t* cu_seqlens_q;  // [batch + 1]
  const int32_t* context_lens;  // [batch]
  const int32_t* block_tables;  // [batch, max_blocks]
  const void* k_cache;          // [num_blocks, block_size, kv_heads, head_dim], kv_dtype
  const void* v_cache;
  void *k_pre, *v_pre;  // [prefill_keys, kv_heads, head_dim], T
  void *k_dec, *v_dec;  // [decodes, decode_stride, kv_heads, head_dim], T
  int64_t decode_stride;
  const void* q;          // [total_queries, heads, head_dim]
  void* q_rot;            // like q: the non-decodes' queries turned at their positions, or null
  void* q_dec;            // [decodes, heads, head_dim]: their queries side by side, or null (in place)
  int32_t* context_dec;   // [decodes] with q_dec
  int32_t* row_dec;       // [decodes] with q_dec: each one's row of q and o
  RopeTable rope;
  int block_size, max_blocks;
  int key_width, q_width;  // elements of one key row (kv_heads · head_dim), of one query row (heads · head_dim)
  int head_dim;
  float v_scale;  // an fp8 V's codes times this; K's codes are kept (k_scale is in the score scale)
};

// Elements of T per 16-byte store.
template <class T>
constexpr int kVec = 16 / static_cast<int>(sizeof(T));

// kVec<T> elements of C at src as floats: a 16-byte load, or fewer bytes for fp8.
template <class T, class C>
__device__ __forceinline__ void load_vec(const C* src, float* f) {
  constexpr int kWords = kVec<T> * static_cast<int>(sizeof(C)) / 4;
  uint32_t w[kWords];
  if constexpr (kWords == 4) {
    const uint4 u = *reinterpret_cast<const uint4*>(src);
    w[0] = u.x, w[1] = u.y, w[2] = u.z, w[3] = u.w;
  } else if constexpr (kWords == 2) {
    const uint2 u = *reinterpret_cast<const uint2*>(src);
    w[0] = u.x, w[1] = u.y;
  } else {
    w[0] = *reinterpret_cast<const uint32_t*>(src);
  }
  to_floats<C, kWords>(w, f);
}

// Where sequence b's pieces go: decodes before it (its index among them), and the non-decode
// keys before it (its context's first row in the packed region). One warp sums over the
// sequences before b; the host knows these too, but handing the device a table of them would
// be an upload per launch.
struct Place {
  bool decode;
  int index;          // among the decodes
  int64_t first_key;  // in the packed non-decode region
};

__device__ Place place(const Gather& g, int b) {
  __shared__ Place shared;
  if (threadIdx.x < 32) {
    int decodes = 0;
    int64_t keys = 0;
    for (int i = static_cast<int>(threadIdx.x); i < b; i += 32) {
      if (g.cu_seqlens_q[i + 1] - g.cu_seqlens_q[i] == 1) ++decodes;
      else keys += g.context_lens[i];
    }
    for (int o = 16; o > 0; o >>= 1) {
      decodes += __shfl_xor_sync(0xffffffffu, decodes, o);
      keys += __shfl_xor_sync(0xffffffffu, keys, o);
    }
    if (threadIdx.x == 0) shared = {g.cu_seqlens_q[b + 1] - g.cu_seqlens_q[b] == 1, decodes, keys};
  }
  __syncthreads();
  return shared;
}

// Grid: (sequence, a part of its work). Each block copies its share of the sequence's K and V
// rows (16-byte stores of T, the key's row found through the block table) and of its query rows
// (turned with RoPE, or moved beside the other decodes'). Keys past a context are never read.
template <class T, class C>
__global__ void __launch_bounds__(kThreads) gather_kernel(const Gather g) {
  constexpr int V = kVec<T>;
  const int b = static_cast<int>(blockIdx.x);
  const int context = g.context_lens[b], first_q = g.cu_seqlens_q[b], query_len = g.cu_seqlens_q[b + 1] - first_q;
  const int key_vecs = g.key_width / V, q_vecs = g.q_width / V;
  const int64_t kv_work = int64_t{context} * key_vecs;
  const bool moves_q = query_len == 1 ? g.q_dec != nullptr : g.q_rot != nullptr;
  const int64_t q_work = moves_q ? int64_t{query_len} * q_vecs : 0;
  const int64_t start = int64_t{blockIdx.y} * kThreads + threadIdx.x, step = int64_t{gridDim.y} * kThreads;
  if (int64_t{blockIdx.y} * kThreads >= (kv_work > q_work ? kv_work : q_work)) return;  // the whole block: before place()'s barrier
  const Place at = place(g, b);

  // K and V: key j's row (every kv head) is contiguous in the cache and in the dense copy.
  const int32_t* table = g.block_tables + int64_t{b} * g.max_blocks;
  const int64_t first_row = at.decode ? int64_t{at.index} * g.decode_stride : at.first_key;
  T* k_to = static_cast<T*>(at.decode ? g.k_dec : g.k_pre) + first_row * g.key_width;
  T* v_to = static_cast<T*>(at.decode ? g.v_dec : g.v_pre) + first_row * g.key_width;
  for (int64_t i = start; i < kv_work; i += step) {
    const int j = static_cast<int>(i / key_vecs), c = static_cast<int>(i % key_vecs) * V;
    const int64_t from = (int64_t{table[j / g.block_size]} * g.block_size + j % g.block_size) * g.key_width + c;
    const int64_t to = int64_t{j} * g.key_width + c;
    if constexpr (std::is_same_v<T, C>) {
      *reinterpret_cast<uint4*>(k_to + to) = *reinterpret_cast<const uint4*>(static_cast<const C*>(g.k_cache) + from);
      *reinterpret_cast<uint4*>(v_to + to) = *reinterpret_cast<const uint4*>(static_cast<const C*>(g.v_cache) + from);
    } else {  // fp8 codes widened: K's exactly (k_scale is in the score scale), V's times v_scale
      float f[V];
      load_vec<T>(static_cast<const C*>(g.k_cache) + from, f);
      *reinterpret_cast<uint4*>(k_to + to) = pack<T>(f);
      load_vec<T>(static_cast<const C*>(g.v_cache) + from, f);
#pragma unroll
      for (int e = 0; e < V; ++e) f[e] *= g.v_scale;
      *reinterpret_cast<uint4*>(v_to + to) = pack<T>(f);
    }
  }

  // The queries: a scattered decode's row beside the others (with its context and row), a
  // non-decode's rows turned at positions context - query_len + t.
  if (!moves_q) return;
  const T* q = static_cast<const T*>(g.q) + int64_t{first_q} * g.q_width;
  if (query_len == 1) {
    T* to = static_cast<T*>(g.q_dec) + int64_t{at.index} * g.q_width;
    for (int64_t i = start; i < q_work; i += step)
      *reinterpret_cast<uint4*>(to + i * V) = *reinterpret_cast<const uint4*>(q + i * V);
    if (start == 0) {
      g.context_dec[at.index] = context;
      g.row_dec[at.index] = first_q;
    }
    return;
  }
  T* to = static_cast<T*>(g.q_rot) + int64_t{first_q} * g.q_width;
  for (int64_t i = start; i < q_work; i += step) {
    const int64_t e = i * V;  // element (t, h, d) of the sequence's queries; a vector stays in its head
    const int t = static_cast<int>(e / g.q_width), d = static_cast<int>(e % g.head_dim);
    float f[V];
    unpack<T>(*reinterpret_cast<const uint4*>(q + e), f);
    rope_row_part<T, V>(q + (e - d), d, f, context - query_len + t, g.rope);
    *reinterpret_cast<uint4*>(to + e) = pack<T>(f);
  }
}

// The scattered decodes' outputs back to their rows of o: block i copies decode i's row.
template <class T>
__global__ void __launch_bounds__(kThreads) scatter_kernel(const T* from, T* o, const int32_t* row_dec, int q_width) {
  const int i = static_cast<int>(blockIdx.x);
  const T* src = from + int64_t{i} * q_width;
  T* dst = o + int64_t{row_dec[i]} * q_width;
  for (int c = static_cast<int>(threadIdx.x) * kVec<T>; c < q_width; c += kThreads * kVec<T>)
    *reinterpret_cast<uint4*>(dst + c) = *reinterpret_cast<const uint4*>(src + c);
}

}  // namespace

// ---------------------------------------------------------------------------------------------

std::size_t separate_workspace(const RaggedParams& p) {
  if (!p.host_cu_seqlens_q || !p.host_context_lens) return 0;
  std::size_t most = 0;
  for (const DeviceCaps& caps : kSizedFor) {
    const Plan plan = make_plan(p, caps, nullptr);
    if (plan.why.empty()) most = std::max(most, plan.at.total);
  }
  return most;
}

std::string separate_supports(const RaggedParams& p, const DeviceCaps& caps) {
  if (const std::string r = common_reason(p); !r.empty()) return r;
  if (!p.host_cu_seqlens_q || !p.host_context_lens)
    return "needs the batch's lengths on the host (host_cu_seqlens_q, host_context_lens): it launches per sequence";
  if (p.head_dim % 8 != 0) return "head_dim must be a multiple of 8 (the gather moves 16-byte rows, as the dense kernels do)";
  if (p.batch > INT_MAX) return "batch must be < 2^31 (sequences in gridDim.x)";
  if (p.total_queries > INT_MAX) return "total_queries must be < 2^31 (rows of q are int32)";
  const Plan plan = make_plan(p, caps, nullptr);
  if (!plan.why.empty()) return plan.why;
  if (plan.at.total > separate_workspace(p))
    return "the dense variants this card runs need more workspace than the rung sizes (for the fastest on sm_90 and "
           "sm_80)";
  return {};
}

std::vector<std::string> separate_launches(const RaggedParams& p, const DeviceCaps& caps) {
  if (!separate_supports(p, caps).empty()) return {};
  const Plan plan = make_plan(p, caps, nullptr);
  std::vector<std::string> out = {"gather"};
  if (plan.decode) out.push_back(std::string("decode/") + plan.decode->name);
  if (plan.decode && !plan.split.decodes_in_place) out.push_back("scatter");
  for (const Variant<AttentionParams>* v : plan.prefill) out.push_back(std::string("attention/") + v->name);
  return out;
}

void separate(const RaggedParams& p, const LaunchContext& ctx) {
  char* ws = static_cast<char*>(ctx.workspace);
  const Plan plan = make_plan(p, *ctx.caps, ws);
  if (!plan.why.empty()) throw std::invalid_argument("ragged/separate: " + plan.why);
  const Split& s = plan.split;
  const Layout& at = plan.at;

  // 1. The gather.
  Gather g{};
  g.cu_seqlens_q = p.cu_seqlens_q;
  g.context_lens = p.context_lens;
  g.block_tables = p.block_tables;
  g.k_cache = p.k_cache;
  g.v_cache = p.v_cache;
  g.k_pre = in(ws, at.k_pre);
  g.v_pre = in(ws, at.v_pre);
  g.k_dec = in(ws, at.k_dec);
  g.v_dec = in(ws, at.v_dec);
  g.decode_stride = s.decode_stride;
  g.q = p.q;
  g.q_rot = p.rope.on() && !s.prefills.empty() ? in(ws, at.q_rot) : nullptr;
  g.q_dec = s.decodes_in_place ? nullptr : in(ws, at.q_dec);
  g.context_dec = s.decodes_in_place ? nullptr : reinterpret_cast<int32_t*>(in(ws, at.context_dec));
  g.row_dec = s.decodes_in_place ? nullptr : reinterpret_cast<int32_t*>(in(ws, at.row_dec));
  g.rope = p.rope;
  g.block_size = static_cast<int>(p.block_size);
  g.max_blocks = static_cast<int>(p.max_blocks_per_seq);
  g.key_width = static_cast<int>(p.kv_heads * p.head_dim);
  g.q_width = static_cast<int>(p.heads * p.head_dim);
  g.head_dim = static_cast<int>(p.head_dim);
  g.v_scale = p.v_scale;
  with_types(p.dtype, p.kv_dtype, "ragged/separate (gather)", [&](auto t, auto c) {
    using T = decltype(t);
    // Enough blocks per sequence that the longest one's K (and V, and queries) is
    // kVectorsPerThread 16-byte stores a thread; a shorter sequence's extra blocks return at once.
    const int64_t most = std::max(p.longest_context * (g.key_width / kVec<T>),
                                  p.longest_query * (g.q_width / kVec<T>));
    const int64_t parts = std::clamp<int64_t>(ceil_div(most, int64_t{kThreads} * kVectorsPerThread), 1, kMaxGridYZ);
    gather_kernel<T, decltype(c)>
        <<<dim3(static_cast<unsigned>(p.batch), static_cast<unsigned>(parts)), kThreads, 0, ctx.stream>>>(g);
  });
  check_launch("ragged/separate (gather)");

  // 2. The decodes, one launch, and their outputs back in place when they were moved.
  LaunchContext inner = ctx;
  inner.workspace = in(ws, at.inner);
  if (plan.decode) {
    plan.decode->launch(decode_params(p, s, at, ws), inner);
    if (!s.decodes_in_place) {
      with_storage(p.dtype, "ragged/separate (scatter)", [&](auto t) {
        using T = decltype(t);
        scatter_kernel<T><<<static_cast<unsigned>(s.decodes.size()), kThreads, 0, ctx.stream>>>(
            reinterpret_cast<const T*>(in(ws, at.o_dec)), static_cast<T*>(p.o),
            reinterpret_cast<const int32_t*>(in(ws, at.row_dec)), g.q_width);
      });
      check_launch("ragged/separate (scatter)");
    }
  }

  // 3. Every other sequence, a dense attention launch each.
  int64_t first_key = 0;
  for (size_t i = 0; i < s.prefills.size(); ++i) {
    const AttentionParams a = prefill_params(p, s.prefills[i], first_key, at, ws);
    plan.prefill[i]->launch(a, inner);
    first_key += a.seq_k;
  }
}

}  // namespace attnbench::ragged_impl
