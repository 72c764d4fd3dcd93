// A seeded mutation fuzzer for the command line (tests/fuzz.cmake runs it as CTest's
// fuzz_cli). It feeds run_cli hostile input of four classes:
//
//   case     mutated case files (from every shipped case): boundary integers, duplicate,
//            removed and swapped keys, stray bytes (NUL, control, bad and good UTF-8),
//            long strings, deep nesting, truncation, splices, big sweeps, odd names
//   set      --set strings on shipped cases: registry key paths with mutated values
//   flags    command lines: --seed, --device, -k, --cases-dir ... with junk values
//   compare  mutated json reports (tests/compare/*.json) for `compare` and `report`
//
// and holds it to the contract for hostile input: exit 0 (accepted) or 2 (bad input;
// compare may also say 1, SLOW), at most 3 lines of output for bad input, no line over
// 500 characters, the offending case file or --set named in the message, never
// `terminate`, a signal, a hang, a sanitizer report or an "internal error".
//
// Each input runs in a forked child whose stdout and stderr go to pipes, with --dry-run
// always (there is no GPU). Input number i is made from (seed, i) alone, so a run is
// reproducible and `--only i` replays one input. Findings are deduplicated by a
// signature (the kind, the exit code and the key line of the output with numbers and
// paths stripped); with --keep DIR each distinct one is shrunk and written as a
// reproducer: its files, cmd.sh (the command line), argv.txt (one argument a line),
// finding.json and output.txt.
//
// A hang is --timeout seconds (default 10) of the child's CPU time, or three times that of
// wall time. Memory: RLIMIT_AS of 4 GiB in the child, and the parent kills a child whose
// RSS passes 4 GiB (under ASan, which reserves terabytes of address space, only the latter,
// with huge allocations failing at 4 GiB: see __asan_default_options).
//
// Usage: attnbench_fuzz --corpus CASES_DIR [--seed N] [--iterations N | --seconds S]
//          [--compare-dir DIR] [--keep DIR] [--class case|set|flags|compare] [--jobs N]
//          [--timeout S] [--shrink-seconds S] [--only INDEX] [--verbose]
// --seconds is the whole budget: with --keep, its last fifth (8 s at most) shrinks the
// findings. --only INDEX replays one input and prints its command line and output.
// Exit 0 when nothing was found, 1 when something was, 2 on bad usage.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "app/cli.hpp"
#include "app/op.hpp"

// ---------------------------------------------------------------------------
// Sanitizer builds (-DATTNBENCH_SANITIZE=ON)

#if defined(__SANITIZE_ADDRESS__)
#define FUZZ_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FUZZ_ASAN 1
#endif
#endif
#ifndef FUZZ_ASAN
#define FUZZ_ASAN 0
#endif

#if FUZZ_ASAN
// ASan reserves terabytes of virtual memory, so RLIMIT_AS cannot cap a child; a huge
// request fails instead (max_allocation_size_mb), and the parent watches the RSS.
// Leak checks are off: children _exit, and a leak is not this fuzzer's business.
extern "C" __attribute__((used, visibility("default"), no_sanitize_address)) const char* __asan_default_options() {
  return "allocator_may_return_null=1:max_allocation_size_mb=4096:detect_leaks=0:print_summary=1";
}
#endif
// Harmless without UBSan: nobody asks for it then.
extern "C" __attribute__((used, visibility("default"))) const char* __ubsan_default_options() {
  return "print_stacktrace=1:halt_on_error=1";
}

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// ---------------------------------------------------------------------------
// Randomness: one generator per input, from (seed, index) alone

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(splitmix64(seed) | 1) {}
  uint64_t next() {  // xorshift64*
    s_ ^= s_ >> 12;
    s_ ^= s_ << 25;
    s_ ^= s_ >> 27;
    return s_ * 0x2545f4914f6cdd1dULL;
  }
  size_t below(size_t n) { return n ? static_cast<size_t>(next() % n) : 0; }
  bool chance(unsigned percent) { return below(100) < percent; }
  template <class T>
  const T& pick(const std::vector<T>& v) {
    return v[below(v.size())];
  }
  // Sizes spread over orders of magnitude: mostly small, sometimes huge.
  size_t size_up_to(size_t max) {
    const size_t scale = size_t{1} << below(64 - __builtin_clzll(max | 1));
    return std::min(max, 1 + below(scale * 2));
  }

 private:
  uint64_t s_;
};

// ---------------------------------------------------------------------------
// Values that break things

const std::vector<std::string> kBoundaryInts = {
    "0", "-1", "1", "2", "3", "7", "8", "16", "64", "127", "128", "255", "256", "1023", "1024", "4096",
    "65535", "65536", "65537", "2147483647", "2147483648", "-2147483648", "-2147483649", "4294967295",
    "4294967296", "4611686018427387904", "9223372036854775807", "-9223372036854775808", "9223372036854775806",
    "3037000500", "46341", "1000000007", "100000000000", "9223372036854775808", "18446744073709551616",
    "0x7fffffff", "0xffffffffffffffff", "0o777", "0b1", "1_000", "+1", "-0", "00", "0x", "1__0"};

const std::vector<std::string> kOtherValues = {
    "1.5", "-1.5", "0.0", "-0.0", "1e3", "1e308", "1e309", "-1e309", "5e-324", "inf", "-inf", "nan", "+nan",
    "true", "false", "\"\"", "\"8\"", "\"x\"", "[]", "[[]]", "[1, \"a\"]", "[[1, 2], [3]]", "{}", "{ a = 1 }",
    "1979-05-27", "1979-05-27T07:32:00Z", "07:32:00", "'lit'", "\"\"\"multi\nline\"\"\"", "'''raw'''",
    "\"\\u0000\"", "\"\\u001b[31m\"", "\"\\n\"", "\"a\\tb\""};

const std::vector<std::string> kNames = {"..", "a/b", "../../x", "", ".", "/", "/etc/passwd", "a\\\\b", "-",
                                         "*", "~", "con", "a\\nb", "\\u0000", "\\u001b[2J", " ", "a b",
                                         "\\r", "%s%n", "$(id)", "nul.toml", "x.toml/.."};

// Byte sequences to insert: NUL and control characters, invalid UTF-8, valid non-ASCII,
// and TOML's own syntax.
const std::vector<std::string> kBytes = {
    std::string(1, '\0'), "\x01", "\x07", "\x08", "\x0b", "\x0c", "\x1b", "\x1b[31m", "\x7f", "\r", "\r\n",
    "\n", "\t",
    // invalid UTF-8
    "\x80", "\xbf", "\xc0\x80", "\xc1\xbf", "\xe0\x80\x80", "\xed\xa0\x80", "\xed\xbf\xbf", "\xf4\x90\x80\x80",
    "\xf5\x80\x80\x80", "\xf8\x88\x80\x80\x80", "\xff", "\xfe", "\xe2\x82", "\xf0\x9f\x98", "\xc3", "\xe2",
    "\xf0",
    // valid non-ASCII
    "\xc3\xa9", "\xe4\xb8\xad", "\xf0\x9f\x98\x80", "\xe2\x80\xa8", "\xe2\x80\xa9", "\xef\xbb\xbf",
    "\xe2\x80\x8b", "\xc2\xa0", "\xef\xbf\xbf", "\xf4\x8f\xbf\xbf", "\xcc\x81", "\xc2\x85", "\xe3\x80\x80",
    "\xd9\xa3", "\xef\xbc\x9d",
    // TOML syntax
    "[", "]", "[[", "]]", "{", "}", "=", "\"", "'", "\"\"\"", "'''", "#", ".", ",", "\\", "\\u", "\\U0010FFFF",
    "\\uD800", "\\x41", "[\nx]", "[\n", "\n[", "\n[x]\n", "\n[[x]]\n", "a.b", "\"\"\"\"\"\"", "''''''"};

const std::vector<std::string> kSectionKeys = {"name", "description", "op", "dtype", "kernels", "baseline"};
const std::vector<std::string> kVerifyKeys = {"seed", "trials", "atol", "rtol", "max_rows"};
const std::vector<std::string> kBenchKeys = {"mode", "warmup_ms", "min_time_ms", "max_noise", "max_time_ms"};
// [inputs] (docs/cases.md): its keys, the words of distribution, and tensor names, real and not.
const std::vector<std::string> kInputKeys = {"distribution", "scale", "offset"};
const std::vector<std::string> kInputWords = {"\"default\"", "\"normal\"", "\"uniform\"", "\"large\"",
                                              "\"outliers\"", "\"pareto\"", "\"constant\"", "\"larg\"", "\"\""};
const std::vector<std::string> kInputTensors = {"x", "a", "b", "q", "k", "v", "k_cache", "v_cache", "cache",
                                                "w_qkv", "wte", "qq", "", "\"\"", "\"k\"", "q.k"};

// The registry, read once: what a mutated value may name.
struct OpInfo {
  std::string name;
  std::vector<std::string> keys, words;  // words: choices, variants and dtypes
  std::map<std::string, std::pair<int64_t, int64_t>> ranges;  // integer keys: [min, max]
};

struct Registry {
  std::vector<OpInfo> ops;
  std::vector<std::string> all_keys, all_words, variants;

  const OpInfo* find(const std::string& name) const {
    for (const auto& o : ops)
      if (o.name == name) return &o;
    return nullptr;
  }
};

Registry read_registry() {
  Registry r;
  for (const attnbench::OpSpec& op : attnbench::ops()) {
    OpInfo o;
    o.name = op.name;
    for (const attnbench::KeySpec& k : op.keys) {
      o.keys.push_back(k.name);
      for (const auto& c : k.choices) o.words.push_back(c);
      if (k.type == attnbench::KeyType::integer || k.type == attnbench::KeyType::lengths)
        o.ranges[k.name] = {k.min, k.max};
    }
    for (const auto& v : op.variant_names()) {
      o.words.push_back(v);
      r.variants.push_back(v);
    }
    for (attnbench::DType d : op.dtypes) o.words.push_back(attnbench::dtype_name(d));
    r.all_keys.insert(r.all_keys.end(), o.keys.begin(), o.keys.end());
    r.all_words.insert(r.all_words.end(), o.words.begin(), o.words.end());
    r.all_words.push_back(o.name);
    r.ops.push_back(std::move(o));
  }
  r.all_words.push_back("fp8_e4m3");
  r.all_words.push_back("cold");
  r.all_words.push_back("hot");
  r.all_words.push_back("graph");
  if (r.variants.empty()) r.variants.push_back("naive");
  return r;
}

// ---------------------------------------------------------------------------
// An input: argv (some arguments are the paths of its files) and the files' contents

struct Arg {
  std::string text;
  int file = -1;  // >= 0: the path of files[file]; text is unused
};

struct Input {
  std::string cls;
  std::vector<Arg> args;  // after the program name
  std::vector<std::pair<std::string, std::string>> files;  // name, content
  bool name_file = false;  // an error must name files[0]
  bool name_set = false;   // an error must name a --set (or the case file)
  std::string case_path;   // the (unmutated) case file of a --set input
  std::vector<int> allowed = {0, 2};
  std::string how;  // the mutations, in words
};

std::string file_arg_path(const std::string& dir, const Input& in, const Arg& a) {
  return a.file >= 0 ? dir + "/" + in.files[static_cast<size_t>(a.file)].first : a.text;
}

// ---------------------------------------------------------------------------
// Text surgery on TOML

std::vector<std::string> split_lines(const std::string& s) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t nl = s.find('\n', start);
    if (nl == std::string::npos) {
      if (start < s.size()) lines.push_back(s.substr(start));
      break;
    }
    lines.push_back(s.substr(start, nl - start));
    start = nl + 1;
  }
  return lines;
}

std::string join_lines(const std::vector<std::string>& lines) {
  std::string s;
  for (const auto& l : lines) s += l + "\n";
  return s;
}

// "key = value" lines: the index of '=' or npos.
size_t key_eq(const std::string& line) {
  const size_t first = line.find_first_not_of(" \t");
  if (first == std::string::npos || line[first] == '#' || line[first] == '[') return std::string::npos;
  return line.find('=');
}

std::vector<size_t> key_lines(const std::vector<std::string>& lines) {
  std::vector<size_t> out;
  for (size_t i = 0; i < lines.size(); ++i)
    if (key_eq(lines[i]) != std::string::npos) out.push_back(i);
  return out;
}

// Integer-looking tokens (offset, length).
std::vector<std::pair<size_t, size_t>> int_tokens(const std::string& s) {
  std::vector<std::pair<size_t, size_t>> out;
  for (size_t i = 0; i < s.size();) {
    if (std::isdigit(static_cast<unsigned char>(s[i])) &&
        (i == 0 || !std::isalnum(static_cast<unsigned char>(s[i - 1])))) {
      size_t j = i;
      while (j < s.size() && (std::isdigit(static_cast<unsigned char>(s[j])) || s[j] == '_')) ++j;
      if (j == s.size() || !std::isalpha(static_cast<unsigned char>(s[j]))) out.emplace_back(i, j - i);
      i = j;
    } else {
      ++i;
    }
  }
  return out;
}

// The lines [begin, end) of [section] ("" = the top level, before any header).
std::pair<size_t, size_t> section_range(const std::vector<std::string>& lines, const std::string& section) {
  size_t begin = 0;
  if (!section.empty()) {
    begin = lines.size();
    for (size_t i = 0; i < lines.size(); ++i)
      if (lines[i].rfind("[" + section + "]", 0) == 0) {
        begin = i + 1;
        break;
      }
  }
  size_t end = begin;
  while (end < lines.size() && (lines[end].empty() || lines[end][0] != '[')) ++end;
  return {begin, end};
}

// Inserts `line` right under [section], adding the section at the end when missing.
std::string put_in_section(const std::string& text, const std::string& section, const std::string& line) {
  std::vector<std::string> lines = split_lines(text);
  if (section.empty()) {
    lines.insert(lines.begin(), line);
    return join_lines(lines);
  }
  for (size_t i = 0; i < lines.size(); ++i)
    if (lines[i].rfind("[" + section + "]", 0) == 0) {
      lines.insert(lines.begin() + static_cast<long>(i) + 1, line);
      return join_lines(lines);
    }
  return text + "\n[" + section + "]\n" + line + "\n";
}

// ---------------------------------------------------------------------------
// The generator

class Generator {
 public:
  Generator(const Registry& reg, std::vector<std::pair<std::string, std::string>> cases,
            std::vector<std::pair<std::string, std::string>> jsons, std::string corpus)
      : reg_(reg), cases_(std::move(cases)), jsons_(std::move(jsons)), corpus_(std::move(corpus)) {
    reports_ = jsons_;
  }

  // Mutations of a good report reach further than those of the broken fixtures.
  void set_good_reports(std::vector<std::pair<std::string, std::string>> good) {
    if (!good.empty()) reports_ = std::move(good);
  }

  std::vector<std::string> classes() const {
    std::vector<std::string> c = {"case", "set", "flags"};
    if (!jsons_.empty()) c.push_back("compare");
    return c;
  }

  Input make(uint64_t seed, uint64_t index, const std::string& only_class) const {
    Rng rng(seed * 0x100000001b3ULL ^ splitmix64(index));
    const auto cls = classes();
    // case files are the richest class: half the inputs.
    static const std::vector<int> weights = {50, 20, 15, 15};
    std::string which = only_class;
    if (which.empty()) {
      int total = 0;
      for (size_t i = 0; i < cls.size(); ++i) total += weights[i];
      int r = static_cast<int>(rng.below(static_cast<size_t>(total)));
      for (size_t i = 0; i < cls.size(); ++i) {
        if (r < weights[i]) {
          which = cls[i];
          break;
        }
        r -= weights[i];
      }
    }
    if (which == "case") return case_input(rng);
    if (which == "set") return set_input(rng);
    if (which == "flags") return flags_input(rng);
    return compare_input(rng);
  }

 private:
  // --- values -------------------------------------------------------------

  std::string huge_list(Rng& rng, size_t n) const {
    std::string s = "[";
    const std::string v = rng.chance(50) ? rng.pick(kBoundaryInts) : std::to_string(1 + rng.below(8));
    for (size_t i = 0; i < n; ++i) s += (i ? "," : "") + (rng.chance(90) ? v : rng.pick(kBoundaryInts));
    return s + "]";
  }

  std::string nested(Rng& rng) const {
    const size_t depth = rng.size_up_to(100000);
    if (rng.chance(50)) return std::string(depth, '[') + "1" + std::string(depth, ']');
    std::string s;
    for (size_t i = 0; i < depth; ++i) s += "{a=";
    return s + "1" + std::string(depth, '}');
  }

  std::string long_string(Rng& rng) const {
    const size_t n = rng.size_up_to(1 << 20);
    const char c = "x\xe4\\ab"[rng.below(5)];
    if (c == '\\') {  // escapes: \n \u0000 repeated
      std::string s = "\"";
      while (s.size() < n) s += rng.chance(50) ? "\\n" : "\\u0000";
      return s + "\"";
    }
    if (c == '\xe4') {  // valid 3-byte UTF-8
      std::string s = "\"";
      while (s.size() < n) s += "\xe4\xb8\xad";
      return s + "\"";
    }
    return "\"" + std::string(n, c) + "\"";
  }

  std::string word(Rng& rng) const {
    switch (rng.below(4)) {
      case 0: return rng.pick(reg_.all_words);
      case 1: return rng.pick(reg_.variants) + (rng.chance(50) ? "+" + rng.pick(reg_.variants) : "");
      case 2: return rng.pick(kNames);
      default: return "nope";
    }
  }

  // A value at the edge of a registry key's range: min - 1, min, max, max + 1, ...
  std::string edge_value(Rng& rng, const OpInfo* info, const std::string& key) const {
    if (!info) return rng.pick(kBoundaryInts);
    const auto it = info->ranges.find(key);
    if (it == info->ranges.end()) return rng.pick(kBoundaryInts);
    const auto [lo, hi] = it->second;
    const std::vector<int64_t> v = {lo, lo + 1, hi, hi - 1, lo == INT64_MIN ? lo : lo - 1, hi == INT64_MAX ? hi : hi + 1,
                                    hi / 2, hi / 2 + 1};
    const int64_t x = rng.pick(v);
    if (key == "context" && rng.chance(40)) {  // one length per sequence
      std::string s = "[";
      for (size_t i = rng.size_up_to(16); i > 0; --i) s += std::to_string(x) + (i > 1 ? "," : "");
      return s + "]";
    }
    return std::to_string(x);
  }

  // A TOML value for `key` (a registry key when it is one).
  std::string value(Rng& rng) const {
    switch (rng.below(12)) {
      case 0: case 1: case 2: case 3: return rng.pick(kBoundaryInts);
      case 4: return rng.pick(kOtherValues);
      case 5: return "\"" + word(rng) + "\"";
      case 6: {
        std::string s = "[";
        const size_t n = rng.size_up_to(8);
        for (size_t i = 0; i < n; ++i) s += (i ? ", " : "") + (rng.chance(70) ? rng.pick(kBoundaryInts) : std::to_string(rng.below(5)));
        return s + "]";
      }
      case 7: return huge_list(rng, rng.size_up_to(100000));
      case 8: return nested(rng);
      case 9: return long_string(rng);
      case 10: return "[\"" + word(rng) + "\", \"" + word(rng) + "\"]";
      default: return std::to_string(rng.below(300));
    }
  }

  // --- case files -----------------------------------------------------------

  // `key = value` in [section]: mostly replacing the key's line when there is one (a
  // second definition is only a TOML error), else a new line under the header.
  std::string assign(Rng& rng, const std::string& text, const std::string& section, const std::string& key,
                     const std::string& value) const {
    if (rng.chance(85)) {
      std::vector<std::string> lines = split_lines(text);
      const auto [begin, end] = section_range(lines, section);
      for (size_t i = begin; i < end; ++i) {
        const size_t eq = key_eq(lines[i]);
        if (eq == std::string::npos) continue;
        std::string k = lines[i].substr(0, eq);
        k.erase(0, k.find_first_not_of(" \t"));
        k.erase(k.find_last_not_of(" \t") + 1);
        if (k != key) continue;
        lines[i] = key + " = " + value;
        return join_lines(lines);
      }
    }
    return put_in_section(text, section, key + " = " + value);
  }

  std::string mutate_case(Rng& rng, std::string text, const std::string& op, std::string& how) const {
    const OpInfo* info = reg_.find(op);
    const size_t count = 1 + rng.below(rng.chance(20) ? 6 : 2);
    // Weights per mutator below: the semantic ones (registry keys, sweeps, boundary
    // integers) reach the validation; the syntactic ones mostly stop in the parser.
    static const std::vector<int> weights = {10, 4, 3, 4, 3, 5, 3, 4, 3, 3, 2, 2, 5, 5, 3, 8, 8, 8, 5, 8};
    for (size_t m = 0; m < count; ++m) {
      std::vector<std::string> lines = split_lines(text);
      const auto keys = key_lines(lines);
      size_t kind = 0;
      {
        int total = 0;
        for (int w : weights) total += w;
        int r = static_cast<int>(rng.below(static_cast<size_t>(total)));
        while (r >= weights[kind]) r -= weights[kind++];
      }
      switch (kind) {
        case 0: case 1: {  // an integer -> a boundary value, or a huge list (weights 10 + 4)
          const auto toks = int_tokens(text);
          if (toks.empty()) break;
          const auto [at, len] = rng.pick(toks);
          const std::string v = rng.chance(85) ? rng.pick(kBoundaryInts)
                                : rng.chance(50) ? huge_list(rng, rng.size_up_to(100000)) : rng.pick(kOtherValues);
          text.replace(at, len, v);
          how += " int->" + v.substr(0, 24);
          break;
        }
        case 2: {  // duplicate a key
          if (keys.empty()) break;
          const size_t i = rng.pick(keys);
          lines.insert(lines.begin() + static_cast<long>(i) + 1, lines[i]);
          text = join_lines(lines);
          how += " dup-key";
          break;
        }
        case 3: {  // remove a key
          if (keys.empty()) break;
          lines.erase(lines.begin() + static_cast<long>(rng.pick(keys)));
          text = join_lines(lines);
          how += " drop-key";
          break;
        }
        case 4: {  // swap the values of two keys
          if (keys.size() < 2) break;
          const size_t a = rng.pick(keys), b = rng.pick(keys);
          const size_t ea = key_eq(lines[a]), eb = key_eq(lines[b]);
          const std::string va = lines[a].substr(ea + 1), vb = lines[b].substr(eb + 1);
          lines[a] = lines[a].substr(0, ea + 1) + vb;
          lines[b] = lines[b].substr(0, eb + 1) + va;
          text = join_lines(lines);
          how += " swap-values";
          break;
        }
        case 5: case 6: {  // stray bytes: anywhere, in a string, in a key
          const std::string bytes = rng.chance(80) ? rng.pick(kBytes) : random_bytes(rng);
          size_t at = rng.below(text.size() + 1);
          if (rng.chance(40)) {
            const size_t q = text.find('"', at);
            if (q != std::string::npos) at = q + 1;
          }
          text.insert(at, bytes);
          how += " bytes";
          break;
        }
        case 7: {  // a long string or key
          const std::string s = long_string(rng);
          if (rng.chance(70)) {
            text = assign(rng, text, "", rng.chance(50) ? "name" : "description", s);
          } else {
            text = put_in_section(text, "shape", std::string(rng.size_up_to(1 << 20), 'k') + " = 1");
          }
          how += " long";
          break;
        }
        case 8: {  // deep nesting: a value, dotted keys, table headers
          const size_t r = rng.below(3);
          if (r == 0) {
            text = assign(rng, text, "shape", !info || info->keys.empty() ? "x" : rng.pick(info->keys), nested(rng));
          } else if (r == 1) {
            std::string k;
            for (size_t i = rng.size_up_to(50000); i > 0; --i) k += "a.";
            text += k + "b = 1\n";
          } else {
            std::string k = "[shape";
            for (size_t i = rng.size_up_to(50000); i > 0; --i) k += ".a";
            text += k + "]\n";
          }
          how += " nest";
          break;
        }
        case 9: {  // `[` newline `x]` and friends at a line start
          static const std::vector<std::string> bad = {"[\nx]", "[[\nx]]", "[ \n]", "[x\n]", "[\"\n\"]", "[shape\n]", "[]", "[[]]", "[.]", "[a..b]"};
          const size_t at = rng.below(lines.size() + 1);
          lines.insert(lines.begin() + static_cast<long>(at), rng.pick(bad));
          text = join_lines(lines);
          how += " bracket-newline";
          break;
        }
        case 10: {  // truncate
          text.resize(rng.below(text.size() + 1));
          how += " truncate";
          break;
        }
        case 11: {  // splice with another case
          const std::string& other = rng.pick(cases_).second;
          text = text.substr(0, rng.below(text.size() + 1)) + other.substr(rng.below(other.size() + 1));
          how += " splice";
          break;
        }
        case 12: case 13: {  // a sweep with many values, or many swept keys
          if (!info || info->keys.empty()) break;
          const size_t axes = rng.chance(70) ? 1 : 1 + rng.below(4);
          for (size_t a = 0; a < axes; ++a) {
            const std::string key = rng.chance(85) ? rng.pick(info->keys) : "dtype";
            std::string list = "[";
            const size_t n = rng.size_up_to(rng.chance(80) ? 64 : 100000);
            for (size_t i = 0; i < n; ++i) {
              std::string v = key == "dtype" ? "\"" + rng.pick(info->words) + "\""
                              : rng.chance(70) ? std::to_string(1 + rng.below(512))
                                               : rng.pick(kBoundaryInts);
              list += (i ? "," : "") + v;
            }
            text = assign(rng, text, "sweep", key, list + "]");
          }
          how += " sweep";
          break;
        }
        case 14: {  // a name that is a path
          text = assign(rng, text, "", "name", "\"" + rng.pick(kNames) + "\"");
          how += " name";
          break;
        }
        case 15: case 16: {  // a registry key with a hostile value
          const std::string key = info && rng.chance(80) ? rng.pick(info->keys) : rng.pick(reg_.all_keys);
          text = assign(rng, text, "shape", key, rng.chance(40) ? edge_value(rng, info, key) : value(rng));
          how += " shape." + key;
          break;
        }
        case 17: {  // [verify], [bench], [inputs] and top-level keys
          const size_t r = rng.below(5);
          if (r == 0) text = assign(rng, text, "verify", rng.pick(kVerifyKeys), value(rng));
          if (r == 1) text = assign(rng, text, "bench", rng.pick(kBenchKeys), value(rng));
          if (r == 2) text = assign(rng, text, "", rng.pick(kSectionKeys), value(rng));
          if (r >= 3) {
            const std::string key = rng.pick(kInputKeys);
            const std::string v = key == "distribution" && rng.chance(70) ? rng.pick(kInputWords) : value(rng);
            text = assign(rng, text, r == 3 ? "inputs" : "inputs." + rng.pick(kInputTensors), key, v);
          }
          how += " section-key";
          break;
        }
        case 18: {  // another op, or another type for a value
          if (rng.chance(50)) {
            text = assign(rng, text, "", "op", "\"" + rng.pick(reg_.ops).name + "\"");
            how += " op";
          } else if (!keys.empty()) {
            const size_t i = rng.pick(keys);
            lines[i] = lines[i].substr(0, key_eq(lines[i]) + 1) + " " + rng.pick(kOtherValues);
            text = join_lines(lines);
            how += " retype";
          }
          break;
        }
        default: {  // kernels / baseline / dtype words
          const size_t r = rng.below(3);
          if (r == 0) text = assign(rng, text, "", "kernels", "[\"" + word(rng) + "\", \"" + word(rng) + "\"]");
          if (r == 1) text = assign(rng, text, "", "baseline", "\"" + word(rng) + "\"");
          if (r == 2) text = assign(rng, text, "", "dtype", "\"" + word(rng) + "\"");
          how += " words";
          break;
        }
      }
    }
    return text;
  }

  std::string random_bytes(Rng& rng) const {
    std::string s(1 + rng.below(8), '\0');
    for (auto& c : s) c = static_cast<char>(rng.below(256));
    return s;
  }

  static std::string op_of(const std::string& text) {
    for (const auto& line : split_lines(text)) {
      const size_t eq = key_eq(line);
      if (eq == std::string::npos) continue;
      if (line.substr(0, line.find_first_of(" =")) != "op") continue;
      const size_t q1 = line.find('"', eq), q2 = line.find('"', q1 + 1);
      if (q1 != std::string::npos && q2 != std::string::npos) return line.substr(q1 + 1, q2 - q1 - 1);
    }
    return "";
  }

  Input case_input(Rng& rng) const {
    const auto& [path, text] = rng.pick(cases_);
    Input in;
    in.cls = "case";
    in.how = fs::relative(path, corpus_).string() + ":";
    std::string t = mutate_case(rng, text, op_of(text), in.how);
    in.files.push_back({"case.toml", t});
    in.args = {{rng.chance(50) ? "verify" : "run"}, {"", 0}, {"--dry-run"}};
    in.name_file = true;
    return in;
  }

  // --- --set ----------------------------------------------------------------

  std::string set_key(Rng& rng, const OpInfo* info) const {
    static const std::vector<std::string> junk = {
        "", " ", ".", "..", "shape.", ".shape", "shape..rows", "shape.rows.x", "\"shape\".rows", "'shape'.rows",
        "shape.\"ro ws\"", "a.b.c.d.e.f.g", "shape", "sweep", "verify", "bench", "=", "shape.=", "[shape]",
        "shape.rows[0]", "shape.\"\"", "\"\"", "shape.\xc3\xa9", "shape.\xff", "shape.\x1b", "sweep.sweep",
        "verify.seed.x", "kernels.0", "name.x", "op.x"};
    switch (rng.below(11)) {
      case 10: return hollow_key(rng, info);
      case 0: case 1: case 2: case 3:
        return "shape." + (info && !info->keys.empty() ? rng.pick(info->keys) : rng.pick(reg_.all_keys));
      case 4: return "shape." + rng.pick(reg_.all_keys);
      case 5: return rng.chance(50) ? "dtype" : "sweep." + (info && rng.chance(70) ? rng.pick(info->keys) : std::string("dtype"));
      case 6:
        if (rng.chance(30)) return "inputs." + (rng.chance(50) ? rng.pick(kInputTensors) + "." : "") + rng.pick(kInputKeys);
        return rng.chance(50) ? "verify." + rng.pick(kVerifyKeys) : "bench." + rng.pick(kBenchKeys);
      case 7: return rng.pick(kSectionKeys);
      case 8: return rng.chance(80) ? rng.pick(junk) : std::string(rng.size_up_to(1 << 20), 'k');
      default: return "shape." + (info && !info->keys.empty() ? rng.pick(info->keys) : std::string("rows"));
    }
  }

  // Keys that TOML reads as nothing or as an empty name: a comment ('#' where a key part
  // may start), empty and blank keys, keys of only dots or only quotes, and those glued to
  // good parts ("a.#", "\"\".x", "shape.''"). `--set '#=1'` once parsed to an empty table
  // that --set's path walk dereferenced (issue 45).
  std::string hollow_key(Rng& rng, const OpInfo* info) const {
    static const std::vector<std::string> parts = {
        "#", " #", "#x", " #x", "# shape.rows", "#\"", "", " ", "\t", "  \t ", ".", "..", "...", "\"\"", "''",
        "\" \"", "' '", "\"\t\"", "\"\"\"\"", "''''", "\"\".\"\"", "''.''", "\"#\"", "'#'", "\"\" #"};
    const std::string good = rng.chance(50) ? std::string("shape")
                             : info && !info->keys.empty() ? rng.pick(info->keys) : std::string("rows");
    std::string k;
    switch (rng.below(6)) {
      case 0: case 1: k = rng.pick(parts); break;       // alone
      case 2: k = good + "." + rng.pick(parts); break;  // a.#, shape.""
      case 3: k = rng.pick(parts) + "." + good; break;  // "".x, #.shape
      case 4: k = "shape." + good + rng.pick(std::vector<std::string>{" #", "#", ".#", ". #"}); break;
      default: {  // a mixture
        const size_t n = 2 + rng.below(4);
        for (size_t i = 0; i < n; ++i) k += (i && rng.chance(70) ? "." : "") + rng.pick(parts);
      }
    }
    return k;
  }

  std::string set_value(Rng& rng) const {
    static const std::vector<std::string> junk = {
        "", "[", "]", "[\nx]", "[1,", "{", "{a=1}", "\"unterminated", "'''", "\"\"\"", "=", "==", "1=2", "[1,2",
        "[[1,2],[3,4]]", "[[]]", "[[1],[2],[3]]", "\"\\u0000\"", "a b", "\\", "\t1", "1\r", "bf16\n", "fp16 ",
        "#", "1 # c", "\xff", "\xc3\xa9", "\x1b[31m", "nan", "inf", "-inf", "1e999"};
    switch (rng.below(9)) {
      case 0: case 1: return rng.pick(kBoundaryInts);
      case 2: return rng.pick(junk);
      case 3: return word(rng);  // bare words are strings
      case 4: {
        const std::string v = value(rng);
        return v.size() > (1 << 20) ? v.substr(0, 1 << 20) : v;
      }
      case 5: {  // a sweep list
        std::string s = "[";
        const size_t n = rng.size_up_to(rng.chance(80) ? 32 : 10000);
        for (size_t i = 0; i < n; ++i) s += (i ? "," : "") + (rng.chance(60) ? std::to_string(1 + rng.below(300)) : rng.pick(kBoundaryInts));
        return s + "]";
      }
      case 6: {  // stray bytes in a good value
        std::string v = std::to_string(1 + rng.below(100));
        v.insert(rng.below(v.size() + 1), rng.pick(kBytes));
        return v;
      }
      case 7: return rng.pick(kOtherValues);
      default: return std::to_string(1 + rng.below(4096));
    }
  }

  Input set_input(Rng& rng) const {
    const auto& [path, text] = rng.pick(cases_);
    const OpInfo* info = reg_.find(op_of(text));
    Input in;
    in.cls = "set";
    in.how = fs::relative(path, corpus_).string() + ":";
    in.case_path = path;
    in.args = {{rng.chance(50) ? "verify" : "run"}, {path}, {"--dry-run"}};
    const size_t n = 1 + rng.below(3);
    for (size_t i = 0; i < n; ++i) {
      std::string s;
      const size_t form = rng.below(20);
      const std::string k = set_key(rng, info);
      const bool word_key = k.size() > 12 && k.compare(k.size() - 12, 12, "distribution") == 0;
      const std::string v = rng.chance(30) && k.rfind("shape.", 0) == 0 ? edge_value(rng, info, k.substr(6))
                            : word_key && rng.chance(60)                ? rng.pick(kInputWords)
                                                                        : set_value(rng);
      if (form == 0) s = k;                 // no '='
      else if (form == 1) s = k + "==" + v;
      else if (form == 2) s = "=" + v;
      else if (form == 3) s = " " + k + " = " + v + " ";
      else s = k + "=" + v;
      // argv strings end at a NUL
      if (s.find('\0') != std::string::npos) s.erase(s.find('\0'));
      in.args.push_back({"--set"});
      in.args.push_back({s});
      in.how += " --set " + s.substr(0, 40);
    }
    in.name_set = true;
    return in;
  }

  // --- command lines ----------------------------------------------------------

  std::string number_junk(Rng& rng) const {
    static const std::vector<std::string> v = {
        "-1", "18446744073709551616", "18446744073709551615", "9223372036854775808", "-9223372036854775809",
        "junk", "", "1e3", "0x10", " 5", "5 ", "+5", "-0", "1.5", "nan", "inf", "99999999999999999999999",
        "\xff", "\xd9\xa3", "2147483648", "4294967296", "0", "1", "--", "-", "5x", "0b1"};
    return rng.pick(v);
  }

  Input flags_input(Rng& rng) const {
    Input in;
    in.cls = "flags";
    const std::string& a_case = rng.pick(cases_).first;
    static const std::vector<std::string> subs = {"run", "verify", "run", "verify", "run", "verify", "list",
                                                  "compare", "", "RUN", "help", "-h", "--help", "--version", "vrify"};
    const std::string sub = rng.pick(subs);
    in.args.push_back({sub});
    in.how = "sub=" + sub;
    if (sub == "run" || sub == "verify" || rng.chance(20)) {
      static const std::vector<std::string> case_args = {"", "all", "smoke", "softmax", "nope", "smoke/softmax.toml",
                                                         "..", "/", "/dev/null", ".", "x.toml", "-", "--", " ",
                                                         "\xff.toml", "a/../../b", "perf"};
      const size_t n = rng.chance(80) ? 1 : rng.below(4);
      for (size_t i = 0; i < n; ++i) in.args.push_back({rng.chance(50) ? a_case : rng.pick(case_args)});
      in.args.push_back({"--dry-run"});  // always: there is no GPU
      in.args.push_back({"--cases-dir"});
      in.args.push_back({rng.chance(85) ? corpus_ : rng.pick(std::vector<std::string>{"", "nope", "/dev/null", "."})});
    }
    const size_t flags = rng.below(4);
    for (size_t i = 0; i < flags; ++i) {
      switch (rng.below(16)) {
        case 0: case 1: in.args.push_back({"--seed"}); in.args.push_back({number_junk(rng)}); break;
        case 2: in.args.push_back({"--device"}); in.args.push_back({number_junk(rng)}); break;
        case 3: in.args.push_back({rng.chance(50) ? "-k" : "--kernel"}); in.args.push_back({rng.chance(50) ? word(rng) : number_junk(rng)}); break;
        case 4: in.args.push_back({"--kernel=" + word(rng)}); break;
        case 5: in.args.push_back({"--format"}); in.args.push_back({rng.pick(std::vector<std::string>{"json", "csv", "md", "junk", ""})}); break;
        case 6: in.args.push_back({"-o"}); in.args.push_back({rng.pick(std::vector<std::string>{"out.json", "out.csv", "", "/nonexistent/x.json", "."})}); break;
        case 7: in.args.push_back({"--mode"}); in.args.push_back({rng.pick(std::vector<std::string>{"cold", "all", "tepid", ""})}); break;
        case 8: in.args.push_back({"--flush"}); in.args.push_back({rng.pick(std::vector<std::string>{"read", "write", "dirty"})}); break;
        case 9: in.args.push_back({rng.pick(std::vector<std::string>{"--keep-samples", "--no-samples", "--profile"})}); break;
        case 10: in.args.push_back({rng.chance(50) ? "--dump" : "--dump-failures"}); in.args.push_back({rng.chance(50) ? "dump" : ""}); break;
        case 11: in.args.push_back({"--set"}); in.args.push_back({rng.chance(50) ? "shape.rows=" + number_junk(rng) : number_junk(rng)}); break;
        case 12: in.args.push_back({rng.pick(std::vector<std::string>{"--bogus", "-", "--", "-kk", "--seed", "--device", "-k", "--set", "--dry-run=1", "--dry-run=junk", "---", "-\xff"})}); break;
        case 13: in.args.push_back({"--threshold"}); in.args.push_back({number_junk(rng)}); break;
        case 14: in.args.push_back({"--remeasure"}); break;
        default: in.args.push_back({rng.pick(std::vector<std::string>{"--seed=-1", "--device=-1", "--seed=18446744073709551616", "--device=2147483648", "-k=", "--cases-dir="})}); break;
      }
      in.how += " " + in.args[in.args.size() - 1].text.substr(0, 24);
    }
    if (sub == "compare") in.allowed = {0, 1, 2};
    return in;
  }

  // --- compare ----------------------------------------------------------------

  nlohmann::json json_value(Rng& rng) const {
    switch (rng.below(22)) {
      case 0: return -1;
      case 1: return 0;
      case 2: return -0.0;
      case 3: return 1e308;
      case 4: return -1e308;
      case 5: return std::numeric_limits<uint64_t>::max();
      case 6: return std::numeric_limits<int64_t>::min();
      case 7: return 5e-324;
      case 8: return "0.01";
      case 9: return nullptr;
      case 10: return true;
      case 11: return nlohmann::json::array();
      case 12: return nlohmann::json::object();
      case 13: return "";
      case 14: return std::string(rng.size_up_to(1 << 20), 'x');
      case 15: return std::string("a\x01\x1b[2J\nb\r\t\x7f");
      case 16: return std::string("\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80\xe2\x80\xa8");
      case 17: return 1e-300;
      case 18: return rng.pick(std::vector<std::string>{"cold", "hot", "graph", "FAILED", "ERROR", "verified", "SLOW"});
      case 19: return 1 + static_cast<double>(rng.below(1000)) / 100;
      case 20: return static_cast<int64_t>(rng.below(1000000)) - 500000;
      default: return 1e-3 * static_cast<double>(rng.below(100));
    }
  }

  // A random node of `j` (a pointer into it) with its parent and key/index.
  static nlohmann::json* random_node(Rng& rng, nlohmann::json& j, nlohmann::json** parent, std::string* key) {
    nlohmann::json* at = &j;
    *parent = nullptr;
    for (int depth = 0; depth < 8 && (at->is_object() || at->is_array()) && !at->empty(); ++depth) {
      if (depth > 0 && rng.chance(25)) break;
      const size_t i = rng.below(at->size());
      *parent = at;
      if (at->is_object()) {
        auto it = at->begin();
        std::advance(it, static_cast<long>(i));
        *key = it.key();
        at = &it.value();
      } else {
        *key = std::to_string(i);
        at = &(*at)[i];
      }
    }
    return at;
  }

  std::string mutate_json(Rng& rng, const std::string& text, std::string& how) const {
    nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    const size_t count = 1 + rng.below(rng.chance(25) ? 3 : 1);
    std::vector<std::string> textual;  // applied to the dump
    for (size_t m = 0; m < count && !j.is_discarded(); ++m) {
      nlohmann::json* parent = nullptr;
      std::string key;
      nlohmann::json* node = random_node(rng, j, &parent, &key);
      switch (rng.below(15)) {
        case 12: case 13: case 14:  // a plausible change: scale a number, keep its type
          if (node->is_number()) {
            static const std::vector<double> f = {0, 0.5, 2, 1e6, 1e-6, 1.0000001, -1, 1.3, 0.7, 1e300};
            *node = node->get<double>() * rng.pick(f);
          } else if (node->is_string()) {
            *node = rng.pick(std::vector<std::string>{"cold", "hot", "graph", "verified", "FAILED", "ERROR", "skipped", "softmax", "cols=1000", "naive", "warp_online", ""});
          }
          how += " scale:" + key;
          break;
        case 0: case 1: case 2: *node = json_value(rng); how += " set:" + key; break;
        case 3:
          if (parent && parent->is_object()) parent->erase(key);
          how += " drop:" + key;
          break;
        case 4:
          if (j.contains("attnbench") && j["attnbench"].is_object()) j["attnbench"]["schema"] = json_value(rng);
          how += " schema";
          break;
        case 5:
          if (j.contains("rows") && j["rows"].is_array() && !j["rows"].empty()) {
            const nlohmann::json row = j["rows"][rng.below(j["rows"].size())];
            // Up to 20,000 rows, and a report of a few MB at most.
            const size_t cap = std::max<size_t>(1, (size_t{4} << 20) / (row.dump().size() + 1));
            for (size_t n = std::min(cap, rng.size_up_to(20000)); n > 0; --n) j["rows"].push_back(row);
          }
          how += " many-rows";
          break;
        case 6:
          if (j.contains("rows") && j["rows"].is_array() && !j["rows"].empty()) {
            nlohmann::json& row = j["rows"][rng.below(j["rows"].size())];
            if (row.is_object() && row.contains("timing")) {
              nlohmann::json t = row["timing"];
              row.erase("timing");
              nlohmann::json ts = nlohmann::json::object();
              for (size_t n = 1 + rng.below(4); n > 0; --n) ts[rng.chance(50) ? "hot" : json_value(rng).dump().substr(0, 30)] = t;
              row["timings"] = ts;
            }
          }
          how += " timings";
          break;
        case 7: textual.push_back(rng.pick(std::vector<std::string>{"NaN", "-NaN", "Infinity", "1e999", "-1e999", "01", "0x10", "1.", ".5", "+1", "-", "1e", "\"\\ud800\""})); how += " text-num"; break;
        case 8:  // deep nesting, in place of a number
          textual.push_back("NEST" + std::to_string(rng.size_up_to(200000)));
          how += " nest";
          break;
        case 9: if (node->is_object()) (*node)[std::string(rng.size_up_to(1000), 'k')] = json_value(rng); how += " extra-key"; break;
        case 10: if (node->is_string()) *node = node->get<std::string>() + rng.pick(std::vector<std::string>{"\x01", "\n", "\x1b[31m", "\xc3\xa9"}); how += " ctl"; break;
        default: *node = json_value(rng); how += " set2:" + key; break;
      }
    }
    std::string out = j.is_discarded() ? text : j.dump(1, ' ', false, nlohmann::json::error_handler_t::replace);
    for (const auto& t : textual) {
      // Replace one number (or a `null` from the nesting case) with the raw text.
      std::string raw = t;
      if (t.rfind("NEST", 0) == 0) {
        const size_t d = std::stoul(t.substr(4));
        raw = std::string(d, '[') + std::string(d, ']');
      }
      const auto toks = int_tokens(out);
      if (toks.empty()) continue;
      const auto [at, len] = toks[rng.below(toks.size())];
      out.replace(at, len, raw);
    }
    if (rng.chance(8)) {  // textual damage
      if (rng.chance(50)) out.resize(rng.below(out.size() + 1));
      else out.insert(rng.below(out.size() + 1), rng.pick(kBytes));
      how += " bytes";
    }
    return out;
  }

  Input compare_input(Rng& rng) const {
    Input in;
    in.cls = "compare";
    in.allowed = {0, 1, 2};
    const auto& [a_path, a_text] = rng.pick(rng.chance(85) ? reports_ : jsons_);
    const auto& [b_path, b_text] = rng.pick(rng.chance(85) ? reports_ : jsons_);
    in.how = fs::path(a_path).filename().string() + "," + fs::path(b_path).filename().string() + ":";
    const size_t which = rng.below(3);  // 0: base mutated, 1: new mutated, 2: both
    in.files.push_back({"base.json", which != 1 ? mutate_json(rng, a_text, in.how) : a_text});
    in.files.push_back({"new.json", which != 0 ? mutate_json(rng, b_text, in.how) : b_text});
    in.args = {{"compare"}, {"", 0}, {"", 1}};
    if (rng.chance(25)) {  // the same reports through `report`'s reader and page, without the plot script
      in.allowed = {0, 2};
      in.args = {{"report"}, {"", 1}, {"-o"}, {"page"}, {"--plot-script"}, {"none"}};
      if (rng.chance(50)) in.args.insert(in.args.end(), {{"--compare"}, {"", 0}});
      in.how += " report";
      return in;
    }
    if (rng.chance(25)) {
      in.args.push_back({"--threshold"});
      in.args.push_back({rng.chance(50) ? number_junk(rng) : std::to_string(rng.below(200)) + "%"});
    }
    if (rng.chance(20)) {
      in.args.push_back({"--confidence"});
      in.args.push_back({rng.chance(50) ? number_junk(rng) : std::to_string(50 + rng.below(50)) + "%"});
    }
    if (rng.chance(10)) in.args.push_back({"--fail-on-unsure"});
    if (rng.chance(20)) in.args.push_back({"--format=markdown"});
    if (rng.chance(10)) {
      in.args.push_back({"-o"});
      in.args.push_back({"out.md"});
    }
    return in;
  }

  const Registry& reg_;
  std::vector<std::pair<std::string, std::string>> cases_, jsons_, reports_;
  std::string corpus_;
};

// ---------------------------------------------------------------------------
// Running one input in a child

struct Limits {
  double timeout_s = 10;
  uint64_t memory_bytes = uint64_t{4} << 30;
};

struct Result {
  bool done = false;
  int code = -1;    // exit status, or -1
  int sig = 0;      // the signal that ended it
  bool hang = false, memory = false;
  std::string out, err;
  size_t out_bytes = 0, err_bytes = 0;  // what the child wrote, kept or not
  double ms = 0;
};

constexpr size_t kKeepBytes = 1 << 20;  // output kept per stream

struct Child {
  pid_t pid = -1;
  int out_fd = -1, err_fd = -1;
  Clock::time_point start;
  std::string dir;
  uint64_t index = 0;
  Input input;
  Result result;
  Clock::time_point next_rss_check;
  bool keep_dir = false;  // leave the input's files when it ends
  double gen_ms = 0;      // making the input
};

[[noreturn]] void child_main(const Input& in, const std::string& dir, const std::string& corpus, const Limits& lim,
                             int out_fd, int err_fd) {
  const int null_fd = open("/dev/null", O_RDONLY);
  if (null_fd >= 0) dup2(null_fd, 0);
  dup2(out_fd, 1);
  dup2(err_fd, 2);
  if (chdir(dir.c_str()) != 0) _exit(120);
  setenv("ATTNBENCH_CASES", corpus.c_str(), 1);
  rlimit core{0, 0};
  setrlimit(RLIMIT_CORE, &core);
  rlimit fsize{256u << 20, 256u << 20};
  setrlimit(RLIMIT_FSIZE, &fsize);
#if !FUZZ_ASAN
  rlimit as{lim.memory_bytes, lim.memory_bytes};
  setrlimit(RLIMIT_AS, &as);
#else
  (void)lim;
#endif
  std::vector<std::string> storage = {"attnbench"};
  for (const Arg& a : in.args) storage.push_back(file_arg_path(dir, in, a));
  std::vector<char*> argv;
  for (auto& s : storage) argv.push_back(s.data());
  argv.push_back(nullptr);
  const int rc = attnbench::run_cli(static_cast<int>(storage.size()), argv.data());
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  _exit(rc);
}

bool write_file(const std::string& path, const std::string& content) {
  std::ofstream f(path, std::ios::binary);
  f.write(content.data(), static_cast<std::streamsize>(content.size()));
  return static_cast<bool>(f);
}

bool start_child(Child& c, const std::string& corpus, const Limits& lim) {
  fs::create_directories(c.dir);
  for (const auto& [name, content] : c.input.files)
    if (!write_file(c.dir + "/" + name, content)) return false;
  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) != 0) return false;
  if (pipe2(err, O_CLOEXEC) != 0) {
    close(out[0]);
    close(out[1]);
    return false;
  }
  std::cout.flush();
  std::cerr.flush();
  c.start = Clock::now();
  c.next_rss_check = c.start;
  c.pid = fork();
  if (c.pid == 0) {
    signal(SIGCHLD, SIG_DFL);
    close(out[0]);
    close(err[0]);
    child_main(c.input, c.dir, corpus, lim, out[1], err[1]);
  }
  close(out[1]);
  close(err[1]);
  if (c.pid < 0) {
    close(out[0]);
    close(err[0]);
    return false;
  }
  c.out_fd = out[0];
  c.err_fd = err[0];
  fcntl(c.out_fd, F_SETFL, O_NONBLOCK);
  fcntl(c.err_fd, F_SETFL, O_NONBLOCK);
  return true;
}

// The child's CPU time (user + system) in seconds: a hang is judged on it, so that a
// busy machine or a slow parent does not make a finding of a child that waited its turn.
double cpu_seconds(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const size_t paren = stat.rfind(')');
  if (paren == std::string::npos) return 0;
  std::istringstream rest(stat.substr(paren + 2));
  std::string field;
  unsigned long long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i == 14) utime = std::strtoull(field.c_str(), nullptr, 10);
    if (i == 15) stime = std::strtoull(field.c_str(), nullptr, 10);
  }
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

uint64_t rss_bytes(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/statm");
  uint64_t size = 0, resident = 0;
  f >> size >> resident;
  return resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

void drain(int& fd, std::string& keep, size_t& bytes) {
  char buf[65536];
  while (fd >= 0) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n > 0) {
      bytes += static_cast<size_t>(n);
      if (keep.size() < kKeepBytes) keep.append(buf, std::min(static_cast<size_t>(n), kKeepBytes - keep.size()));
    } else if (n == 0) {
      close(fd);
      fd = -1;
    } else {
      if (errno != EAGAIN && errno != EINTR) {
        close(fd);
        fd = -1;
      }
      return;
    }
  }
}

// SIGCHLD wakes poll() through this pipe: a child's pipes close a moment before it
// can be reaped.
int g_sigchld_pipe[2] = {-1, -1};

void on_sigchld(int) {
  const int saved = errno;
  const char c = 0;
  [[maybe_unused]] const ssize_t n = write(g_sigchld_pipe[1], &c, 1);
  errno = saved;
}

void install_sigchld() {
  if (pipe2(g_sigchld_pipe, O_CLOEXEC | O_NONBLOCK) != 0) return;
  struct sigaction sa {};
  sa.sa_handler = on_sigchld;
  sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
  sigaction(SIGCHLD, &sa, nullptr);
}

// Polls the running children once (up to `wait_ms`); finished ones get result.done.
void poll_children(std::vector<Child>& kids, const Limits& lim, int wait_ms) {
  std::vector<pollfd> fds;
  if (g_sigchld_pipe[0] >= 0) fds.push_back({g_sigchld_pipe[0], POLLIN, 0});
  for (auto& c : kids) {
    if (c.out_fd >= 0) fds.push_back({c.out_fd, POLLIN, 0});
    if (c.err_fd >= 0) fds.push_back({c.err_fd, POLLIN, 0});
  }
  if (!fds.empty()) poll(fds.data(), fds.size(), wait_ms);
  if (g_sigchld_pipe[0] >= 0) {
    char buf[64];
    while (read(g_sigchld_pipe[0], buf, sizeof buf) > 0) {
    }
  }
  const auto now = Clock::now();
  for (auto& c : kids) {
    if (c.result.done) continue;
    drain(c.out_fd, c.result.out, c.result.out_bytes);
    drain(c.err_fd, c.result.err, c.result.err_bytes);
    const double s = std::chrono::duration<double>(now - c.start).count();
    if (!c.result.hang && !c.result.memory) {
      // A hang: timeout_s of CPU time, or three times that of wall time (a child
      // blocked on something).
      if (s > 3 * lim.timeout_s) {
        c.result.hang = true;
        kill(c.pid, SIGKILL);
      } else if (now >= c.next_rss_check) {
        c.next_rss_check = now + std::chrono::milliseconds(50);
        if (s > lim.timeout_s / 2 && cpu_seconds(c.pid) > lim.timeout_s) {
          c.result.hang = true;
          kill(c.pid, SIGKILL);
        } else if (rss_bytes(c.pid) > lim.memory_bytes) {
          c.result.memory = true;
          kill(c.pid, SIGKILL);
        }
      }
    }
    int status = 0;
    const pid_t r = waitpid(c.pid, &status, WNOHANG);
    if (r == c.pid) {
      drain(c.out_fd, c.result.out, c.result.out_bytes);
      drain(c.err_fd, c.result.err, c.result.err_bytes);
      // A grandchild could hold the pipes open; the child is what counts.
      if (c.out_fd >= 0) close(c.out_fd);
      if (c.err_fd >= 0) close(c.err_fd);
      c.out_fd = c.err_fd = -1;
      if (WIFEXITED(status)) c.result.code = WEXITSTATUS(status);
      if (WIFSIGNALED(status)) c.result.sig = WTERMSIG(status);
      c.result.ms = std::chrono::duration<double, std::milli>(Clock::now() - c.start).count();
      c.result.done = true;
      std::error_code ec;
      if (!c.keep_dir) fs::remove_all(c.dir, ec);
    }
  }
}

void kill_child(Child& c) {
  if (c.result.done) return;
  kill(c.pid, SIGKILL);
  int status = 0;
  waitpid(c.pid, &status, 0);
  if (c.out_fd >= 0) close(c.out_fd);
  if (c.err_fd >= 0) close(c.err_fd);
  c.out_fd = c.err_fd = -1;
  std::error_code ec;
  fs::remove_all(c.dir, ec);
}

Result run_one(const Input& in, const std::string& dir, const std::string& corpus, const Limits& lim,
               bool keep_dir = false) {
  std::vector<Child> kids(1);
  kids[0].dir = dir;
  kids[0].keep_dir = keep_dir;
  kids[0].input = in;
  if (!start_child(kids[0], corpus, lim)) {
    Result r;
    r.done = true;
    r.code = 125;
    r.err = "attnbench_fuzz: could not start the child\n";
    return r;
  }
  while (!kids[0].result.done) poll_children(kids, lim, 20);
  return kids[0].result;
}

// ---------------------------------------------------------------------------
// Judging

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == '\n') {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

struct Verdict {
  std::string kind;  // empty: no finding
  std::string line;  // the output line the signature is made of
  std::string advisory;  // not a finding: control bytes in a message
};

std::string first_line_with(const std::string& text, const std::vector<std::string>& needles) {
  for (const auto& l : lines_of(text))
    for (const auto& n : needles)
      if (l.find(n) != std::string::npos) return l;
  return "";
}

const char* signal_name(int sig) {
  switch (sig) {
    case SIGSEGV: return "SIGSEGV";
    case SIGABRT: return "SIGABRT";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    case SIGKILL: return "SIGKILL";
    case SIGXFSZ: return "SIGXFSZ";
    case SIGTRAP: return "SIGTRAP";
    default: return "signal";
  }
}

Verdict judge(const Input& in, const Result& r, const std::string& dir) {
  Verdict v;
  const std::string all = r.err + "\n" + r.out;
  static const std::vector<std::string> sanitizer = {"AddressSanitizer", "UndefinedBehaviorSanitizer",
                                                     "runtime error", "LeakSanitizer"};
  if (r.hang) return {"hang", "", ""};
  if (r.memory) return {"memory", "", ""};
  if (const std::string l = first_line_with(all, {"runtime error"}); !l.empty()) return {"sanitizer", l, ""};
  if (const std::string l = first_line_with(all, sanitizer); !l.empty()) {
    // ASan's first line names the error; the first frame in our sources says where.
    std::string frame;
    for (const auto& f : lines_of(all)) {
      if (f.find(" in ") == std::string::npos || f.find("#") == std::string::npos) continue;
      if (f.find("/app/") != std::string::npos || f.find("toml++") != std::string::npos ||
          f.find("/kernels/") != std::string::npos || f.find("nlohmann") != std::string::npos ||
          f.find("CLI/") != std::string::npos) {
        frame = f;
        break;
      }
    }
    return {"sanitizer", l + (frame.empty() ? "" : " @ " + frame), ""};
  }
  if (const std::string l = first_line_with(all, {"terminate called"}); !l.empty()) {
    const std::string what = first_line_with(all, {"what():"});
    return {"terminate", l + (what.empty() ? "" : " " + what), ""};
  }
  if (r.sig) {
    std::string l = first_line_with(r.err, {"Assertion", "assert"});
    if (l.empty() && !lines_of(r.err).empty()) l = lines_of(r.err).back();
    return {"signal " + std::to_string(r.sig) + " (" + signal_name(r.sig) + ")", l, ""};
  }
  if (const std::string l = first_line_with(all, {"internal error"}); !l.empty()) return {"internal error", l, ""};
  const auto err_lines = lines_of(r.err), out_lines = lines_of(r.out);
  const std::string key = !err_lines.empty() ? err_lines.front() : !out_lines.empty() ? out_lines.front() : "";
  if (std::find(in.allowed.begin(), in.allowed.end(), r.code) == in.allowed.end())
    return {"exit " + std::to_string(r.code), key, ""};
  if (r.code != 2) return v;
  const size_t n_lines = err_lines.size() + out_lines.size();
  if (n_lines > 3) return {"more than 3 lines (" + std::string(n_lines > 100 ? ">100" : std::to_string(n_lines)) + ")", key, ""};
  const std::string* longest = nullptr;
  for (const auto* ls : {&err_lines, &out_lines})
    for (const auto& l : *ls)
      if (!longest || l.size() > longest->size()) longest = &l;
  if (longest && longest->size() > 500) {
    // An unbounded location ("--set KEY=VALUE: error: ...") is one fault, whatever follows.
    const size_t e = longest->find(": error:");
    if (e != std::string::npos && e > 400) return {"line longer than 500 chars (its location)", longest->substr(0, e), ""};
    return {"line longer than 500 chars", *longest, ""};
  }
  if (in.name_file) {
    const std::string path = dir + "/" + in.files[0].first;
    if (all.find(path) == std::string::npos) return {"message does not name the case file", key, ""};
  }
  if (in.name_set) {
    if (all.find("--set") == std::string::npos && all.find(in.case_path) == std::string::npos)
      return {"message names neither the --set nor the case file", key, ""};
  }
  for (unsigned char c : all)
    if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) {
      v.advisory = "raw control byte in the message";
      v.line = key;
      break;
    }
  return v;
}

// The signature of a finding: its kind and its key line with numbers, paths and quoted
// text stripped (a sanitizer's source location keeps its file and line).
std::string normalize(std::string line, const std::string& workdir, const std::string& corpus) {
  auto replace_all = [&](const std::string& from, const std::string& to) {
    if (from.empty()) return;
    for (size_t at = line.find(from); at != std::string::npos; at = line.find(from, at + to.size()))
      line.replace(at, from.size(), to);
  };
  // An input's files live in WORKDIR/<input>/: keep only their names.
  for (size_t at = line.find(workdir + "/"); at != std::string::npos; at = line.find(workdir + "/", at)) {
    const size_t slash = line.find('/', at + workdir.size() + 1);
    line.erase(at, slash == std::string::npos ? workdir.size() + 1 : slash + 1 - at);
  }
  replace_all(corpus + "/", "");
  // A --set is its own location: "--set KEY=VALUE: error: ..." -> "--set S: error: ...".
  if (line.rfind("--set ", 0) == 0) {
    const size_t e = line.find(": error:");
    line = "--set S" + (e == std::string::npos ? std::string() : line.substr(e));
  }
  // Runs of one character (long keys and strings) -> "c<run>".
  std::string squeezed;
  for (size_t i = 0; i < line.size();) {
    size_t j = i;
    while (j < line.size() && line[j] == line[i]) ++j;
    squeezed += j - i > 8 ? std::string(1, line[i]) + "<run>" : line.substr(i, j - i);
    i = j;
  }
  line = squeezed;
  if (line.size() > 2000) line.resize(2000);
  std::string out;
  // Sanitizer and assert locations: "dir/file.cpp:123:45" -> "file.cpp:123".
  static const std::regex where(R"(([^\s:/]*/)*([\w.+-]+\.(?:cpp|hpp|h|inl|cu|cuh|tcc)):(\d+)(:\d+)?)");
  static const std::regex quoted(R"('[^']*'|"[^"]*"|`[^`]*')");
  static const std::regex point(R"(sweep point [^:]*:)");
  static const std::regex paren(R"(\([^()]*\))");
  static const std::regex number(R"([-+]?(0x[0-9a-fA-F]+|\d+(\.\d+)?([eE][-+]?\d+)?))");
  static const std::regex spaces(R"(\s+)");
  // Parentheses hold hints and lists of valid names that vary with the op, not the fault.
  const std::string s = std::regex_replace(std::regex_replace(line, point, "sweep point P:"), paren, "(...)");
  // Keep locations, number-strip the rest.
  std::smatch m;
  std::string rest = s;
  while (std::regex_search(rest, m, where)) {
    std::string before = m.prefix().str();
    before = std::regex_replace(std::regex_replace(before, quoted, "<Q>"), number, "N");
    out += before + m[2].str() + ":" + m[3].str();
    rest = m.suffix().str();
  }
  const bool assertion = s.find("Assertion") != std::string::npos;
  out += assertion ? rest : std::regex_replace(std::regex_replace(rest, quoted, "<Q>"), number, "N");
  out = std::regex_replace(out, spaces, " ");
  // Sweep point labels and other content after the first ':' of the message vary most.
  if (out.size() > 160) out = out.substr(0, 160) + "...";
  return out;
}

// ---------------------------------------------------------------------------
// Shrinking a finding: smaller files and arguments that keep the signature

std::string shell_quote(const std::string& s) {
  if (!s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || std::strchr("_-./=+:,@%", c);
      }))
    return s;
  bool plain = true;
  for (unsigned char c : s) plain = plain && c >= 0x20 && c < 0x7f;
  if (plain) {
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
  }
  std::string q = "$'";
  for (unsigned char c : s) {
    char buf[8];
    if (c == '\\' || c == '\'') {
      q += '\\';
      q += static_cast<char>(c);
    } else if (c == '\n') {
      q += "\\n";
    } else if (c < 0x20 || c >= 0x7f) {
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      q += buf;
    } else {
      q += static_cast<char>(c);
    }
  }
  return q + "'";
}

struct Finding {
  std::string cls, kind, signature, line;
  uint64_t index = 0, count = 0;
  Input input;
  Result result;
  std::string dir_name;  // under --keep
};

class Fuzzer {
 public:
  Fuzzer(const Generator& gen, std::string corpus, std::string workdir, Limits lim)
      : gen_(gen), corpus_(std::move(corpus)), workdir_(std::move(workdir)), lim_(lim) {}

  std::string signature(const Input& in, const Verdict& v) const {
    std::string line = normalize(v.line, workdir_, corpus_);
    // A long line is one fault however the message goes on: cut it after the first
    // stand-in for the long input (a quoted value, a run, a sweep point's label).
    if (v.kind.rfind("line longer", 0) == 0) {
      size_t cut = std::string::npos;
      for (const char* mark : {"<Q>", "<run>", "sweep point P:"}) {
        const size_t at = line.find(mark);
        if (at != std::string::npos) cut = std::min(cut, at + std::strlen(mark));
      }
      if (cut != std::string::npos) line.resize(cut);
    }
    return in.cls + " | " + v.kind + " | " + line;
  }

  // Same signature with a smaller input?
  bool still_fails(const Input& in, const std::string& sig, uint64_t& runs) {
    ++runs;
    const std::string dir = workdir_ + "/m" + std::to_string(runs);
    Result r = run_one(in, dir, corpus_, lim_);
    const Verdict v = judge(in, r, dir);
    return !v.kind.empty() && signature(in, v) == sig;
  }

  Input shrink(const Input& start, const std::string& sig, Clock::time_point until) {
    Input best = start;
    uint64_t runs = 0;
    bool progress = true;
    while (progress && Clock::now() < until) {
      progress = false;
      // Files: drop chunks of lines, halving the chunk, then cut long lines.
      for (size_t f = 0; f < best.files.size() && Clock::now() < until; ++f) {
        std::vector<std::string> lines = split_lines(best.files[f].second);
        for (size_t chunk = std::max<size_t>(1, lines.size() / 2); chunk >= 1 && Clock::now() < until; chunk /= 2) {
          for (size_t at = 0; at < lines.size() && Clock::now() < until;) {
            std::vector<std::string> fewer = lines;
            fewer.erase(fewer.begin() + static_cast<long>(at),
                        fewer.begin() + static_cast<long>(std::min(lines.size(), at + chunk)));
            Input trial = best;
            trial.files[f].second = join_lines(fewer);
            if (still_fails(trial, sig, runs)) {
              best = trial;
              lines = fewer;
              progress = true;
            } else {
              at += chunk;
            }
          }
          if (chunk == 1) break;
        }
        for (size_t i = 0; i < lines.size() && Clock::now() < until; ++i) {
          while (lines[i].size() > 64 && Clock::now() < until) {
            std::vector<std::string> cut = lines;
            const size_t half = cut[i].size() / 2;
            // Keep the line's head (the key) and its tail (closing brackets and quotes).
            cut[i] = cut[i].substr(0, half / 2 + 8) + cut[i].substr(cut[i].size() - half / 2 + 8);
            Input trial = best;
            trial.files[f].second = join_lines(cut);
            if (!still_fails(trial, sig, runs)) break;
            best = trial;
            lines = cut;
            progress = true;
          }
        }
      }
      // Arguments: drop optional ones, shorten long ones.
      for (size_t i = 1; i < best.args.size() && Clock::now() < until;) {
        if (best.args[i].file >= 0 || best.args[i].text == "--dry-run") {
          ++i;
          continue;
        }
        Input trial = best;
        const bool pair = best.args[i].text.rfind("-", 0) == 0 && i + 1 < best.args.size() &&
                          best.args[i + 1].text.rfind("-", 0) != 0 && best.args[i + 1].file < 0;
        trial.args.erase(trial.args.begin() + static_cast<long>(i),
                         trial.args.begin() + static_cast<long>(i + (pair ? 2 : 1)));
        if (still_fails(trial, sig, runs)) {
          best = trial;
          progress = true;
        } else {
          ++i;
        }
      }
      for (size_t i = 0; i < best.args.size() && Clock::now() < until; ++i) {
        while (best.args[i].file < 0 && best.args[i].text.size() > 64 && Clock::now() < until) {
          Input trial = best;
          std::string& t = trial.args[i].text;
          const size_t half = t.size() / 2;
          t = t.substr(0, half / 2 + 8) + t.substr(t.size() - half / 2 + 8);
          if (!still_fails(trial, sig, runs)) break;
          best = trial;
          progress = true;
        }
      }
    }
    return best;
  }

  void keep(Finding& f, const std::string& keep_dir) {
    f.dir_name = f.cls + "-" + std::to_string(++kept_);
    const std::string dir = keep_dir + "/" + f.dir_name;
    fs::create_directories(dir);
    // Rerun from the kept files, so the output shows the paths a user will see.
    const Result r = run_one(f.input, dir, corpus_, lim_, /*keep_dir=*/true);
    std::string cmd = "${ATTNBENCH:-attnbench}";
    for (const Arg& a : f.input.args)
      cmd += " " + shell_quote(a.file >= 0 ? dir + "/" + f.input.files[static_cast<size_t>(a.file)].first : a.text);
    write_file(dir + "/cmd.sh", "#!/bin/sh\n# " + f.signature + "\nexec " + cmd + "\n");
    fs::permissions(dir + "/cmd.sh", fs::perms::owner_exec | fs::perms::group_exec | fs::perms::others_exec,
                    fs::perm_options::add);
    nlohmann::json meta = {{"class", f.cls},
                           {"kind", f.kind},
                           {"signature", f.signature},
                           {"input", f.index},
                           {"count", f.count},
                           {"how", f.input.how}};
    std::string argv_text;
    for (const Arg& a : f.input.args) argv_text += (argv_text.empty() ? "" : "\n") + (a.file >= 0 ? dir + "/" + f.input.files[static_cast<size_t>(a.file)].first : a.text);
    write_file(dir + "/argv.txt", argv_text + "\n");
    write_file(dir + "/finding.json", meta.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
    const Result& shown = r.done ? r : f.result;
    std::string out = "exit " + std::to_string(shown.code) + (shown.sig ? " signal " + std::to_string(shown.sig) : "") +
                      (shown.hang ? " (killed: hang)" : "") + (shown.memory ? " (killed: memory)" : "") +
                      "\n--- stderr (" + std::to_string(shown.err_bytes) + " bytes) ---\n" + shown.err.substr(0, 20000) +
                      "\n--- stdout (" + std::to_string(shown.out_bytes) + " bytes) ---\n" + shown.out.substr(0, 20000) + "\n";
    write_file(dir + "/output.txt", out);
  }

  const Generator& gen_;
  std::string corpus_, workdir_;
  Limits lim_;
  size_t kept_ = 0;
};

// ---------------------------------------------------------------------------
// Main

struct Options {
  uint64_t seed = 1;
  uint64_t iterations = 0;
  double seconds = 0;
  std::string corpus, compare_dir, keep, only_class;
  int64_t only = -1;
  int jobs = 2;
  double shrink_seconds = -1;
  bool verbose = false;
  Limits lim;
};

[[noreturn]] void usage(const std::string& why) {
  std::cerr << "attnbench_fuzz: " << why << "\n"
            << "usage: attnbench_fuzz --corpus CASES_DIR [--seed N] [--iterations N | --seconds S]\n"
               "         [--compare-dir DIR] [--keep DIR] [--class case|set|flags|compare] [--jobs N]\n"
               "         [--timeout S] [--shrink-seconds S] [--only INDEX] [--verbose]\n";
  std::exit(2);
}

Options parse_options(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) usage(a + " needs a value");
      return argv[++i];
    };
    auto number = [&](const std::string& s) -> double {
      char* end = nullptr;
      const double v = std::strtod(s.c_str(), &end);
      if (s.empty() || *end || !(v >= 0)) usage(a + ": not a number: " + s);
      return v;
    };
    if (a == "--seed") o.seed = static_cast<uint64_t>(number(next()));
    else if (a == "--iterations") o.iterations = static_cast<uint64_t>(number(next()));
    else if (a == "--seconds") o.seconds = number(next());
    else if (a == "--corpus") o.corpus = next();
    else if (a == "--compare-dir") o.compare_dir = next();
    else if (a == "--keep") o.keep = next();
    else if (a == "--class") o.only_class = next();
    else if (a == "--only") o.only = static_cast<int64_t>(number(next()));
    else if (a == "--jobs") o.jobs = std::max(1, static_cast<int>(number(next())));
    else if (a == "--timeout") o.lim.timeout_s = number(next());
    else if (a == "--shrink-seconds") o.shrink_seconds = number(next());
    else if (a == "--verbose" || a == "-v") o.verbose = true;
    else if (a == "--help" || a == "-h") usage("a mutation fuzzer for the attnbench command line");
    else usage("unknown option " + a);
  }
  if (o.corpus.empty()) usage("--corpus is required (the repository's cases/ directory)");
  if (o.iterations == 0 && o.seconds == 0 && o.only < 0) o.iterations = 1000;
  if (o.compare_dir.empty()) o.compare_dir = (fs::path(o.corpus) / ".." / "tests" / "compare").lexically_normal().string();
  return o;
}

std::vector<std::pair<std::string, std::string>> read_files(const std::string& dir, const std::string& ext) {
  std::vector<std::pair<std::string, std::string>> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (!it->is_regular_file() || it->path().extension() != ext) continue;
    std::ifstream f(it->path(), std::ios::binary);
    std::stringstream s;
    s << f.rdbuf();
    out.emplace_back(fs::absolute(it->path()).lexically_normal().string(), s.str());
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  Options o = parse_options(argc, argv);
  o.corpus = fs::absolute(o.corpus).lexically_normal().string();
  if (!o.corpus.empty() && o.corpus.back() == '/') o.corpus.pop_back();
  const auto cases = read_files(o.corpus, ".toml");
  if (cases.empty()) usage(o.corpus + ": no .toml case files");
  const auto jsons = read_files(o.compare_dir, ".json");
  const Registry reg = read_registry();
  Generator gen(reg, cases, jsons, o.corpus);
  if (!o.only_class.empty()) {
    const auto c = gen.classes();
    if (std::find(c.begin(), c.end(), o.only_class) == c.end()) usage("--class: unknown class " + o.only_class);
  }

  char tmpl[] = "/tmp/attnbench-fuzz.XXXXXX";
  if (!mkdtemp(tmpl)) {
    std::perror("attnbench_fuzz: mkdtemp");
    return 2;
  }
  const std::string workdir = tmpl;
  signal(SIGPIPE, SIG_IGN);
  install_sigchld();
  Fuzzer fz(gen, o.corpus, workdir, o.lim);
  {
    // The good reports: those `compare X X` accepts.
    std::vector<std::pair<std::string, std::string>> good;
    for (const auto& j : jsons) {
      Input in;
      in.files = {{"r.json", j.second}};
      in.args = {{"compare"}, {"", 0}, {"", 0}};
      if (run_one(in, workdir + "/good", o.corpus, o.lim).code == 0) good.push_back(j);
    }
    gen.set_good_reports(good);
  }

  // One input, replayed: its command line and everything it printed.
  if (o.only >= 0) {
    const Input in = gen.make(o.seed, static_cast<uint64_t>(o.only), o.only_class);
    const Result r = run_one(in, workdir + "/only", o.corpus, o.lim);
    const Verdict v = judge(in, r, workdir + "/only");
    std::cout << "input " << o.only << " (" << in.cls << "): " << in.how << "\nargv:";
    for (const Arg& a : in.args) std::cout << " " << shell_quote(a.file >= 0 ? in.files[static_cast<size_t>(a.file)].first : a.text);
    std::cout << "\nexit " << r.code << (r.sig ? " signal " + std::to_string(r.sig) : "") << (r.hang ? " hang" : "")
              << " in " << r.ms << " ms\n--- stderr ---\n" << r.err.substr(0, 4000) << "\n--- stdout ---\n"
              << r.out.substr(0, 4000) << "\n--- verdict: " << (v.kind.empty() ? "ok" : fz.signature(in, v)) << "\n";
    if (!o.keep.empty() && !v.kind.empty()) {
      Finding f{in.cls, v.kind, fz.signature(in, v), v.line, static_cast<uint64_t>(o.only), 1, in, r, ""};
      fz.keep(f, o.keep);
      std::cout << "kept as " << o.keep << "/" << f.dir_name << "\n";
    }
    std::error_code ec;
    fs::remove_all(workdir, ec);
    return v.kind.empty() ? 0 : 1;
  }

  const auto t0 = Clock::now();
  // Shrinking the findings takes the end of the time budget.
  const double shrink_s = o.keep.empty() ? 0
                          : o.shrink_seconds >= 0 ? o.shrink_seconds
                          : o.seconds > 0 ? std::min(8.0, o.seconds / 5) : 20.0;
  const auto fuzz_until = o.seconds > 0 ? t0 + std::chrono::duration_cast<Clock::duration>(
                                                   std::chrono::duration<double>(o.seconds - shrink_s))
                                        : Clock::time_point::max();
  std::cout << "attnbench_fuzz: seed " << o.seed << ", "
            << (o.seconds > 0 ? std::to_string(static_cast<int>(o.seconds)) + " s" : std::to_string(o.iterations) + " inputs")
            << ", " << o.jobs << " job(s), " << cases.size() << " cases, " << jsons.size() << " json reports, "
            << (FUZZ_ASAN ? "ASan+UBSan build" : "no ASan") << ", timeout " << o.lim.timeout_s << " s\n"
            << std::flush;

  struct ClassStats {
    uint64_t inputs = 0, findings = 0, advisories = 0;
    std::map<int, uint64_t> codes;
  };
  std::map<std::string, ClassStats> stats;
  std::map<std::string, Finding> findings;  // by signature
  std::map<std::string, Finding> advisories;
  std::vector<Child> running;
  uint64_t next_index = 0;
  auto finish = [&](Child& c) {
    const Verdict v = judge(c.input, c.result, c.dir);
    ClassStats& s = stats[c.input.cls];
    ++s.inputs;
    ++s.codes[c.result.hang ? -2 : c.result.sig ? -1 : c.result.code];
    if (o.verbose)
      std::cout << "#" << c.index << " " << c.input.cls << " exit " << c.result.code << " " << c.result.ms << " ms (made in "
                << c.gen_ms << " ms) "
                << c.input.how.substr(0, 100) << (v.kind.empty() ? "" : "  FINDING " + v.kind) << "\n    "
                << lines_of(c.result.err + "\n").front().substr(0, 160) << "\n";
    if (!v.kind.empty()) {
      ++s.findings;
      const std::string sig = fz.signature(c.input, v);
      auto it = findings.find(sig);
      if (it == findings.end()) {
        findings[sig] = Finding{c.input.cls, v.kind, sig, v.line, c.index, 1, c.input, c.result, ""};
        std::cout << "  new finding at input " << c.index << ": " << sig << "\n" << std::flush;
      } else {
        ++it->second.count;
        if (c.index < it->second.index) {  // the earliest input represents it, whatever the job order
          it->second.index = c.index;
          it->second.input = c.input;
          it->second.result = c.result;
          it->second.line = v.line;
        }
      }
    } else if (!v.advisory.empty()) {
      ++s.advisories;
      const std::string sig = c.input.cls + " | " + v.advisory + " | " + normalize(v.line, workdir, o.corpus);
      if (!advisories.count(sig)) advisories[sig] = Finding{c.input.cls, v.advisory, sig, v.line, c.index, 1, c.input, c.result, ""};
    }
  };
  while (true) {
    const auto more = [&] { return Clock::now() < fuzz_until && (o.iterations == 0 || next_index < o.iterations); };
    const bool time_left = more();
    while (more() && static_cast<int>(running.size()) < o.jobs) {
      Child c;
      c.index = next_index++;
      const auto g0 = Clock::now();
      c.input = gen.make(o.seed, c.index, o.only_class);
      c.gen_ms = std::chrono::duration<double, std::milli>(Clock::now() - g0).count();
      c.dir = workdir + "/" + std::to_string(c.index);
      if (!start_child(c, o.corpus, o.lim)) {
        std::cerr << "attnbench_fuzz: cannot start input " << c.index << ": " << std::strerror(errno) << "\n";
        return 2;
      }
      running.push_back(std::move(c));
    }
    if (running.empty()) break;
    if (!time_left && o.seconds > 0 && Clock::now() >= fuzz_until) {
      // Out of time: inputs still running are dropped, not judged.
      for (auto& c : running) kill_child(c);
      running.clear();
      break;
    }
    poll_children(running, o.lim, 20);
    for (auto it = running.begin(); it != running.end();) {
      if (it->result.done) {
        finish(*it);
        it = running.erase(it);
      } else {
        ++it;
      }
    }
  }
  const double fuzz_s = std::chrono::duration<double>(Clock::now() - t0).count();

  // Shrink and keep each distinct finding, earliest input first.
  std::vector<Finding*> order;
  for (auto& [sig, f] : findings) order.push_back(&f);
  std::sort(order.begin(), order.end(), [](const Finding* a, const Finding* b) { return a->index < b->index; });
  if (!o.keep.empty()) {
    fs::create_directories(o.keep);
    // Reproducers of an earlier run (CLASS-N/ holding a finding.json) would mix with these.
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(o.keep, ec))
      if (e.is_directory() && fs::exists(e.path() / "finding.json") && fs::exists(e.path() / "cmd.sh"))
        fs::remove_all(e.path(), ec);
    const auto shrink_until = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(shrink_s));
    for (size_t i = 0; i < order.size(); ++i) {
      Finding& f = *order[i];
      const bool slow = f.kind == "hang" || f.kind == "memory";
      const auto left = shrink_until - Clock::now();
      if (!slow && left > Clock::duration::zero()) {
        // An equal share of what is left for each finding still to shrink.
        const auto share = left / static_cast<long>(order.size() - i);
        f.input = fz.shrink(f.input, f.signature, Clock::now() + share);
      }
      fz.keep(f, o.keep);
    }
  }

  // Summary
  std::cout << "\nclass     inputs   exit 0   exit 1   exit 2    other  findings  distinct\n";
  uint64_t total = 0, total_findings = 0;
  for (const auto& cls : gen.classes()) {
    const ClassStats& s = stats[cls];
    uint64_t other = 0;
    for (const auto& [code, n] : s.codes)
      if (code != 0 && code != 1 && code != 2) other += n;
    size_t distinct = 0;
    for (const auto& [sig, f] : findings) distinct += f.cls == cls;
    auto code = [&](int c) { auto it = s.codes.find(c); return it == s.codes.end() ? uint64_t{0} : it->second; };
    char line[160];
    std::snprintf(line, sizeof line, "%-8s %7" PRIu64 " %8" PRIu64 " %8" PRIu64 " %8" PRIu64 " %8" PRIu64 " %9" PRIu64 " %9zu\n",
                  cls.c_str(), s.inputs, code(0), code(1), code(2), other, s.findings, distinct);
    std::cout << line;
    total += s.inputs;
    total_findings += s.findings;
  }
  std::cout << "total    " << total << " inputs in " << static_cast<int>(fuzz_s) << " s, " << total_findings
            << " finding(s), " << findings.size() << " distinct\n";
  for (const Finding* f : order)
    std::cout << "FINDING x" << f->count << " (first: input " << f->index << ")"
              << (f->dir_name.empty() ? "" : " -> " + o.keep + "/" + f->dir_name) << "\n  " << f->signature << "\n";
  for (const auto& [sig, a] : advisories)
    std::cout << "note (not a finding), first at input " << a.index << ": " << sig << "\n";
  std::error_code ec;
  fs::remove_all(workdir, ec);
  return findings.empty() ? 0 : 1;
}
