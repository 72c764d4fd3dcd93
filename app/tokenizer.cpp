#include "app/tokenizer.hpp"

#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "app/errors.hpp"
#include "app/text.hpp"

namespace attnbench {
namespace {

bool printable_byte(uint8_t b) { return (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || b >= 0xae; }

// The inverse of gpt2_char_of_byte over all 256 bytes.
const std::map<uint32_t, uint8_t>& byte_of_char() {
  static const std::map<uint32_t, uint8_t> m = [] {
    std::map<uint32_t, uint8_t> out;
    for (int b = 0; b < 256; ++b) out[gpt2_char_of_byte(static_cast<uint8_t>(b))] = static_cast<uint8_t>(b);
    return out;
  }();
  return m;
}

// The code points of a UTF-8 string; false on a malformed sequence.
bool code_points(const std::string& s, std::vector<uint32_t>& out) {
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<uint8_t>(s[i]);
    const int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    uint32_t cp = n == 1 ? c : c & (0x7f >> n);
    for (int k = 1; k < n; ++k) {
      const auto d = static_cast<uint8_t>(s[i + k]);
      if ((d >> 6) != 2) return false;
      cp = cp << 6 | (d & 0x3f);
    }
    out.push_back(cp);
    i += n;
  }
  return true;
}

std::string u_plus(uint32_t cp) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "U+%04X", static_cast<unsigned>(cp));
  return buf;
}

}  // namespace

uint32_t gpt2_char_of_byte(uint8_t b) {
  if (printable_byte(b)) return b;
  int n = 0;  // the unprintable bytes, in order, take 256, 257, ...
  for (int x = 0; x < b; ++x) n += !printable_byte(static_cast<uint8_t>(x));
  return 256 + static_cast<uint32_t>(n);
}

Gpt2Vocab Gpt2Vocab::load(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError(clipped(path) + ": cannot open the vocabulary");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(clipped(path) + ": not valid JSON: " + one_line(e.what()));
  }
  if (!j.is_object()) throw InputError(clipped(path) + ": expected an object of token -> id");
  Gpt2Vocab v;
  v.bytes_.resize(j.size());
  std::vector<bool> seen(j.size(), false);
  for (const auto& [token, id] : j.items()) {
    if (!id.is_number_unsigned() || id.get<uint64_t>() >= j.size())
      throw InputError(clipped(path) + ": token " + clipped(token, 40) + " has id " + clipped(id.dump(), 40) +
                       ", expected a whole number below the vocabulary's size " + std::to_string(j.size()));
    const auto n = id.get<uint64_t>();
    if (seen[n]) throw InputError(clipped(path) + ": id " + std::to_string(n) + " is given to two tokens");
    seen[n] = true;
    std::vector<uint32_t> cps;
    if (!code_points(token, cps)) throw InputError(clipped(path) + ": token " + std::to_string(n) + " is not UTF-8");
    for (uint32_t cp : cps) {
      const auto it = byte_of_char().find(cp);
      if (it == byte_of_char().end())
        throw InputError(clipped(path) + ": token " + std::to_string(n) + " has " + u_plus(cp) +
                         ", outside GPT-2's byte alphabet");
      v.bytes_[n] += static_cast<char>(it->second);
    }
  }
  return v;
}

std::string Gpt2Vocab::decode(const std::vector<int64_t>& ids) const {
  std::string out;
  for (int64_t id : ids) {
    if (id < 0 || id >= size())
      throw InputError("token id " + std::to_string(id) + " is outside the vocabulary (" + std::to_string(size()) +
                       " tokens)");
    out += bytes_[static_cast<size_t>(id)];
  }
  return out;
}

}  // namespace attnbench
