// Text from users and files, made safe to print on one line: control characters
// escaped, long strings cut with an ellipsis. Every message that quotes an input
// goes through these, so a 10 MB key or a name with escape codes stays one short line.
// Also the small formatters every layer prints with: sizes, durations, shell words.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace attnbench {

// Longest quoted input a message shows; the rest becomes "...".
constexpr std::size_t kMaxQuoted = 80;
// Longest message line attnbench prints for an error.
constexpr std::size_t kMaxMessage = 400;

// Control characters (and DEL) as \n, \t, \xNN; printable bytes and UTF-8 as they are.
std::string printable(const std::string& s);
// printable(s), cut to `max` characters (not `quoted`: that would clash with std::quoted) with "..." when longer.
std::string clipped(const std::string& s, std::size_t max = kMaxQuoted);
// One line of at most `max` characters: line breaks escaped, the tail cut with "...".
std::string one_line(const std::string& s, std::size_t max = kMaxMessage);

// "a, b, c"
std::string comma_list(const std::vector<std::string>& items);
// "a", "a or b", "a, b or c"
std::string or_list(const std::vector<std::string>& items);
// Case-insensitive edit distance, a swap of neighbours one edit (optimal string alignment).
std::size_t edit_distance(const std::string& a, const std::string& b);
// The known names nearest to `got`, when near enough to be a typo of them; else none.
std::vector<std::string> near_names(const std::string& got, const std::vector<std::string>& known);
// " (did you mean x?)" when a known name is close, else " (FALLBACK)".
std::string hint(const std::string& got, const std::vector<std::string>& known, const std::string& fallback);

// Quantities and commands as messages and reports print them.
std::string human_bytes(double bytes);         // 1536 -> "1.5 KiB"
std::string format_duration(double seconds);  // 42 -> "0:42", 3725 -> "1:02:05"
// A word as a POSIX shell reads it back: as is when safe, else in single quotes.
std::string shell_quote(const std::string& s);
// "1.23e-04" style for small errors; "-" for absent values.
std::string fmt_sci(double v);
std::string fmt_fixed(double v, int decimals);

}  // namespace attnbench
