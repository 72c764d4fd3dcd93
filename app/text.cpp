#include "app/text.hpp"

#include <cstdio>

namespace attnbench {

std::string printable(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += ch;
    }
  }
  return out;
}

namespace {

// Cuts at a UTF-8 character boundary so the ellipsis never splits a character.
std::string cut(const std::string& s, std::size_t max) {
  if (s.size() <= max) return s;
  std::size_t n = max > 3 ? max - 3 : 0;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return s.substr(0, n) + "...";
}

}  // namespace

std::string clipped(const std::string& s, std::size_t max) {
  // Escape only what can survive the cut: a 10 MB string is not copied whole.
  return cut(printable(s.size() > 4 * max ? s.substr(0, 4 * max) : s), max);
}

std::string one_line(const std::string& s, std::size_t max) { return clipped(s, max); }

}  // namespace attnbench
