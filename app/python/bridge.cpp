// The Python bridge (libattnbench_python.so): Python files as plugins (docs/plugins.md,
// "Python kernels"). attnbench loads this library only when a .py plugin is named, after it
// loaded the libpython of the python3 it found (app/python_plugin.cpp), so that the binary
// itself never needs Python. The library is built against Python's stable ABI (Py_LIMITED_API,
// 3.10 on): one build serves every Python from 3.10 on, which is why it uses neither pybind11
// nor nanobind (pybind11 does not build for the stable ABI).
//
// What it does: embeds the interpreter, imports app/python/attnbench.py, runs a plugin file
// and turns each variant it declared into an attnbench_variant of the C plugin ABI
// (attnbench/plugin.h), so that a Python variant joins its op's table through exactly the path
// a .cu plugin takes. The ABI's functions carry no context pointer, so each variant gets a slot
// of its own among kSlots trampolines. A launch hands Python its op's tensors (pointer, dtype,
// shape, strides: the struct's comments, as code) and scalars; attnbench.py makes the DLPack
// views. A Python exception never crosses into C: attnbench.py returns its message, the
// trampoline returns cudaErrorUnknown, and attnbench_python_take_error() gives the message to
// the row (app/plugin.hpp).
#define Py_LIMITED_API 0x030A0000
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlpack/dlpack.h>

#include <array>
#include <cstring>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "app/errors.hpp"  // kSupportsError
#include "kernels/plugin/include/attnbench/plugin.h"

namespace {

constexpr int kSlots = 256;  // Python variants a process can load

struct Slot {
  PyObject* variant = nullptr;  // attnbench.Variant
  int32_t op = 0;
  bool has_workspace = false;  // declared a workspace()
  std::string name, note;
  std::string reason;  // what supports() last returned (the ABI wants a string that outlives the call)
};

std::array<Slot, kSlots> slots;
int used_slots = 0;
std::vector<attnbench_variant> tables[kSlots];  // per loaded file; index = first slot
attnbench_plugin plugins[kSlots];
PyObject* module = nullptr;  // attnbench.py
std::string pending_error;   // the last Python error, until taken

std::string text_of(PyObject* o) {
  if (!o) return {};
  PyObject* s = PyObject_Str(o);
  if (!s) {
    PyErr_Clear();
    return "(unprintable)";
  }
  Py_ssize_t n = 0;
  const char* c = PyUnicode_AsUTF8AndSize(s, &n);
  std::string out = c ? std::string(c, static_cast<size_t>(n)) : std::string("(unprintable)");
  Py_DecRef(s);
  return out;
}

// An exception raised in the bridge's own calls (attnbench.py catches the plugin's): its text.
std::string fetch_error() {
  PyObject *type = nullptr, *value = nullptr, *tb = nullptr;
  PyErr_Fetch(&type, &value, &tb);
  std::string out = text_of(type) + ": " + text_of(value);
  Py_DecRef(type);
  Py_DecRef(value);
  Py_DecRef(tb);
  return out;
}

// ---- DLPack ------------------------------------------------------------------------------

struct Managed {
  DLManagedTensor m{};
  std::vector<int64_t> shape, strides;
};

void delete_managed(DLManagedTensor* m) { delete static_cast<Managed*>(m->manager_ctx); }

void capsule_destructor(PyObject* capsule) {
  // A capsule no one consumed still owns its tensor (a consumer renames it "used_dltensor").
  if (PyCapsule_IsValid(capsule, "dltensor")) {
    auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, "dltensor"));
    if (m && m->deleter) m->deleter(m);
  }
}

std::vector<int64_t> ints_of(PyObject* seq) {
  std::vector<int64_t> out;
  const Py_ssize_t n = PyObject_Length(seq);
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* key = PyLong_FromSsize_t(i);
    PyObject* item = PyObject_GetItem(seq, key);
    Py_DecRef(key);
    out.push_back(item ? PyLong_AsLongLong(item) : 0);
    Py_DecRef(item);
  }
  return out;
}

// capsule(data_ptr, code, bits, shape, strides, device): a legacy "dltensor" capsule over
// attnbench's memory; the memory stays attnbench's (the deleter frees only the description).
PyObject* make_capsule(PyObject*, PyObject* args) {
  PyObject *ptr = nullptr, *shape = nullptr, *strides = nullptr;
  int code = 0, bits = 0, device = 0;
  if (!PyArg_ParseTuple(args, "OiiOOi", &ptr, &code, &bits, &shape, &strides, &device)) return nullptr;
  auto* t = new Managed;
  t->shape = ints_of(shape);
  t->strides = ints_of(strides);
  if (PyErr_Occurred()) {
    delete t;
    return nullptr;
  }
  DLTensor& d = t->m.dl_tensor;
  d.data = PyLong_AsVoidPtr(ptr);
  d.device = {kDLCUDA, device};
  d.ndim = static_cast<int32_t>(t->shape.size());
  d.dtype = {static_cast<uint8_t>(code), static_cast<uint8_t>(bits), 1};
  d.shape = t->shape.data();
  d.strides = t->strides.data();
  d.byte_offset = 0;
  t->m.manager_ctx = t;
  t->m.deleter = delete_managed;
  PyObject* capsule = PyCapsule_New(&t->m, "dltensor", capsule_destructor);
  if (!capsule) delete t;
  return capsule;
}

PyMethodDef bridge_methods[] = {
    {"capsule", make_capsule, METH_VARARGS, "capsule(data_ptr, code, bits, shape, strides, device)"},
    {nullptr, nullptr, 0, nullptr},
};
PyModuleDef bridge_def = {PyModuleDef_HEAD_INIT, "attnbench._bridge", nullptr, -1, bridge_methods,
                          nullptr, nullptr, nullptr, nullptr};

// ---- an op's struct as Python sees it ----------------------------------------------------

const char* dtype_name(int32_t t) {
  switch (t) {
    case ATTNBENCH_FP32: return "float32";
    case ATTNBENCH_FP16: return "float16";
    case ATTNBENCH_BF16: return "bfloat16";
    case ATTNBENCH_FP8_E4M3: return "float8_e4m3fn";
    default: return "unknown";
  }
}

// The tensors {name: (data_ptr, dtype, shape, strides) or None} and the scalars {name: value,
// or a dict for a nested struct} of one launch.
class Fields {
 public:
  Fields() : tensors_(PyDict_New()), params_(PyDict_New()) {}
  ~Fields() {
    Py_DecRef(tensors_);
    Py_DecRef(params_);
  }
  Fields(const Fields&) = delete;
  Fields& operator=(const Fields&) = delete;
  PyObject* tensors() const { return tensors_; }
  PyObject* params() const { return params_; }

  // Row-major: strides from the shape unless given.
  void tensor(const char* name, const void* ptr, const char* dtype, std::vector<int64_t> shape,
              std::vector<int64_t> strides = {}) {
    if (!ptr) {
      set(tensors_, name, Py_NewRef(Py_None));
      return;
    }
    if (strides.empty()) {
      strides.assign(shape.size(), 1);
      for (size_t i = shape.size(); i-- > 1;) strides[i - 1] = strides[i] * shape[i];
    }
    PyObject* s = PyTuple_New(static_cast<Py_ssize_t>(shape.size()));
    PyObject* st = PyTuple_New(static_cast<Py_ssize_t>(shape.size()));
    for (size_t i = 0; i < shape.size(); ++i) {
      PyTuple_SetItem(s, static_cast<Py_ssize_t>(i), PyLong_FromLongLong(shape[i]));
      PyTuple_SetItem(st, static_cast<Py_ssize_t>(i), PyLong_FromLongLong(strides[i]));
    }
    PyObject* spec = PyTuple_New(4);
    PyTuple_SetItem(spec, 0, PyLong_FromVoidPtr(const_cast<void*>(ptr)));
    PyTuple_SetItem(spec, 1, PyUnicode_FromString(dtype));
    PyTuple_SetItem(spec, 2, s);
    PyTuple_SetItem(spec, 3, st);
    set(tensors_, name, spec);
  }
  void num(const char* name, int64_t v, PyObject* into = nullptr) { set(into ? into : params_, name, PyLong_FromLongLong(v)); }
  void real(const char* name, double v, PyObject* into = nullptr) { set(into ? into : params_, name, PyFloat_FromDouble(v)); }
  void flag(const char* name, bool v, PyObject* into = nullptr) { set(into ? into : params_, name, PyBool_FromLong(v)); }
  void text(const char* name, const char* v, PyObject* into = nullptr) {
    set(into ? into : params_, name, PyUnicode_FromString(v));
  }
  PyObject* nested(const char* name) {  // borrowed: lives in params
    PyObject* d = PyDict_New();
    set(params_, name, d);
    return d;
  }

  void score(const attnbench_score& s, int64_t heads) {
    PyObject* d = nested("score");
    flag("alibi", s.alibi != 0, d);
    real("scale", s.scale, d);
    real("scale_log2", s.scale_log2, d);
    real("softcap", s.softcap, d);
    flag("sinks", s.sinks != 0, d);
    tensor("alibi_slopes", s.alibi ? s.alibi_slopes : nullptr, "float32", {heads});
    tensor("sink_logits", s.sinks ? s.sink_logits : nullptr, "float32", {heads});
  }
  void rope(const attnbench_rope& r) {
    PyObject* d = nested("rope");
    text("style", r.style == 1 ? "neox" : r.style == 2 ? "gptj" : "none", d);
    num("rotary_dim", r.rotary_dim, d);
    num("first", r.first, d);
    num("rows", r.rows, d);
    tensor("cos_sin", r.style ? r.cos_sin : nullptr, "float32", {r.rows, r.rotary_dim / 2, 2});
  }

 private:
  static void set(PyObject* dict, const char* name, PyObject* value) {
    PyDict_SetItemString(dict, name, value);
    Py_DecRef(value);
  }
  PyObject* tensors_;
  PyObject* params_;
};

// Each op's struct (attnbench/plugin.h) as tensors and scalars; the shapes are its comments'.
void describe(int32_t op, const void* raw, Fields& f) {
  switch (op) {
    case ATTNBENCH_OP_SOFTMAX: {
      const auto& p = *static_cast<const attnbench_softmax_params*>(raw);
      const char* t = dtype_name(p.dtype);
      f.tensor("x", p.x, t, {p.rows, p.cols});
      f.tensor("y", p.y, t, {p.rows, p.cols});
      f.num("rows", p.rows);
      f.num("cols", p.cols);
      f.text("dtype", t);
      return;
    }
    case ATTNBENCH_OP_GEMM: {
      const auto& p = *static_cast<const attnbench_gemm_params*>(raw);
      const char* t = dtype_name(p.dtype);
      f.tensor("a", p.a, t, {p.batch, p.m, p.k});
      f.tensor("b", p.b, t, p.layout == 0 ? std::vector<int64_t>{p.batch, p.n, p.k} : std::vector<int64_t>{p.batch, p.k, p.n});
      f.tensor("c", p.c, t, {p.batch, p.m, p.n});
      for (auto [n, v] : {std::pair{"batch", p.batch}, {"m", p.m}, {"n", p.n}, {"k", p.k}}) f.num(n, v);
      f.text("layout", p.layout == 0 ? "nt" : "nn");
      f.text("dtype", t);
      return;
    }
    case ATTNBENCH_OP_ATTENTION: {
      const auto& p = *static_cast<const attnbench_attention_params*>(raw);
      const char* t = dtype_name(p.dtype);
      const int64_t d = p.head_dim;
      f.tensor("q", p.q, t, {p.batch, p.seq_q, p.heads, d}, {p.q_batch_stride, p.heads * d, d, 1});
      f.tensor("k", p.k, t, {p.batch, p.seq_k, p.kv_heads, d}, {p.kv_batch_stride, p.kv_heads * d, d, 1});
      f.tensor("v", p.v, t, {p.batch, p.seq_k, p.kv_heads, d}, {p.kv_batch_stride, p.kv_heads * d, d, 1});
      f.tensor("o", p.o, t, {p.batch, p.seq_q, p.heads, d}, {p.o_batch_stride, p.heads * d, d, 1});
      for (auto [n, v] : {std::pair{"batch", p.batch}, {"heads", p.heads}, {"kv_heads", p.kv_heads}, {"seq_q", p.seq_q},
                          {"seq_k", p.seq_k}, {"head_dim", p.head_dim}, {"q_offset", p.q_offset}, {"window", p.window}})
        f.num(n, v);
      f.flag("causal", p.causal != 0);
      f.text("dtype", t);
      f.score(p.score, p.heads);
      f.rope(p.rope);
      f.num("sparse_block", p.sparse_block);
      const bool sparse = p.sparse_block > 0;
      const int64_t qb = p.sparse_q_blocks, kb = p.sparse_k_blocks;
      f.tensor("sparse_live", sparse ? p.sparse_live : nullptr, "uint8", {p.heads, qb, kb});
      f.tensor("sparse_num", sparse ? p.sparse_num : nullptr, "int32", {p.heads, qb});
      f.tensor("sparse_idx", sparse ? p.sparse_idx : nullptr, "int32", {p.heads, qb, kb});
      return;
    }
    case ATTNBENCH_OP_DECODE: {
      const auto& p = *static_cast<const attnbench_decode_params*>(raw);
      const char* t = dtype_name(p.dtype);
      f.tensor("q", p.q, t, {p.batch, p.heads, p.head_dim});
      f.tensor("k_cache", p.k_cache, t, {p.batch, p.max_context, p.kv_heads, p.head_dim});
      f.tensor("v_cache", p.v_cache, t, {p.batch, p.max_context, p.kv_heads, p.head_dim});
      f.tensor("o", p.o, t, {p.batch, p.heads, p.head_dim});
      f.tensor("context_lens", p.context_lens, "int32", {p.batch});
      for (auto [n, v] : {std::pair{"batch", p.batch}, {"heads", p.heads}, {"kv_heads", p.kv_heads}, {"head_dim", p.head_dim},
                          {"max_context", p.max_context}, {"longest_context", p.longest_context}, {"window", p.window}})
        f.num(n, v);
      f.text("dtype", t);
      f.score(p.score, p.heads);
      f.rope(p.rope);
      return;
    }
    case ATTNBENCH_OP_PAGED: {
      const auto& p = *static_cast<const attnbench_paged_params*>(raw);
      const char* t = dtype_name(p.dtype);
      const char* kt = dtype_name(p.kv_dtype);
      const int64_t x = 16 / (p.kv_dtype == ATTNBENCH_FP32 ? 4 : p.kv_dtype == ATTNBENCH_FP8_E4M3 ? 1 : 2);
      f.tensor("q", p.q, t, {p.batch, p.heads, p.head_dim});
      f.tensor("k_cache", p.k_cache, kt, {p.num_blocks, p.kv_heads, p.head_dim / x, p.block_size, x});
      f.tensor("v_cache", p.v_cache, kt, {p.num_blocks, p.kv_heads, p.head_dim, p.block_size});
      f.tensor("o", p.o, t, {p.batch, p.heads, p.head_dim});
      f.tensor("block_tables", p.block_tables, "int32", {p.batch, p.max_blocks_per_seq});
      f.tensor("context_lens", p.context_lens, "int32", {p.batch});
      for (auto [n, v] : {std::pair{"batch", p.batch}, {"heads", p.heads}, {"kv_heads", p.kv_heads}, {"head_dim", p.head_dim},
                          {"block_size", p.block_size}, {"num_blocks", p.num_blocks},
                          {"max_blocks_per_seq", p.max_blocks_per_seq}, {"longest_context", p.longest_context},
                          {"partition_size", p.partition_size}, {"window", p.window}})
        f.num(n, v);
      f.text("dtype", t);
      f.text("kv_dtype", kt);
      f.real("k_scale", p.k_scale);
      f.real("v_scale", p.v_scale);
      f.score(p.score, p.heads);
      f.rope(p.rope);
      return;
    }
    case ATTNBENCH_OP_CACHE_APPEND: {
      const auto& p = *static_cast<const attnbench_cache_append_params*>(raw);
      const char* t = dtype_name(p.dtype);
      f.tensor("k_cache", p.k_cache, t, {p.batch, p.max_context, p.kv_heads, p.head_dim});
      f.tensor("v_cache", p.v_cache, t, {p.batch, p.max_context, p.kv_heads, p.head_dim});
      f.tensor("k_new", p.k_new, t, {p.batch, p.tokens, p.kv_heads, p.head_dim});
      f.tensor("v_new", p.v_new, t, {p.batch, p.tokens, p.kv_heads, p.head_dim});
      f.tensor("positions", p.positions, "int32", {p.batch});
      for (auto [n, v] : {std::pair{"batch", p.batch}, {"tokens", p.tokens}, {"kv_heads", p.kv_heads},
                          {"head_dim", p.head_dim}, {"max_context", p.max_context}})
        f.num(n, v);
      f.text("dtype", t);
      f.rope(p.rope);
      return;
    }
    case ATTNBENCH_OP_RESHAPE_AND_CACHE: {
      const auto& p = *static_cast<const attnbench_reshape_and_cache_params*>(raw);
      const char* t = dtype_name(p.dtype);
      const char* kt = dtype_name(p.kv_dtype);
      const int64_t x = 16 / (p.kv_dtype == ATTNBENCH_FP32 ? 4 : p.kv_dtype == ATTNBENCH_FP8_E4M3 ? 1 : 2);
      f.tensor("k", p.k, t, {p.tokens, p.kv_heads, p.head_dim});
      f.tensor("v", p.v, t, {p.tokens, p.kv_heads, p.head_dim});
      f.tensor("k_cache", p.k_cache, kt, {p.num_blocks, p.kv_heads, p.head_dim / x, p.block_size, x});
      f.tensor("v_cache", p.v_cache, kt, {p.num_blocks, p.kv_heads, p.head_dim, p.block_size});
      f.tensor("slot_mapping", p.slot_mapping, "int64", {p.tokens});
      f.tensor("positions", p.rope.style ? p.positions : nullptr, "int32", {p.tokens});
      for (auto [n, v] : {std::pair{"tokens", p.tokens}, {"kv_heads", p.kv_heads}, {"head_dim", p.head_dim},
                          {"block_size", p.block_size}, {"num_blocks", p.num_blocks}})
        f.num(n, v);
      f.text("dtype", t);
      f.text("kv_dtype", kt);
      f.real("k_scale", p.k_scale);
      f.real("v_scale", p.v_scale);
      f.rope(p.rope);
      return;
    }
    case ATTNBENCH_OP_RAGGED: {
      const auto& p = *static_cast<const attnbench_ragged_params*>(raw);
      const char* t = dtype_name(p.dtype);
      const char* kt = dtype_name(p.kv_dtype);
      f.tensor("q", p.q, t, {p.total_queries, p.heads, p.head_dim});
      f.tensor("k_cache", p.k_cache, kt, {p.num_blocks, p.block_size, p.kv_heads, p.head_dim});
      f.tensor("v_cache", p.v_cache, kt, {p.num_blocks, p.block_size, p.kv_heads, p.head_dim});
      f.tensor("o", p.o, t, {p.total_queries, p.heads, p.head_dim});
      f.tensor("cu_seqlens_q", p.cu_seqlens_q, "int32", {p.batch + 1});
      f.tensor("context_lens", p.context_lens, "int32", {p.batch});
      f.tensor("block_tables", p.block_tables, "int32", {p.batch, p.max_blocks_per_seq});
      // The host's copies as Python lists: a scheduler's view, for a launch that plans.
      for (auto [name, ptr, n] : {std::tuple{"host_cu_seqlens_q", p.host_cu_seqlens_q, p.batch + 1},
                                  {"host_context_lens", p.host_context_lens, p.batch}}) {
        PyObject* list = PyList_New(0);
        for (int64_t i = 0; ptr && i < n; ++i) {
          PyObject* v = PyLong_FromLong(ptr[i]);
          PyList_Append(list, v);
          Py_DecRef(v);
        }
        PyDict_SetItemString(f.params(), name, ptr ? list : Py_None);
        Py_DecRef(list);
      }
      for (auto [n, v] : {std::pair{"batch", p.batch}, {"total_queries", p.total_queries}, {"heads", p.heads},
                          {"kv_heads", p.kv_heads}, {"head_dim", p.head_dim}, {"block_size", p.block_size},
                          {"num_blocks", p.num_blocks}, {"max_blocks_per_seq", p.max_blocks_per_seq},
                          {"longest_context", p.longest_context}, {"longest_query", p.longest_query},
                          {"window", p.window}})
        f.num(n, v);
      f.text("dtype", t);
      f.text("kv_dtype", kt);
      f.real("k_scale", p.k_scale);
      f.real("v_scale", p.v_scale);
      f.score(p.score, p.heads);
      f.rope(p.rope);
      return;
    }
    case ATTNBENCH_OP_ATTENTION_BACKWARD: {
      const auto& p = *static_cast<const attnbench_attention_backward_params*>(raw);
      const char* t = dtype_name(p.dtype);
      const std::vector<int64_t> qs = {p.batch, p.seq_q, p.heads, p.head_dim};
      const std::vector<int64_t> ks = {p.batch, p.seq_k, p.kv_heads, p.head_dim};
      f.tensor("q", p.q, t, qs);
      f.tensor("k", p.k, t, ks);
      f.tensor("v", p.v, t, ks);
      f.tensor("o", p.o, t, qs);
      f.tensor("d_o", p.d_o, t, qs);
      f.tensor("lse", p.lse, "float32", {p.batch, p.heads, p.seq_q});
      f.tensor("dq", p.dq, t, qs);
      f.tensor("dk", p.dk, t, ks);
      f.tensor("dv", p.dv, t, ks);
      for (auto [n, v] : {std::pair{"batch", p.batch}, {"heads", p.heads}, {"kv_heads", p.kv_heads}, {"seq_q", p.seq_q},
                          {"seq_k", p.seq_k}, {"head_dim", p.head_dim}, {"q_offset", p.q_offset}, {"window", p.window}})
        f.num(n, v);
      f.flag("causal", p.causal != 0);
      f.text("dtype", t);
      f.score(p.score, p.heads);
      return;
    }
    case ATTNBENCH_OP_MLA: {
      const auto& p = *static_cast<const attnbench_mla_params*>(raw);
      const char* t = dtype_name(p.dtype);
      const bool fp8 = p.kv_dtype == ATTNBENCH_FP8_E4M3;
      const int64_t width = p.latent_dim + p.rope_dim;
      f.tensor("q", p.q, t, {p.batch, p.s_q, p.heads, width});
      // A cache in the dtype is its rows' values; FlashMLA's fp8 rows mix e4m3 codes, fp32 scales
      // and bf16 RoPE values, so they go over as their bytes.
      if (fp8)
        f.tensor("cache", p.cache, "uint8", {p.num_blocks, p.block_size, p.token_bytes});
      else
        f.tensor("cache", p.cache, dtype_name(p.kv_dtype), {p.num_blocks, p.block_size, width});
      f.tensor("o", p.o, t, {p.batch, p.s_q, p.heads, p.latent_dim});
      f.tensor("block_tables", p.block_tables, "int32", {p.batch, p.max_blocks_per_seq});
      f.tensor("context_lens", p.context_lens, "int32", {p.batch});
      PyObject* list = PyList_New(0);  // the host's lengths as a Python list: a scheduler's view
      for (int64_t i = 0; p.host_context_lens && i < p.batch; ++i) {
        PyObject* v = PyLong_FromLong(p.host_context_lens[i]);
        PyList_Append(list, v);
        Py_DecRef(v);
      }
      PyDict_SetItemString(f.params(), "host_context_lens", p.host_context_lens ? list : Py_None);
      Py_DecRef(list);
      for (auto [n, v] : {std::pair{"batch", p.batch}, {"s_q", p.s_q}, {"heads", p.heads}, {"latent_dim", p.latent_dim},
                          {"rope_dim", p.rope_dim}, {"block_size", p.block_size}, {"num_blocks", p.num_blocks},
                          {"max_blocks_per_seq", p.max_blocks_per_seq}, {"longest_context", p.longest_context},
                          {"token_bytes", p.token_bytes}})
        f.num(n, v);
      f.real("scale", p.scale);
      f.flag("causal", p.causal != 0);
      f.text("dtype", t);
      f.text("kv_dtype", dtype_name(p.kv_dtype));
      return;
    }
    default:
      return;
  }
}

// Calls attnbench.py's `function(*args)` with a new reference to each arg; a new reference back.
PyObject* call(const char* function, std::initializer_list<PyObject*> args) {
  PyObject* f = PyObject_GetAttrString(module, function);
  if (!f) return nullptr;
  PyObject* tuple = PyTuple_New(static_cast<Py_ssize_t>(args.size()));
  Py_ssize_t i = 0;
  for (PyObject* a : args) PyTuple_SetItem(tuple, i++, a);
  PyObject* out = PyObject_CallObject(f, tuple);
  Py_DecRef(tuple);
  Py_DecRef(f);
  return out;
}

// ---- the trampolines ---------------------------------------------------------------------

// Calls f(slot, fields) under the GIL, with the op's struct described as Python sees it; the
// fields are released before the GIL is.
template <class F>
auto with_fields(int i, const void* params, F f) {
  Slot& s = slots[static_cast<size_t>(i)];
  const PyGILState_STATE g = PyGILState_Ensure();
  auto out = [&] {
    Fields fields;
    describe(s.op, params, fields);
    return f(s, fields);
  }();
  PyGILState_Release(g);
  return out;
}

// The bytes the variant's workspace() asks for; 0 without one, or when it raised (its launch
// then raises the same and says so).
int64_t workspace_bytes(const Slot& s, const Fields& f) {
  if (!s.has_workspace) return 0;
  PyObject* n = call("_workspace", {Py_NewRef(s.variant), Py_NewRef(f.params())});
  const int64_t bytes = n && PyLong_Check(n) ? PyLong_AsLongLong(n) : 0;
  Py_DecRef(n);
  PyErr_Clear();
  return bytes;
}

cudaError_t launch_slot(int i, const void* params, void* workspace, cudaStream_t stream) {
  return with_fields(i, params, [&](Slot& s, Fields& f) {
    const int64_t bytes = workspace_bytes(s, f);  // the workspace as a byte tensor of that size
    f.tensor("workspace", bytes > 0 ? workspace : nullptr, "uint8", {bytes});
    PyObject* r = call("_launch", {Py_NewRef(s.variant), Py_NewRef(f.tensors()), Py_NewRef(f.params()),
                                   PyLong_FromVoidPtr(stream)});
    cudaError_t result = cudaSuccess;
    if (!r) {
      pending_error = s.name + ": " + fetch_error();
      result = cudaErrorUnknown;
    } else if (r != Py_None) {
      pending_error = text_of(r);
      result = cudaErrorUnknown;
    }
    Py_DecRef(r);
    return result;
  });
}

// kSupportsError before the message marks an exception (app/plugin.hpp turns it into the row's error).
const char* supports_slot(int i, const void* params, const attnbench_device* device) {
  return with_fields(i, params, [&](Slot& s, Fields& f) -> const char* {
    PyObject* d = PyDict_New();
    for (auto [n, v] : {std::pair{"sm_count", int64_t{device->sm_count}}, {"cc_major", int64_t{device->cc_major}},
                        {"cc_minor", int64_t{device->cc_minor}},
                        {"smem_per_block_optin", static_cast<int64_t>(device->smem_per_block_optin)},
                        {"l2_bytes", static_cast<int64_t>(device->l2_bytes)},
                        {"total_memory", static_cast<int64_t>(device->total_memory)}}) {
      PyObject* x = PyLong_FromLongLong(v);
      PyDict_SetItemString(d, n, x);
      Py_DecRef(x);
    }
    PyObject* r = call("_supports", {Py_NewRef(s.variant), Py_NewRef(f.params()), d});
    if (!r)
      s.reason = attnbench::kSupportsError + fetch_error();
    else if (r == Py_None)
      s.reason.clear();
    else if (PyTuple_Check(r))
      s.reason = attnbench::kSupportsError + text_of(PyTuple_GetItem(r, 1));
    else
      s.reason = text_of(r);
    Py_DecRef(r);
    return s.reason.empty() ? nullptr : s.reason.c_str();
  });
}

size_t workspace_slot(int i, const void* params) {
  return with_fields(i, params, [](Slot& s, Fields& f) { return static_cast<size_t>(workspace_bytes(s, f)); });
}

template <int I>
cudaError_t launch_at(const void* p, void* w, cudaStream_t s) {
  return launch_slot(I, p, w, s);
}
template <int I>
const char* supports_at(const void* p, const attnbench_device* d) {
  return supports_slot(I, p, d);
}
template <int I>
size_t workspace_at(const void* p) {
  return workspace_slot(I, p);
}

struct SlotFunctions {
  cudaError_t (*launch)(const void*, void*, cudaStream_t);
  const char* (*supports)(const void*, const attnbench_device*);
  size_t (*workspace)(const void*);
};
template <int... I>
constexpr std::array<SlotFunctions, sizeof...(I)> slot_functions(std::integer_sequence<int, I...>) {
  return {{{launch_at<I>, supports_at<I>, workspace_at<I>}...}};
}
constexpr auto functions = slot_functions(std::make_integer_sequence<int, kSlots>{});

void put(char* error, size_t size, const std::string& text) {
  if (error && size) {
    std::strncpy(error, text.c_str(), size - 1);
    error[size - 1] = '\0';
  }
}

PyObject* list_of(const char* lines) {  // a list of str, one per line
  PyObject* list = PyList_New(0);
  std::string all = lines ? lines : "";
  for (size_t at = 0; at < all.size();) {
    size_t end = all.find('\n', at);
    if (end == std::string::npos) end = all.size();
    PyObject* s = PyUnicode_FromStringAndSize(all.data() + at, static_cast<Py_ssize_t>(end - at));
    PyList_Append(list, s);
    Py_DecRef(s);
    at = end + 1;
  }
  return list;
}

}  // namespace

extern "C" {

// Starts the interpreter: sys.path as the chosen python3 has it (its venv's site-packages
// included), attnbench.py's folder first; sys.executable that python3, since a library that
// starts workers of its own (torch.compile, Triton) runs sys.executable. 0 on success.
__attribute__((visibility("default"))) int attnbench_python_init(const char* executable, const char* sys_path,
                                                                 const char* module_dir, int device, char* error,
                                                                 size_t error_size) {
  if (module) return 0;
  if (!Py_IsInitialized()) Py_InitializeEx(0);  // 0: no signal handlers; Ctrl-C stays attnbench's
  PyObject* path = list_of(sys_path);
  PyObject* first = PyUnicode_FromString(module_dir);
  PyList_Insert(path, 0, first);
  Py_DecRef(first);
  PySys_SetObject("path", path);
  Py_DecRef(path);
  PyObject* exe = PyUnicode_FromString(executable);
  PySys_SetObject("executable", exe);
  Py_DecRef(exe);
  module = PyImport_ImportModule("attnbench");
  PyObject* bridge = module ? PyModule_Create(&bridge_def) : nullptr;
  if (!module || !bridge) {
    put(error, error_size, "cannot import attnbench.py from " + std::string(module_dir) + ": " + fetch_error());
    Py_DecRef(bridge);
    return 1;
  }
  PyObject_SetAttrString(module, "_bridge", bridge);
  Py_DecRef(bridge);
  PyObject* dev = PyLong_FromLong(device);
  PyObject_SetAttrString(module, "_device", dev);
  Py_DecRef(dev);
  PyEval_SaveThread();  // the GIL is taken per call from here on
  return 0;
}

// Runs one plugin file; its variants as a plugin table, or null with the message in `error`.
__attribute__((visibility("default"))) const attnbench_plugin* attnbench_python_load(const char* file, char* error,
                                                                                    size_t error_size) {
  const PyGILState_STATE g = PyGILState_Ensure();
  const attnbench_plugin* out = nullptr;
  PyObject* r = call("_load", {PyUnicode_FromString(file)});
  if (!r) {
    put(error, error_size, fetch_error());
  } else if (PyUnicode_Check(r)) {
    put(error, error_size, text_of(r));
  } else {
    const Py_ssize_t n = PyList_Size(r);
    if (used_slots + n > kSlots) {
      put(error, error_size, "more than " + std::to_string(kSlots) + " Python variants in one run");
    } else {
      const int first = used_slots;
      std::vector<attnbench_variant>& table = tables[first];
      for (Py_ssize_t i = 0; i < n; ++i) {
        PyObject* item = PyList_GetItem(r, i);  // (Variant, op number)
        Slot& s = slots[static_cast<size_t>(used_slots)];
        s.variant = Py_NewRef(PyTuple_GetItem(item, 0));
        s.op = static_cast<int32_t>(PyLong_AsLong(PyTuple_GetItem(item, 1)));
        PyObject* ws = PyObject_GetAttrString(s.variant, "workspace");
        s.has_workspace = ws && ws != Py_None;
        Py_DecRef(ws);
        PyObject* name = PyObject_GetAttrString(s.variant, "name");
        PyObject* note = PyObject_GetAttrString(s.variant, "note");
        s.name = text_of(name);
        s.note = text_of(note);
        Py_DecRef(name);
        Py_DecRef(note);
        const SlotFunctions& fn = functions[static_cast<size_t>(used_slots)];
        table.push_back({s.name.c_str(), s.note.c_str(), s.op, fn.supports, fn.workspace, fn.launch});
        ++used_slots;
      }
      plugins[first] = {ATTNBENCH_PLUGIN_ABI_VERSION, static_cast<int32_t>(n), table.data()};
      out = &plugins[first];
    }
  }
  Py_DecRef(r);
  PyGILState_Release(g);
  return out;
}

// The message of the last launch that failed in Python ("" when none), taken once.
__attribute__((visibility("default"))) const char* attnbench_python_take_error() {
  static std::string taken;
  taken = std::move(pending_error);
  pending_error.clear();
  return taken.c_str();
}

// The host time of one launch's marshalling (tensors, params and the call into Python) with a
// callable that does nothing, in microseconds: the mean of `calls`.
__attribute__((visibility("default"))) double attnbench_python_overhead_us(int32_t op, const void* params, int calls) {
  const PyGILState_STATE g = PyGILState_Ensure();
  PyObject* clock = PyImport_ImportModule("time");
  PyObject* perf = clock ? PyObject_GetAttrString(clock, "perf_counter") : nullptr;
  double seconds = 0;
  for (int c = 0; perf && c < calls; ++c) {
    PyObject* t0 = PyObject_CallObject(perf, nullptr);
    {
      Fields f;
      describe(op, params, f);
      PyObject* r = call("_noop", {Py_NewRef(f.tensors()), Py_NewRef(f.params()), PyLong_FromLong(0)});
      Py_DecRef(r);
    }
    PyObject* t1 = PyObject_CallObject(perf, nullptr);
    seconds += PyFloat_AsDouble(t1) - PyFloat_AsDouble(t0);
    Py_DecRef(t0);
    Py_DecRef(t1);
  }
  PyErr_Clear();
  Py_DecRef(perf);
  Py_DecRef(clock);
  PyGILState_Release(g);
  return calls > 0 ? 1e6 * seconds / calls : 0;
}

}  // extern "C"
