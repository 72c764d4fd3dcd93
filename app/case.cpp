// Case files (docs/cases.md): TOML -> overrides applied -> keys checked against the op's
// table -> sweep expanded -> each point defaulted and validated. Every problem is one
// InputError line that points at the key or value to fix.
#include "app/case.hpp"

#include "app/op.hpp"
#include "app/text.hpp"

#include <toml++/toml.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <tuple>
#include <utility>

namespace attnbench {

const char* distribution_name(Distribution d) {
  switch (d) {
    case Distribution::op: return "default";
    case Distribution::normal: return "normal";
    case Distribution::uniform: return "uniform";
    case Distribution::large: return "large";
    case Distribution::outliers: return "outliers";
    case Distribution::pareto: return "pareto";
    case Distribution::constant: return "constant";
  }
  return "?";
}

const std::vector<Distribution>& all_distributions() {
  static const std::vector<Distribution> all = {Distribution::op,       Distribution::normal, Distribution::uniform,
                                                Distribution::large,    Distribution::outliers,
                                                Distribution::pareto,   Distribution::constant};
  return all;
}

bool InputsSpec::is_default() const {
  if (!all.is_default()) return false;
  for (const auto& kv : tensors)
    if (!kv.second.is_default()) return false;
  return true;
}

namespace {

std::string number_text(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

// "large", "constant scale 0 offset 0.5", "default scale 2"
std::string describe(const InputSpec& s) {
  std::string out = distribution_name(s.distribution);
  if (s.scale) out += " scale " + number_text(*s.scale);
  if (s.offset != 0) out += " offset " + number_text(s.offset);
  return out;
}

}  // namespace

std::string InputsSpec::summary() const {
  if (is_default()) return "";
  std::string out;
  if (!all.is_default()) out = describe(all);
  for (const auto& [name, spec] : tensors) {
    const bool same = spec.distribution == all.distribution && spec.scale == all.scale && spec.offset == all.offset;
    if (!same) out += (out.empty() ? "" : ", ") + name + " " + describe(spec);
  }
  return "inputs: " + out;
}

namespace {

namespace fs = std::filesystem;

// ---------------------------------------------------------------------------
// Names, lists and suggestions

bool contains(const std::vector<std::string>& items, const std::string& s) {
  return std::find(items.begin(), items.end(), s) != items.end();
}

std::string trim(const std::string& s) {
  const auto first = s.find_first_not_of(" \t");
  if (first == std::string::npos) return "";
  return s.substr(first, s.find_last_not_of(" \t") - first + 1);
}

// ---------------------------------------------------------------------------
// Locations and errors

// Formats the one-line errors. Nodes parsed from the case file carry its path;
// nodes from a --set override carry "--set KEY=VALUE", which is their location.
// Where a --set's nodes say they come from; kept on one line like every message.
std::string set_location(const std::string& set) { return "--set " + clipped(set, 120); }

// A path a case file gives, taken from the case file's folder when relative, so that a case
// and its files move together; "" (not given) stays "".
std::string case_relative(const std::string& case_file, const std::string& entry) {
  fs::path file = entry;
  const fs::path folder = fs::path(case_file).parent_path();
  if (!file.empty() && file.is_relative() && !folder.empty()) file = folder / file;
  return file.string();
}

class Context {
 public:
  Context(std::string file, const std::vector<std::string>& sets) : file_(std::move(file)) {
    for (const auto& s : sets) set_locations_.push_back(set_location(s));
  }

  // Errors about one sweep point name it first: the same key fails for one value only.
  Context for_point(const std::string& label) const {
    Context c = *this;
    if (!label.empty()) c.prefix_ = "sweep point " + label + ": ";
    return c;
  }

  const std::string& file() const { return file_; }

  std::string where(const toml::source_region& r) const {
    if (r.path && *r.path != file_) return *r.path;
    if (r.begin.line == 0) return file_;
    return file_ + ":" + std::to_string(r.begin.line) + ":" + std::to_string(r.begin.column);
  }

  // Sort key for "file order": the file's keys by position, then overrides in --set order.
  std::tuple<size_t, uint32_t, uint32_t> order(const toml::source_region& r) const {
    size_t rank = 0;
    if (r.path && *r.path != file_) {
      const auto it = std::find(set_locations_.begin(), set_locations_.end(), *r.path);
      rank = 1 + static_cast<size_t>(it - set_locations_.begin());
    }
    return {rank, r.begin.line, r.begin.column};
  }

  [[noreturn]] void fail(const toml::source_region& r, const std::string& what) const {
    throw InputError(where(r) + ": error: " + prefix_ + what);
  }
  [[noreturn]] void fail(const std::string& what) const { throw InputError(file_ + ": error: " + prefix_ + what); }

 private:
  std::string file_, prefix_;
  std::vector<std::string> set_locations_;
};

// The table's keys in file order (toml::table iterates alphabetically).
std::vector<const toml::key*> keys_in_order(const Context& ctx, const toml::table& t) {
  std::vector<const toml::key*> keys;
  for (const auto& kv : t) keys.push_back(&kv.first);
  std::stable_sort(keys.begin(), keys.end(), [&](const toml::key* a, const toml::key* b) {
    return ctx.order(a->source()) < ctx.order(b->source());
  });
  return keys;
}

// `section` is "" for the top level, else "shape", "verify", ...
void check_keys(const Context& ctx, const toml::table& t, const std::string& section,
                const std::vector<std::string>& allowed, const std::string& allowed_what = "valid keys") {
  for (const toml::key* k : keys_in_order(ctx, t)) {
    if (contains(allowed, std::string(k->str()))) continue;
    const std::string full = section.empty() ? std::string(k->str()) : section + "." + std::string(k->str());
    ctx.fail(k->source(),
             "unknown key " + clipped(full) + hint(std::string(k->str()), allowed, allowed_what + ": " + comma_list(allowed)));
  }
}

// ---------------------------------------------------------------------------
// Typed reads of single values

// A value and the name the user knows it by: "shape.seq_q", "sweep.seq_q[2]", "kernels[0]".
struct Item {
  Item() = default;
  // A table that a --set made has no position of its own; its key has the override's.
  Item(std::string name_, const toml::node* node_, const toml::source_region& key_at = {})
      : name(std::move(name_)), node(node_), where(node_->source().begin.line ? node_->source() : key_at) {}
  const toml::source_region& at() const { return where; }

  std::string name;
  const toml::node* node = nullptr;
  toml::source_region where;
};

const char* type_name(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::table: return "table";
    case toml::node_type::array: return "list";
    case toml::node_type::string: return "string";
    case toml::node_type::integer: return "integer";
    case toml::node_type::floating_point: return "float";
    case toml::node_type::boolean: return "boolean";
    case toml::node_type::date: return "date";
    case toml::node_type::time: return "time";
    case toml::node_type::date_time: return "date-time";
    default: return "nothing";
  }
}

// How a value reads in a sweep label or a message: 8, bf16, true, [1,7,1000].
std::string show(const toml::node& n) {
  if (auto v = n.as_integer()) return std::to_string(v->get());
  if (auto v = n.as_string()) return v->get();
  if (auto v = n.as_boolean()) return v->get() ? "true" : "false";
  if (auto v = n.as_floating_point()) {
    std::ostringstream s;
    s << v->get();
    return s.str();
  }
  if (auto a = n.as_array()) {
    std::string out = "[";
    for (size_t i = 0; i < a->size(); ++i) out += (i ? "," : "") + show((*a)[i]);
    return out + "]";
  }
  return type_name(n);
}

[[noreturn]] void wrong_type(const Context& ctx, const Item& it, const char* expected) {
  ctx.fail(it.at(), it.name + " must be " + expected + ", got " + type_name(*it.node));
}

int64_t read_int(const Context& ctx, const Item& it, int64_t min, int64_t max = INT64_MAX) {
  const auto* v = it.node->as_integer();
  if (!v) wrong_type(ctx, it, "an integer");
  if (v->get() < min) ctx.fail(it.at(), it.name + " must be at least " + std::to_string(min) + ", got " + std::to_string(v->get()));
  if (v->get() > max) ctx.fail(it.at(), it.name + " must be at most " + std::to_string(max) + ", got " + std::to_string(v->get()));
  return v->get();
}

// Integers are accepted where a float is expected: `warmup_ms = 20` is natural.
double read_float(const Context& ctx, const Item& it, double min, double max = HUGE_VAL) {
  double x = 0;
  if (const auto* i = it.node->as_integer()) {
    x = static_cast<double>(i->get());
  } else if (const auto* f = it.node->as_floating_point()) {
    x = f->get();
  } else {
    wrong_type(ctx, it, "a number");
  }
  if (!std::isfinite(x) || x < min || x > max)
    ctx.fail(it.at(), it.name + " must be a finite number " +
                          (max == HUGE_VAL ? ">= " + show(toml::value<double>(min))
                                           : "between " + show(toml::value<double>(min)) + " and " +
                                                 show(toml::value<double>(max))) +
                          ", got " + show(*it.node));
  return x;
}

bool read_bool(const Context& ctx, const Item& it) {
  const auto* v = it.node->as_boolean();
  if (!v) wrong_type(ctx, it, "a boolean (true or false)");
  return v->get();
}

std::string read_string(const Context& ctx, const Item& it) {
  const auto* v = it.node->as_string();
  if (!v) wrong_type(ctx, it, "a string");
  return v->get();
}

// One of a fixed set of words; returns its index in `names`.
size_t read_choice(const Context& ctx, const Item& it, const std::vector<std::string>& names) {
  const std::string s = read_string(ctx, it);
  const auto found = std::find(names.begin(), names.end(), s);
  if (found == names.end())
    ctx.fail(it.at(), "unknown " + it.name + " '" + clipped(s) + "'" + hint(s, names, "expected " + or_list(names)));
  return static_cast<size_t>(found - names.begin());
}

std::optional<Item> field(const toml::table* t, const std::string& section, const char* key) {
  if (!t) return std::nullopt;
  const auto found = t->find(key);
  if (found == t->end()) return std::nullopt;
  return Item(section.empty() ? std::string(key) : section + "." + key, &found->second, found->first.source());
}

// ---------------------------------------------------------------------------
// Words for enums

template <class E>
std::vector<std::string> names_of(const std::vector<E>& values, const char* (*name)(E)) {
  std::vector<std::string> names;
  for (E v : values) names.push_back(name(v));
  return names;
}

template <class E>
E read_enum(const Context& ctx, const Item& it, const std::vector<E>& values, const char* (*name)(E)) {
  return values[read_choice(ctx, it, names_of(values, name))];
}

const std::vector<TimingMode> kModes = {TimingMode::cold, TimingMode::hot, TimingMode::graph, TimingMode::graph_hot};

DType read_dtype(const Context& ctx, const Item& it, const OpSpec& op) {
  const auto* s = it.node->as_string();
  if (s && s->get() == dtype_name(DType::fp8_e4m3) && !contains(names_of(op.dtypes, dtype_name), s->get()))
    ctx.fail(it.at(), it.name + " fp8_e4m3 is not an input type of op " + op.name + " (expected " +
                          or_list(names_of(op.dtypes, dtype_name)) +
                          "); fp8 is for attention's inputs and, with shape.kv_dtype = \"fp8_e4m3\", a paged KV cache");
  return read_enum(ctx, it, op.dtypes, dtype_name);
}

void check_kernel(const Context& ctx, const OpSpec& op, const Item& it, const std::string& name) {
  const std::vector<std::string> known = op.variant_names();
  if (contains(known, name)) return;
  const std::string fallback = known.empty() ? "op " + op.name + " has no kernels yet" : "known: " + comma_list(known);
  ctx.fail(it.at(), "unknown kernel '" + clipped(name) + "' for op " + op.name + hint(name, known, fallback));
}

// Any op's [shape] key: a list on one in --set means a sweep.
bool is_shape_key(const std::string& name) {
  for (const OpSpec& op : ops())
    if (op.key(name)) return true;
  return false;
}

// How deep a key's one value nests lists: 0 for a scalar, 1 for a list (context,
// alibi_slopes), 2 for a list of pairs (sequences). Only a list one level deeper sweeps it.
// (Any op's key of that name: the deepest.)
int list_depth(const std::string& name) {
  int depth = 0;
  for (const OpSpec& op : ops())
    if (const KeySpec* k = op.key(name)) {
      if (k->type == KeyType::pairs) depth = std::max(depth, 2);
      if (k->type == KeyType::lengths || k->type == KeyType::numbers || k->type == KeyType::integers)
        depth = std::max(depth, 1);
    }
  return depth;
}

// How deep a value nests lists, through its first elements: 3 is 0, [] and [1, 2] are 1, [[1, 2]] is 2.
int nesting(const toml::node& n) {
  const auto* list = n.as_array();
  return list ? 1 + (list->empty() ? 0 : nesting((*list)[0])) : 0;
}

// ---------------------------------------------------------------------------
// One sweep point: raw values -> defaulted, validated CasePoint

// What a point is made of before validation: each shape key's value node (from [shape],
// or one element of a [sweep] list) and the dtype's.
bool is_bare_word(const std::string& s);

struct RawPoint {
  std::string label;
  std::vector<std::string> pins;  // --set overrides that select this point alone
  std::map<std::string, Item> shape;
  std::optional<Item> dtype;
};

// What every point of a case shares.
struct Common {
  const OpSpec* op = nullptr;
  std::vector<std::string> kernels;
  std::string baseline;
  VerifySpec verify;
  BenchSpec bench;
  InputsSpec inputs;
  std::vector<std::pair<std::string, toml::source_region>> input_at;  // each [inputs.NAME], in file order
};

// Reads one point's [shape] by its op's key table, then lets the op finish it.
class PointReader : public ShapeCheck {
 public:
  PointReader(const Context& ctx, const RawPoint& raw, const toml::source_region& shape_at, const OpSpec& op,
              Shape& shape, DType dtype)
      : ShapeCheck(shape, dtype), ctx_(ctx.for_point(raw.label)), raw_(raw), shape_at_(shape_at), op_(op) {}

  void read() {
    // Lengths are one per sequence: read them once batch is known.
    for (const KeySpec& key : op_.keys)
      if (key.type != KeyType::lengths) read_key(key);
    for (const KeySpec& key : op_.keys)
      if (key.type == KeyType::lengths) read_key(key);
    if (op_.finish) op_.finish(*this);
    // Defaults computed from other keys (max_context = prompt + generate) obey the same range.
    for (const KeySpec& key : op_.keys)
      if (key.type == KeyType::integer && !given(key.name) && shape.has(key.name)) {
        const int64_t v = shape.num(key.name);
        if (v < key.min || v > key.max)
          fail(key.name, "shape." + key.name + " (" + (key.derived.empty() ? "its default" : key.derived) + ") is " +
                             std::to_string(v) + ", outside " + std::to_string(key.min) + ".." +
                             std::to_string(key.max));
      }
  }

  bool given(const std::string& key) const override { return raw_.shape.count(key) != 0; }

  [[noreturn]] void fail(const std::string& key, const std::string& what) const override {
    ctx_.fail(given(key) ? item(key).at() : shape_at_, what);
  }

 private:
  const Item& item(const std::string& key) const { return raw_.shape.at(key); }

  void read_key(const KeySpec& key) {
    if (!given(key.name)) {
      if (key.fallback) shape.set(key.name, *key.fallback);
      return;  // required keys were checked for the whole case; derived ones are finish()'s
    }
    const Item& it = item(key.name);
    switch (key.type) {
      case KeyType::integer: shape.set(key.name, read_int(ctx_, it, key.min, key.max)); break;
      case KeyType::boolean: shape.set(key.name, read_bool(ctx_, it)); break;
      case KeyType::choice:
        if (!key.bool_words.empty() && it.node->is_boolean()) {
          shape.set(key.name, key.bool_words[read_bool(ctx_, it) ? 1 : 0]);
          break;
        }
        if (!key.bool_words.empty() && !it.node->is_string())
          wrong_type(ctx_, it, ("true, false or one of " + or_list(key.choices)).c_str());
        shape.set(key.name, key.choices[read_choice(ctx_, it, key.choices)]);
        break;
      case KeyType::lengths: shape.set(key.name, read_lengths(key, it)); break;
      case KeyType::number: shape.set(key.name, read_float(ctx_, it, key.low, key.high)); break;
      case KeyType::numbers: {
        const auto* list = it.node->as_array();
        if (!list) wrong_type(ctx_, it, "a list of numbers");
        std::vector<double> values;
        for (size_t i = 0; i < list->size(); ++i)
          values.push_back(read_float(ctx_, Item{it.name + "[" + std::to_string(i) + "]", &(*list)[i]}, key.low,
                                      key.high));
        shape.set(key.name, values);
        break;
      }
      case KeyType::integers: {
        const auto* list = it.node->as_array();
        if (!list) wrong_type(ctx_, it, "a list of integers");
        std::vector<int64_t> values;
        for (size_t i = 0; i < list->size(); ++i)
          values.push_back(read_int(ctx_, Item{it.name + "[" + std::to_string(i) + "]", &(*list)[i]}, key.min, key.max));
        shape.set(key.name, values);
        break;
      }
      case KeyType::pairs: {
        const auto* list = it.node->as_array();
        if (!list) wrong_type(ctx_, it, "a list of [a, b] pairs of integers");
        IntPairs values;
        for (size_t i = 0; i < list->size(); ++i) {
          const Item entry{it.name + "[" + std::to_string(i) + "]", &(*list)[i]};
          const auto* pair = entry.node->as_array();
          if (!pair || pair->size() != 2)
            ctx_.fail(entry.at(), entry.name + " must be a pair [a, b] of integers, got " + show(*entry.node));
          values.emplace_back(read_int(ctx_, Item{entry.name + "[0]", &(*pair)[0]}, key.min, key.max),
                              read_int(ctx_, Item{entry.name + "[1]", &(*pair)[1]}, key.min, key.max));
        }
        shape.set(key.name, values);
        break;
      }
      case KeyType::path: shape.set(key.name, case_relative(ctx_.file(), read_string(ctx_, it))); break;
      case KeyType::text: shape.set(key.name, read_string(ctx_, it)); break;
      case KeyType::variant: {
        // Empty means "the fastest verified one", so it is allowed.
        std::string name = read_string(ctx_, it);
        if (!name.empty()) check_kernel(ctx_, op_spec(key.variant_of), it, name);
        shape.set(key.name, name);
        break;
      }
    }
  }

  // An int is every sequence's length; a list has one length per sequence.
  std::vector<int64_t> read_lengths(const KeySpec& key, const Item& it) const {
    const int64_t batch = shape.num("batch");
    auto too_small = [&](const Item& at, int64_t len, const std::string& which) {
      ctx_.fail(at.at(), key.name + " " + std::to_string(len) + which + ": " +
                             (key.min == 1 ? "every sequence needs at least one token"
                                           : "must be at least " + std::to_string(key.min)));
    };
    auto too_large = [&](const Item& at, int64_t len, const std::string& which) {
      ctx_.fail(at.at(), key.name + " " + std::to_string(len) + which + ": must be at most " + std::to_string(key.max));
    };
    if (it.node->is_integer()) {
      const int64_t len = it.node->as_integer()->get();
      if (len < key.min) too_small(it, len, "");
      if (len > key.max) too_large(it, len, "");
      return std::vector<int64_t>(static_cast<size_t>(batch), len);
    }
    const auto* list = it.node->as_array();
    if (!list) wrong_type(ctx_, it, "an integer or a list of integers (one per sequence)");
    if (static_cast<int64_t>(list->size()) != batch)
      ctx_.fail(it.at(), it.name + " has " + std::to_string(list->size()) + " entries but batch is " +
                             std::to_string(batch) + " (expected one length per sequence)");
    std::vector<int64_t> lengths;
    for (size_t i = 0; i < list->size(); ++i) {
      const Item entry{it.name + "[" + std::to_string(i) + "]", &(*list)[i]};
      if (!entry.node->is_integer()) wrong_type(ctx_, entry, "an integer");
      const int64_t len = entry.node->as_integer()->get();
      if (len < key.min) too_small(entry, len, " for sequence " + std::to_string(i));
      if (len > key.max) too_large(entry, len, " for sequence " + std::to_string(i));
      lengths.push_back(len);
    }
    return lengths;
  }

  Context ctx_;
  const RawPoint& raw_;
  toml::source_region shape_at_;
  const OpSpec& op_;
};

// ---------------------------------------------------------------------------
// The whole case: top level, sections, sweep

struct SweepAxis {
  std::string key;
  std::vector<Item> values;
};


class CaseReader {
 public:
  CaseReader(const Context& ctx, const toml::table& doc, int64_t max_points)
      : ctx_(ctx), doc_(doc), max_points_(max_points) {}

  Case read() {
    const OpSpec& op = read_op();
    std::vector<std::string> top = {"name",  "description", "op",     "dtype", "kernels", "baseline",
                                    "shape", "sweep",       "verify", "bench", "plugins", "inputs"};
    for (const std::string& k : op.top_key_names()) top.push_back(k);
    check_keys(ctx_, doc_, "", top);
    Case c;
    c.file = ctx_.file();
    c.op = op.name;
    c.name = fs::path(c.file).stem().string();
    if (auto it = field(&doc_, "", "name")) c.name = read_text(*it, 100);
    if (auto it = field(&doc_, "", "description")) c.description = read_text(*it, 1000);

    c.plugins = read_plugins();
    Common common;
    common.op = &op;
    read_kernels(common);
    common.verify = read_verify();
    common.bench = read_bench();
    read_inputs(common);

    const toml::table* shape = section("shape");
    if (shape) check_keys(ctx_, *shape, "shape", op.key_names(), "valid keys for " + op.name);
    const auto axes = read_sweep(op);
    RawPoint base = base_point(shape, op);
    check_sweep_conflicts(base, axes);
    check_required(base, axes, op, shape);
    check_point_count(axes);

    const toml::source_region shape_at = shape ? shape->source() : toml::source_region{};
    for (const RawPoint& raw : expand(base, axes)) c.points.push_back(read_point(raw, shape_at, common));
    return c;
  }

 private:
  // A name or description: one printable line, since tables, paths and reports show it.
  std::string read_text(const Item& it, size_t max) const {
    std::string v = read_string(ctx_, it);
    if (v.size() > max)
      ctx_.fail(it.at(), it.name + " is " + std::to_string(v.size()) + " bytes long; at most " + std::to_string(max));
    if (std::any_of(v.begin(), v.end(), [](char ch) { return static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f; }))
      ctx_.fail(it.at(), it.name + " '" + clipped(v) + "' has a control character; it must be one printable line");
    return v;
  }

  // plugins = ["file.cu", ...], relative to the case file. The CLI loads them before any
  // case (case_plugin_files), so that the kernels key can name their variants.
  std::vector<std::string> read_plugins() const {
    std::vector<std::string> out;
    const auto it = field(&doc_, "", "plugins");
    if (!it) return out;
    const auto* list = it->node->as_array();
    if (!list) wrong_type(ctx_, *it, "a list of plugin files");
    for (size_t i = 0; i < list->size(); ++i) {
      const Item entry{"plugins[" + std::to_string(i) + "]", &(*list)[i]};
      const std::string file = case_relative(ctx_.file(), read_string(ctx_, entry));
      std::error_code ec;
      if (!fs::is_regular_file(file, ec)) ctx_.fail(entry.at(), "no such plugin file " + clipped(file));
      out.push_back(file);
    }
    return out;
  }

  // A [table] by name, or null when the file has none.
  const toml::table* section(const char* name) const {
    const auto it = field(&doc_, "", name);
    if (!it) return nullptr;
    if (!it->node->is_table()) wrong_type(ctx_, *it, "a table");
    return it->node->as_table();
  }

  CasePoint read_point(const RawPoint& raw, const toml::source_region& shape_at, const Common& common) const {
    CasePoint p;
    p.label = raw.label;
    p.pins = raw.pins;
    p.op = common.op->name;
    p.kernels = common.kernels;
    p.baseline = common.baseline;
    p.verify = common.verify;
    p.bench = common.bench;
    p.inputs = common.inputs;
    if (raw.dtype) p.dtype = read_dtype(ctx_.for_point(raw.label), *raw.dtype, *common.op);
    PointReader(ctx_, raw, shape_at, *common.op, p.shape, p.dtype).read();
    // Its tensors' sizes, checked now: an overflow or a tensor past 32-bit indexing is
    // refused before any run allocates a byte.
    std::vector<std::pair<std::string, bool>> inputs;
    try {
      inputs = point_inputs(p);
    } catch (const InputError& e) {
      ctx_.for_point(raw.label).fail(shape_at, e.what());
    }
    check_input_names(common, inputs);
    return p;
  }

  // Each [inputs.NAME] names a tensor the op draws from the seed. `inputs`: the point's
  // input tensors, (name, drawn from the seed).
  void check_input_names(const Common& common, const std::vector<std::pair<std::string, bool>>& inputs) const {
    std::vector<std::string> drawn, all;
    for (const auto& [name, is_drawn] : inputs) {
      all.push_back(name);
      if (is_drawn) drawn.push_back(name);
    }
    for (const auto& [name, at] : common.input_at) {
      if (!contains(all, name))
        ctx_.fail(at, "unknown input tensor inputs." + clipped(name) + " for op " + common.op->name +
                          hint(name, drawn, "its drawn inputs: " + comma_list(drawn)));
      if (!contains(drawn, name))
        ctx_.fail(at, "inputs." + name + ": op " + common.op->name + " does not draw tensor " + name +
                          " from the seed (it fills it itself, e.g. from a checkpoint); its drawn inputs: " +
                          (drawn.empty() ? std::string("none") : comma_list(drawn)));
    }
  }

  // [inputs]: distribution, scale and offset for every drawn tensor, and [inputs.NAME]
  // tables whose keys override those for one tensor.
  void read_inputs(Common& common) const {
    const toml::table* t = section("inputs");
    if (!t) return;
    static const std::vector<std::string> keys = {"distribution", "scale", "offset"};
    std::vector<std::pair<std::string, const toml::table*>> tables;
    for (const toml::key* k : keys_in_order(ctx_, *t)) {
      const std::string name(k->str());
      if (contains(keys, name)) continue;
      const toml::node* n = t->get(name);
      if (!n->is_table())
        ctx_.fail(k->source(), "unknown key inputs." + clipped(name) +
                                   hint(name, keys,
                                        "[inputs] takes distribution, scale and offset, and a table [inputs.NAME] "
                                        "per input tensor"));
      tables.emplace_back(name, n->as_table());
      common.input_at.emplace_back(name, k->source());
    }
    read_input_spec(*t, "inputs", common.inputs.all);
    for (const auto& [name, sub] : tables) {
      const std::string section_name = "inputs." + clipped(name);
      check_keys(ctx_, *sub, section_name, keys);
      InputSpec spec = common.inputs.all;
      read_input_spec(*sub, section_name, spec);
      common.inputs.tensors[name] = spec;
    }
  }

  void read_input_spec(const toml::table& t, const std::string& section_name, InputSpec& spec) const {
    constexpr double kLargest = 3.4028234663852886e38;  // fp32's largest finite value
    if (auto it = field(&t, section_name, "distribution"))
      spec.distribution = read_enum(ctx_, *it, all_distributions(), distribution_name);
    if (auto it = field(&t, section_name, "scale")) spec.scale = read_float(ctx_, *it, 0, kLargest);
    if (auto it = field(&t, section_name, "offset")) spec.offset = read_float(ctx_, *it, -kLargest, kLargest);
  }

  const OpSpec& read_op() const {
    std::vector<std::string> names;
    for (const OpSpec& op : ops()) names.push_back(op.name);
    const auto it = field(&doc_, "", "op");
    if (!it) ctx_.fail("missing key op (expected " + or_list(names) + ")");
    return ops()[read_choice(ctx_, *it, names)];
  }

  void read_kernels(Common& common) const {
    if (auto it = field(&doc_, "", "kernels")) {
      const auto* list = it->node->as_array();
      if (!list) wrong_type(ctx_, *it, "a list of kernel names");
      if (list->empty())
        ctx_.fail(it->at(), "kernels is empty (leave it out to run every variant that supports the case)");
      for (size_t i = 0; i < list->size(); ++i) {
        const Item entry{"kernels[" + std::to_string(i) + "]", &(*list)[i]};
        const std::string name = read_string(ctx_, entry);
        check_kernel(ctx_, *common.op, entry, name);
        if (!contains(common.kernels, name)) common.kernels.push_back(name);
      }
    }
    if (auto it = field(&doc_, "", "baseline")) {
      common.baseline = read_string(ctx_, *it);
      check_kernel(ctx_, *common.op, *it, common.baseline);
    } else {
      common.baseline = common.op->baseline();
    }
    // The runner needs the baseline's time for the speedup column.
    if (!common.kernels.empty() && !common.baseline.empty() && !contains(common.kernels, common.baseline))
      common.kernels.push_back(common.baseline);
  }

  VerifySpec read_verify() const {
    VerifySpec v;
    const toml::table* t = section("verify");
    if (!t) return v;
    check_keys(ctx_, *t, "verify", {"seed", "trials", "atol", "rtol", "max_rows", "bound_factor", "bound_floor",
                                           "repeat"});
    if (auto it = field(t, "verify", "seed")) v.seed = static_cast<uint64_t>(read_int(ctx_, *it, 0));
    if (auto it = field(t, "verify", "trials")) v.trials = static_cast<int>(read_int(ctx_, *it, 1, kMaxTrials));
    if (auto it = field(t, "verify", "atol")) v.atol = read_float(ctx_, *it, 0);
    if (auto it = field(t, "verify", "rtol")) v.rtol = read_float(ctx_, *it, 0);
    if (auto it = field(t, "verify", "max_rows")) v.max_rows = read_int(ctx_, *it, 0, kMaxIndex);
    if (auto it = field(t, "verify", "repeat")) v.repeat = static_cast<int>(read_int(ctx_, *it, 1, kMaxTrials));
    if (auto it = field(t, "verify", "bound_factor")) v.bound_factor = read_float(ctx_, *it, 0, 1e6);
    if (auto it = field(t, "verify", "bound_floor")) v.bound_floor = read_float(ctx_, *it, 0, 1);
    return v;
  }

  BenchSpec read_bench() const {
    BenchSpec b;
    const toml::table* t = section("bench");
    if (!t) return b;
    check_keys(ctx_, *t, "bench", {"mode", "warmup_ms", "min_time_ms", "max_noise", "max_time_ms"});
    if (auto it = field(t, "bench", "mode")) b.mode = read_enum(ctx_, *it, kModes, mode_name);
    if (auto it = field(t, "bench", "warmup_ms")) b.warmup_ms = read_float(ctx_, *it, 0, kMaxWarmupMs);
    if (auto it = field(t, "bench", "min_time_ms")) b.min_time_ms = read_float(ctx_, *it, 0, kMaxSamplingMs);
    if (auto it = field(t, "bench", "max_noise")) b.max_noise = read_float(ctx_, *it, 0, 1);
    const auto max_time = field(t, "bench", "max_time_ms");
    if (!max_time) {
      // Raising only min_time_ms asks for longer sampling; the default cap must not refuse it.
      b.max_time_ms = std::max(b.max_time_ms, b.min_time_ms);
    } else {
      b.max_time_ms = read_float(ctx_, *max_time, 0, kMaxSamplingMs);
      if (b.max_time_ms < b.min_time_ms)
        ctx_.fail(max_time->at(), "bench.max_time_ms (" + show(*max_time->node) +
                                      ") must be at least bench.min_time_ms (" +
                                      show(toml::value<double>(b.min_time_ms)) + ")");
    }
    return b;
  }

  // Lists of values per key, in file order; the first key varies slowest.
  std::vector<SweepAxis> read_sweep(const OpSpec& op) const {
    std::vector<SweepAxis> axes;
    const toml::table* t = section("sweep");
    if (!t) return axes;
    std::vector<std::string> allowed = op.key_names();
    allowed.push_back("dtype");
    check_keys(ctx_, *t, "sweep", allowed, "a [shape] key of this op, or dtype");
    for (const toml::key* k : keys_in_order(ctx_, *t)) {
      const Item it{"sweep." + std::string(k->str()), t->get(k->str())};
      const auto* list = it.node->as_array();
      if (!list || list->empty())
        ctx_.fail(it.at(), it.name + " must be a non-empty list of values or a range like \"1024:16384:*2\", got " +
                               (list ? "[]" : type_name(*it.node)));
      SweepAxis axis{std::string(k->str()), {}};
      for (size_t i = 0; i < list->size(); ++i)
        axis.values.push_back(Item{it.name + "[" + std::to_string(i) + "]", &(*list)[i]});
      axes.push_back(std::move(axis));
    }
    return axes;
  }

  RawPoint base_point(const toml::table* shape, const OpSpec& op) const {
    RawPoint base;
    if (shape)
      for (const auto& kv : *shape) {
        const std::string key(kv.first.str());
        base.shape[key] = Item("shape." + key, &kv.second, kv.first.source());
      }
    // The op's top-level keys are read with the point's [shape], under their own names.
    for (const std::string& key : op.top_key_names())
      if (auto it = field(&doc_, "", key.c_str())) base.shape[key] = *it;
    base.dtype = field(&doc_, "", "dtype");
    return base;
  }

  // A value in both places is ambiguous; asking the user to pick is clearer than a silent rule.
  void check_sweep_conflicts(const RawPoint& base, const std::vector<SweepAxis>& axes) const {
    for (const auto& axis : axes) {
      const Item* fixed = axis.key == "dtype" ? (base.dtype ? &*base.dtype : nullptr)
                                              : (base.shape.count(axis.key) ? &base.shape.at(axis.key) : nullptr);
      if (fixed) ctx_.fail(fixed->at(), fixed->name + " is also swept; remove one");
    }
  }

  void check_required(const RawPoint& base, const std::vector<SweepAxis>& axes, const OpSpec& op,
                      const toml::table* shape) const {
    std::vector<std::string> required;
    for (const KeySpec& k : op.keys)
      if (k.required()) required.push_back(k.name);
    for (const auto& key : required) {
      const bool swept = std::any_of(axes.begin(), axes.end(), [&](const SweepAxis& a) { return a.key == key; });
      if (base.shape.count(key) || swept) continue;
      const std::string what =
          "missing key shape." + key + " (the [shape] of op " + op.name + " needs " + comma_list(required) + ")";
      if (shape) ctx_.fail(shape->source(), what);
      ctx_.fail(what);
    }
  }

  // Refused before the product is built: three lists of 1000 would be 10^9 points.
  void check_point_count(const std::vector<SweepAxis>& axes) const {
    int64_t n = 1;
    std::string product;
    for (const auto& axis : axes) {
      const auto size = static_cast<int64_t>(axis.values.size());
      product += (product.empty() ? "" : " x ") + std::to_string(size);
      n = n > max_points_ ? n : n * size;  // stops growing once past the cap: no overflow
    }
    if (n > max_points_)
      ctx_.fail(section("sweep")->source(),
                "the sweep makes more than " + std::to_string(max_points_) + " points (" + product +
                    "); a run takes at most " + std::to_string(max_points_) + " (raise it with --max-points)");
  }

  // The cartesian product, first axis outermost.
  static std::vector<RawPoint> expand(const RawPoint& base, const std::vector<SweepAxis>& axes) {
    std::vector<RawPoint> points = {base};
    for (const auto& axis : axes) {
      std::vector<RawPoint> next;
      for (const RawPoint& p : points) {
        for (const Item& v : axis.values) {
          RawPoint q = p;
          if (axis.key == "dtype")
            q.dtype = v;
          else
            q.shape[axis.key] = v;
          q.label += (q.label.empty() ? "" : " ") + axis.key + "=" + show(*v.node);
          const std::string value = v.node->is_string() && !is_bare_word(show(*v.node))
                                        ? "\"" + show(*v.node) + "\""
                                        : show(*v.node);
          q.pins.push_back((axis.key == "dtype" ? "" : "shape.") + axis.key + "=" + value);
          next.push_back(std::move(q));
        }
      }
      points = std::move(next);
    }
    return points;
  }

  const Context& ctx_;
  const toml::table& doc_;
  int64_t max_points_;
};

// ---------------------------------------------------------------------------
// Sweep ranges: "START:STOP:*FACTOR" (1024:16384:*2) or "START:STOP:+STEP" (64:256:+64).
// "xFACTOR" is "*FACTOR" for the shell: an unquoted * on a command line is a glob.

bool looks_like_range(const std::string& s) {
  const auto a = s.find(':'), b = s.find(':', a == std::string::npos ? a : a + 1);
  return a != std::string::npos && b != std::string::npos && b + 1 < s.size() &&
         (s[b + 1] == '*' || s[b + 1] == 'x' || s[b + 1] == '+');
}

// The values, STOP included when the steps reach it; `error` says why there are none.
std::vector<int64_t> range_values(const std::string& s, int64_t max_values, std::string& error) {
  const auto number = [](const std::string& t, int64_t& out) {
    if (t.empty() || t.size() > 18 || !std::all_of(t.begin(), t.end(), [](char c) { return c >= '0' && c <= '9'; }))
      return false;
    out = std::stoll(t);
    return true;
  };
  const auto a = s.find(':'), b = s.find(':', a + 1);
  int64_t start = 0, stop = 0, step = 0;
  const bool times = s[b + 1] == '*' || s[b + 1] == 'x';
  if (!number(s.substr(0, a), start) || !number(s.substr(a + 1, b - a - 1), stop) || !number(s.substr(b + 2), step)) {
    error = "a range is START:STOP:*FACTOR (or xFACTOR) or START:STOP:+STEP with whole numbers, like 1024:16384:*2";
    return {};
  }
  if (start > stop || (times ? (start < 1 || step < 2) : step < 1)) {
    error = times ? "needs 1 <= START <= STOP and a FACTOR of at least 2" : "needs START <= STOP and a STEP of at least 1";
    return {};
  }
  std::vector<int64_t> values;
  for (int64_t v = start; v <= stop; v = times ? v * step : v + step) {
    if (static_cast<int64_t>(values.size()) == max_values) {
      error = "makes more than " + std::to_string(max_values) + " values (raise the limit with --max-points)";
      return {};
    }
    values.push_back(v);
    if (times ? v > stop / step : v > stop - step) break;  // the next value passes STOP (and could overflow)
  }
  return values;
}

// Each [sweep] value given as a range string becomes the list it names.
void expand_ranges(const Context& ctx, toml::table& doc, int64_t max_values) {
  auto* sweep = doc.get_as<toml::table>("sweep");
  if (!sweep) return;
  std::vector<std::pair<toml::key, toml::array>> lists;
  for (const auto& [key, node] : *sweep) {
    const auto* str = node.as_string();
    if (!str || !looks_like_range(str->get())) continue;
    std::string error;
    const std::vector<int64_t> values = range_values(str->get(), max_values, error);
    if (values.empty())
      ctx.fail(node.source().begin.line ? node.source() : key.source(),
               "sweep." + std::string(key.str()) + " = \"" + clipped(str->get()) + "\": " + error);
    toml::array list;
    for (int64_t v : values) list.push_back(v);
    lists.emplace_back(key, std::move(list));
  }
  for (auto& [key, list] : lists) sweep->insert_or_assign(key, std::move(list));
}

// ---------------------------------------------------------------------------
// --set overrides, applied to the document before it is read

std::string lower_first(std::string s) {
  if (!s.empty()) s[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(s[0])));
  return s;
}

// Unquoted words a shell user types for strings: bf16, cold, flash_mma, fp8_e4m3.
bool is_bare_word(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.' || c == '+';
  });
}

// "[bf16, fp16, 512]" -> "[\"bf16\", \"fp16\", 512]": a flat list's bare words quoted, its
// TOML values (numbers, booleans, quoted strings) as they are; nothing for anything else.
std::optional<std::string> quote_bare_list(const std::string& v) {
  if (v.size() < 2 || v.front() != '[' || v.back() != ']') return std::nullopt;
  const std::string inner = v.substr(1, v.size() - 2);
  if (inner.find_first_of("[]{}\"'#") != std::string::npos) return std::nullopt;
  std::string out = "[";
  size_t start = 0;
  while (start <= inner.size()) {
    const size_t comma = std::min(inner.find(',', start), inner.size());
    const std::string item = trim(inner.substr(start, comma - start));
    if (item.empty()) {
      if (comma == inner.size() && start > 0) break;  // a trailing comma, as TOML allows
      return std::nullopt;
    }
    // toml_guard first (app/toml_guard.hpp): what toml++ 3.3 mishandles never reaches it.
    const bool toml_value = !toml_guard("x = " + item) && static_cast<bool>(toml::parse("x = " + item));
    if (!toml_value && !is_bare_word(item) && !looks_like_range(item)) return std::nullopt;
    out += (out.size() > 1 ? ", " : "") + (toml_value ? item : "\"" + item + "\"");
    start = comma + 1;
  }
  return out + "]";
}

class Override {
 public:
  explicit Override(const std::string& set) : where_(set_location(set)) {
    const auto eq = set.find('=');
    key_ = trim(set.substr(0, eq));
    if (eq == std::string::npos || key_.empty()) fail("expected KEY=VALUE, like shape.seq_q=8192");
    value_ = trim(set.substr(eq + 1));
    if (set.find_first_of("\r\n") != std::string::npos) fail("KEY=VALUE must be on one line");
    parsed_ = parse();
    find_path();
  }

  void apply(toml::table& doc) {
    retarget_to_sweep();
    clear_other_slot(doc);
    toml::table* t = &doc;
    for (size_t i = 0; i + 1 < path_.size(); ++i) {
      if (!t->get(path_[i].str())) t->insert(path_[i], toml::table{});
      toml::node* n = t->get(path_[i].str());
      if (!n->is_table()) fail(dotted(i + 1) + " is a " + type_name(*n) + ", not a table");
      t = n->as_table();
    }
    t->erase(path_.back().str());
    // Moving keeps the value's source: errors about it point at this --set.
    leaf_->visit([&](auto& v) { t->insert_or_assign(path_.back(), std::move(v)); });
  }

 private:
  [[noreturn]] void fail(const std::string& what) const { throw InputError(where_ + ": error: " + what); }

  // Parsing "KEY = VALUE" as TOML gives dotted and quoted keys their TOML meaning, and
  // names this --set as the source of every node it makes.
  toml::table parse() const {
    // toml_guard (app/toml_guard.hpp, toml++'s config header): what toml++ 3.3 mishandles.
    if (const auto bad = toml_guard(key_ + " = 0")) fail("bad key '" + key_ + "': " + bad->what);
    if (!toml::parse(key_ + " = 0", std::string_view(where_)))
      fail("bad key '" + key_ + "' (expected a dotted path like shape.seq_q)");
    if (const auto bad = toml_guard(key_ + " = " + value_)) fail("bad value '" + value_ + "': " + bad->what);
    auto r = toml::parse(key_ + " = " + value_, std::string_view(where_));
    if (!r && (is_bare_word(value_) || looks_like_range(value_)))
      r = toml::parse(key_ + " = \"" + value_ + "\"", std::string_view(where_));
    if (!r) {
      // A list of bare words, as a shell user types it: dtype=[bf16,fp16].
      const auto quoted = quote_bare_list(value_);
      if (quoted && !toml_guard(key_ + " = " + *quoted)) r = toml::parse(key_ + " = " + *quoted, std::string_view(where_));
    }
    if (!r) fail("bad value '" + value_ + "': " + lower_first(std::string(r.error().description())));
    return std::move(r).table();
  }

  // Dotted keys make nested non-inline tables of one entry each; the leaf is the value.
  // A key TOML reads as nothing ('#' starts a comment: `#`, ` #x`) leaves the table empty,
  // and a quoted empty or blank part (`""`, `''`, `"".x`, `shape." "`) names no key: both
  // are bad keys, refused before anything looks inside.
  void find_path() {
    toml::table* t = &parsed_;
    while (true) {
      if (t->size() != 1)
        fail("bad key '" + clipped(key_) + "' (expected a dotted path like shape.seq_q" +
             (key_.find('#') != std::string::npos ? "; '#' starts a TOML comment" : "") + ")");
      const auto entry = t->begin();  // toml++ iterators hold the pair they yield
      const toml::key& key = entry->first;
      toml::node& node = entry->second;
      if (key.str().find_first_not_of(" \t") == std::string_view::npos)
        fail("bad key '" + clipped(key_) + "': an empty or blank part (expected a dotted path like shape.seq_q)");
      path_.push_back(key);
      toml::table* sub = node.as_table();
      if (!sub || sub->is_inline() || sub->size() != 1) {
        leaf_ = &node;
        return;
      }
      t = sub;
    }
  }

  // A list on a shape key (or dtype) means "run each": that is a sweep. For context a
  // list of ints is one length per sequence; only a list of lists is a sweep (for
  // sequences, a list of pairs is one batch; only a list of lists of pairs is a sweep).
  void retarget_to_sweep() {
    const auto* list = leaf_->as_array();
    const bool range = leaf_->is_string() && looks_like_range(leaf_->as_string()->get());
    if (!list && !range) return;
    const bool shape_key = path_.size() == 2 && path_[0] == "shape" && is_shape_key(std::string(path_[1].str()));
    const bool dtype = path_.size() == 1 && path_[0] == "dtype";
    if (!shape_key && !dtype) return;
    if (list && nesting(*leaf_) <= list_depth(std::string(path_.back().str()))) return;
    path_ = {toml::key("sweep", path_[0].source()), path_.back()};
  }

  // A key lives in one place, fixed or swept: an override of either replaces both.
  void clear_other_slot(toml::table& doc) const {
    const bool top_dtype = path_.size() == 1 && path_[0] == "dtype";
    const bool slot = path_.size() == 2 && (path_[0] == "sweep" || (path_[0] == "shape" && path_[1] != "dtype"));
    if (!top_dtype && !slot) return;
    const std::string name(path_.back().str());
    if (auto* sweep = doc.get_as<toml::table>("sweep")) sweep->erase(name);
    if (name == "dtype") {
      doc.erase("dtype");
    } else if (auto* shape = doc.get_as<toml::table>("shape")) {
      shape->erase(name);
    }
  }

  std::string dotted(size_t n) const {
    std::string out;
    for (size_t i = 0; i < n; ++i) out += (i ? "." : "") + std::string(path_[i].str());
    return out;
  }

  std::string where_, key_, value_;
  toml::table parsed_;
  std::vector<toml::key> path_;
  toml::node* leaf_ = nullptr;
};

// ---------------------------------------------------------------------------
// Finding case files

bool is_toml(const fs::path& p) { return p.extension() == ".toml"; }

std::vector<std::string> toml_files_below(const fs::path& dir) {
  std::vector<std::string> files;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec), end;
       !ec && it != end; it.increment(ec))
    if (it->is_regular_file(ec) && is_toml(it->path())) files.push_back(it->path().string());
  std::sort(files.begin(), files.end());
  return files;
}

std::vector<std::string> cases_in_dir(const fs::path& dir) {
  auto files = toml_files_below(dir);
  if (files.empty()) throw InputError(dir.string() + ": error: no .toml case files here");
  return files;
}

}  // namespace

// ---------------------------------------------------------------------------
// Public API

namespace {

// The case's TOML document with the --set overrides applied; InputError at the fault.
toml::table case_document(const Context& ctx, const std::string& toml_text, const std::vector<std::string>& sets) {
  // toml_guard (app/toml_guard.hpp, toml++'s config header): what toml++ 3.3 mishandles.
  if (const auto bad = toml_guard(toml_text))
    ctx.fail(toml::source_region{{bad->line, bad->column}, {bad->line, bad->column}, nullptr},
             "invalid TOML: " + bad->what);
  auto parsed = toml::parse(toml_text, std::string_view(ctx.file()));
  if (!parsed)
    ctx.fail(parsed.error().source(), "invalid TOML: " + lower_first(std::string(parsed.error().description())));
  toml::table doc = std::move(parsed).table();
  for (const auto& set : sets) Override(set).apply(doc);
  return doc;
}

// A case file's text; InputError when it is missing, a directory, too large, unreadable or empty.
std::string case_text(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) throw InputError(path + ": error: no such case file");
  if (fs::is_directory(path, ec)) throw InputError(path + ": error: is a directory, not a case file");
  if (const auto size = fs::file_size(path, ec); !ec && size > kMaxCaseBytes)
    throw InputError(path + ": error: the case file is " + std::to_string(size) + " bytes; case files are at most " +
                     std::to_string(kMaxCaseBytes));
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  if (!in) throw InputError(path + ": error: cannot read the case file");
  const std::string s = text.str();
  if (s.find_first_not_of(" \t\r\n") == std::string::npos) throw InputError(path + ": error: empty case file");
  return s;
}

}  // namespace

Case parse_case(const std::string& toml_text, const std::string& source, const std::vector<std::string>& sets,
                int64_t max_points) {
  const Context ctx(source, sets);
  toml::table doc = case_document(ctx, toml_text, sets);
  expand_ranges(ctx, doc, max_points);
  return CaseReader(ctx, doc, max_points).read();
}

Case load_case(const std::string& path, const std::vector<std::string>& sets, int64_t max_points) {
  return parse_case(case_text(path), path, sets, max_points);
}

std::vector<std::string> case_plugin_files(const std::string& path, const std::vector<std::string>& sets) {
  std::vector<std::string> out;
  toml::table doc;
  try {  // a case that does not load is the case load's to report, with its position
    doc = case_document(Context(path, sets), case_text(path), sets);
  } catch (const std::exception&) {
    return out;
  }
  if (const auto* list = doc["plugins"].as_array())
    for (const auto& entry : *list)
      if (const auto* file = entry.as_string()) out.push_back(case_relative(path, file->get()));
  return out;
}

std::vector<std::string> resolve_case_paths(const std::string& arg, const std::string& cases_dir) {
  std::error_code ec;
  // An empty word would name cases_dir itself: a mistyped variable must not run everything.
  if (arg.empty()) throw InputError("error: an empty case argument (give a case file, directory, name or `all`)");
  if (fs::is_regular_file(arg, ec) && is_toml(arg)) return {arg};
  if (fs::is_directory(arg, ec)) return cases_in_dir(arg);
  if (arg == "all") return cases_in_dir(cases_dir);

  const fs::path dir(cases_dir);
  if (is_toml(arg)) {
    // A path to a file, maybe relative to cases_dir ("smoke/softmax.toml").
    if (fs::is_regular_file(dir / arg, ec)) return {(dir / arg).string()};
    throw InputError(arg + ": error: no such case file");
  }
  if (fs::is_regular_file(dir / (arg + ".toml"), ec)) return {(dir / (arg + ".toml")).string()};
  if (fs::is_directory(dir / arg, ec)) return cases_in_dir(dir / arg);
  // A bare name found anywhere below cases_dir, when exactly one file has it. Two that share
  // it (attention/gqa, mha/gqa) are never guessed between: the message gives the names to type.
  std::vector<std::string> matches, names;
  for (const auto& f : toml_files_below(dir)) {
    const std::string name = fs::path(f).lexically_relative(dir).replace_extension().generic_string();
    names.push_back(name);
    names.push_back(fs::path(f).stem().string());
    if (fs::path(f).filename() == arg + ".toml") matches.push_back(f);
  }
  if (matches.size() == 1) return matches;
  if (matches.size() > 1) {
    std::vector<std::string> full;
    for (const auto& f : matches) full.push_back(fs::path(f).lexically_relative(dir).replace_extension().generic_string());
    throw InputError("error: case name '" + clipped(arg) + "' is ambiguous: " + std::to_string(matches.size()) +
                     " case files have it; type " + or_list(full));
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  throw InputError("error: no case named '" + clipped(arg) + "' under " + cases_dir +
                   hint(arg, names, "`attnbench list cases` lists them"));
}

}  // namespace attnbench
