// `attnbench report RUN.json [--compare BASE.json] [--peers PEERS.json] -o DIR`: a results
// page, DIR/Results.md (docs/results.md). Its tables are the markdown report format's, printed
// from rows read back out of the json report; its plots are drawn into DIR by
// app/plot/attnbench_plot.py when python3 and matplotlib are there, and the page says so when
// they are not. Pure json and files: it needs no GPU.
#pragma once
#include <iosfwd>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "app/compare.hpp"
#include "app/report.hpp"

namespace attnbench {

// The rows of a json report as `run` held them, so that the report formats print them as
// `run` did: what row_json writes, read back. A key missing or of another type reads as
// absent (read_report has checked the keys compare needs); strings are made printable.
std::vector<ResultRow> rows_from_json(const nlohmann::json& report);

// The plot script and the interpreter that runs it. The script: --plot-script when given,
// else $ATTNBENCH_PLOT_SCRIPT, else app/plot/attnbench_plot.py in the source tree this
// binary was built from; the interpreter: $ATTNBENCH_PYTHON, else python3 on the PATH.
struct PlotTool {
  std::string python, script;
};
PlotTool plot_tool(const std::string& script_flag);

// The images of a page, as file names inside its directory, or why there are none.
struct Plots {
  std::map<std::string, std::string> throughput;  // by case name
  std::string compare;                            // empty: no compare plot
  std::string missing;                            // why none were drawn; empty when the script ran
};

// Runs the script (RUN [--compare BASE] [--peers PEERS] -o DIR, no shell) and reads the
// plots.json it writes into DIR. A missing interpreter, script or matplotlib, and a script
// that fails, are no error: `missing` says which, in one line.
Plots draw_plots(const PlotTool& tool, const std::string& run, const std::string& base, const std::string& peers,
                 const std::string& dir);

// Results.md: the run's card, date, version, command and ceilings; one section per case with
// its plot and its rows as `run --format markdown` prints them; then, with `compared`, the
// comparison as `compare --format markdown` prints it, under its plot. `run_name`,
// `base_name` (the reports' paths) and `redo` (the command that writes the page again) are
// for the page's text.
void write_results_page(std::ostream& out, const nlohmann::json& run, const std::string& run_name,
                        const std::optional<CompareResult>& compared, const std::string& base_name, const Plots& plots,
                        const std::string& redo);

}  // namespace attnbench
