// The op registry: each op declares, in one entry, its case keys (with types,
// defaults, ranges and meanings), the checks across keys, its variants and how to
// build its problem. The case loader, `list`, `--dry-run`, dump, docs and reports ask
// this registry; nothing else knows an op by name. The entries are listed once, in
// app/ops/registry.cpp; each op's entry lives in its own file, app/ops/<op>.cpp.
#pragma once
#include <climits>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "app/checked.hpp"
#include "app/shape.hpp"
#include "kernels/common/dtype.hpp"

struct attnbench_variant;  // kernels/plugin/include/attnbench/plugin.h

namespace attnbench {

class Problem;
struct CasePoint;

enum class KeyType {
  integer,  // int64 in [min, max]; max is at most kMaxIndex (kernels index with 32-bit ints)
  boolean,
  choice,   // one word of `choices`
  lengths,  // one integer >= min per sequence: an integer (every sequence) or a list of `batch` integers
  variant,  // the name of a variant of op `variant_of`; "" = the fastest that supports the point
  number,   // a finite real in [low, high]; integers are accepted
  numbers,  // a list of such reals (its length is the op's finish() to check)
  integers, // a list of integers in [min, max] (its length is the op's finish() to check)
  pairs,    // a list of [a, b] pairs of integers in [min, max] (a ragged batch's sequences)
  path,     // a file's path: relative ones are taken from the case file's folder
  text,     // one line of text
};

struct KeySpec {
  std::string name;
  KeyType type = KeyType::integer;
  std::string meaning;                  // one line, for docs and error messages
  std::optional<ShapeValue> fallback;   // the default; none = required (unless `derived`)
  std::string derived;                  // the default computed from other keys, in words ("seq_q")
  int64_t min = 1, max = kMaxIndex;     // integer, lengths
  std::vector<std::string> choices;     // choice
  std::vector<std::string> bool_words;  // choice: false and true also accepted, as these two words
  double low = 0, high = 0;             // number, numbers
  std::string variant_of;               // variant
  // Read from the case's top level, beside op and dtype, instead of [shape]: what a whole
  // case shares and no sweep varies (a model's weights file). Never swept.
  bool top_level = false;

  bool required() const { return !fallback && derived.empty(); }
};

// Builders that keep each op's key table to one line a key.
KeySpec int_key(std::string name, std::string meaning, std::optional<int64_t> fallback = std::nullopt,
                int64_t min = 1, int64_t max = kMaxIndex);
KeySpec derived_int_key(std::string name, std::string meaning, std::string derived, int64_t min = 1,
                        int64_t max = kMaxIndex);
KeySpec bool_key(std::string name, std::string meaning, bool fallback = false);
KeySpec choice_key(std::string name, std::string meaning, std::vector<std::string> choices,
                   std::optional<std::string> fallback = std::nullopt, std::string derived = "");
KeySpec lengths_key(std::string name, std::string meaning, int64_t min = 1, int64_t max = kMaxIndex);
// A real number; `fallback` none = required, unless `derived` names how it is computed.
KeySpec number_key(std::string name, std::string meaning, std::optional<double> fallback, double low, double high,
                   std::string derived = "");
KeySpec numbers_key(std::string name, std::string meaning, double low, double high);
KeySpec variant_key(std::string name, std::string meaning, std::string variant_of);
// Optional lists of integers (an empty list is the default, read as "not given").
KeySpec integers_key(std::string name, std::string meaning, int64_t min, int64_t max = kMaxIndex);
// Optional lists of [a, b] integer pairs, each in [min, max] (an empty list is the default,
// read as "not given"); how a and b relate is the op's finish() to check.
KeySpec pairs_key(std::string name, std::string meaning, int64_t min, int64_t max = kMaxIndex);
// Optional top-level keys; "" is the default, read as "not given".
KeySpec path_key(std::string name, std::string meaning);
KeySpec text_key(std::string name, std::string meaning);

// What an op's `finish` sees of one sweep point: the keys read so far, which of them
// the case gave, and a way to fail at the key's position in the file.
class ShapeCheck {
 public:
  ShapeCheck(Shape& shape, DType dtype) : shape(shape), dtype(dtype) {}
  virtual ~ShapeCheck() = default;
  virtual bool given(const std::string& key) const = 0;
  // Points at the key when the case has it, else at [shape].
  [[noreturn]] virtual void fail(const std::string& key, const std::string& what) const = 0;

  Shape& shape;
  const DType dtype;
};

struct VariantInfo {
  std::string name, note;
};

struct OpSpec {
  std::string name;
  std::string summary;  // one line: what the op computes
  std::vector<KeySpec> keys;
  // Defaults that depend on other keys, and rules across keys; may be null.
  void (*finish)(ShapeCheck& check) = nullptr;
  // Every variant, in table order: the learner's version first (the baseline), the fastest last.
  std::vector<VariantInfo> (*variants)() = nullptr;
  std::unique_ptr<Problem> (*make)(const CasePoint& point) = nullptr;
  // The storage dtypes a case may ask for.
  std::vector<DType> dtypes = {DType::fp32, DType::fp16, DType::bf16};
  // Plugins (app/plugin.hpp): the ABI's ATTNBENCH_OP_* number of this op (0: it takes none),
  // and how a plugin's variant joins the op's kernel table, from `file`.
  int plugin_op = 0;
  void (*add_plugin)(const attnbench_variant& v, const char* file) = nullptr;

  const KeySpec* key(const std::string& key_name) const;
  std::vector<std::string> key_names() const;      // the [shape] keys (and sweep's)
  std::vector<std::string> top_key_names() const;  // the op's own top-level keys
  std::vector<std::string> variant_names() const;
  std::string baseline() const;  // the first variant; "" when there is none
};

// Every op, in the order `list` shows them.
const std::vector<OpSpec>& ops();
const OpSpec* find_op(const std::string& name);  // null when there is none
const OpSpec& op_spec(const std::string& name);  // throws std::logic_error when there is none

std::unique_ptr<Problem> make_problem(const CasePoint& point);
// The case loader's check of a point: builds its problem, which checks its tensors' sizes
// (InputError on an overflow or a tensor past 32-bit indexing; nothing is allocated), and
// names its input tensors, each with whether generate() draws it from the seed. Defined in
// app/problem.cpp, so that the loader needs only this registry.
std::vector<std::pair<std::string, bool>> point_inputs(const CasePoint& point);

}  // namespace attnbench
