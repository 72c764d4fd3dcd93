// `attnbench compare BASE.json NEW.json`: two json reports, row by row, for a
// pull request or a CI gate. Pure json: it needs no GPU.
//
// Rows match by case, sweep point, variant and timing mode. Each pair is judged by a
// bootstrap interval of median(NEW) / median(BASE) from the rows' samples: SLOW when the
// whole interval is above 1 + threshold, FAST when it is below 1 / (1 + threshold), SAME
// when it lies inside that band, UNSURE when it crosses an edge of the band, so noise is
// never reported as a regression, nor a noisy regression as SAME. A row without samples
// (older reports, --no-samples, fewer than kMinBootstrapSamples) falls back to the
// interquartile rule of schema 1 and 2, and the output says so.
#pragma once
#include <iosfwd>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "app/stats.hpp"

namespace attnbench {

enum class Verdict {
  fast,     // NEW clearly faster
  slow,     // NEW clearly slower: exit 1
  same,     // within the threshold
  unsure,   // the interval crosses an edge of the band: too noisy to say (exit 1 only with --fail-on-unsure)
  failed,   // NEW did not verify (or errored) where it was timed before: exit 1
  missing,  // in BASE only
  added,    // in NEW only
};
const char* verdict_name(Verdict v);

// One timing of one row, as the json report gives it.
struct TimingStats {
  double median = 0, q1 = 0, q3 = 0, noise = 0;
  int64_t samples = 0;
  std::vector<double> samples_ms;  // every sample, sorted; empty when the report kept none
};

// Fewer samples than kMinBootstrapSamples (stats.hpp): the row is judged by the
// interquartile rule instead.
constexpr double kDefaultConfidence = 0.95;

struct CompareRow {
  std::string case_name, point, variant, mode;
  std::optional<TimingStats> base, now;
  std::string now_status;  // NEW's status ("verified", "FAILED", ...)
  Verdict verdict = Verdict::same;
  double change = 0;        // NEW median / BASE median - 1
  bool by_samples = false;  // judged by the bootstrap interval; false: by the interquartile rule
  Interval ratio;           // the interval of NEW / BASE medians (by_samples only)
  double overlap = 0;       // the part of the narrower interquartile range the other one covers, 0..1
  std::string note;
  // Both timings there, but judged by the interquartile rule: the output marks these.
  bool by_quartiles() const { return base && now && !by_samples; }
};

struct CompareResult {
  std::vector<CompareRow> rows;
  std::string base_label, now_label;  // card, driver, date, attnbench version
  std::string warning;                // e.g. the reports come from different cards
  double threshold = 0.05, confidence = kDefaultConfidence;
  int count(Verdict v) const;
  int count_by_quartiles() const;  // pairs judged without samples
  // 1 when anything is SLOW or FAILED (or UNSURE, with fail_on_unsure), else 0.
  int exit_code(bool fail_on_unsure = false) const;
};

// The verdict for an interval of NEW / BASE medians. `threshold` is a fraction: 0.05 = 5%.
Verdict judge_interval(const Interval& ratio, double threshold);
// The rule for timings without samples: SLOW or FAST only when the interquartile ranges
// are apart *and* the medians differ by more than the threshold; else SAME.
Verdict judge(const TimingStats& base, const TimingStats& now, double threshold, double* overlap = nullptr);

// Throws InputError ("BASE: error: rows[2] (case ...): ...", one line) when either document
// is not an attnbench json report this build reads: a schema other than 1 to 3, a field of
// the wrong type, or impossible statistics (a negative, non-finite or zero median, quartiles
// out of order, negative noise or samples, samples that disagree with the count or the
// median); or when they have no timed row in common. base_name and now_name name the
// reports in those messages. `confidence` is the bootstrap interval's, in (0, 1).
// `pairs` (--pair): BASE's rows of variant `first` are matched with NEW's of variant
// `second`, e.g. a peer library's row (tests/peers.py --report) with one of ours.
using VariantPairs = std::vector<std::pair<std::string, std::string>>;
CompareResult compare_reports(const nlohmann::json& base, const nlohmann::json& now, double threshold,
                              const std::string& base_name = "BASE", const std::string& now_name = "NEW",
                              double confidence = kDefaultConfidence, const VariantPairs& pairs = {});
// "torch_sdpa_cudnn=flash_wgmma" -> {"torch_sdpa_cudnn", "flash_wgmma"}; InputError otherwise.
std::pair<std::string, std::string> parse_pair(const std::string& s);
// "5", "5%" or "2.5%" -> 0.05, 0.05, 0.025: the threshold is always in percent, 0 to 1000.
double parse_threshold(const std::string& s);
// "0.95" or "95%" -> 0.95: a fraction from 0.5 to 0.999, or the same in percent.
double parse_confidence(const std::string& s);
// Reads a report file and checks it as compare_reports does; InputError with the path on
// any problem (a directory, unreadable, empty, not json, not a report, a bad row).
nlohmann::json read_report(const std::string& path);

// A terminal table, or markdown for a pull request; a line after the table counts the
// verdicts, and one more says how many rows were judged without samples, when any were.
// Strings from the reports are printed escaped (app/text.hpp) and cut when long.
void write_compare(std::ostream& out, const CompareResult& r, bool markdown);

}  // namespace attnbench
