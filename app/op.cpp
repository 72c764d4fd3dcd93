#include "app/op.hpp"

#include <stdexcept>

namespace attnbench {

KeySpec int_key(std::string name, std::string meaning, std::optional<int64_t> fallback, int64_t min, int64_t max) {
  KeySpec k;
  k.name = std::move(name);
  k.meaning = std::move(meaning);
  if (fallback) k.fallback = *fallback;
  k.min = min;
  k.max = max;
  return k;
}

KeySpec derived_int_key(std::string name, std::string meaning, std::string derived, int64_t min, int64_t max) {
  KeySpec k = int_key(std::move(name), std::move(meaning), std::nullopt, min, max);
  k.derived = std::move(derived);
  return k;
}

KeySpec bool_key(std::string name, std::string meaning, bool fallback) {
  KeySpec k;
  k.name = std::move(name);
  k.type = KeyType::boolean;
  k.meaning = std::move(meaning);
  k.fallback = fallback;
  return k;
}

KeySpec choice_key(std::string name, std::string meaning, std::vector<std::string> choices,
                   std::optional<std::string> fallback, std::string derived) {
  KeySpec k;
  k.name = std::move(name);
  k.type = KeyType::choice;
  k.meaning = std::move(meaning);
  k.choices = std::move(choices);
  if (fallback) k.fallback = *fallback;
  k.derived = std::move(derived);
  return k;
}

KeySpec lengths_key(std::string name, std::string meaning, int64_t min, int64_t max) {
  KeySpec k;
  k.name = std::move(name);
  k.type = KeyType::lengths;
  k.meaning = std::move(meaning);
  k.min = min;
  k.max = max;
  return k;
}

KeySpec number_key(std::string name, std::string meaning, std::optional<double> fallback, double low, double high,
                   std::string derived) {
  KeySpec k;
  k.name = std::move(name);
  k.type = KeyType::number;
  k.meaning = std::move(meaning);
  if (fallback) k.fallback = *fallback;
  k.derived = std::move(derived);
  k.low = low;
  k.high = high;
  return k;
}

// Optional: an empty list is the default, which the op reads as "not given".
KeySpec numbers_key(std::string name, std::string meaning, double low, double high) {
  KeySpec k = number_key(std::move(name), std::move(meaning), std::nullopt, low, high);
  k.type = KeyType::numbers;
  k.fallback = std::vector<double>();
  return k;
}

KeySpec variant_key(std::string name, std::string meaning, std::string variant_of) {
  KeySpec k;
  k.name = std::move(name);
  k.type = KeyType::variant;
  k.meaning = std::move(meaning);
  k.fallback = std::string();
  k.variant_of = std::move(variant_of);
  return k;
}

KeySpec integers_key(std::string name, std::string meaning, int64_t min, int64_t max) {
  KeySpec k = int_key(std::move(name), std::move(meaning), std::nullopt, min, max);
  k.type = KeyType::integers;
  k.fallback = std::vector<int64_t>();
  return k;
}

KeySpec pairs_key(std::string name, std::string meaning, int64_t min, int64_t max) {
  KeySpec k = int_key(std::move(name), std::move(meaning), std::nullopt, min, max);
  k.type = KeyType::pairs;
  k.fallback = IntPairs();
  return k;
}

KeySpec path_key(std::string name, std::string meaning) {
  KeySpec k;
  k.name = std::move(name);
  k.type = KeyType::path;
  k.meaning = std::move(meaning);
  k.fallback = std::string();
  k.top_level = true;
  return k;
}

KeySpec text_key(std::string name, std::string meaning) {
  KeySpec k = path_key(std::move(name), std::move(meaning));
  k.type = KeyType::text;
  return k;
}

const KeySpec* OpSpec::key(const std::string& key_name) const {
  for (const KeySpec& k : keys)
    if (k.name == key_name) return &k;
  return nullptr;
}

std::vector<std::string> OpSpec::key_names() const {
  std::vector<std::string> out;
  for (const KeySpec& k : keys)
    if (!k.top_level) out.push_back(k.name);
  return out;
}

std::vector<std::string> OpSpec::top_key_names() const {
  std::vector<std::string> out;
  for (const KeySpec& k : keys)
    if (k.top_level) out.push_back(k.name);
  return out;
}

std::vector<std::string> OpSpec::variant_names() const {
  std::vector<std::string> out;
  if (variants)
    for (const VariantInfo& v : variants()) out.push_back(v.name);
  return out;
}

std::string OpSpec::baseline() const {
  const auto names = variant_names();
  return names.empty() ? "" : names.front();
}

const OpSpec* find_op(const std::string& name) {
  for (const OpSpec& op : ops())
    if (op.name == name) return &op;
  return nullptr;
}

const OpSpec& op_spec(const std::string& name) {
  const OpSpec* op = find_op(name);
  if (!op) throw std::logic_error("no op named '" + name + "' in the registry");
  return *op;
}

}  // namespace attnbench
