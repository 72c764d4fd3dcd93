#include "app/tokenizer.hpp"

#include <algorithm>
#include <array>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <queue>
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

// The bytes that a token written in GPT-2's byte alphabet stands for; an InputError that
// starts with `what` (the file and the token) when it is not UTF-8 or leaves the alphabet.
std::string bytes_of_token(const std::string& token, const std::string& what) {
  std::vector<uint32_t> cps;
  if (!code_points(token, cps)) throw InputError(what + " is not UTF-8");
  std::string bytes;
  for (uint32_t cp : cps) {
    const auto it = byte_of_char().find(cp);
    if (it == byte_of_char().end()) throw InputError(what + " has " + u_plus(cp) + ", outside GPT-2's byte alphabet");
    bytes += static_cast<char>(it->second);
  }
  return bytes;
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

// A merge's key: its two tokens' ids (below 2^32: vocab.json would need 4 billion entries).
uint64_t pair_key(int64_t left, int64_t right) {
  return static_cast<uint64_t>(left) << 32 | static_cast<uint32_t>(right);
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
    v.bytes_[n] = bytes_of_token(token, clipped(path) + ": token " + std::to_string(n));
    // Distinct tokens have distinct bytes (the alphabet is one character per byte).
    v.ids_.emplace(v.bytes_[n], static_cast<int64_t>(n));
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

int64_t Gpt2Vocab::id_of(const std::string& bytes) const {
  const auto it = ids_.find(bytes);
  return it == ids_.end() ? -1 : it->second;
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

struct Gpt2Tokenizer::Merges {
  struct Merge {
    int64_t rank;    // its line in merges.txt, counting from the first merge
    int64_t result;  // the id of the joined token
  };
  std::unordered_map<uint64_t, Merge> by_pair;  // pair_key(left id, right id) -> merge
  std::array<int64_t, 256> byte_ids{};          // byte -> the id of its one-byte token

  // Words already encoded, up to a bound: text repeats its words, and BPE is the costly part.
  static constexpr size_t kCachedWords = 1 << 14, kCachedWordBytes = 64;
  std::mutex cache_mutex;
  std::unordered_map<std::string, std::vector<int64_t>> cache;

  std::vector<int64_t> encode_word(const std::string& word);
  std::vector<int64_t> bpe(const std::string& word) const;
};

// encoder.py's loop (find the adjacent pair of lowest rank, merge each of its occurrences
// left to right, repeat) costs O(n^2) on an n-byte word, and a word can be a whole input
// file of letters. The same merges in O(n log n): every adjacent pair with a merge waits in
// a heap ordered by rank, then position; a pair that a merge changed is skipped when it
// comes up. All pairs of one rank are taken off the heap before any of them is merged, so
// that one step merges exactly the occurrences that encoder.py's step does; a merge can't
// create a pair of the same rank, since its result is longer than either of its tokens.
std::vector<int64_t> Gpt2Tokenizer::Merges::bpe(const std::string& word) const {
  struct Symbol {
    int64_t id;  // -1 once merged into the symbol on its left
    int64_t prev, next;
  };
  const auto n = static_cast<int64_t>(word.size());
  std::vector<Symbol> symbols(word.size());
  for (int64_t i = 0; i < n; ++i) symbols[i] = {byte_ids[static_cast<uint8_t>(word[i])], i - 1, i + 1 < n ? i + 1 : -1};
  struct Candidate {
    int64_t rank, left, right, left_id, right_id, result;
  };
  const auto later = [](const Candidate& a, const Candidate& b) {
    return a.rank != b.rank ? a.rank > b.rank : a.left > b.left;
  };
  std::priority_queue<Candidate, std::vector<Candidate>, decltype(later)> heap(later);
  const auto consider = [&](int64_t left) {
    if (left < 0 || symbols[left].next < 0) return;
    const Symbol& l = symbols[left];
    const auto it = by_pair.find(pair_key(l.id, symbols[l.next].id));
    if (it != by_pair.end()) heap.push({it->second.rank, left, l.next, l.id, symbols[l.next].id, it->second.result});
  };
  for (int64_t i = 0; i + 1 < n; ++i) consider(i);
  std::vector<Candidate> step;
  while (!heap.empty()) {
    step.clear();
    const int64_t rank = heap.top().rank;
    while (!heap.empty() && heap.top().rank == rank) {
      step.push_back(heap.top());
      heap.pop();
    }
    for (const Candidate& c : step) {  // left to right
      Symbol& l = symbols[c.left];
      Symbol& r = symbols[c.right];
      if (l.id != c.left_id || l.next != c.right || r.id != c.right_id) continue;  // changed since
      l.id = c.result;
      l.next = r.next;
      if (r.next >= 0) symbols[r.next].prev = c.left;
      r.id = -1;
      consider(l.prev);
      consider(c.left);
    }
  }
  std::vector<int64_t> ids;
  for (int64_t i = n > 0 ? 0 : -1; i >= 0; i = symbols[i].next) ids.push_back(symbols[i].id);
  return ids;
}

std::vector<int64_t> Gpt2Tokenizer::Merges::encode_word(const std::string& word) {
  if (word.size() > kCachedWordBytes) return bpe(word);
  {
    std::lock_guard<std::mutex> lock(cache_mutex);
    const auto it = cache.find(word);
    if (it != cache.end()) return it->second;
  }
  std::vector<int64_t> ids = bpe(word);
  std::lock_guard<std::mutex> lock(cache_mutex);
  if (cache.size() >= kCachedWords) cache.clear();
  cache.emplace(word, ids);
  return ids;
}

Gpt2Tokenizer Gpt2Tokenizer::load(const std::string& vocab_path, const std::string& merges_path) {
  Gpt2Tokenizer t;
  t.vocab_ = Gpt2Vocab::load(vocab_path);
  t.merges_ = std::make_shared<Merges>();
  Merges& m = *t.merges_;
  for (int b = 0; b < 256; ++b) {
    m.byte_ids[b] = t.vocab_.id_of(std::string(1, static_cast<char>(b)));
    if (m.byte_ids[b] < 0) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02x", b);
      throw InputError(clipped(vocab_path) + ": no token for byte " + hex + " (" +
                       u_plus(gpt2_char_of_byte(static_cast<uint8_t>(b))) +
                       "); encoding needs all 256, for text that no merge covers");
    }
  }
  std::ifstream in(merges_path, std::ios::binary);
  if (!in) throw InputError(clipped(merges_path) + ": cannot open the merges");
  std::string line;
  int64_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();  // CRLF: '\r' is no token's character
    const std::string at = clipped(merges_path) + ":" + std::to_string(line_no) + ": ";
    if (line_no == 1) {
      // encoder.py drops the first line unread; a file without the header would lose a merge.
      if (line.rfind("#version", 0) != 0)
        throw InputError(at + "expected a \"#version\" line first, got '" + clipped(line, 40) + "'");
      continue;
    }
    const size_t space = line.find(' ');
    if (space == std::string::npos || space == 0 || space + 1 == line.size() ||
        line.find(' ', space + 1) != std::string::npos)
      throw InputError(at + "expected two tokens separated by one space, got '" + clipped(line, 40) + "'");
    const std::string left_token = line.substr(0, space), right_token = line.substr(space + 1);
    const std::string left = bytes_of_token(left_token, at + "token '" + clipped(left_token, 40) + "'");
    const std::string right = bytes_of_token(right_token, at + "token '" + clipped(right_token, 40) + "'");
    const int64_t left_id = t.vocab_.id_of(left), right_id = t.vocab_.id_of(right);
    if (left_id < 0) throw InputError(at + "token '" + clipped(left_token, 40) + "' is not in the vocabulary");
    if (right_id < 0) throw InputError(at + "token '" + clipped(right_token, 40) + "' is not in the vocabulary");
    const int64_t result = t.vocab_.id_of(left + right);
    if (result < 0)
      throw InputError(at + "the merge's result '" + clipped(left_token + right_token, 40) +
                       "' is not in the vocabulary");
    const int64_t rank = line_no - 2;
    const auto [it, fresh] = m.by_pair.emplace(pair_key(left_id, right_id), Merges::Merge{rank, result});
    if (!fresh) throw InputError(at + "repeats the merge on line " + std::to_string(it->second.rank + 2));
  }
  if (in.bad()) throw InputError(clipped(merges_path) + ": cannot read the merges");
  if (line_no == 0) throw InputError(clipped(merges_path) + ":1: expected a \"#version\" line first, got nothing");
  return t;
}

std::vector<int64_t> Gpt2Tokenizer::encode(const std::string& text) const {
  std::vector<int64_t> ids;
  for (const std::string& word : gpt2_pretokenize(text)) {
    const std::vector<int64_t> word_ids = merges_->encode_word(word);
    ids.insert(ids.end(), word_ids.begin(), word_ids.end());
  }
  return ids;
}

}  // namespace attnbench
