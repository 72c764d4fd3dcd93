#include "app/compare.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <ostream>
#include <set>
#include <tuple>

#include "app/errors.hpp"

namespace attnbench {

const char* verdict_name(Verdict v) {
  switch (v) {
    case Verdict::fast: return "FAST";
    case Verdict::slow: return "SLOW";
    case Verdict::same: return "SAME";
    case Verdict::failed: return "FAILED";
    case Verdict::missing: return "missing";
    case Verdict::added: return "added";
  }
  return "?";
}

int CompareResult::count(Verdict v) const {
  return static_cast<int>(std::count_if(rows.begin(), rows.end(), [&](const CompareRow& r) { return r.verdict == v; }));
}

int CompareResult::exit_code() const { return count(Verdict::slow) + count(Verdict::failed) > 0 ? 1 : 0; }

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

struct Entry {
  std::string case_name, point, variant, status, reason;
  std::map<std::string, TimingStats> timings;  // by mode
  std::vector<std::string> modes;              // in report order
};

std::string str(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

double num(const nlohmann::json& j, const char* key, double fallback) {
  const auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : fallback;
}

// Older reports and hand-written ones may give only the median: the range is then that point.
TimingStats stats_of(const nlohmann::json& t) {
  TimingStats s;
  s.median = num(t, "median_ms", 0);
  s.q1 = num(t, "q1_ms", s.median);
  s.q3 = num(t, "q3_ms", s.median);
  s.noise = num(t, "noise", 0);
  s.samples = static_cast<int64_t>(num(t, "samples", 0));
  return s;
}

using Key = std::tuple<std::string, std::string, std::string>;  // case, point, variant

// The rows of one report in order, each with its timings by mode: `timings` when the
// report has it (--mode all gives several), else the one `timing`.
std::vector<Entry> entries_of(const nlohmann::json& doc, const std::string& which) {
  if (!doc.is_object() || !doc.contains("attnbench") || !doc.contains("rows") || !doc["rows"].is_array())
    throw InputError(which + ": not an attnbench json report (expected the output of `attnbench run --format json`)");
  std::vector<Entry> out;
  for (const auto& row : doc["rows"]) {
    if (!row.is_object()) throw InputError(which + ": a row is not an object");
    Entry e{str(row, "case"), str(row, "point"), str(row, "variant"), str(row, "status"), str(row, "reason"), {}, {}};
    auto add = [&](const std::string& mode, const nlohmann::json& t) {
      if (!t.is_object() || !t.contains("median_ms")) return;
      if (!e.timings.count(mode)) e.modes.push_back(mode);
      e.timings[mode] = stats_of(t);
    };
    if (row.contains("timings") && row["timings"].is_object()) {
      for (const auto& [mode, t] : row["timings"].items()) add(mode, t);
    } else if (row.contains("timing") && row["timing"].is_object()) {
      add(str(row["timing"], "mode"), row["timing"]);
    }
    out.push_back(std::move(e));
  }
  return out;
}

std::string label_of(const nlohmann::json& doc) {
  std::string s;
  if (doc.contains("device") && doc["device"].is_object()) {
    const auto& d = doc["device"];
    s = str(d, "name") + ", driver " + str(d, "driver");
  }
  const auto& a = doc["attnbench"];
  const std::string date = str(a, "date"), version = str(a, "version");
  if (!date.empty()) s += (s.empty() ? "" : ", ") + date;
  if (!version.empty()) s += (s.empty() ? "" : ", ") + std::string("attnbench ") + version;
  return s;
}

std::string device_name(const nlohmann::json& doc) {
  return doc.contains("device") && doc["device"].is_object() ? str(doc["device"], "name") : "";
}

bool failed_status(const std::string& s) { return s == "FAILED" || s == "ERROR"; }

std::string pct(double fraction, bool sign) {
  char buf[32];
  std::snprintf(buf, sizeof buf, sign ? "%+.1f%%" : "%.0f%%", 100 * fraction);
  return buf;
}

}  // namespace

CompareResult compare_reports(const nlohmann::json& base, const nlohmann::json& now, double threshold) {
  const std::vector<Entry> b = entries_of(base, "BASE"), n = entries_of(now, "NEW");
  CompareResult r;
  r.threshold = threshold;
  r.base_label = label_of(base);
  r.now_label = label_of(now);
  const std::string bd = device_name(base), nd = device_name(now);
  if (!bd.empty() && !nd.empty() && bd != nd)
    r.warning = "the reports come from different cards (" + bd + ", " + nd + "): their timings are not comparable";

  std::map<Key, const Entry*> by_key;
  for (const auto& e : n) by_key[{e.case_name, e.point, e.variant}] = &e;
  bool any_pair = false;
  for (const auto& e : b) {
    const Key key{e.case_name, e.point, e.variant};
    const auto it = by_key.find(key);
    const Entry* m = it == by_key.end() ? nullptr : it->second;
    for (const auto& mode : e.modes) {
      CompareRow row{e.case_name, e.point, e.variant, mode, e.timings.at(mode), std::nullopt, m ? m->status : "",
                     Verdict::same, 0, 0, ""};
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
        row.change = row.base->median > 0 ? row.now->median / row.base->median - 1 : 0;
        row.verdict = judge(*row.base, *row.now, threshold, &row.overlap);
        any_pair = true;
        const bool apart = row.overlap == 0 && (row.now->q1 > row.base->q3 || row.now->q3 < row.base->q1);
        if (row.verdict == Verdict::same)
          row.note = apart ? "ranges apart, change within the threshold"
                           : "interquartile ranges overlap " + pct(row.overlap, false);
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
      CompareRow row{e.case_name, e.point, e.variant, mode, std::nullopt, e.timings.at(mode), e.status,
                     Verdict::added, 0, 0, "not in BASE"};
      r.rows.push_back(std::move(row));
    }
  }
  if (!any_pair)
    throw InputError("compare: BASE and NEW have no timed row in common (same cases, points, variants and modes?)");
  return r;
}

double parse_threshold(const std::string& s) {
  std::string t = s;
  if (!t.empty() && t.back() == '%') t.pop_back();
  size_t used = 0;
  double v = -1;
  try {
    v = std::stod(t, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (t.empty() || used != t.size() || !(v >= 0) || v >= 1000)
    throw InputError("--threshold " + s + ": expected a percentage like 5 or 5%");
  return v / 100;
}

nlohmann::json read_report(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError(path + ": error: cannot read the report");
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) throw InputError(path + ": error: not valid json");
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

std::vector<std::string> cells(const CompareRow& r) {
  return {r.case_name,
          r.point.empty() ? "-" : r.point,
          r.variant,
          r.mode,
          timing_cell(r.base),
          timing_cell(r.now),
          r.base && r.now ? pct(r.change, true) : "-",
          verdict_name(r.verdict),
          r.note};
}

const std::vector<std::string> kHeaders = {"case",   "point",  "variant", "mode", "BASE ms (q1-q3)",
                                           "NEW ms (q1-q3)", "change", "verdict", "note"};

std::string summary_line(const CompareResult& r) {
  std::string s = std::to_string(r.count(Verdict::fast)) + " FAST, " + std::to_string(r.count(Verdict::slow)) +
                  " SLOW, " + std::to_string(r.count(Verdict::same)) + " SAME";
  if (r.count(Verdict::failed)) s += ", " + std::to_string(r.count(Verdict::failed)) + " FAILED";
  if (r.count(Verdict::missing)) s += ", " + std::to_string(r.count(Verdict::missing)) + " missing in NEW";
  if (r.count(Verdict::added)) s += ", " + std::to_string(r.count(Verdict::added)) + " added";
  return s + " (threshold " + pct(r.threshold, false) + ", interquartile ranges)";
}

}  // namespace

void write_compare(std::ostream& out, const CompareResult& r, bool markdown) {
  if (markdown) {
    out << "**BASE** " << r.base_label << "  \n**NEW** " << r.now_label << "\n\n";
    if (!r.warning.empty()) out << "> warning: " << r.warning << "\n\n";
    out << "|";
    for (const auto& h : kHeaders) out << " " << h << " |";
    out << "\n|";
    for (size_t i = 0; i < kHeaders.size(); ++i) out << (i >= 4 && i <= 6 ? " ---: |" : " --- |");
    out << "\n";
    for (const auto& row : r.rows) {
      auto c = cells(row);
      if (row.verdict == Verdict::slow || row.verdict == Verdict::failed || row.verdict == Verdict::fast)
        c[7] = "**" + c[7] + "**";
      out << "|";
      for (auto x : c) {
        for (size_t p = 0; (p = x.find('|', p)) != std::string::npos; p += 2) x.replace(p, 1, "\\|");
        out << " " << x << " |";
      }
      out << "\n";
    }
    out << "\n" << summary_line(r) << "\n";
    return;
  }
  out << "BASE: " << r.base_label << "\nNEW:  " << r.now_label << "\n";
  if (!r.warning.empty()) out << "warning: " << r.warning << "\n";
  std::vector<size_t> w(kHeaders.size());
  for (size_t i = 0; i < w.size(); ++i) w[i] = kHeaders[i].size();
  std::vector<std::vector<std::string>> all;
  for (const auto& row : r.rows) {
    all.push_back(cells(row));
    for (size_t i = 0; i + 1 < w.size(); ++i) w[i] = std::max(w[i], all.back()[i].size());
  }
  auto line = [&](const std::vector<std::string>& c) {
    std::string s;
    for (size_t i = 0; i < c.size(); ++i) {
      const bool right = i >= 4 && i <= 6;
      const std::string fill(c[i].size() < w[i] ? w[i] - c[i].size() : 0, ' ');
      s += (i ? "  " : "") + (right ? fill + c[i] : c[i] + (i + 1 < c.size() ? fill : ""));
    }
    while (!s.empty() && s.back() == ' ') s.pop_back();
    return s + "\n";
  };
  out << line(kHeaders);
  for (const auto& c : all) out << line(c);
  out << summary_line(r) << "\n";
}

}  // namespace attnbench
