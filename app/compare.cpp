#include "app/compare.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <ostream>
#include <set>
#include <tuple>

#include "app/errors.hpp"
#include "app/report.hpp"
#include "app/text.hpp"

namespace attnbench {

const char* verdict_name(Verdict v) {
  switch (v) {
    case Verdict::fast: return "FAST";
    case Verdict::slow: return "SLOW";
    case Verdict::same: return "SAME";
    case Verdict::unsure: return "UNSURE";
    case Verdict::failed: return "FAILED";
    case Verdict::missing: return "missing";
    case Verdict::added: return "added";
  }
  return "?";
}

int CompareResult::count(Verdict v) const {
  return static_cast<int>(std::count_if(rows.begin(), rows.end(), [&](const CompareRow& r) { return r.verdict == v; }));
}

int CompareResult::count_by_quartiles() const {
  return static_cast<int>(
      std::count_if(rows.begin(), rows.end(), [](const CompareRow& r) { return r.by_quartiles(); }));
}

int CompareResult::count_noisy_base() const {
  return static_cast<int>(std::count_if(rows.begin(), rows.end(), [](const CompareRow& r) { return r.noisy_base; }));
}

int CompareResult::exit_code(bool fail_on_unsure, bool allow_missing) const {
  const int bad = count(Verdict::slow) + count(Verdict::failed) + (fail_on_unsure ? count(Verdict::unsure) : 0) +
                  (allow_missing ? 0 : count(Verdict::missing));
  return bad > 0 ? 1 : 0;
}

Verdict judge_interval(const Interval& ratio, double threshold) {
  // The band is symmetric in ratio: 1.05x slower and 1.05x faster (0.952) are its edges, so
  // swapping BASE and NEW swaps SLOW and FAST.
  const double up = 1 + threshold, down = 1 / up;
  if (ratio.lo > up) return Verdict::slow;
  if (ratio.hi < down) return Verdict::fast;
  if (ratio.lo >= down && ratio.hi <= up) return Verdict::same;
  return Verdict::unsure;
}

Verdict judge(const TimingStats& base, const TimingStats& now, double threshold, double* overlap) {
  const double lo = std::max(base.q1, now.q1), hi = std::min(base.q3, now.q3);
  const double narrower = std::min(base.q3 - base.q1, now.q3 - now.q1);
  // A zero-width range (one sample, or a report without quartiles) is covered or not at all.
  const double ov = hi < lo ? 0 : narrower <= 0 ? 1 : std::min(1.0, (hi - lo) / narrower);
  if (overlap) *overlap = ov;
  const bool apart = now.q1 > base.q3 || now.q3 < base.q1;
  if (!apart || base.median <= 0) return Verdict::same;
  const double change = now.median / base.median - 1;
  if (change > threshold) return Verdict::slow;
  if (change < -threshold) return Verdict::fast;
  return Verdict::same;
}

namespace {

// The report schemas this build reads (report.hpp's kJsonSchema is the newest). Schema 2
// only replaced schema 1's "pipeline" object by "stages"; schema 3 keeps "samples_ms" by
// default and adds "samples_mhz". Compare reads none of those but "samples_ms", which
// means the same in all three (schema 1 and 2 wrote it with --keep-samples): every key it
// reads ("attnbench", "device", "rows", a row's "case", "point", "variant", "status",
// "reason", "timing" and "timings" with "mode", "median_ms", "q1_ms", "q3_ms", "noise",
// "samples", "samples_ms") means the same in all, so older reports are still compared.
// Schema 4's mode "graph" launches on rotating copies of the inputs (cold); the warm graph
// of schemas 1-3 is schema 4's "graph_hot", and is read as such, so that an old report's
// graph rows meet a new report's graph_hot rows.
// Any other schema is refused: its keys may mean something else. When kJsonSchema is
// raised, check what compare reads before raising kNewestSchema with it.
constexpr int kOldestSchema = 1, kNewestSchema = 4;
static_assert(kNewestSchema == kJsonSchema, "a new json schema: check that compare still reads it right");

// What a measured time may be, in ms. The median divides the change, so it may not be 0;
// none of them is negative, and nothing attnbench times runs for days.
constexpr double kMinMedianMs = 1e-9, kMaxMs = 1e9;
// Quartiles are interpolated: q1 may exceed the median by a rounding error, not more.
constexpr double kOrderSlack = 1e-9;
// The median of samples_ms may differ from median_ms by their rounding (report.cpp writes
// samples to 7 significant digits), not more.
constexpr double kSampleSlack = 1e-5;
// The confidences an interval may have (parse_confidence says why).
constexpr double kMinConfidence = 0.5, kMaxConfidence = 0.999;
// The largest report file read; reports of big runs, with every sample, are tens of MB.
constexpr std::uintmax_t kMaxReportBytes = std::uintmax_t(1) << 30;

struct Entry {
  std::string case_name, point, variant, status, reason;
  std::map<std::string, TimingStats> timings;  // by mode
  std::vector<std::string> modes;              // in report order
};

std::string g(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// A json value as a message names it.
std::string describe(const nlohmann::json& j) {
  if (j.is_string()) return "the string \"" + clipped(j.get_ref<const std::string&>(), 40) + "\"";
  if (j.is_boolean()) return j.get<bool>() ? "true" : "false";
  if (j.is_null()) return "null";
  if (j.is_number()) return "the number " + g(j.get<double>());
  if (j.is_array()) return "an array";
  if (j.is_object()) return "an object";
  return j.type_name();
}

// Where a message points: the report (its path, or BASE/NEW) and, inside a row, which one.
struct Where {
  std::string file;  // printable already
  std::string row;   // "" or `rows[2] (case "softmax", point "cols=1000", variant "naive")`
  [[noreturn]] void fail(const std::string& what) const {
    throw InputError(one_line(file + ": error: " + (row.empty() ? "" : row + ": ") + what));
  }
};

// A member that must be a string when present; "" when absent (or refused when required).
std::string string_at(const Where& w, const nlohmann::json& obj, const std::string& path, const char* key,
                      bool required = false) {
  const auto it = obj.find(key);
  if (it == obj.end()) {
    if (required) w.fail(path + key + " is missing");
    return "";
  }
  if (!it->is_string()) w.fail(path + key + " is " + describe(*it) + ", expected a string");
  return it->get<std::string>();
}

// A member that must be a finite number when present.
std::optional<double> number_at(const Where& w, const nlohmann::json& obj, const std::string& path, const char* key) {
  const auto it = obj.find(key);
  if (it == obj.end()) return std::nullopt;
  if (!it->is_number()) w.fail(path + key + " is " + describe(*it) + ", expected a number");
  const double v = it->get<double>();
  if (!std::isfinite(v)) w.fail(path + key + " is " + g(v) + ", expected a finite number");
  return v;
}

// The timing's "samples_ms", sorted; empty when absent. Each must be a time a kernel can
// take, and together they must give the timing's own count and median: the bootstrap
// judges by them, the table shows the median.
std::vector<double> samples_of(const Where& w, const nlohmann::json& t, const std::string& at, const TimingStats& s) {
  const auto it = t.find("samples_ms");
  if (it == t.end()) return {};
  if (!it->is_array()) w.fail(at + "samples_ms is " + describe(*it) + ", expected an array of times");
  std::vector<double> v;
  v.reserve(it->size());
  for (size_t i = 0; i < it->size(); ++i) {
    const nlohmann::json& x = (*it)[i];
    const std::string name = at + "samples_ms[" + std::to_string(i) + "]";
    if (!x.is_number()) w.fail(name + " is " + describe(x) + ", expected a number");
    const double ms = x.get<double>();
    if (!(ms >= kMinMedianMs && ms <= kMaxMs))
      w.fail(name + " is " + g(ms) + ": not a time a kernel takes (1e-9 to 1e9 ms)");
    v.push_back(ms);
  }
  if (s.samples && static_cast<size_t>(s.samples) != v.size())
    w.fail(at + "samples_ms holds " + std::to_string(v.size()) + " times, but samples is " + std::to_string(s.samples));
  std::sort(v.begin(), v.end());
  if (const double median = quantile(v, 0.5); !v.empty() && std::fabs(median - s.median) > kSampleSlack * s.median)
    w.fail(at + "samples_ms has the median " + g(median) + ", but median_ms is " + g(s.median));
  return v;
}

// One timing object; `path` is its place in the row ("timing", "timings.cold"). Older reports
// and hand-written ones may give only the median: the range is then that point.
TimingStats stats_of(const Where& w, const nlohmann::json& t, const std::string& path) {
  if (!t.is_object()) w.fail(path + " is " + describe(t) + ", expected an object");
  const std::string at = path + ".";
  auto time = [&](const char* key) {
    const std::optional<double> v = number_at(w, t, at, key);
    if (v && *v < 0) w.fail(at + key + " is " + g(*v) + ": a time cannot be negative");
    if (v && *v > kMaxMs) w.fail(at + key + " is " + g(*v) + " ms, over 10^9 ms: not a measured time");
    return v;
  };
  const std::optional<double> median = time("median_ms");
  if (!median) w.fail(path + " has no median_ms");
  for (const char* k : {"min_ms", "max_ms", "mean_ms"}) time(k);
  TimingStats s;
  s.median = *median;
  s.q1 = time("q1_ms").value_or(s.median);
  s.q3 = time("q3_ms").value_or(s.median);
  if (s.median < kMinMedianMs)
    w.fail(at + "median_ms is " + g(s.median) + ": no kernel runs in no time, and the change divides by it");
  const double slack = kOrderSlack * s.median;
  if (s.q1 > s.median + slack || s.median > s.q3 + slack)
    w.fail(path + " has its quartiles out of order: q1_ms " + g(s.q1) + ", median_ms " + g(s.median) + ", q3_ms " +
           g(s.q3) + " (expected q1 <= median <= q3)");
  if (const auto noise = number_at(w, t, at, "noise")) {
    if (*noise < 0) w.fail(at + "noise is " + g(*noise) + ": a spread cannot be negative");
    s.noise = *noise;
  }
  if (const auto n = number_at(w, t, at, "samples")) {
    if (*n < 1 || *n != std::floor(*n) || *n > 1e15)
      w.fail(at + "samples is " + g(*n) + ", expected a whole number of samples, at least 1");
    s.samples = static_cast<int64_t>(*n);
  }
  s.samples_ms = samples_of(w, t, at, s);
  return s;
}

using Key = std::tuple<std::string, std::string, std::string>;  // case, point, variant

// Refuses a document whose "schema" is missing, not an integer, or not one this build reads.
void check_schema(const Where& w, const nlohmann::json& doc) {
  const std::string reads = "this build of attnbench reads schema " + std::to_string(kOldestSchema) + " to " +
                            std::to_string(kNewestSchema);
  const auto it = doc.find("schema");
  if (it == doc.end()) {
    if (!doc.contains("attnbench") || !doc.contains("rows"))
      w.fail("not an attnbench json report (expected the output of `attnbench run --format json`)");
    w.fail("the report has no \"schema\"; " + reads);
  }
  if (!it->is_number_integer()) w.fail("the report's \"schema\" is " + describe(*it) + ", not an integer; " + reads);
  // Signed or unsigned as json stores it: a parsed 2 is unsigned, a json(2) built in code is not.
  const bool negative = !it->is_number_unsigned() && it->get<int64_t>() < 0;
  const uint64_t v = negative ? 0 : it->get<uint64_t>();
  if (negative || v < static_cast<uint64_t>(kOldestSchema) || v > static_cast<uint64_t>(kNewestSchema))
    w.fail("the report has schema " + it->dump() + "; " + reads +
           (v > static_cast<uint64_t>(kNewestSchema) ? " (a newer attnbench wrote it?)" : ""));
}

// The rows of one report in order, each with its timings by mode: `timings` when the
// report has it (--mode all gives several), else the one `timing`. Everything compare
// reads is checked; `which` names the report in messages (its path, or BASE / NEW).
std::vector<Entry> entries_of(const nlohmann::json& doc, const std::string& which) {
  Where w{which, ""};
  if (!doc.is_object())
    w.fail("not an attnbench json report: the document is " + describe(doc) +
           ", expected an object (the output of `attnbench run --format json`)");
  check_schema(w, doc);
  const bool warm_graph = doc["schema"].get<int>() < 4;
  const auto mode_of = [&](const std::string& m) { return warm_graph && m == "graph" ? std::string("graph_hot") : m; };
  const auto attn = doc.find("attnbench");
  if (attn == doc.end() || !attn->is_object())
    w.fail(attn == doc.end() ? std::string("not an attnbench json report: \"attnbench\" is missing")
                             : "\"attnbench\" is " + describe(*attn) + ", expected an object");
  string_at(w, *attn, "attnbench.", "version");
  string_at(w, *attn, "attnbench.", "date");
  if (const auto d = doc.find("device"); d != doc.end()) {
    if (!d->is_object()) w.fail("\"device\" is " + describe(*d) + ", expected an object");
    string_at(w, *d, "device.", "name");
    string_at(w, *d, "device.", "driver");
  }
  const auto rows = doc.find("rows");
  if (rows == doc.end() || !rows->is_array())
    w.fail(rows == doc.end() ? std::string("not an attnbench json report: \"rows\" is missing")
                             : "\"rows\" is " + describe(*rows) + ", expected an array");
  std::vector<Entry> out;
  for (size_t i = 0; i < rows->size(); ++i) {
    const nlohmann::json& row = (*rows)[i];
    w.row = "rows[" + std::to_string(i) + "]";
    if (!row.is_object()) w.fail("the row is " + describe(row) + ", expected an object");
    Entry e;
    e.case_name = string_at(w, row, "", "case", true);
    e.point = string_at(w, row, "", "point");
    e.variant = string_at(w, row, "", "variant", true);
    e.status = string_at(w, row, "", "status");
    e.reason = string_at(w, row, "", "reason");
    const std::string row_name = w.row + " (case \"" + clipped(e.case_name, 40) + "\", point \"" +
                                 clipped(e.point, 40) + "\", variant \"" + clipped(e.variant, 40) + "\"";
    w.row = row_name + ")";
    auto add = [&](const std::string& as_written, const nlohmann::json& t, const std::string& path, bool use) {
      w.row = row_name + ", mode \"" + clipped(as_written, 20) + "\")";
      TimingStats s = stats_of(w, t, path);
      w.row = row_name + ")";
      if (!use) return s;
      const std::string mode = mode_of(as_written);
      if (!e.timings.count(mode)) e.modes.push_back(mode);
      e.timings[mode] = s;
      return s;
    };
    const auto timings = row.find("timings");
    if (timings != row.end()) {
      if (!timings->is_object()) w.fail("timings is " + describe(*timings) + ", expected an object");
      for (const auto& [mode, t] : timings->items()) add(mode, t, "timings." + clipped(mode, 20), true);
    }
    // `timing` repeats one of `timings` in reports that have both: checked, and used only
    // alone, but for its samples, which report.cpp writes there and not again in `timings`.
    if (const auto t = row.find("timing"); t != row.end()) {
      if (!t->is_object()) w.fail("timing is " + describe(*t) + ", expected an object");
      const std::string mode = string_at(w, *t, "timing.", "mode");
      TimingStats own = add(mode, *t, "timing", timings == row.end());
      const auto same_mode = e.timings.find(mode_of(mode));
      if (timings != row.end() && same_mode != e.timings.end() && same_mode->second.samples_ms.empty() &&
          !own.samples_ms.empty()) {
        TimingStats& other = same_mode->second;
        if (other.samples != own.samples || std::fabs(other.median - own.median) > kSampleSlack * other.median)
          w.fail("timing.samples_ms does not belong to timings." + clipped(mode, 20) +
                 ": their sample counts or medians differ");
        other.samples_ms = std::move(own.samples_ms);
      }
    }
    out.push_back(std::move(e));
  }
  return out;
}

// "NVIDIA H200, driver 13.0, 2026-12-01T00:00:00Z, attnbench 0.2.0": printable, for the header.
std::string label_of(const nlohmann::json& doc) {
  const auto str = [](const nlohmann::json& j, const char* key) {
    const auto it = j.find(key);
    return it != j.end() && it->is_string() ? clipped(it->get<std::string>(), 60) : std::string();
  };
  std::string s;
  if (const auto d = doc.find("device"); d != doc.end() && d->is_object())
    s = str(*d, "name") + ", driver " + str(*d, "driver");
  if (const auto a = doc.find("attnbench"); a != doc.end() && a->is_object()) {
    const std::string date = str(*a, "date"), version = str(*a, "version");
    if (!date.empty()) s += (s.empty() ? "" : ", ") + date;
    if (!version.empty()) s += (s.empty() ? "" : ", ") + std::string("attnbench ") + version;
  }
  return s;
}

std::string device_name(const nlohmann::json& doc) {
  const auto d = doc.find("device");
  if (d == doc.end() || !d->is_object()) return "";
  const auto n = d->find("name");
  return n != d->end() && n->is_string() ? n->get<std::string>() : "";
}

bool failed_status(const std::string& s) { return s == "FAILED" || s == "ERROR"; }

std::string pct(double fraction, bool sign) {
  char buf[32];
  std::snprintf(buf, sizeof buf, sign ? "%+.1f%%" : "%.0f%%", 100 * fraction);
  return buf;
}

// A setting in percent as the user gives it: 5%, 2.5%, 97.5%.
std::string setting_pct(double fraction) { return g(100 * fraction) + "%"; }

std::string fixed3(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", v);
  return buf;
}

// Why a side cannot be bootstrapped: "" when it can.
std::string too_few_samples(const TimingStats& t, const char* side) {
  if (t.samples_ms.empty()) return std::string("no samples in ") + side;
  if (t.samples_ms.size() < kMinBootstrapSamples)
    return std::to_string(t.samples_ms.size()) + " samples in " + side + ", fewer than " +
           std::to_string(kMinBootstrapSamples);
  return "";
}

// Judges a row with both timings: by the bootstrap interval when both sides have samples
// enough, else by the interquartile rule, saying why in the note.
void judge_row(CompareRow& row, double threshold, double confidence) {
  const TimingStats &b = *row.base, &n = *row.now;
  row.change = n.median / b.median - 1;
  const std::string why_base = too_few_samples(b, "BASE"), why_now = too_few_samples(n, "NEW");
  std::string why = why_base.empty() ? why_now : why_now.empty() ? why_base : why_base + "; " + why_now;
  if (b.samples_ms.empty() && n.samples_ms.empty()) why = "no samples in BASE and NEW";
  if (why.empty()) {
    row.by_samples = true;
    row.ratio = median_ratio_interval(b.samples_ms, n.samples_ms, confidence);
    row.verdict = judge_interval(row.ratio, threshold);
    if (row.verdict == Verdict::unsure) {
      const double up = 1 + threshold, down = 1 / up;
      const bool crosses_up = row.ratio.hi > up, crosses_down = row.ratio.lo < down;
      row.note = "the interval crosses " + std::string(crosses_down ? fixed3(down) : "") +
                 (crosses_down && crosses_up ? " and " : "") + (crosses_up ? fixed3(up) : "");
    }
    return;
  }
  row.verdict = judge(b, n, threshold, &row.overlap);
  const bool apart = row.overlap == 0 && (n.q1 > b.q3 || n.q3 < b.q1);
  // The reason and the rule first, the row's own figure after "; ": many rows share the
  // first part, which the table then prints once as a footnote.
  row.note = why + ": by the interquartile ranges";
  if (row.verdict == Verdict::same)
    row.note += apart ? "; apart, change within the threshold" : "; they overlap " + pct(row.overlap, false);
}

}  // namespace

namespace {

// A row of the comparison, named after a report's entry and one of its modes.
CompareRow row_for(const Entry& e, const std::string& mode) {
  CompareRow row;
  row.case_name = e.case_name;
  row.point = e.point;
  row.variant = e.variant;
  row.mode = mode;
  return row;
}

// "softmax cols=1000 naive (cold)": a row as a one-line list names it, printable.
std::string row_name(const CompareRow& r) {
  return clipped(r.case_name, 60) + (r.point.empty() ? "" : " " + clipped(r.point, 60)) + " " + clipped(r.variant, 40) +
         " (" + clipped(r.mode, 20) + ")";
}

// --pair's `name` must be a variant of the report on its `side`; else one line that says
// which report lacks it, the nearest names, and the variants that report has.
void check_pair_side(const std::vector<Entry>& entries, const std::string& name, const char* side,
                     const std::string& report_name, const std::string& pair) {
  std::vector<std::string> variants;
  for (const auto& e : entries)
    if (std::find(variants.begin(), variants.end(), e.variant) == variants.end()) variants.push_back(e.variant);
  if (std::find(variants.begin(), variants.end(), name) != variants.end()) return;
  const std::vector<std::string> near = near_names(name, variants);
  std::string list;
  constexpr size_t kListed = 12;
  for (size_t i = 0; i < variants.size() && i < kListed; ++i) list += (i ? ", " : "") + clipped(variants[i], 40);
  if (variants.size() > kListed) list += ", ... (" + std::to_string(variants.size()) + " in all)";
  std::string report = side;
  if (report_name != side) report += " (" + clipped(report_name, 120) + ")";
  std::string mean;
  for (size_t i = 0; i < near.size(); ++i) mean += (i ? ", " : "") + clipped(near[i], 40);
  throw InputError(one_line("compare: error: --pair " + clipped(pair, 100) + ": " + report + " has no variant \"" +
                            clipped(name, 60) + "\"" + (mean.empty() ? "" : " (did you mean " + mean + "?)") +
                            "; its variants: " + (list.empty() ? "none" : list)));
}

CompareResult compare_checked(const nlohmann::json& base, const nlohmann::json& now, double threshold,
                              const std::string& base_name, const std::string& now_name, double confidence,
                              const VariantPairs& pairs) {
  if (!(threshold >= 0 && threshold <= 10))
    throw InputError("compare: error: threshold " + g(threshold) + " is not a fraction from 0 to 10 (1000%)");
  if (!(confidence >= kMinConfidence && confidence <= kMaxConfidence))
    throw InputError("compare: error: confidence " + g(confidence) + " is not a fraction from " + g(kMinConfidence) +
                     " to " + g(kMaxConfidence));
  std::vector<Entry> b = entries_of(base, base_name);
  const std::vector<Entry> n = entries_of(now, now_name);
  // --pair names must be variants of their own report: a typo would otherwise match no
  // row and pass the gate silently.
  for (const auto& [from, to] : pairs) {
    check_pair_side(b, from, "BASE", base_name, from + "=" + to);
    check_pair_side(n, to, "NEW", now_name, from + "=" + to);
  }
  // --pair: BASE's row of one variant stands in for NEW's of another.
  std::map<std::string, std::string> paired_from;  // NEW variant -> the BASE variant matched with it
  for (auto& e : b)
    for (const auto& [from, to] : pairs)
      if (e.variant == from) {
        e.variant = to;
        paired_from[to] = from;
      }
  CompareResult r;
  r.threshold = threshold;
  r.confidence = confidence;
  r.base_label = label_of(base);
  r.now_label = label_of(now);
  r.base_name = base_name;
  r.now_name = now_name;
  const std::string bd = device_name(base), nd = device_name(now);
  r.base_device = bd;
  r.now_device = nd;
  if (!bd.empty() && !nd.empty() && bd != nd)
    r.warning = "the reports come from different cards (" + clipped(bd, 60) + ", " + clipped(nd, 60) +
                "): their timings are not comparable";
  // A run stopped by a fault or a kill leaves a report with "complete": false: its
  // missing rows are not regressions, and the reader should know.
  const auto unfinished = [](const nlohmann::json& j) {
    const auto m = j.find("attnbench");
    if (m == j.end() || !m->is_object()) return false;
    const auto c = m->find("complete");
    return c != m->end() && c->is_boolean() && !c->get<bool>();
  };
  for (const auto& [doc, name] : {std::pair<const nlohmann::json&, const std::string&>{base, base_name},
                                  std::pair<const nlohmann::json&, const std::string&>{now, now_name}})
    if (unfinished(doc))
      r.warning += (r.warning.empty() ? "" : "; ") + clipped(name, 200) + " is an unfinished run (stopped early)";

  std::map<Key, const Entry*> by_key;
  for (const auto& e : n) by_key[{e.case_name, e.point, e.variant}] = &e;
  bool any_pair = false;
  for (const auto& e : b) {
    const Key key{e.case_name, e.point, e.variant};
    const auto it = by_key.find(key);
    const Entry* m = it == by_key.end() ? nullptr : it->second;
    for (const auto& mode : e.modes) {
      CompareRow row = row_for(e, mode);
      row.base = e.timings.at(mode);
      row.now_status = m ? m->status : "";
      if (!m) {
        row.verdict = Verdict::missing;
        row.note = "not in NEW";
      } else if (failed_status(m->status)) {
        row.verdict = Verdict::failed;
        row.note = m->reason.empty() ? "NEW did not verify" : m->reason;
        any_pair = true;
      } else if (!m->timings.count(mode)) {
        row.verdict = Verdict::missing;
        row.note = "no " + mode + " timing in NEW" + (m->status.empty() ? "" : " (" + m->status + ")");
      } else {
        row.now = m->timings.at(mode);
        judge_row(row, threshold, confidence);
        any_pair = true;
      }
      if (const auto p = paired_from.find(e.variant); p != paired_from.end()) {
        row.base_variant = p->second;
        row.note = "BASE: " + p->second + (row.note.empty() ? "" : "; " + row.note);
      }
      // A change smaller than BASE's own spread cannot be told from noise at this row.
      if (row.now && row.base->noise > threshold) {
        row.noisy_base = true;
        row.note += (row.note.empty() ? "" : "; ") + std::string("BASE's noise is above the threshold");
      }
      r.rows.push_back(std::move(row));
    }
  }
  std::set<std::pair<Key, std::string>> in_base;
  for (const auto& e : b)
    for (const auto& mode : e.modes) in_base.insert({{e.case_name, e.point, e.variant}, mode});
  for (const auto& e : n) {
    for (const auto& mode : e.modes) {
      if (in_base.count({{e.case_name, e.point, e.variant}, mode})) continue;
      CompareRow row = row_for(e, mode);
      row.now = e.timings.at(mode);
      row.now_status = e.status;
      row.verdict = Verdict::added;
      row.note = "not in BASE";
      r.rows.push_back(std::move(row));
    }
  }
  if (!any_pair)
    throw InputError("compare: BASE and NEW have no timed row in common (same cases, points, variants and modes?)");
  if (const int noisy = r.count_noisy_base()) {
    double worst = 0;
    const CompareRow* first = nullptr;
    for (const auto& row : r.rows)
      if (row.noisy_base) {
        worst = std::max(worst, row.base->noise);
        if (!first) first = &row;
      }
    r.noise_warning = std::to_string(noisy) + (noisy == 1 ? " row" : " rows") + " of BASE " +
                      (noisy == 1 ? "has" : "have") + " noise above the " + setting_pct(threshold) +
                      " threshold (up to " + pct(worst, false) + ", e.g. " + row_name(*first) +
                      "): a change that small is inside BASE's own spread there";
  }
  return r;
}

}  // namespace

CompareResult compare_reports(const nlohmann::json& base, const nlohmann::json& now, double threshold,
                              const std::string& base_name, const std::string& now_name, double confidence,
                              const VariantPairs& pairs) {
  try {
    return compare_checked(base, now, threshold, clipped(base_name, 160), clipped(now_name, 160), confidence, pairs);
  } catch (const nlohmann::json::exception& e) {
    // Not expected once entries_of has checked both reports; never let one escape as a crash.
    throw InputError(one_line("compare: error: " + std::string(e.what())));
  }
}

namespace {

// A plain decimal: digits with at most one point, then '%' when `percent` says so. No
// sign, exponent, hex, "inf" or "nan", no spaces and nothing after the number; nullopt
// for anything else.
std::optional<double> plain_decimal(std::string t, bool* percent) {
  *percent = !t.empty() && t.back() == '%';
  if (*percent) t.pop_back();
  const bool digits = !t.empty() && t.size() <= 32 && t.find_first_not_of("0123456789.") == std::string::npos &&
                      std::count(t.begin(), t.end(), '.') <= 1 && t.find_first_of("0123456789") != std::string::npos;
  if (!digits) return std::nullopt;
  try {
    const double v = std::stod(t);
    return std::isfinite(v) ? std::optional<double>(v) : std::nullopt;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

}  // namespace

std::pair<std::string, std::string> parse_pair(const std::string& s) {
  const size_t eq = s.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == s.size() || s.find('=', eq + 1) != std::string::npos)
    throw InputError("compare: error: --pair " + clipped(s, 80) +
                     " is not BASE_VARIANT=NEW_VARIANT (e.g. torch_sdpa_cudnn=flash_wgmma)");
  return {s.substr(0, eq), s.substr(eq + 1)};
}

double parse_threshold(const std::string& s) {
  bool percent = false;
  const std::optional<double> v = plain_decimal(s, &percent);  // "5" and "5%" both mean 5%
  if (!v || *v > 1000)
    throw InputError("--threshold " + clipped(s, 40) + ": error: expected a percentage from 0 to 1000, like 5 or 2.5%");
  return *v / 100;
}

double parse_confidence(const std::string& s) {
  bool percent = false;
  const std::optional<double> v = plain_decimal(s, &percent);
  // Below 0.5 an interval says little; above 0.999 its ends are the few most extreme of
  // the resamples, which 2000 resamples cannot place. Percentages are checked as given:
  // 99.9 / 100 rounds to just above 0.999.
  const double scale = percent ? 100 : 1;
  if (!v || *v < kMinConfidence * scale || *v > kMaxConfidence * scale)
    throw InputError(
        "--confidence " + clipped(s, 40) +
        ": error: expected a fraction from 0.5 to 0.999 or a percentage from 50% to 99.9%, like 0.95 or 95%");
  return std::clamp(*v / scale, kMinConfidence, kMaxConfidence);
}

nlohmann::json read_report(const std::string& path) {
  const std::string name = clipped(path, 160);
  const auto fail = [&](const std::string& what) { throw InputError(one_line(name + ": error: " + what)); };
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  if (std::filesystem::is_directory(st)) fail("is a directory, not a json report");
  if (std::filesystem::is_regular_file(st)) {
    const std::uintmax_t size = std::filesystem::file_size(path, ec);
    if (!ec && size > kMaxReportBytes) fail("is " + std::to_string(size >> 20) + " MiB: too large for a json report");
  }
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(std::string("cannot read the report") + (errno ? std::string(": ") + std::strerror(errno) : ""));
  // Read the bytes here, not through nlohmann's stream adapter: a read error (EISDIR, EIO)
  // throws from inside the stream, and must become one line, not a crash.
  std::string text;
  std::string read_error;
  try {
    std::vector<char> buf(1 << 16);
    while (in.read(buf.data(), static_cast<std::streamsize>(buf.size())) || in.gcount() > 0) {
      text.append(buf.data(), static_cast<size_t>(in.gcount()));
      if (text.size() > kMaxReportBytes) {
        read_error = "is larger than " + std::to_string(kMaxReportBytes >> 20) + " MiB: too large for a json report";
        break;
      }
    }
    if (read_error.empty() && in.bad()) read_error = "cannot read the report";
  } catch (const std::exception& e) {
    read_error = std::string("cannot read the report: ") + e.what();
  }
  if (!read_error.empty()) fail(read_error);
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) fail("the file is empty, not a json report");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    // "[json.exception.parse_error.101] parse error at line 1, column 2: ..." without the tag.
    std::string what = e.what();
    if (const size_t p = what.find("] "); what.rfind("[json.exception.", 0) == 0 && p != std::string::npos)
      what.erase(0, p + 2);
    fail("not valid json: " + what);
  }
  // Check the whole report now, while its path is known: every later message names the file.
  try {
    entries_of(j, name);
  } catch (const nlohmann::json::exception& e) {
    fail(e.what());
  }
  return j;
}

std::string missing_summary(const CompareResult& r, size_t named) {
  const int n = r.count(Verdict::missing);
  if (n == 0) return "";
  std::string s = std::to_string(n) + (n == 1 ? " row of BASE is" : " rows of BASE are") + " missing in NEW: ";
  size_t shown = 0;
  for (const auto& row : r.rows) {
    if (row.verdict != Verdict::missing) continue;
    if (shown == named) break;
    s += (shown ? ", " : "") + row_name(row);
    ++shown;
  }
  if (static_cast<size_t>(n) > shown) s += " and " + std::to_string(n - static_cast<int>(shown)) + " more";
  return s;
}

std::string golden_file_name(const std::string& device_name) {
  std::string out;
  bool dash = false;
  for (const char ch : device_name) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if (std::isalnum(c) && c < 128) {
      if (dash && !out.empty()) out += '-';
      dash = false;
      out += static_cast<char>(std::tolower(c));
    } else {
      dash = true;
    }
  }
  return out.empty() ? "" : out + ".json";
}

std::string find_golden(const std::string& dir, const nlohmann::json& now, const std::string& now_name) {
  namespace fs = std::filesystem;
  const std::string where = "compare: error: --golden " + clipped(dir, 120);
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw InputError(one_line(where + ": not a directory"));
  const std::string card = device_name(now);
  const std::string want = golden_file_name(card);
  if (want.empty())
    throw InputError(one_line(where + ": " + clipped(now_name, 120) +
                              " names no card (device.name), so no golden file can be picked for it"));
  const fs::path path = fs::path(dir) / want;
  if (fs::is_regular_file(path, ec)) return path.string();
  // Not there: list what is, so the CI log shows the names to compare with.
  std::vector<std::string> files;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->is_regular_file(ec)) files.push_back(it->path().filename().string());
  std::sort(files.begin(), files.end());
  std::string list;
  constexpr size_t kListed = 10;
  for (size_t i = 0; i < files.size() && i < kListed; ++i) list += (i ? ", " : "") + clipped(files[i], 60);
  if (files.size() > kListed) list += ", ... (" + std::to_string(files.size()) + " in all)";
  throw InputError(one_line(where + ": no golden file " + want + " for " + clipped(now_name, 120) + "'s card \"" +
                            clipped(card, 60) + "\"; the directory holds " + (files.empty() ? "no files" : list)));
}

namespace {

std::string fmt_ms(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

std::string timing_cell(const std::optional<TimingStats>& t) {
  if (!t) return "-";
  return fmt_ms(t->median) + " (" + fmt_ms(t->q1) + "-" + fmt_ms(t->q3) + ")";
}

// NEW / BASE with its interval: "1.250 (1.031-1.482)"; the ratio alone without samples.
std::string ratio_cell(const CompareRow& r) {
  if (!r.base || !r.now) return "-";
  const std::string ratio = fixed3(1 + r.change);
  return r.by_samples ? ratio + " (" + fixed3(r.ratio.lo) + "-" + fixed3(r.ratio.hi) + ")" : ratio;
}

// The columns of the table and markdown. The table prints the case as a heading over its
// rows instead of a column, which is most of what makes it fit 120 columns.
enum Column { kCase, kPoint, kVariant, kMode, kBase, kNew, kChange, kRatio, kVerdict, kNote, kColumns };
bool numeric_column(size_t i) { return i >= kBase && i < kVerdict; }  // right-aligned

// Every string from a report is printed through clipped(): control characters escaped, cut when long.
std::vector<std::string> cells(const CompareRow& r) {
  return {clipped(r.case_name),
          r.point.empty() ? "-" : clipped(r.point),
          clipped(r.variant),
          clipped(r.mode, 20),
          timing_cell(r.base),
          timing_cell(r.now),
          r.base && r.now ? pct(r.change, true) : "-",
          ratio_cell(r),
          std::string(verdict_name(r.verdict)) + (r.by_quartiles() ? "*" : ""),  // the footnote's mark
          ""};                                                                   // the note: see Notes
}

// Markdown text that cannot end a table cell or start an escape: '\' and '|' escaped.
std::string md_escape(const std::string& s) {
  std::string out;
  for (char ch : s) {
    if (ch == '\\' || ch == '|') out += '\\';
    out += ch;
  }
  return out;
}

std::vector<std::string> headers(const CompareResult& r) {
  return {"case",   "point", "variant", "mode", "BASE ms (q1-q3)", "NEW ms (q1-q3)",
          "change", "NEW/BASE (" + setting_pct(r.confidence) + " CI)", "verdict", "note"};
}

std::string summary_line(const CompareResult& r) {
  std::string s = std::to_string(r.count(Verdict::fast)) + " FAST, " + std::to_string(r.count(Verdict::slow)) +
                  " SLOW, " + std::to_string(r.count(Verdict::same)) + " SAME, " +
                  std::to_string(r.count(Verdict::unsure)) + " UNSURE";
  if (r.count(Verdict::failed)) s += ", " + std::to_string(r.count(Verdict::failed)) + " FAILED";
  if (r.count(Verdict::missing)) s += ", " + std::to_string(r.count(Verdict::missing)) + " missing in NEW";
  if (r.count(Verdict::added)) s += ", " + std::to_string(r.count(Verdict::added)) + " added";
  return s + " (threshold " + setting_pct(r.threshold) + ": SLOW above " + fixed3(1 + r.threshold) + "x, FAST below " +
         fixed3(1 / (1 + r.threshold)) + "x, by " + setting_pct(r.confidence) + " bootstrap intervals)";
}

// "" when every pair had samples; else what the mark on their verdicts means.
std::string quartile_footnote(const CompareResult& r) {
  const int n = r.count_by_quartiles();
  if (n == 0) return "";
  return "* " + std::to_string(n) + (n == 1 ? " row" : " rows") +
         " judged without samples (a report without samples_ms, or fewer than " +
         std::to_string(kMinBootstrapSamples) +
         "): by the older rule, SLOW or FAST only when the interquartile ranges are apart and the medians differ by "
         "more than the threshold";
}

// The line under the summary that says rows went missing, and whether that fails.
std::string missing_line(const CompareResult& r, const CompareOutput& how) {
  const std::string s = missing_summary(r);
  if (s.empty()) return "";
  return s + (how.allow_missing ? "; allowed by --allow-missing"
                                : "; this fails the comparison (--allow-missing accepts it)");
}

// Columns on a terminal: UTF-8 continuation bytes take none (the footnote marks are two bytes each).
size_t width(const std::string& s) {
  return static_cast<size_t>(std::count_if(s.begin(), s.end(), [](char c) { return (c & 0xC0) != 0x80; }));
}

// The footnote marks: superscript digits, then [10], [11], ...
std::string mark(size_t i) {
  static const char* const kSup[] = {"¹", "²", "³", "⁴", "⁵", "⁶", "⁷", "⁸", "⁹"};
  return i < 9 ? kSup[i] : "[" + std::to_string(i + 1) + "]";
}

// A row's note split at "; " into parts; a part that two or more rows share becomes a
// footnote, printed once, and those rows show its mark instead. The issue this answers: a
// table with "no samples in BASE and NEW: by the interquartile ranges" on every row.
struct Notes {
  std::vector<std::string> marks, own;                 // per row: its footnotes' marks; the parts of its own, printable
  std::vector<std::pair<std::string, int>> footnotes;  // the text (printable) and how many rows carry it
};

std::vector<std::string> note_parts(const std::string& note) {
  std::vector<std::string> parts;
  size_t from = 0;
  while (from <= note.size() && !note.empty()) {
    const size_t at = note.find("; ", from);
    parts.push_back(note.substr(from, at == std::string::npos ? std::string::npos : at - from));
    if (at == std::string::npos) break;
    from = at + 2;
  }
  return parts;
}

Notes notes_of(const std::vector<CompareRow>& rows, size_t note_max) {
  std::map<std::string, int> uses;
  for (const auto& row : rows) {
    std::set<std::string> seen;  // a part twice in one row counts once
    for (const auto& p : note_parts(row.note))
      if (seen.insert(p).second) ++uses[p];
  }
  Notes n;
  std::map<std::string, size_t> index;
  for (const auto& row : rows) {
    std::string marks, own;
    for (const auto& p : note_parts(row.note)) {
      if (uses[p] >= 2) {
        auto it = index.find(p);
        if (it == index.end()) {
          it = index.emplace(p, n.footnotes.size()).first;
          n.footnotes.push_back({clipped(p, 200), uses[p]});
        }
        if (marks.find(mark(it->second)) == std::string::npos) marks += mark(it->second);
      } else {
        own += (own.empty() ? "" : "; ") + p;
      }
    }
    n.marks.push_back(marks);
    n.own.push_back(clipped(own, note_max));
  }
  return n;
}

std::string footnote_line(const Notes& n, size_t i) {
  const int rows = n.footnotes[i].second;
  return mark(i) + " " + n.footnotes[i].first + " (" + std::to_string(rows) + " rows)";
}

// The widest a table line should be; a note that would pass it goes under its row.
constexpr size_t kTableWidth = 120;

// `text` broken at spaces into lines of at most kTableWidth columns, the later ones
// indented by two; a word longer than a line stays whole.
std::string wrapped(const std::string& text) {
  std::string out, line;
  size_t from = 0;
  while (from < text.size()) {
    size_t to = text.find(' ', from);
    if (to == std::string::npos) to = text.size();
    const std::string word = text.substr(from, to - from);
    if (!line.empty() && width(line) + 1 + width(word) > kTableWidth) {
      out += line + "\n";
      line = "  ";
    } else if (!line.empty() && line != "  ") {
      line += " ";
    }
    line += word;
    from = to + 1;
  }
  return out + line + "\n";
}

void write_table(std::ostream& out, const CompareResult& r, const CompareOutput& how) {
  out << "BASE: " << (r.golden.empty() ? "" : "golden " + clipped(r.base_name, 120) + ": ") << r.base_label
      << "\nNEW:  " << r.now_label << "\n";
  if (!r.warning.empty()) out << wrapped("warning: " + r.warning);
  if (!r.noise_warning.empty()) out << wrapped("warning: " + r.noise_warning);
  const std::vector<std::string> head = headers(r);
  const Notes notes = notes_of(r.rows, 160);
  // Columns kPoint..kVerdict under an indent; the case is a heading line above its rows.
  std::vector<size_t> w(kColumns, 0);
  for (size_t i = kPoint; i < kNote; ++i) w[i] = width(head[i]);
  std::vector<std::vector<std::string>> all;
  for (const auto& row : r.rows) {
    all.push_back(cells(row));
    for (size_t i = kPoint; i < kNote; ++i) w[i] = std::max(w[i], width(all.back()[i]));
  }
  const auto line = [&](const std::vector<std::string>& c, const std::string& marks, const std::string& note) {
    std::string s = "  ";
    for (size_t i = kPoint; i < kNote; ++i) {
      const std::string fill(width(c[i]) < w[i] ? w[i] - width(c[i]) : 0, ' ');
      s += (i > kPoint ? "  " : "") + (numeric_column(i) ? fill + c[i] : c[i] + fill);
    }
    while (!s.empty() && s.back() == ' ') s.pop_back();
    if (!marks.empty()) s += "  " + marks;
    if (note.empty()) return s + "\n";
    // The marks and a short note stay on the line; a note that would pass 120 columns goes
    // under it (and the header's "note" is left out when it would).
    if (width(s) + (marks.empty() ? 2 : 1) + width(note) <= kTableWidth)
      return s + (marks.empty() ? "  " : " ") + note + "\n";
    return &c == &head ? s + "\n" : s + "\n      " + note + "\n";
  };
  out << line(head, "", head[kNote]);
  std::string last_case;
  for (size_t k = 0; k < all.size(); ++k) {
    if (k == 0 || all[k][kCase] != last_case) out << all[k][kCase] << "\n";
    last_case = all[k][kCase];
    out << line(all[k], notes.marks[k], notes.own[k]);
  }
  for (size_t i = 0; i < notes.footnotes.size(); ++i) out << wrapped(footnote_line(notes, i));
  out << wrapped(summary_line(r));
  if (const std::string q = quartile_footnote(r); !q.empty()) out << wrapped(q);
  if (const std::string m = missing_line(r, how); !m.empty()) out << wrapped(m);
}

void write_markdown(std::ostream& out, const CompareResult& r, const CompareOutput& how) {
  out << "**BASE** " << (r.golden.empty() ? "" : "golden " + md_escape(clipped(r.base_name, 120)) + ": ")
      << md_escape(r.base_label) << "  \n**NEW** " << md_escape(r.now_label) << "\n\n";
  if (!r.warning.empty()) out << "> warning: " << md_escape(r.warning) << "\n\n";
  if (!r.noise_warning.empty()) out << "> warning: " << md_escape(r.noise_warning) << "\n\n";
  const std::vector<std::string> head = headers(r);
  const Notes notes = notes_of(r.rows, 160);
  out << "|";
  for (const auto& h : head) out << " " << h << " |";
  out << "\n|";
  for (size_t i = 0; i < head.size(); ++i) out << (numeric_column(i) ? " ---: |" : " --- |");
  out << "\n";
  for (size_t k = 0; k < r.rows.size(); ++k) {
    const CompareRow& row = r.rows[k];
    auto c = cells(row);
    c[kNote] = notes.marks[k] + (notes.marks[k].empty() || notes.own[k].empty() ? "" : " ") + notes.own[k];
    for (auto& x : c) x = md_escape(x);
    // Verdicts that need a look in bold; the footnote's mark escaped, as markdown reads '*'.
    const bool bold = row.verdict == Verdict::slow || row.verdict == Verdict::failed || row.verdict == Verdict::fast ||
                      row.verdict == Verdict::unsure || (row.verdict == Verdict::missing && !how.allow_missing);
    c[kVerdict] = (bold ? "**" : "") + std::string(verdict_name(row.verdict)) + (bold ? "**" : "") +
                  (row.by_quartiles() ? "\\*" : "");
    out << "|";
    for (const auto& x : c) out << " " << x << " |";
    out << "\n";
  }
  out << "\n";
  // One paragraph: a line break ("  \n") between the footnotes.
  for (size_t i = 0; i < notes.footnotes.size(); ++i)
    out << md_escape(footnote_line(notes, i)) << (i + 1 < notes.footnotes.size() ? "  \n" : "\n\n");
  out << summary_line(r) << "\n";
  if (const std::string q = quartile_footnote(r); !q.empty()) out << "\n\\" << q << "\n";
  if (const std::string m = missing_line(r, how); !m.empty()) out << "\n" << md_escape(m) << "\n";
}

std::string csv_quote(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string q = "\"";
  for (char ch : s) q += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return q + "\"";
}

// Numbers as json writes them: enough digits to read back the same double.
std::string num(double v) { return nlohmann::json(v).dump(); }

void write_csv(std::ostream& out, const CompareResult& r) {
  out << "case,point,variant,base_variant,mode,verdict,by_samples,change,ratio_lo,ratio_hi,base_median_ms,base_q1_ms,"
         "base_q3_ms,base_noise,base_samples,new_median_ms,new_q1_ms,new_q3_ms,new_noise,new_samples,new_status,"
         "noisy_base,note\n";
  const auto timing = [&](const std::optional<TimingStats>& t) {
    if (!t) return std::string(",,,,");
    return num(t->median) + "," + num(t->q1) + "," + num(t->q3) + "," + num(t->noise) + "," +
           std::to_string(t->samples);
  };
  for (const auto& row : r.rows) {
    const bool both = row.base && row.now;
    out << csv_quote(row.case_name) << "," << csv_quote(row.point) << "," << csv_quote(row.variant) << ","
        << csv_quote(row.base_variant) << "," << csv_quote(row.mode) << "," << verdict_name(row.verdict) << ","
        << (row.by_samples ? 1 : 0) << "," << (both ? num(row.change) : "") << ","
        << (row.by_samples ? num(row.ratio.lo) : "") << "," << (row.by_samples ? num(row.ratio.hi) : "") << ","
        << timing(row.base) << "," << timing(row.now) << "," << csv_quote(row.now_status) << ","
        << (row.noisy_base ? 1 : 0) << "," << csv_quote(row.note) << "\n";
  }
}

// The json output's layout version (docs/results.md describes it): raised when a key
// changes meaning or one always written goes.
constexpr int kCompareJsonVersion = 1;

// Keys in the order docs/results.md lists them, not sorted: the file is read by people too.
nlohmann::ordered_json json_of(const CompareResult& r, const CompareOutput& how) {
  using json = nlohmann::ordered_json;
  const auto timing = [](const std::optional<TimingStats>& t) -> json {
    if (!t) return nullptr;
    return {{"median_ms", t->median}, {"q1_ms", t->q1},        {"q3_ms", t->q3},
            {"noise", t->noise},      {"samples", t->samples}, {"samples_kept", t->samples_ms.size()}};
  };
  json rows = json::array();
  for (const auto& row : r.rows) {
    const bool both = row.base && row.now;
    json j = {{"case", row.case_name},
              {"point", row.point},
              {"variant", row.variant},
              {"mode", row.mode},
              {"verdict", verdict_name(row.verdict)},
              {"base", timing(row.base)},
              {"new", timing(row.now)},
              {"new_status", row.now_status},
              {"change", both ? json(row.change) : json(nullptr)},
              {"by_samples", row.by_samples},
              {"ratio", row.by_samples ? json{{"lo", row.ratio.lo}, {"hi", row.ratio.hi}} : json(nullptr)},
              {"noisy_base", row.noisy_base},
              {"note", row.note}};
    if (!row.base_variant.empty()) j["base_variant"] = row.base_variant;
    rows.push_back(std::move(j));
  }
  json counts = json::object();
  for (const Verdict v : {Verdict::fast, Verdict::slow, Verdict::same, Verdict::unsure, Verdict::failed,
                          Verdict::missing, Verdict::added})
    counts[verdict_name(v)] = r.count(v);
  counts["by_quartiles"] = r.count_by_quartiles();
  counts["noisy_base"] = r.count_noisy_base();
  json warnings = json::array();
  for (const std::string& w : {r.warning, r.noise_warning})
    if (!w.empty()) warnings.push_back(w);
  const int code = r.exit_code(how.fail_on_unsure, how.allow_missing);
  json j = {{"compare", kCompareJsonVersion},
            {"base", {{"report", r.base_name}, {"label", r.base_label}, {"device", r.base_device}}},
            {"new", {{"report", r.now_name}, {"label", r.now_label}, {"device", r.now_device}}},
            {"golden", r.golden.empty() ? json(nullptr) : json(r.golden)},
            {"threshold", r.threshold},
            {"confidence", r.confidence},
            {"fail_on_unsure", how.fail_on_unsure},
            {"allow_missing", how.allow_missing},
            {"rows", std::move(rows)},
            {"counts", std::move(counts)},
            {"missing", missing_summary(r)},
            {"warnings", std::move(warnings)},
            {"exit_code", code},
            {"passed", code == 0}};
  return j;
}

}  // namespace

void write_compare(std::ostream& out, const CompareResult& r, const CompareOutput& how) {
  switch (how.format) {
    case Format::table:
      write_table(out, r, how);
      return;
    case Format::markdown:
      write_markdown(out, r, how);
      return;
    case Format::csv:
      write_csv(out, r);
      return;
    // Strings from the reports go in whole: json escapes what needs it, and a script reads
    // the names it matches on, not cut ones. Invalid UTF-8 is replaced, not thrown on.
    case Format::json:
      out << json_of(r, how).dump(1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) << "\n";
      return;
  }
}

void write_compare(std::ostream& out, const CompareResult& r, bool markdown) {
  CompareOutput how;
  how.format = markdown ? Format::markdown : Format::table;
  write_compare(out, r, how);
}

}  // namespace attnbench
