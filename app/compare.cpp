#include "app/compare.hpp"

#include <algorithm>
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

int CompareResult::exit_code(bool fail_on_unsure) const {
  const int bad = count(Verdict::slow) + count(Verdict::failed) + (fail_on_unsure ? count(Verdict::unsure) : 0);
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
  row.note = why + ": by the interquartile ranges";
  if (row.verdict == Verdict::same)
    row.note += apart ? ", apart, change within the threshold" : ", which overlap " + pct(row.overlap, false);
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
  const std::string bd = device_name(base), nd = device_name(now);
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
      if (const auto p = paired_from.find(e.variant); p != paired_from.end())
        row.note = "BASE: " + p->second + (row.note.empty() ? "" : "; " + row.note);
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
          clipped(r.note, 160)};
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

// Columns 4 to 7 hold numbers: right-aligned.
constexpr size_t kVerdictColumn = 8;
bool numeric_column(size_t i) { return i >= 4 && i < kVerdictColumn; }

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
         fixed3(1 / (1 + r.threshold)) + "x, by " + setting_pct(r.confidence) +
         " bootstrap intervals of the ratio of medians)";
}

// "" when every pair had samples; else what the mark on their verdicts means.
std::string footnote(const CompareResult& r) {
  const int n = r.count_by_quartiles();
  if (n == 0) return "";
  return "* " + std::to_string(n) + (n == 1 ? " row" : " rows") +
         " judged without samples (a report without samples_ms, or fewer than " +
         std::to_string(kMinBootstrapSamples) +
         "): by the older rule, SLOW or FAST only when the interquartile ranges are apart and the medians differ by "
         "more than the threshold";
}

}  // namespace

void write_compare(std::ostream& out, const CompareResult& r, bool markdown) {
  const std::vector<std::string> head = headers(r);
  const std::string note = footnote(r);
  if (markdown) {
    out << "**BASE** " << md_escape(r.base_label) << "  \n**NEW** " << md_escape(r.now_label) << "\n\n";
    if (!r.warning.empty()) out << "> warning: " << md_escape(r.warning) << "\n\n";
    out << "|";
    for (const auto& h : head) out << " " << h << " |";
    out << "\n|";
    for (size_t i = 0; i < head.size(); ++i) out << (numeric_column(i) ? " ---: |" : " --- |");
    out << "\n";
    for (const auto& row : r.rows) {
      auto c = cells(row);
      for (auto& x : c) x = md_escape(x);
      // Verdicts that need a look in bold; the footnote's mark escaped, as markdown reads '*'.
      const bool bold = row.verdict == Verdict::slow || row.verdict == Verdict::failed ||
                        row.verdict == Verdict::fast || row.verdict == Verdict::unsure;
      c[kVerdictColumn] = (bold ? "**" : "") + std::string(verdict_name(row.verdict)) + (bold ? "**" : "") +
                          (row.by_quartiles() ? "\\*" : "");
      out << "|";
      for (const auto& x : c) out << " " << x << " |";
      out << "\n";
    }
    out << "\n" << summary_line(r) << "\n";
    if (!note.empty()) out << "\n\\" << note << "\n";
    return;
  }
  out << "BASE: " << r.base_label << "\nNEW:  " << r.now_label << "\n";
  if (!r.warning.empty()) out << "warning: " << r.warning << "\n";
  std::vector<size_t> w(head.size());
  for (size_t i = 0; i < w.size(); ++i) w[i] = head[i].size();
  std::vector<std::vector<std::string>> all;
  for (const auto& row : r.rows) {
    all.push_back(cells(row));
    for (size_t i = 0; i + 1 < w.size(); ++i) w[i] = std::max(w[i], all.back()[i].size());
  }
  auto line = [&](const std::vector<std::string>& c) {
    std::string s;
    for (size_t i = 0; i < c.size(); ++i) {
      const bool right = numeric_column(i);
      const std::string fill(c[i].size() < w[i] ? w[i] - c[i].size() : 0, ' ');
      s += (i ? "  " : "") + (right ? fill + c[i] : c[i] + (i + 1 < c.size() ? fill : ""));
    }
    while (!s.empty() && s.back() == ' ') s.pop_back();
    return s + "\n";
  };
  out << line(head);
  for (const auto& c : all) out << line(c);
  out << summary_line(r) << "\n";
  if (!note.empty()) out << note << "\n";
}

}  // namespace attnbench
