// `attnbench compare BASE.json NEW.json`: two json reports, row by row, for a
// pull request or a CI gate. Pure json: it needs no GPU.
//
// Rows match by case, sweep point, variant and timing mode. A change is called
// FAST or SLOW only when the two interquartile ranges are apart *and* the medians
// differ by more than the threshold; anything less is SAME, with how much the
// ranges overlap, so that noise is never reported as a regression.
#pragma once
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace attnbench {

enum class Verdict {
  fast,     // NEW clearly faster
  slow,     // NEW clearly slower: exit 1
  same,     // within the noise or the threshold
  failed,   // NEW did not verify (or errored) where it was timed before: exit 1
  missing,  // in BASE only
  added,    // in NEW only
};
const char* verdict_name(Verdict v);

// One timing of one row, as the json report gives it.
struct TimingStats {
  double median = 0, q1 = 0, q3 = 0, noise = 0;
  int64_t samples = 0;
};

struct CompareRow {
  std::string case_name, point, variant, mode;
  std::optional<TimingStats> base, now;
  std::string now_status;  // NEW's status ("verified", "FAILED", ...)
  Verdict verdict = Verdict::same;
  double change = 0;   // NEW median / BASE median - 1
  double overlap = 0;  // the part of the narrower interquartile range the other one covers, 0..1
  std::string note;
};

struct CompareResult {
  std::vector<CompareRow> rows;
  std::string base_label, now_label;  // card, driver, date, attnbench version
  std::string warning;                // e.g. the reports come from different cards
  double threshold = 0.05;
  int count(Verdict v) const;
  // 1 when anything is SLOW or FAILED, else 0.
  int exit_code() const;
};

// The verdict for one pair of timings (the rule above). `threshold` is a fraction: 0.05 = 5%.
Verdict judge(const TimingStats& base, const TimingStats& now, double threshold, double* overlap = nullptr);

// Throws InputError ("BASE: error: rows[2] (case ...): ...", one line) when either document
// is not an attnbench json report this build reads: a schema other than 1 or 2, a field of
// the wrong type, or impossible statistics (a negative, non-finite or zero median, quartiles
// out of order, negative noise or samples); or when they have no timed row in common.
// base_name and now_name name the reports in those messages.
CompareResult compare_reports(const nlohmann::json& base, const nlohmann::json& now, double threshold,
                              const std::string& base_name = "BASE", const std::string& now_name = "NEW");
// "5", "5%" or "2.5%" -> 0.05, 0.05, 0.025: the threshold is always in percent, 0 to 1000.
double parse_threshold(const std::string& s);
// Reads a report file and checks it as compare_reports does; InputError with the path on
// any problem (a directory, unreadable, empty, not json, not a report, a bad row).
nlohmann::json read_report(const std::string& path);

// A terminal table, or markdown for a pull request; the last line counts the verdicts.
// Strings from the reports are printed escaped (app/text.hpp) and cut when long.
void write_compare(std::ostream& out, const CompareResult& r, bool markdown);

}  // namespace attnbench
