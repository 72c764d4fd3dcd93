// The four report formats of result rows (app/row.hpp): a terminal table, markdown, csv, json.
#pragma once
#include <iosfwd>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "app/device.hpp"
#include "app/row.hpp"
#include "app/shard.hpp"
#include "app/text.hpp"

namespace attnbench {

// Version of the json report's layout (docs/measuring.md, docs/report.schema.json); raised
// when a key changes meaning or the keys always written change. 2: a row's "pipeline"
// object became the op-neutral "stages" list. 3: every timing keeps its samples
// ("samples_ms") unless --no-samples, and the SM clock read during each ("samples_mhz").
// 4: mode "graph" launches on rotating copies of the inputs (cold L2); the warm graph of
// 1-3 is "graph_hot". Rows may carry a "footprint".
constexpr int kJsonSchema = 4;

struct RunMeta {
  std::string version, command_line, date, mode;  // mode: "run" or "verify"
  std::string timing_mode;                        // --mode as given ("all", "cold", ...); empty = the cases' own
  double load_ms = 0, elapsed_ms = 0;             // loading the cases; the whole run, loading included
  bool keep_samples = true;                       // json: every sample, not only the statistics
  bool complete = true;  // false while a run is still going (-o is rewritten after each point) or after a fault
  std::optional<DeviceInfo> device;
  std::optional<Ceilings> ceilings;
  // The run's plugins (app/plugin.hpp): the file given, the library loaded, and the
  // variants it added as "op/name". Written to json only when there are any.
  struct Plugin {
    std::string file, library;
    std::vector<std::string> variants;
  };
  std::vector<Plugin> plugins;
  // A part of a run (--shard, a --devices worker): the whole run's points and which of them
  // this part finished (app/merge.hpp). Written to json only then.
  std::optional<RunPlan> plan;
};

enum class Format { table, markdown, csv, json };
std::optional<Format> parse_format(const std::string& s);
Format format_for_path(const std::string& path);  // by extension; table otherwise

// The columns the `run` and `verify` table shows after point, variant and status (which it
// always shows): names as `--columns` takes them (docs/cli.md), groups included. They stay
// names until the table resolves them, since `default` and `wide` mean other columns in
// `run` than in `verify`. The other formats always carry every column.
struct TableColumns {
  std::vector<std::string> names{"default"};
};
// `run`: margin, median, noise, TFLOP/s, GB/s, % floor, speedup (fits 120 columns);
// `verify`: the errors, margin and rows checked.
TableColumns default_table_columns();
// Every column: the errors, floor ms, MHz and the footprint's besides (`--wide`).
TableColumns wide_table_columns();
// A comma-separated `--columns` list, in the order the table shows them; throws InputError
// naming an unknown column and listing the known ones. Timing columns are left out of
// `verify`'s table, the hot and graph medians out of a run without `--mode all`.
TableColumns parse_table_columns(const std::string& list);
// Every name parse_table_columns takes, groups first ("default, wide, footprint, modes, max_abs, ...").
std::vector<std::string> table_column_names();

// Table rows one at a time, so results show as soon as they exist. Rows are grouped under
// their case's name; the first column is the sweep point. A skipped, ERROR or FAILED row's
// reason is a footnote ("[1] skipped: why (variants)"), each text once per case, printed
// under the case's last row: when the next case begins, at finish(), or at destruction.
class TableWriter {
 public:
  // all_modes: a column for each of the hot and graph medians after the (cold) median.
  TableWriter(std::ostream& out, bool timed, bool all_modes = false, TableColumns columns = default_table_columns());
  // Prints the last case's footnotes if finish() did not.
  ~TableWriter();
  TableWriter(const TableWriter&) = delete;
  TableWriter& operator=(const TableWriter&) = delete;
  // Announces the next case (printed with its first row): the widest point label sets the column.
  void begin_case(const std::string& name, const std::string& description, size_t point_width);
  void row(const ResultRow& r);
  // The current case's footnotes, now: call after the last row, before printing anything else.
  void finish();

 private:
  struct Note {
    std::string text;                   // "skipped: why"
    std::vector<std::string> variants;  // the rows it is for, each variant once
  };
  std::ostream& out_;
  bool timed_, all_modes_;
  std::vector<int> columns_;  // resolved for timed_ and all_modes_ (report.cpp's column ids)
  std::string case_, description_;
  size_t point_width_ = 5;
  bool header_pending_ = true, first_ = true;
  std::vector<Note> notes_;  // the current case's footnotes, numbered from 1
};

// `columns`: the table format's (the other formats carry every column).
void write_report(std::ostream& out, Format f, const RunMeta& meta, const std::vector<ResultRow>& rows,
                  const TableColumns& columns = default_table_columns());
// One row as the json report writes it.
nlohmann::json row_json(const ResultRow& r, bool keep_samples);

// The -o file, rewritten whole as points finish (through a temporary file renamed over it,
// so a killed run leaves a document that parses) without rendering a row twice: json and
// csv rows are rendered once, when they first reach write(). Rendering every row again at
// each write made a long run's writing quadratic in its rows; the caller also writes at
// most once a second (the bytes written still grow with the square of the points).
class ReportFile {
 public:
  // `columns`: a table file's (-o FILE.txt), as the terminal's.
  ReportFile(std::string path, Format format, TableColumns columns = default_table_columns())
      : path_(std::move(path)), format_(format), columns_(std::move(columns)) {}
  // `rows` only grows between calls, and rows already written do not change.
  void write(const RunMeta& meta, const std::vector<ResultRow>& rows);

 private:
  std::string path_;
  Format format_;
  TableColumns columns_;
  std::vector<std::string> rendered_;
};

// The markdown format's table alone (a `case` column first, a `note` last), and the legend
// it prints under it: `attnbench report` prints one table per case and the legend once.
void write_markdown_table(std::ostream& out, const std::vector<ResultRow>& rows, bool timed);
void write_markdown_legend(std::ostream& out, const std::vector<ResultRow>& rows, bool timed);

}  // namespace attnbench
