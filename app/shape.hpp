// The [shape] of one sweep point: the values of its op's keys, read from the case
// file, defaulted and validated by the op's registry entry (app/op.hpp). Generic on
// purpose: the loader, dump and reports handle every op's shape the same way, and
// an op's adapter reads its own keys by name once, into its kernel's params.
#pragma once
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace attnbench {

// integer, boolean, word (a choice or a variant name), one integer per sequence, a real
// number, or a list of them (one per head), or a list of integer pairs (a ragged batch's
// [query_len, context_len] per sequence).
using IntPairs = std::vector<std::pair<int64_t, int64_t>>;
using ShapeValue = std::variant<int64_t, bool, std::string, std::vector<int64_t>, double, std::vector<double>, IntPairs>;

class Shape {
 public:
  // Each throws std::logic_error when the key is absent or of another type: the op
  // asked for a key its registry entry does not declare, a bug, not an input error.
  int64_t num(const std::string& key) const { return get<int64_t>(key); }
  bool flag(const std::string& key) const { return get<bool>(key); }
  const std::string& word(const std::string& key) const { return get<std::string>(key); }
  const std::vector<int64_t>& lengths(const std::string& key) const { return get<std::vector<int64_t>>(key); }
  double real(const std::string& key) const { return get<double>(key); }
  const std::vector<double>& reals(const std::string& key) const { return get<std::vector<double>>(key); }
  const IntPairs& pairs(const std::string& key) const { return get<IntPairs>(key); }

  bool has(const std::string& key) const { return values_.count(key) != 0; }
  void set(const std::string& key, ShapeValue v) { values_[key] = std::move(v); }
  const std::map<std::string, ShapeValue>& values() const { return values_; }

 private:
  template <class T>
  const T& get(const std::string& key) const {
    const auto it = values_.find(key);
    if (it == values_.end()) throw std::logic_error("shape key '" + key + "' was never set");
    if (const T* v = std::get_if<T>(&it->second)) return *v;
    throw std::logic_error("shape key '" + key + "' read as the wrong type");
  }
  std::map<std::string, ShapeValue> values_;
};

}  // namespace attnbench
