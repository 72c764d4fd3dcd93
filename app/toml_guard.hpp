// A pre-scan of TOML text for the inputs that toml++ 3.3 (Debian's) mishandles, so that
// they become ordinary parse errors. Every toml::parse of user text (case files and
// --set overrides, app/case.cpp) calls toml_guard first.
//
// This header is toml++'s TOML_CONFIG_HEADER (set on the tomlpp_header_only target in
// CMakeLists.txt), so every file that includes <toml++/toml.h> sees it.
//
// What it rejects, each with the position and a one-line reason:
//  - a non-ASCII character outside strings and comments. It is never valid TOML there,
//    but toml++ 3.3 first asks is_non_ascii_horizontal_whitespace() about it, which
//    reaches TOML_UNREACHABLE (undefined behaviour; UBSan reports it) for most code
//    points in U+00A1..U+0499, U+2C8E..U+3087 and U+FBF6..U+FEFE, e.g. `x = é`;
//  - in a """multi-line""" string, a non-ASCII character right after a backslash, or as
//    the first character after a line-ending backslash: the same question, same UB;
//  - a table header whose name does not start with a key character, `[` newline `x]`
//    or `[.]`: parse_key() asserts on it where NDEBUG is not set (Debug and sanitizer
//    builds abort; Release reports it);
//  - in an array, a '}' or ',' where a value must start (after '[' or ','), `[64, 80,} 256]`:
//    parse_value() asserts that it is not at a value's terminator (Debug and sanitizer
//    builds abort);
//  - keys and values nested more than kMaxTomlDepth levels: dotted keys and table
//    headers are not bounded by TOML_MAX_NESTED_VALUES, and toml++ recurses once per
//    level (`a.a.a....a = 1` with 50,000 segments overflows the stack).
// Anything else, valid or not, is left to toml++.
#pragma once

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace attnbench {

constexpr int kMaxTomlDepth = 100;

struct TomlGuardError {
  uint32_t line = 1, column = 1;  // 1-based; columns count characters, as toml++ does
  std::string what;               // the reason, lower case, no position
};

namespace toml_guard_detail {

inline bool is_bare_key_char(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

// "U+00E9" for a valid UTF-8 sequence at s[i], else "byte 0xNN".
inline std::string describe_non_ascii(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return k < s.size() ? static_cast<unsigned char>(s[k]) : 0u; };
  const unsigned c = b(i);
  uint32_t cp = 0;
  size_t n = 0;
  if (c >= 0xC2 && c <= 0xDF) cp = c & 0x1F, n = 1;
  else if (c >= 0xE0 && c <= 0xEF) cp = c & 0x0F, n = 2;
  else if (c >= 0xF0 && c <= 0xF4) cp = c & 0x07, n = 3;
  bool ok = n > 0;
  for (size_t k = 1; ok && k <= n; ++k) {
    ok = (b(i + k) & 0xC0) == 0x80;
    cp = (cp << 6) | (b(i + k) & 0x3F);
  }
  ok = ok && !(n == 2 && cp < 0x800) && !(n == 3 && (cp < 0x10000 || cp > 0x10FFFF)) && !(cp >= 0xD800 && cp <= 0xDFFF);
  char buf[32];
  if (ok)
    std::snprintf(buf, sizeof buf, "U+%04X", static_cast<unsigned>(cp));
  else
    std::snprintf(buf, sizeof buf, "byte 0x%02x", c);
  return buf;
}

// How toml++ shows a character it did not expect: control characters escaped.
inline std::string show_char(std::string_view s, size_t i) {
  if (i >= s.size()) return "end of input";
  const unsigned char c = static_cast<unsigned char>(s[i]);
  if (c == '\n') return "'\\n'";
  if (c == '\r') return "'\\r'";
  if (c == '\t') return "'\\t'";
  if (c < 0x20 || c == 0x7f) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "'\\x%02x'", c);
    return buf;
  }
  return "'" + std::string(1, static_cast<char>(c)) + "'";
}

class Scanner {
 public:
  explicit Scanner(std::string_view s) : s_(s) {}

  std::optional<TomlGuardError> run() {
    if (s_.substr(0, 3) == "\xEF\xBB\xBF") i_ = 3;  // toml++ skips a UTF-8 byte order mark
    bool statement_start = true;                      // at depth 0, only whitespace since the line began
    while (i_ < s_.size() && !error_) {
      const unsigned char c = at(i_);
      if (statement_start && stack_.empty()) {
        if (c == ' ' || c == '\t' || c == '\r') {
          step();
          continue;
        }
        if (c == '[') {
          header();
          statement_start = false;
          continue;
        }
        if (c != '\n' && c != '#') {
          statement_start = false;
          begin_key();
        }
      }
      switch (c) {
        case '\n':
          step();
          if (stack_.empty()) {
            statement_start = true;
            in_key_ = false;
          }
          break;
        case '#':
          while (i_ < s_.size() && at(i_) != '\n') step();
          break;
        case '"':
        case '\'':
          string(c);
          break;
        case '=':
          if (in_key_) check_depth(header_segments_ + static_cast<int>(stack_.size()) + key_segments_);
          in_key_ = false;
          step();
          break;
        case '.':
          if (in_key_) check_depth(header_segments_ + static_cast<int>(stack_.size()) + ++key_segments_);
          step();
          break;
        case '{':
        case '[':
          stack_.push_back(static_cast<char>(c));
          check_depth(header_segments_ + static_cast<int>(stack_.size()));
          if (c == '{') begin_key();
          step();
          if (c == '[') array_value_start();
          break;
        case ',':
          if (!stack_.empty() && stack_.back() == '{') begin_key();
          step();
          if (!stack_.empty() && stack_.back() == '[') array_value_start();
          break;
        case ']':
        case '}':
          if (!stack_.empty()) stack_.pop_back();
          step();
          break;
        default:
          if (c >= 0x80) {
            fail(describe_non_ascii(s_, i_) + " outside a string or comment (only quoted strings and comments may "
                 "hold non-ASCII text)");
            break;
          }
          step();
      }
    }
    return error_;
  }

 private:
  unsigned char at(size_t k) const { return k < s_.size() ? static_cast<unsigned char>(s_[k]) : 0; }

  void step() {
    if (i_ >= s_.size()) return;
    const unsigned char c = at(i_++);
    if (c == '\n') {
      ++line_;
      column_ = 1;
    } else if ((c & 0xC0) != 0x80) {
      ++column_;
    }
  }

  void fail(const std::string& what) {
    if (!error_) error_ = TomlGuardError{line_, column_, what};
  }

  // After an array's '[' or ',': what follows (past whitespace, line breaks and comments) must
  // start a value or close the array; toml++ asserts on a '}' or ',' there.
  void array_value_start() {
    size_t k = i_;
    while (k < s_.size()) {
      const unsigned char c = at(k);
      if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
        ++k;
      } else if (c == '#') {
        while (k < s_.size() && at(k) != '\n') ++k;
      } else {
        break;
      }
    }
    if (at(k) == '}' || at(k) == ',') {
      while (i_ < k) step();  // the error points at the character
      fail("expected a value or ']' in an array, saw " + show_char(s_, k));
    }
  }

  void begin_key() {
    in_key_ = true;
    key_segments_ = 1;
  }

  void check_depth(int depth) {
    if (depth > kMaxTomlDepth)
      fail("keys and values nested more than " + std::to_string(kMaxTomlDepth) + " levels deep");
  }

  // [name] or [[name]] at the start of a statement.
  void header() {
    step();  // '['
    const bool array = at(i_) == '[';
    if (array) step();
    bool had_space = false;
    while (at(i_) == ' ' || at(i_) == '\t') {
      step();
      had_space = true;
    }
    const unsigned char first = at(i_);
    const bool ok = i_ >= s_.size() || first == ']' || first == '"' || first == '\'' || is_bare_key_char(first) ||
                    (first == '[' && !array && had_space);  // toml++ reports "[ [": brackets must be contiguous
    if (!ok) {
      if (first >= 0x80)
        fail(describe_non_ascii(s_, i_) + " outside a string or comment (only quoted strings and comments may "
             "hold non-ASCII text)");
      else
        fail("expected a table name after '" + std::string(array ? "[[" : "[") + "', saw " + show_char(s_, i_));
      return;
    }
    int segments = 1;
    while (i_ < s_.size() && at(i_) != ']' && at(i_) != '\n' && !error_) {
      const unsigned char c = at(i_);
      if (c == '"' || c == '\'') {
        step();
        while (i_ < s_.size() && at(i_) != c && at(i_) != '\n') {
          if (c == '"' && at(i_) == '\\') step();
          step();
        }
        if (at(i_) == c) step();
        continue;
      }
      if (c == '.') check_depth(array ? 2 * ++segments : ++segments);
      if (c >= 0x80) {
        fail(describe_non_ascii(s_, i_) + " outside a string or comment (only quoted strings and comments may "
             "hold non-ASCII text)");
        return;
      }
      step();
    }
    header_segments_ = array ? 2 * segments : segments;  // an array of tables adds a level per segment at most
    check_depth(header_segments_);
    if (at(i_) == ']') step();
    if (array && at(i_) == ']') step();
  }

  // A string starting at i_ with `quote`; leaves i_ after it (or at the line break that
  // ends a broken single-line string).
  void string(unsigned char quote) {
    const bool multi = at(i_ + 1) == quote && at(i_ + 2) == quote;
    step();
    if (multi) {
      step();
      step();
    }
    while (i_ < s_.size() && !error_) {
      const unsigned char c = at(i_);
      if (!multi && c == '\n') return;  // toml++ reports the unterminated string
      if (c == quote) {
        if (!multi) {
          step();
          return;
        }
        size_t n = 0;
        while (at(i_ + n) == quote) ++n;
        if (n >= 3) {  // """ ends it; one or two more quotes belong to the string
          for (size_t k = 0; k < std::min<size_t>(n, 5); ++k) step();
          return;
        }
        for (size_t k = 0; k < n; ++k) step();
        continue;
      }
      if (c == '\\' && quote == '"') {
        step();
        const unsigned char e = at(i_);
        if (multi && e >= 0x80) {
          fail(describe_non_ascii(s_, i_) + " right after a backslash in a multi-line string (not an escape "
               "sequence)");
          return;
        }
        if (multi && (e == ' ' || e == '\t' || e == '\r' || e == '\n')) {
          // A line-ending backslash: toml++ skips the whitespace and line breaks that follow,
          // asking of each character whether it is whitespace.
          while (at(i_) == ' ' || at(i_) == '\t' || at(i_) == '\r' || at(i_) == '\n') step();
          if (at(i_) >= 0x80) {
            const std::string cp = describe_non_ascii(s_, i_);
            fail(cp + " first after a line-ending backslash in a multi-line string (toml++ cannot read it "
                 "there: write it as a \\u escape or move it up a line)");
            return;
          }
          continue;
        }
        step();  // the escaped character
        continue;
      }
      step();
    }
  }

  std::string_view s_;
  size_t i_ = 0;
  uint32_t line_ = 1, column_ = 1;
  std::vector<char> stack_;  // open '[' and '{' of values
  bool in_key_ = false;
  int key_segments_ = 0, header_segments_ = 0;
  std::optional<TomlGuardError> error_;
};

}  // namespace toml_guard_detail

// The first construct that toml++ 3.3 mishandles in `text`, or nothing.
inline std::optional<TomlGuardError> toml_guard(std::string_view text) {
  return toml_guard_detail::Scanner(text).run();
}

}  // namespace attnbench
