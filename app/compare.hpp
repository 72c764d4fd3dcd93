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
//
// As a CI gate: exit 1 on SLOW, FAILED and rows of BASE missing in NEW (unless
// --allow-missing), with --fail-on-unsure on UNSURE too; BASE may be the golden report of
// NEW's card, picked from a directory by golden_file_name (--golden DIR).
#pragma once
#include <iosfwd>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "app/report.hpp"  // Format
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
  std::string note;         // parts joined by "; " (the table footnotes the parts many rows share)
  std::string base_variant;  // --pair: BASE's variant matched with `variant`; "" when the same
  bool noisy_base = false;   // BASE's own noise is above the threshold (see CompareResult::noise_warning)
  // Both timings there, but judged by the interquartile rule: the output marks these.
  bool by_quartiles() const { return base && now && !by_samples; }
};

struct CompareResult {
  std::vector<CompareRow> rows;
  std::string base_label, now_label;  // card, driver, date, attnbench version
  std::string base_name, now_name;    // the reports as compare_reports was given them (paths from the CLI)
  std::string base_device, now_device;  // device.name, "" when a report has none
  std::string golden;                   // --golden DIR: the directory BASE was picked from; "" otherwise
  std::string warning;                // e.g. the reports come from different cards
  // Rows whose BASE noise is above the threshold: a change that small is inside BASE's own
  // spread there, so the gate cannot see it (vLLM's benchmark gate warns the same way).
  std::string noise_warning;
  double threshold = 0.05, confidence = kDefaultConfidence;
  int count(Verdict v) const;
  int count_by_quartiles() const;  // pairs judged without samples
  int count_noisy_base() const;
  // 1 when anything is SLOW or FAILED, or missing in NEW (unless allow_missing: a CI gate
  // must not pass because the run it judges lost rows), or UNSURE with fail_on_unsure; else 0.
  int exit_code(bool fail_on_unsure = false, bool allow_missing = false) const;
};

// How compare's output is written and gated: the json output records the exit code.
struct CompareOutput {
  Format format = Format::table;
  bool fail_on_unsure = false, allow_missing = false;
};

// "3 rows of BASE are missing in NEW: softmax cols=1000 naive (cold), ... and 1 more"; ""
// when none is. At most `named` rows are named.
std::string missing_summary(const CompareResult& r, size_t named = 3);

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
// `second`, e.g. a peer library's row (tools/peers.py --report) with one of ours.
using VariantPairs = std::vector<std::pair<std::string, std::string>>;
CompareResult compare_reports(const nlohmann::json& base, const nlohmann::json& now, double threshold,
                              const std::string& base_name = "BASE", const std::string& now_name = "NEW",
                              double confidence = kDefaultConfidence, const VariantPairs& pairs = {});
// A pair naming a variant its side's report does not have (BASE_VARIANT in BASE, NEW_VARIANT
// in NEW) is an InputError that lists the variants the report has: a typo must not pass
// silently as "no rows matched".
// "torch_sdpa_cudnn=flash_wgmma" -> {"torch_sdpa_cudnn", "flash_wgmma"}; InputError otherwise.
std::pair<std::string, std::string> parse_pair(const std::string& s);
// "5", "5%" or "2.5%" -> 0.05, 0.05, 0.025: the threshold is always in percent, 0 to 1000.
double parse_threshold(const std::string& s);
// "0.95" or "95%" -> 0.95: a fraction from 0.5 to 0.999, or the same in percent.
double parse_confidence(const std::string& s);
// Reads a report file and checks it as compare_reports does; InputError with the path on
// any problem (a directory, unreadable, empty, not json, not a report, a bad row).
nlohmann::json read_report(const std::string& path);

// --golden DIR: the file holding the golden report of a card is named after its
// device.name, lowercased, every run of characters other than a-z and 0-9 one '-', no '-'
// at either end, then ".json": "NVIDIA H100 80GB HBM3" -> "nvidia-h100-80gb-hbm3.json".
// "" for a name with no letter or digit.
std::string golden_file_name(const std::string& device_name);
// The golden file in `dir` for the card `now` (a report read by read_report, named
// `now_name` in messages) was measured on. InputError, one line, when `dir` is no
// directory, `now` names no card, or `dir` has no such file: the line lists the files
// `dir` holds, so a CI log shows what is there.
std::string find_golden(const std::string& dir, const nlohmann::json& now, const std::string& now_name);

// A terminal table, markdown for a pull request, csv, or json for a script. The table
// groups rows under their case and fits 120 columns where the names allow: a note that
// many rows share is a footnote (a mark on each row, the text once under the table), and a
// long note goes on its own line under its row. After the table: a line that counts the
// verdicts, one for the rows judged without samples, one naming rows missing in NEW, and
// the warnings. json is one object, described in docs/results.md; csv is one line per row
// with the notes in full. Strings from the reports are printed escaped (app/text.hpp) and
// cut when long in the table and markdown; csv and json carry them whole.
void write_compare(std::ostream& out, const CompareResult& r, const CompareOutput& how);
// The table or markdown, gated by the defaults (kept for callers that print a comparison).
void write_compare(std::ostream& out, const CompareResult& r, bool markdown);

}  // namespace attnbench
