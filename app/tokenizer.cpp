#include "app/tokenizer.hpp"

#include <algorithm>
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

// The pre-tokenizer's character classes: \p{L}, \p{N}, \s, and everything else.
enum class Kind : uint8_t { kLetter, kNumber, kSpace, kOther };

struct KindRange {
  uint32_t first, last;
  Kind kind;
};

// The non-letters of the non-ASCII blocks that tokenizer.hpp lists as exact, sorted;
// anything non-ASCII not here is a letter. Generated from Python's regex module (2026.5.9),
// whose \s is Unicode's White_Space: the whitespace here is the whole of it above ASCII.
constexpr KindRange kNonLetters[] = {
    {0x0080, 0x0084, Kind::kOther},   {0x0085, 0x0085, Kind::kSpace},    {0x0086, 0x009F, Kind::kOther},
    {0x00A0, 0x00A0, Kind::kSpace},   {0x00A1, 0x00A9, Kind::kOther},    {0x00AB, 0x00B1, Kind::kOther},
    {0x00B2, 0x00B3, Kind::kNumber},  {0x00B4, 0x00B4, Kind::kOther},    {0x00B6, 0x00B8, Kind::kOther},
    {0x00B9, 0x00B9, Kind::kNumber},  {0x00BB, 0x00BB, Kind::kOther},    {0x00BC, 0x00BE, Kind::kNumber},
    {0x00BF, 0x00BF, Kind::kOther},   {0x00D7, 0x00D7, Kind::kOther},    {0x00F7, 0x00F7, Kind::kOther},
    {0x0300, 0x036F, Kind::kOther},   {0x1680, 0x1680, Kind::kSpace},    {0x2000, 0x200A, Kind::kSpace},
    {0x200B, 0x2027, Kind::kOther},   {0x2028, 0x2029, Kind::kSpace},    {0x202A, 0x202E, Kind::kOther},
    {0x202F, 0x202F, Kind::kSpace},   {0x2030, 0x205E, Kind::kOther},    {0x205F, 0x205F, Kind::kSpace},
    {0x2060, 0x206F, Kind::kOther},   {0x20A0, 0x20FF, Kind::kOther},    {0x2190, 0x245F, Kind::kOther},
    {0x2460, 0x249B, Kind::kNumber},  {0x249C, 0x24E9, Kind::kOther},    {0x24EA, 0x24FF, Kind::kNumber},
    {0x2500, 0x2775, Kind::kOther},   {0x2776, 0x2793, Kind::kNumber},   {0x2794, 0x2BFF, Kind::kOther},
    {0x2E00, 0x2E2E, Kind::kOther},   {0x2E30, 0x2E7F, Kind::kOther},    {0x3000, 0x3000, Kind::kSpace},
    {0x3001, 0x3004, Kind::kOther},   {0x3007, 0x3007, Kind::kNumber},   {0x3008, 0x3020, Kind::kOther},
    {0x3021, 0x3029, Kind::kNumber},  {0x302A, 0x3030, Kind::kOther},    {0x3036, 0x3037, Kind::kOther},
    {0x3038, 0x303A, Kind::kNumber},  {0x303D, 0x303F, Kind::kOther},    {0xFE00, 0xFE6F, Kind::kOther},
    {0xFEFF, 0xFEFF, Kind::kOther},   {0xFF00, 0xFF0F, Kind::kOther},    {0xFF10, 0xFF19, Kind::kNumber},
    {0xFF1A, 0xFF20, Kind::kOther},   {0xFF3B, 0xFF40, Kind::kOther},    {0xFF5B, 0xFF65, Kind::kOther},
    {0xFFF0, 0xFFFF, Kind::kOther},   {0x1F000, 0x1F0FF, Kind::kOther},  {0x1F100, 0x1F10C, Kind::kNumber},
    {0x1F10D, 0x1FBEF, Kind::kOther}, {0x1FBF0, 0x1FBF9, Kind::kNumber}, {0x1FBFA, 0x1FBFF, Kind::kOther},
    {0xE0000, 0xE01EF, Kind::kOther},
};

Kind kind_of(uint32_t cp) {
  if (cp < 0x80) {
    if ((cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z')) return Kind::kLetter;
    if (cp >= '0' && cp <= '9') return Kind::kNumber;
    if (cp == ' ' || (cp >= '\t' && cp <= '\r')) return Kind::kSpace;
    return Kind::kOther;
  }
  const auto* end = std::end(kNonLetters);
  const auto* it =
      std::upper_bound(std::begin(kNonLetters), end, cp, [](uint32_t c, const KindRange& r) { return c < r.first; });
  if (it != std::begin(kNonLetters) && cp <= (it - 1)->last) return (it - 1)->kind;
  return Kind::kLetter;
}

// The character of s at byte i: its length in bytes and its kind. A byte that does not start
// a well-formed UTF-8 sequence (malformed, truncated, overlong, a surrogate, past U+10FFFF)
// is a character of its own, of kind other: decoding must keep every byte.
std::pair<size_t, Kind> char_at(const std::string& s, size_t i) {
  const auto c = static_cast<uint8_t>(s[i]);
  if (c < 0x80) return {1, kind_of(c)};
  const size_t n = (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
  const std::pair<size_t, Kind> stray{1, Kind::kOther};
  if (n == 0 || i + n > s.size()) return stray;
  uint32_t cp = c & (0x7f >> n);
  for (size_t k = 1; k < n; ++k) {
    const auto d = static_cast<uint8_t>(s[i + k]);
    if ((d >> 6) != 2) return stray;
    cp = cp << 6 | (d & 0x3f);
  }
  const uint32_t least[] = {0, 0, 0x80, 0x800, 0x10000};  // shorter forms are overlong
  if (cp < least[n] || (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff) return stray;
  return {n, kind_of(cp)};
}

// The length of the contraction ('s 't 're 've 'm 'll 'd, lower case only, as GPT-2's
// pattern has them) at byte i, or 0.
size_t contraction_at(const std::string& s, size_t i) {
  if (s[i] != '\'' || i + 1 >= s.size()) return 0;
  const char a = s[i + 1];
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  const char b = i + 2 < s.size() ? s[i + 2] : '\0';
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  return 0;
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

std::vector<std::string> gpt2_pretokenize(const std::string& text) {
  // The characters: where each starts (and, last, where the text ends), and its kind.
  std::vector<size_t> start;
  std::vector<Kind> kind;
  for (size_t i = 0; i < text.size();) {
    const auto [len, k] = char_at(text, i);
    start.push_back(i);
    kind.push_back(k);
    i += len;
  }
  const size_t n = kind.size();
  start.push_back(text.size());
  const auto run_end = [&](size_t i) {  // the end of the run of i's kind that starts at i
    size_t j = i + 1;
    while (j < n && kind[j] == kind[i]) ++j;
    return j;
  };
  // The pattern's alternatives, first match wins; the greedy runs only ever back off in
  // \s+(?!\S), which gives up the last whitespace character when something follows.
  std::vector<std::string> words;
  for (size_t i = 0; i < n;) {
    size_t j;
    if (const size_t len = contraction_at(text, start[i])) {
      j = i + len;  // ASCII: one byte a character
    } else if (text[start[i]] == ' ' && i + 1 < n && kind[i + 1] != Kind::kSpace) {
      j = run_end(i + 1);  // " ?\p{L}+", " ?\p{N}+", " ?[^\s\p{L}\p{N}]+" with their space
    } else if (kind[i] != Kind::kSpace) {
      j = run_end(i);  // the same without one
    } else {
      j = run_end(i);  // "\s+(?!\S)"; "\s+" when that leaves nothing (one space before a word)
      if (j < n && j - i >= 2) --j;
    }
    words.push_back(text.substr(start[i], start[j] - start[i]));
    i = j;
  }
  return words;
}

}  // namespace attnbench
