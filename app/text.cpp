#include "app/text.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>

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

// ---------------------------------------------------------------------------
// Names, lists and suggestions

std::string comma_list(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

// "a", "a or b", "a, b or c"
std::string or_list(const std::vector<std::string>& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i == 0 ? "" : i + 1 == items.size() ? " or " : ", ") + items[i];
  return out;
}

// Case-insensitive edit distance counting a swap of neighbours as one edit (optimal
// string alignment): "fp61" is one typo away from "fp16", and "FP16" is no typo at all.
size_t edit_distance(const std::string& a, const std::string& b) {
  const auto same = [&](size_t i, size_t j) {
    return std::tolower(static_cast<unsigned char>(a[i])) == std::tolower(static_cast<unsigned char>(b[j]));
  };
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (same(i - 1, j - 1) ? 0 : 1)});
      if (i > 1 && j > 1 && same(i - 1, j - 2) && same(i - 2, j - 1)) d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

// The known names nearest to `got`, when near enough to be what the user meant. The
// limit grows with the word ("seq_len" -> "seq_q" is 3 edits) but never reaches a
// full rewrite, so "x" suggests nothing rather than every one-letter key.
std::vector<std::string> near_names(const std::string& got, const std::vector<std::string>& known) {
  // Known names are short: a long word is no typo of one, and its distance table would be huge.
  if (got.size() > 64) return {};
  const size_t limit = std::max<size_t>(2, got.size() / 2);
  size_t best = SIZE_MAX;
  std::vector<std::string> nearest;
  for (const auto& k : known) {
    const size_t d = edit_distance(got, k);
    if (d > limit || d >= got.size() || d > best) continue;
    if (d < best) nearest.clear();
    best = d;
    nearest.push_back(k);
  }
  return nearest;
}

// " (did you mean x?)" when a known name is close, else " (FALLBACK)".
std::string hint(const std::string& got, const std::vector<std::string>& known, const std::string& fallback) {
  const auto nearest = near_names(got, known);
  if (!nearest.empty()) return " (did you mean " + or_list(nearest) + "?)";
  return " (" + fallback + ")";
}

std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) {
    b /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u ? "%.1f %s" : "%.0f %s", b, units[u]);
  return buf;
}

std::string format_duration(double seconds) {
  const auto s = static_cast<long>(std::max(0.0, seconds) + 0.5);
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
  else
    std::snprintf(buf, sizeof buf, "%ld:%02ld", s / 60, s % 60);
  return buf;
}

std::string shell_quote(const std::string& s) {
  const bool safe = !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || std::strchr("_-.,/=+:@%", c);
  });
  if (safe) return s;
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string fmt_sci(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return "inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2e", v);
  return buf;
}

std::string fmt_fixed(double v, int decimals) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

}  // namespace attnbench
