#include "app/merge.hpp"

#include <algorithm>
#include <map>

#include "app/errors.hpp"
#include "app/text.hpp"

namespace attnbench {
namespace {

using json = nlohmann::json;

std::string point_label(const std::pair<std::string, std::string>& p) {
  return p.first + (p.second.empty() ? "" : " [" + p.second + "]");
}

std::string text_at(const json& j, const char* section, const char* key) {
  if (!j.contains(section) || !j[section].is_object()) return "";
  const json& s = j[section];
  return s.contains(key) && s[key].is_string() ? s[key].get<std::string>() : "";
}

double number_at(const json& j, const char* section, const char* key) {
  if (!j.contains(section) || !j[section].is_object()) return 0;
  const json& s = j[section];
  return s.contains(key) && s[key].is_number() ? s[key].get<double>() : 0;
}

// The plan's points as (case, point) pairs; throws through `fail` when malformed.
template <class Fail>
std::vector<std::pair<std::string, std::string>> plan_points(const json& plan, const Fail& fail) {
  std::vector<std::pair<std::string, std::string>> out;
  if (!plan.contains("points") || !plan["points"].is_array()) fail("its plan has no points");
  for (const json& p : plan["points"]) {
    if (!p.is_array() || p.size() != 2 || !p[0].is_string() || !p[1].is_string())
      fail("a point of its plan is not [case, point]");
    out.emplace_back(p[0].get<std::string>(), p[1].get<std::string>());
  }
  return out;
}

}  // namespace

json plan_json(const RunPlan& plan) {
  json points = json::array();
  for (const auto& [c, p] : plan.points) points.push_back({c, p});
  return {{"by", plan.by}, {"index", plan.index}, {"count", plan.count}, {"points", points}, {"done", plan.done}};
}

MergeResult merge_reports(std::vector<json> parts, const std::vector<std::string>& names,
                          const std::string& command_line, const std::string& date) {
  if (parts.empty()) throw InputError("error: merge needs at least one report");
  std::vector<std::vector<std::pair<std::string, std::string>>> points(parts.size());
  for (size_t i = 0; i < parts.size(); ++i) {
    const auto fail = [&](const std::string& what) { throw InputError(one_line(names[i] + ": error: " + what)); };
    const json& r = parts[i];
    if (!r.contains("plan") || !r["plan"].is_object())
      fail("has no plan: it is not a part of a run (one made with --shard I/N or --devices)");
    if (!r.contains("rows") || !r["rows"].is_array()) fail("has no rows");
    points[i] = plan_points(r["plan"], fail);
    if (i == 0) continue;
    const auto differs = [&](const char* section, const char* key, const std::string& what) {
      const std::string a = text_at(parts[0], section, key), b = text_at(r, section, key);
      if (a != b) fail(what + " '" + b + "', " + names[0] + " '" + a + "': not parts of one run");
    };
    differs("attnbench", "version", "comes from attnbench");
    differs("attnbench", "mode", "is a report of mode");
    differs("attnbench", "timing_mode", "has timing mode");
    if (points[i] != points[0])
      fail("plans other points than " + names[0] + " (other cases, --set or -k): not parts of one run");
  }

  const auto& plan = points[0];
  std::map<std::pair<std::string, std::string>, size_t> index;
  for (size_t k = 0; k < plan.size(); ++k) index.emplace(plan[k], k);
  MergeResult out;
  std::vector<int64_t> owner(plan.size(), -1);
  for (size_t i = 0; i < parts.size(); ++i) {
    const json& done = parts[i]["plan"].value("done", json::array());
    for (const json& d : done) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0 || d.get<int64_t>() >= static_cast<int64_t>(plan.size()))
        throw InputError(one_line(names[i] + ": error: its plan's done list names a point it does not plan"));
      const size_t k = d.get<size_t>();
      if (owner[k] < 0)
        owner[k] = static_cast<int64_t>(i);
      else
        out.duplicated.push_back(point_label(plan[k]));
    }
  }
  // Rows are moved, not copied, out of the parts: a verify all report is 5000 rows.
  std::vector<json> by_point(plan.size(), json::array());
  for (size_t i = 0; i < parts.size(); ++i)
    for (json& row : parts[i]["rows"]) {
      const auto key = std::make_pair(row.value("case", std::string()), row.value("point", std::string()));
      // The row's plan index names its point (two cases may share a name); a row without one
      // is found by its case and point.
      int64_t k = -1;
      if (row.contains("plan_index") && row["plan_index"].is_number_integer()) {
        k = row["plan_index"].get<int64_t>();
        if (k >= static_cast<int64_t>(plan.size()) || plan[k] != key) k = -1;
      } else if (const auto it = index.find(key); it != index.end()) {
        k = static_cast<int64_t>(it->second);
      }
      if (k < 0)
        throw InputError(one_line(names[i] + ": error: has a row of " + point_label(key) + ", which its plan lacks"));
      // A point finished twice keeps the first part's rows; an unfinished one (a fault) keeps what there is.
      if (owner[k] < 0 || owner[k] == static_cast<int64_t>(i)) {
        row["part"] = i;  // which of `parts` it ran in
        by_point[k].push_back(std::move(row));
      }
    }
  for (size_t k = 0; k < plan.size(); ++k)
    if (owner[k] < 0) out.missing.push_back(point_label(plan[k]));

  bool complete = out.missing.empty();
  double load_ms = 0, elapsed_ms = 0;
  for (const json& r : parts) {
    complete = complete && r["attnbench"].value("complete", false);
    load_ms = std::max(load_ms, number_at(r, "attnbench", "load_ms"));
    elapsed_ms = std::max(elapsed_ms, number_at(r, "attnbench", "elapsed_ms"));
  }
  // Where each part ran: its card and ceilings. Every row's rates were taken against its
  // own part's card (a job array may mix card types; the top-level device is the first's).
  json where = json::array();
  for (size_t i = 0; i < parts.size(); ++i) {
    json part = {{"report", names[i]},
                 {"device", parts[i].value("device", json())},
                 {"elapsed_ms", number_at(parts[i], "attnbench", "elapsed_ms")}};
    if (parts[i].contains("ceilings")) part["ceilings"] = parts[i]["ceilings"];
    where.push_back(std::move(part));
  }
  // Every part's plugins, once each.
  json plugins = json::array();
  for (const json& r : parts)
    for (const json& p : r.value("plugins", json::array()))
      if (std::find(plugins.begin(), plugins.end(), p) == plugins.end()) plugins.push_back(p);

  json merged = std::move(parts[0]);  // its rows are moved out already
  merged.erase("plan");
  json& rows = merged["rows"] = json::array();
  for (json& point : by_point)
    for (json& row : point) rows.push_back(std::move(row));
  merged["attnbench"]["command"] = command_line;
  merged["attnbench"]["date"] = date;
  merged["attnbench"]["load_ms"] = load_ms;
  merged["attnbench"]["elapsed_ms"] = elapsed_ms;  // the parts ran side by side: the longest
  merged["attnbench"]["complete"] = complete;
  merged["parts"] = std::move(where);
  if (!plugins.empty()) merged["plugins"] = plugins;
  out.report = std::move(merged);
  return out;
}

}  // namespace attnbench
