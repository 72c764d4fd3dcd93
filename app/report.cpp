#include "app/report.hpp"

#include "app/build_info.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <ostream>
#include <sstream>

#include "app/errors.hpp"
#include "app/merge.hpp"
#include "app/output.hpp"
#include "app/text.hpp"

namespace attnbench {

std::optional<Format> parse_format(const std::string& s) {
  if (s == "table") return Format::table;
  if (s == "markdown" || s == "md") return Format::markdown;
  if (s == "csv") return Format::csv;
  if (s == "json") return Format::json;
  return std::nullopt;
}

Format format_for_path(const std::string& path) {
  auto ends = [&](const char* ext) {
    const std::string e(ext);
    return path.size() >= e.size() && path.compare(path.size() - e.size(), e.size(), e) == 0;
  };
  if (ends(".json")) return Format::json;
  if (ends(".csv")) return Format::csv;
  if (ends(".md")) return Format::markdown;
  return Format::table;
}

namespace {

// Why a row is not simply "verified": after a skipped row, under a failed one.
std::string detail_of_status(const ResultRow& r) {
  std::ostringstream s;
  if (r.status == Status::skipped || r.status == Status::error) return r.reason;
  if (!r.profiled.empty() && r.status == Status::verified) return "profiled: --nvtx-include " + shell_quote(r.profiled);
  if (r.timing && (r.timing->clock.low_samples || r.timing->dropped)) {
    const Timing& t = *r.timing;
    const ClockStats& c = t.clock;
    if (t.dropped)
      s << t.dropped << " throttled samples dropped and taken again"
        << (t.clock_gave_up ? " until the clock did not come back" : "");
    if (t.dropped && c.low_samples) s << "; ";
    if (c.low_samples)
      s << c.low_samples << " of " << c.samples << " samples ran below " << fmt_fixed(100 * kLowClock, 0)
        << "% of the " << fmt_fixed(c.max_mhz, 0) << " MHz SM clock (throttled)";
    const std::vector<std::string> why = clock_reason_names(t.throttle_reasons);
    for (size_t i = 0; i < why.size(); ++i) s << (i ? ", " : " (") << why[i] << (i + 1 == why.size() ? ")" : "");
    if (r.status == Status::verified && r.stages.empty()) return s.str();
    s << "; ";
  }
  if (!r.stages.empty()) {
    for (size_t i = 0; i < r.stages.size(); ++i) {
      const StageTiming& st = r.stages[i];
      s << (i ? "; " : "") << st.name << " mean " << fmt_fixed(st.ms.mean, 4) << " ms, p50 " << fmt_fixed(st.ms.median, 4)
        << ", p99 " << fmt_fixed(st.p99, 4) << " over " << st.runs << " runs (" << st.what << ")";
      if (st.floor_ms > 0)
        s << ", floor " << fmt_fixed(st.floor_ms, 4) << " ms (" << fmt_fixed(st.ms.mean / st.floor_ms, 2) << "x)";
      if (st.tokens > 0 && st.ms.mean > 0) s << ", " << fmt_fixed(1e3 * st.tokens / st.ms.mean, 0) << " tokens/s";
    }
    if (r.status == Status::verified) return s.str();
    s << "; ";
  }
  if (r.status == Status::failed && r.cmp) {
    const Comparison& c = *r.cmp;
    const char* sep = "";
    if (!c.within_bound()) {
      const Bound& b = *c.bound;
      s << "error " << fmt_margin(c.margin) << "x its bound (max abs " << fmt_sci(c.max_abs) << " against "
        << fmt_sci(b.allowed_max) << ", rel L2 " << fmt_sci(c.rel_l2) << " against " << fmt_sci(b.allowed_l2)
        << "; an honest kernel in the dtype: " << fmt_sci(b.faithful_max) << ", " << fmt_sci(b.faithful_l2) << ")";
      sep = "; ";
    }
    if (c.mismatches)
      s << sep << c.mismatches << " of " << c.elements_checked << " checked elements outside " << fmt_sci(r.tol.atol)
        << " + " << fmt_sci(r.tol.rtol) << "*|ref|";
    if (c.nonfinite) s << ", " << c.nonfinite << " NaN/Inf in the output (unwritten or overflowed)";
    if (c.worst_row >= 0 && c.mismatches) s << "; worst " << r.worst << ": got " << c.worst_got << ", want " << c.worst_ref;
    if (!c.also_wrong.empty()) s << "; " << c.also_wrong;
    if (!r.reason.empty()) s << "; " << r.reason;
  }
  return s.str();
}

// The row's note: what its op's check adds (a model's tokens), then detail_of_status.
std::string detail(const ResultRow& r) {
  std::string d = detail_of_status(r);
  if (r.status == Status::skipped || r.status == Status::error) return d;
  if (!r.timing_note.empty()) d += (d.empty() ? "" : "; ") + r.timing_note;
  if (!r.cmp || r.cmp->note.empty()) return d;
  return r.cmp->note + (d.empty() ? "" : "; " + d);
}

// The median of one of the row's other modes (--mode all), "-" when not measured.
std::string mode_median(const ResultRow& r, TimingMode m) {
  for (const auto& t : r.other_modes)
    if (t.mode == m) return fmt_fixed(t.ms.median, 4);
  return "-";
}

// The footprint's table cells: registers, shared memory a block, resident blocks a SM and
// waves of each kernel (joined by '/' when the variant launches several), and the
// device memory of the point's tensors plus the variant's workspace.
std::vector<std::string> footprint_cells(const ResultRow& r) {
  if (!r.footprint || !r.footprint->error.empty() || r.footprint->kernels.empty()) return {"-", "-", "-", "-", "-"};
  const auto known = [](auto v, const std::string& text) { return v < 0 ? std::string("?") : text; };
  std::string regs, smem, per_sm, waves;
  for (const KernelFootprint& k : r.footprint->kernels) {
    const std::string sep = regs.empty() ? "" : "/";
    regs += sep + known(k.registers, std::to_string(k.registers));
    smem += sep + known(k.smem(), k.smem() >= 1024 ? fmt_fixed(k.smem() / 1024.0, 0) + "K" : std::to_string(k.smem()));
    per_sm += sep + known(k.blocks_per_sm, std::to_string(k.blocks_per_sm));
    const double w = k.waves(r.footprint->sm_count);
    waves += sep + known(w, fmt_fixed(w, w < 10 ? 2 : 0));
  }
  return {regs, smem, per_sm, waves, human_bytes(static_cast<double>(r.tensor_bytes + r.workspace_bytes))};
}

// The columns after point, variant and status, in the order the full table (markdown,
// `--wide`) shows them. The footprint's columns follow each other from kRegs on.
enum Column : int {
  kMaxAbs, kRelL2, kMargin, kRows, kMedian, kNoise, kHot, kGraph, kGraphHot, kTflops, kGbps, kFloor, kPctFloor,
  kSpeedup, kMhz, kRegs, kSmem, kBlkSm, kWaves, kMemory, kColumnCount
};

struct ColumnDef {
  const char* name;    // as --columns takes it
  const char* header;
  size_t width;        // the table's: the header's or the widest usual value's ("1147.76x"), if wider
  bool timed;          // a figure of the timing: left out of verify's table
};

const ColumnDef kColumns[kColumnCount] = {
    {"max_abs", "max abs err", 11, false}, {"rel_l2", "rel L2 err", 10, false},  {"margin", "margin", 6, false},
    {"rows", "rows checked", 12, false},   {"median", "median ms", 9, true},      {"noise", "noise", 5, true},
    {"hot", "hot ms", 10, true},           {"graph", "graph ms", 10, true},       {"graph_hot", "graph hot ms", 12, true},
    {"tflops", "TFLOP/s", 7, true},        {"gbps", "GB/s", 5, true},             {"floor", "floor ms", 9, true},
    {"pct_floor", "% floor", 8, true},     {"speedup", "speedup", 8, true},       {"mhz", "MHz", 5, true},
    {"regs", "regs", 5, false},            {"smem", "smem", 5, false},            {"blk_sm", "blk/SM", 6, false},
    {"waves", "waves", 6, false},          {"memory", "memory", 9, false}};

// The variant and status columns' widths (left-aligned, as the point's). A longer variant
// name is not cut: the cells after it give up their spare padding until the row is aligned again.
constexpr size_t kVariantWidth = 16, kStatusWidth = 11;
// Notes under a row and footnotes are folded to lines of at most this many characters.
constexpr size_t kFoldWidth = 118;

// A group's columns for the table's mode; empty for a name that is no group.
std::vector<int> group_columns(const std::string& name, bool timed) {
  if (name == "default")
    return timed ? std::vector<int>{kMargin, kMedian, kNoise, kHot, kGraph, kGraphHot, kTflops, kGbps, kPctFloor,
                                    kSpeedup}
                 : std::vector<int>{kMaxAbs, kRelL2, kMargin, kRows};
  if (name == "wide") {
    std::vector<int> all;
    for (int c = 0; c < kColumnCount; ++c)
      if (c != kRows || !timed) all.push_back(c);  // run's full table never had the rows checked
    return all;
  }
  if (name == "footprint") return {kRegs, kSmem, kBlkSm, kWaves, kMemory};
  if (name == "modes") return {kHot, kGraph, kGraphHot};
  return {};
}

const std::vector<std::string> kGroups = {"default", "wide", "footprint", "modes"};

// The names in order, groups expanded, each column once; those the table's mode has no
// figure for left out.
std::vector<int> resolve_columns(const TableColumns& cols, bool timed, bool all_modes) {
  std::vector<int> out;
  auto add = [&](int c) {
    if (kColumns[c].timed && !timed) return;
    if ((c == kHot || c == kGraph || c == kGraphHot) && !all_modes) return;
    if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
  };
  for (const std::string& n : cols.names) {
    if (std::find(kGroups.begin(), kGroups.end(), n) != kGroups.end()) {
      for (int c : group_columns(n, timed)) add(c);
      continue;
    }
    for (int c = 0; c < kColumnCount; ++c)
      if (n == kColumns[c].name) add(c);
  }
  return out;
}

// Markdown (and so `report`'s page) keeps every column, whatever the table shows.
std::vector<int> markdown_columns(bool timed, bool all_modes) {
  std::vector<int> c = resolve_columns(wide_table_columns(), timed, all_modes);
  if (!timed) c.resize(4);  // verify's markdown: errors, margin, rows checked; no footprint
  return c;
}

// A speedup interval's bound in the table: three significant digits ("631", "46.8", "0.98"),
// so that an interleaved run's speedup column stays narrow; markdown keeps two decimals.
std::string fmt_bound(double v) { return fmt_fixed(v, v >= 100 ? 0 : v >= 10 ? 1 : 2); }
std::string fmt_2(double v) { return fmt_fixed(v, 2); }

// One row's cell for column c; `fp`: its footprint_cells. `narrow`: the terminal's table.
std::string cell(const ResultRow& r, int c, const std::vector<std::string>& fp, bool narrow) {
  const bool checked = r.cmp.has_value();
  switch (c) {
    case kMaxAbs: return checked ? fmt_sci(r.cmp->max_abs) : "-";
    case kRelL2: return checked ? fmt_sci(r.cmp->rel_l2) : "-";
    case kMargin: return checked && r.cmp->bound ? fmt_margin(r.cmp->margin) : "-";
    case kRows:
      return checked ? std::to_string(r.cmp->rows_checked / std::max(r.trials, 1)) + "/" +
                           std::to_string(r.cmp->rows_total)
                     : "-";
    case kRegs: case kSmem: case kBlkSm: case kWaves: case kMemory: return fp[c - kRegs];
  }
  // The timing's columns. --profile: launched once for a profiler, whose figures are the only ones.
  if (!r.profiled.empty()) return c == kMedian ? "profiled" : "-";
  const bool t = r.timing.has_value();
  switch (c) {
    case kMedian: return t ? fmt_fixed(r.timing->ms.median, 4) : "-";
    case kNoise: return t ? fmt_fixed(100 * r.timing->ms.noise, 1) + "%" : "-";
    case kHot: return mode_median(r, TimingMode::hot);
    case kGraph: return mode_median(r, TimingMode::graph);
    case kGraphHot: return mode_median(r, TimingMode::graph_hot);
    case kTflops: return t && r.work.flops > 0 ? fmt_fixed(r.tflops, 1) : "-";
    case kGbps: return t ? fmt_fixed(r.gbps, 0) : "-";
    case kFloor: return t && r.floor_ms > 0 ? fmt_fixed(r.floor_ms, 4) : "-";
    case kPctFloor:
      return t && r.floor_ms > 0 ? fmt_fixed(r.pct_of_floor, 1) + "% " + (r.bound == "compute" ? "C" : "M") : "-";
    case kSpeedup:
      // Interleaved runs show the speedup's 95% interval beside it.
      return !r.speedup ? "-"
             : r.rounds > 1 && r.speedup_ci
                 ? fmt_fixed(*r.speedup, 2) + "x [" + (narrow ? fmt_bound : fmt_2)(r.speedup_ci->lo) + "-" +
                       (narrow ? fmt_bound : fmt_2)(r.speedup_ci->hi) + "]"
                 : fmt_fixed(*r.speedup, 2) + "x";
    case kMhz:
      // The mean SM clock while sampling; "!" when some samples ran below 90% of the maximum.
      return t && r.timing->clock.samples
                 ? fmt_fixed(r.timing->clock.mean_mhz, 0) + (r.timing->clock.low_samples ? "!" : "")
                 : "-";
  }
  return "-";
}

// One row as the strings the table and markdown formats print: point, variant, status, then `cols`.
std::vector<std::string> cells(const ResultRow& r, const std::vector<int>& cols, bool narrow) {
  std::vector<std::string> c = {r.point.empty() ? "-" : r.point, r.variant + (r.baseline ? "*" : ""),
                                status_name(r.status)};
  const std::vector<std::string> fp = footprint_cells(r);
  for (int col : cols) c.push_back(cell(r, col, fp, narrow));
  return c;
}

std::vector<std::string> headers(const std::vector<int>& cols) {
  std::vector<std::string> h = {"point", "variant", "status"};
  for (int c : cols) h.push_back(kColumns[c].header);
  return h;
}

bool any_other_modes(const std::vector<ResultRow>& rows) {
  return std::any_of(rows.begin(), rows.end(), [](const ResultRow& r) { return !r.other_modes.empty(); });
}

std::string pad(const std::string& s, size_t w, bool left) {
  if (s.size() >= w) return s;
  return left ? s + std::string(w - s.size(), ' ') : std::string(w - s.size(), ' ') + s;
}

// The first three cells (point, variant, status) left-aligned, the figures right-aligned. A
// cell wider than its column pushes the next ones right only until their spare padding has
// taken it up: a long variant name costs its own row's alignment for a few columns, not the
// line's length.
std::string line_of(const std::vector<std::string>& c, const std::vector<int>& cols, size_t point_width) {
  std::string line = "  ";
  size_t over = 0;  // how far this cell starts right of its column
  for (size_t i = 0; i < c.size(); ++i) {
    size_t w = i == 0 ? point_width : i == 1 ? kVariantWidth : i == 2 ? kStatusWidth : kColumns[cols[i - 3]].width;
    const size_t spare = w > c[i].size() ? w - c[i].size() : 0, taken = std::min(spare, over);
    w -= taken;
    over = over - taken + (c[i].size() > w ? c[i].size() - w : 0);
    line += pad(c[i], w, i < 3) + (i + 1 < c.size() ? "  " : "");
  }
  while (!line.empty() && line.back() == ' ') line.pop_back();
  return line;
}

// `text` after `first` as lines of at most `width` characters, each further line indented
// by `indent_by` (default: to first's length). A note lists several things separated by "; ": each such part starts a
// line of its own when it would fit one but not the rest of the current line, so that a
// part is cut only when it is longer than a line. A word longer than a line stays whole.
std::string fold(const std::string& text, const std::string& first, size_t indent_by = std::string::npos,
                 size_t width = kFoldWidth) {
  std::vector<std::string> words;
  std::istringstream in(text);
  for (std::string w; in >> w;) words.push_back(w);
  const std::string indent(indent_by == std::string::npos ? first.size() : indent_by, ' ');
  std::string out, line = first;
  size_t at = first.size();  // where the line's text begins: nothing written on it yet while line.size() == at
  bool part_start = true;
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string& w = words[i];
    if (part_start) {
      size_t part = w.size();
      for (size_t j = i; words[j].back() != ';' && j + 1 < words.size(); ++j) part += 1 + words[j + 1].size();
      if (line.size() > at && line.size() + 1 + part > width && indent.size() + part <= width) {
        out += line + "\n";
        line = indent;
        at = indent.size();
      }
    }
    if (line.size() > at && line.size() + 1 + w.size() > width) {
      out += line + "\n";
      line = indent;
      at = indent.size();
    }
    line += (line.size() > at ? " " : "") + w;
    part_start = w.back() == ';';
  }
  return out + line + "\n";
}

}  // namespace

TableColumns default_table_columns() { return TableColumns{{"default"}}; }
TableColumns wide_table_columns() { return TableColumns{{"wide"}}; }

std::vector<std::string> table_column_names() {
  std::vector<std::string> names = kGroups;
  for (const ColumnDef& c : kColumns) names.push_back(c.name);
  return names;
}

TableColumns parse_table_columns(const std::string& list) {
  const std::vector<std::string> known = table_column_names();
  const std::string known_list = "columns: " + comma_list(known);
  TableColumns cols;
  cols.names.clear();
  std::string item;
  std::istringstream in(list);
  while (std::getline(in, item, ',')) {
    const size_t b = item.find_first_not_of(" \t"), e = item.find_last_not_of(" \t");
    const std::string name = b == std::string::npos ? "" : item.substr(b, e - b + 1);
    if (name.empty())
      throw InputError("--columns: an empty name in '" + clipped(list) + "' (" + known_list + ")");
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      const std::vector<std::string> near = near_names(name, known);
      throw InputError("--columns: unknown column '" + clipped(name) + "' (" +
                       (near.empty() ? "" : "did you mean " + or_list(near) + "? ") + known_list + ")");
    }
    cols.names.push_back(name);
  }
  if (cols.names.empty() || list.back() == ',')  // getline ends a list without its empty last name
    throw InputError("--columns: an empty name in '" + clipped(list) + "' (" + known_list + ")");
  return cols;
}

TableWriter::TableWriter(std::ostream& out, bool timed, bool all_modes, TableColumns columns)
    : out_(out), timed_(timed), all_modes_(all_modes), columns_(resolve_columns(columns, timed, all_modes)) {}

TableWriter::~TableWriter() {
  try {
    finish();
  } catch (...) {  // a destructor must not throw; the stream's own error state says what went wrong
  }
}

void TableWriter::begin_case(const std::string& name, const std::string& description, size_t point_width) {
  finish();  // the previous case's footnotes belong under its rows
  case_ = name;
  description_ = description;
  point_width_ = std::max<size_t>(point_width, 5);
  header_pending_ = true;
}

void TableWriter::row(const ResultRow& r) {
  if (r.case_name != case_) begin_case(r.case_name, "", r.point.size());
  if (header_pending_) {
    // A case's description can be a sentence: folded under itself, as a note is.
    out_ << (first_ ? "" : "\n") << (description_.empty() ? case_ + "\n" : fold(description_, case_ + ": ", 2));
    const std::string h = line_of(headers(columns_), columns_, point_width_);
    out_ << h << "\n  " << std::string(h.size() - 2, '-') << "\n";
    header_pending_ = false;
    first_ = false;
  }
  std::vector<std::string> c = cells(r, columns_, true);
  const std::string d = detail(r);
  // Why a row did not verify is long and often the same for several rows (a variant that
  // cannot run any point of the case): a footnote, once per text, keeps the rows one line each.
  const bool footnote =
      !d.empty() && (r.status == Status::skipped || r.status == Status::error || r.status == Status::failed);
  if (footnote) {
    const std::string text = std::string(status_name(r.status)) + ": " + d;
    auto it = std::find_if(notes_.begin(), notes_.end(), [&](const Note& n) { return n.text == text; });
    if (it == notes_.end()) it = notes_.insert(notes_.end(), Note{text, {}});
    if (std::find(it->variants.begin(), it->variants.end(), r.variant) == it->variants.end())
      it->variants.push_back(r.variant);
    c[2] += " [" + std::to_string(it - notes_.begin() + 1) + "]";
  }
  // A row that did not run has no figures: its status and mark end it.
  if (r.status == Status::skipped || r.status == Status::error)
    while (c.size() > 3 && c.back() == "-") c.pop_back();
  out_ << line_of(c, columns_, point_width_) << "\n";
  // What a verified row adds (its clock, its stages, its profile) is its own: under it.
  if (!footnote && !d.empty()) out_ << fold(d, "      ");
  out_.flush();
}

void TableWriter::finish() {
  for (size_t i = 0; i < notes_.size(); ++i)
    out_ << fold(notes_[i].text + " (" + comma_list(notes_[i].variants) + ")",
                 "  [" + std::to_string(i + 1) + "] ");
  if (!notes_.empty()) out_.flush();
  notes_.clear();
}

namespace {

void write_markdown(std::ostream& out, const RunMeta& m, const std::vector<ResultRow>& rows) {
  const bool timed = m.mode == "run";
  if (m.device) {
    out << "**" << m.device->name << "**, " << m.device->caps.sm_count << " SMs, driver "
        << cuda_version_string(m.device->driver_version) << ", attnbench " << m.version << "\n\n";
  }
  write_markdown_table(out, rows, timed);
  write_markdown_legend(out, rows, timed);
}

}  // namespace

void write_markdown_table(std::ostream& out, const std::vector<ResultRow>& rows, bool timed) {
  const std::vector<int> cols = markdown_columns(timed, any_other_modes(rows));
  auto h = headers(cols);
  h.insert(h.begin(), "case");
  h.push_back("note");
  out << "|";
  for (const auto& x : h) out << " " << x << " |";
  out << "\n|";
  for (size_t i = 0; i < h.size(); ++i) out << (i < 4 || i + 1 == h.size() ? " --- |" : " ---: |");
  out << "\n";
  for (const auto& r : rows) {
    auto c = cells(r, cols, false);
    c.insert(c.begin(), r.case_name);
    c.push_back(detail(r));
    out << "|";
    for (auto x : c) {
      for (size_t p = 0; (p = x.find('|', p)) != std::string::npos; p += 2) x.replace(p, 1, "\\|");
      out << " " << x << " |";
    }
    out << "\n";
  }
}

void write_markdown_legend(std::ostream& out, const std::vector<ResultRow>& rows, bool timed) {
  if (!timed) return;
  if (std::any_of(rows.begin(), rows.end(), [](const ResultRow& r) { return !r.profiled.empty(); })) {
    out << "\n`*` baseline; profiled: launched once under `run --profile` for a profiler, not timed (the note "
           "gives its NVTX ranges for `ncu --nvtx --nvtx-include`).\n";
    return;
  }
  out << "\n`*` baseline; floor: the least time the card's measured ceilings allow; % floor: floor over the median, "
         "C = compute-bound, M = memory-bound; MHz: mean SM clock while timing, `!` = some samples below 90% of "
         "its maximum.\n";
}

namespace {

std::string csv_quote(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char ch : s) q += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return q + "\"";
}

const char* const kCsvHeader =
    "case,point,op,dtype,variant,baseline,status,reason,max_abs,max_rel,rel_l2,mismatches,elements_checked,"
    "rows_checked,rows_total,nonfinite,worst,atol,rtol,trials,mode,median_ms,min_ms,max_ms,q1_ms,q3_ms,noise,"
    "samples,flops,bytes,tflops,gbps,floor_ms,pct_of_floor,bound,speedup,stages,sm_mhz,low_clock_samples,"
    "command,kernels,registers,smem_bytes,blocks_per_sm,waves,tensor_bytes,workspace_bytes,speedup_ci_low,"
    "speedup_ci_high,dropped_samples,throttle_reasons,margin\n";

// One row's csv line, newline included.
std::string csv_line(const ResultRow& r) {
  std::ostringstream s;
  s << std::setprecision(6);
  s << csv_quote(r.case_name) << "," << csv_quote(r.point) << "," << r.op << "," << r.dtype << "," << r.variant
    << "," << (r.baseline ? 1 : 0) << "," << status_name(r.status) << "," << csv_quote(detail(r)) << ",";
  if (r.cmp) {
    s << r.cmp->max_abs << "," << r.cmp->max_rel << "," << r.cmp->rel_l2 << "," << r.cmp->mismatches << ","
      << r.cmp->elements_checked << "," << r.cmp->rows_checked << "," << r.cmp->rows_total << ","
      << r.cmp->nonfinite << "," << csv_quote(r.worst) << "," << r.tol.atol << "," << r.tol.rtol << "," << r.trials
      << ",";
  } else {
    s << ",,,,,,,,,,,,";
  }
  if (r.timing) {
    const Summary& t = r.timing->ms;
    s << mode_name(r.timing->mode) << "," << t.median << "," << t.min << "," << t.max << "," << t.q1 << "," << t.q3
      << "," << t.noise << "," << t.samples << "," << r.work.flops << "," << r.work.bytes << "," << r.tflops << ","
      << r.gbps << "," << r.floor_ms << "," << r.pct_of_floor << "," << r.bound << ",";
  } else {
    s << ",,,,,,,," << r.work.flops << "," << r.work.bytes << ",,,,,,";
  }
  if (r.speedup) s << *r.speedup;
  // Stages as "NAME mean p50 p99 runs" (ms), separated by ';'.
  std::ostringstream st;
  st << std::setprecision(6);
  for (size_t i = 0; i < r.stages.size(); ++i)
    st << (i ? ";" : "") << r.stages[i].name << " " << r.stages[i].ms.mean << " " << r.stages[i].ms.median << " "
       << r.stages[i].p99 << " " << r.stages[i].runs;
  s << "," << csv_quote(st.str());
  if (r.timing && r.timing->clock.samples)
    s << "," << r.timing->clock.mean_mhz << "," << r.timing->clock.low_samples;
  else
    s << ",,";
  s << "," << csv_quote(r.command);
  // The footprint: each kernel's figures joined by ';', as the table joins them by '/'.
  std::string kernels, regs, smem, per_sm, waves;
  if (r.footprint)
    for (const KernelFootprint& k : r.footprint->kernels) {
      const std::string sep = kernels.empty() ? "" : ";";
      std::ostringstream w;
      w << std::setprecision(4) << k.waves(r.footprint->sm_count);
      kernels += sep + k.name;
      regs += sep + std::to_string(k.registers);
      smem += sep + std::to_string(k.smem());
      per_sm += sep + std::to_string(k.blocks_per_sm);
      waves += sep + w.str();
    }
  s << "," << csv_quote(kernels) << "," << csv_quote(regs) << "," << csv_quote(smem) << "," << csv_quote(per_sm)
    << "," << csv_quote(waves) << ",";
  if (r.footprint) s << r.tensor_bytes << "," << r.workspace_bytes;
  else s << ",";
  s << ",";
  if (r.speedup_ci) s << r.speedup_ci->lo << "," << r.speedup_ci->hi;
  else s << ",";
  s << ",";
  if (r.timing) {
    std::string why;
    for (const std::string& w : clock_reason_names(r.timing->throttle_reasons)) why += (why.empty() ? "" : ";") + w;
    s << r.timing->dropped << "," << csv_quote(why);
  } else {
    s << ",";
  }
  s << ",";
  if (r.cmp && r.cmp->bound) s << r.cmp->margin;
  s << "\n";
  return s.str();
}

// A sample as the json keeps it: 7 significant digits. A CUDA event resolves about 0.5 us,
// which 7 digits resolve better for any sample under a second, and the report of every
// sample is about half the size it would be at a double's 17 digits.
double sample_digits(double ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.7g", ms);
  return std::strtod(buf, nullptr);
}

nlohmann::json timing_json(const Timing& t, bool keep_samples) {
  const Summary& s = t.ms;
  nlohmann::json j = {{"mode", mode_name(t.mode)}, {"median_ms", s.median}, {"min_ms", s.min},
                      {"max_ms", s.max},           {"q1_ms", s.q1},         {"q3_ms", s.q3},
                      {"mean_ms", s.mean},         {"noise", s.noise},      {"samples", s.samples},
                      {"launches_per_sample", t.launches_per_sample},       {"elapsed_ms", t.elapsed_ms}};
  if (t.mode == TimingMode::graph) j["copies"] = t.copies;
  if (t.clock.samples)
    j["clock"] = {{"mean_mhz", t.clock.mean_mhz}, {"max_mhz", t.clock.max_mhz}, {"samples", t.clock.samples},
                  {"low_samples", t.clock.low_samples}};
  j["hold_timeouts"] = t.hold_timeouts;
  if (t.dropped || t.throttle_reasons || t.clock_gave_up) {
    j["dropped_samples"] = t.dropped;
    j["throttle_reasons"] = clock_reason_names(t.throttle_reasons);
    j["clock_gave_up"] = t.clock_gave_up;
  }
  if (keep_samples && !t.samples.empty()) {
    j["samples_ms"] = nlohmann::json::array();
    for (double ms : t.samples) j["samples_ms"].push_back(sample_digits(ms));
    // Whole MHz, as NVML reads them; 0 where a reading failed.
    if (!t.samples_mhz.empty()) {
      j["samples_mhz"] = nlohmann::json::array();
      for (double mhz : t.samples_mhz) j["samples_mhz"].push_back(std::llround(mhz));
    }
  }
  return j;
}

}  // namespace

nlohmann::json row_json(const ResultRow& r, bool keep_samples) {
  nlohmann::json j = {{"case", r.case_name}, {"point", r.point},     {"op", r.op},
                      {"dtype", r.dtype},    {"variant", r.variant}, {"baseline", r.baseline},
                      {"status", status_name(r.status)}};
  if (!r.reason.empty()) j["reason"] = r.reason;
  if (r.plan_index >= 0) j["plan_index"] = r.plan_index;
  j["command"] = r.command;
  if (r.cmp) {
    const Comparison& c = *r.cmp;
    j["verify"] = {{"max_abs", c.max_abs},
                   {"max_rel", c.max_rel},
                   {"rel_l2", c.rel_l2},
                   {"mismatches", c.mismatches},
                   {"elements_checked", c.elements_checked},
                   {"rows_checked", c.rows_checked},
                   {"rows_total", c.rows_total},
                   {"nonfinite", c.nonfinite},
                   {"worst", {{"at", r.worst}, {"got", c.worst_got}, {"ref", c.worst_ref}}},
                   {"atol", r.tol.atol},
                   {"rtol", r.tol.rtol},
                   {"trials", r.trials}};
    if (!c.note.empty()) j["verify"]["note"] = c.note;
    if (c.bound) {
      const Bound& b = *c.bound;
      j["verify"]["margin"] = c.margin;
      j["verify"]["bound"] = {{"k_max", b.k_max},           {"k_l2", b.k_l2},
                              {"faithful_max", b.faithful_max}, {"faithful_l2", b.faithful_l2},
                              {"rms", b.rms},               {"largest", b.largest},
                              {"floor", b.floor},           {"score_floor", b.score_floor},
                              {"allowed_max", b.allowed_max}, {"allowed_l2", b.allowed_l2}};
      if (!std::isfinite(c.margin)) j["verify"]["margin"] = nullptr;
    }
    // JSON has no infinity: an unbounded error is reported as null.
    if (!std::isfinite(r.tol.atol)) j["verify"]["atol"] = nullptr;  // no elementwise tolerance: the bound decides
    for (const char* k : {"max_abs", "max_rel", "rel_l2"})
      if (!std::isfinite(j["verify"][k].get<double>())) j["verify"][k] = nullptr;
    for (const char* k : {"got", "ref"})
      if (!std::isfinite(j["verify"]["worst"][k].get<double>())) j["verify"]["worst"][k] = nullptr;
  }
  if (r.cmp)
    j["verify_time"] = {{"allocate_ms", r.verify_time.allocate_ms}, {"inputs_ms", r.verify_time.inputs_ms},
                        {"reference_ms", r.verify_time.reference_ms},
                        {"reference_wait_ms", r.verify_time.reference_wait_ms},
                        {"release_ms", r.verify_time.release_ms},
                        {"point_ms", r.verify_time.point_ms},
                        {"check_ms", r.verify_time.check_ms}};
  j["flops"] = r.work.flops;
  j["bytes"] = r.work.bytes;
  if (r.footprint) {
    const Footprint& f = *r.footprint;
    nlohmann::json& fp = j["footprint"];
    fp = {{"tensor_bytes", r.tensor_bytes}, {"workspace_bytes", r.workspace_bytes}, {"sm_count", f.sm_count},
          {"kernels", nlohmann::json::array()}};
    if (!f.error.empty()) fp["error"] = f.error;
    for (const KernelFootprint& k : f.kernels) {
      nlohmann::json kj = {{"name", k.name}, {"blocks", k.blocks}, {"threads", k.threads},
                           {"dynamic_smem", k.dynamic_smem}};
      // Unknown figures (a kernel whose attributes could not be read) are left out.
      if (k.registers >= 0) kj["registers"] = k.registers;
      if (k.static_smem >= 0) kj["static_smem"] = k.static_smem;
      if (k.local_bytes >= 0) kj["local_bytes"] = k.local_bytes;
      if (k.blocks_per_sm >= 0) kj["blocks_per_sm"] = k.blocks_per_sm;
      if (k.waves(f.sm_count) >= 0) kj["waves"] = k.waves(f.sm_count);
      fp["kernels"].push_back(kj);
    }
  }
  if (r.timing) {
    j["timing"] = timing_json(*r.timing, keep_samples);
    j["timings"][mode_name(r.timing->mode)] = timing_json(*r.timing, false);
    for (const auto& t : r.other_modes) j["timings"][mode_name(t.mode)] = timing_json(t, keep_samples);
    j["tflops"] = r.tflops;
    j["gbps"] = r.gbps;
    j["floor_ms"] = r.floor_ms;
    j["floor_compute_ms"] = r.floor_compute_ms;
    j["floor_memory_ms"] = r.floor_memory_ms;
    j["bound"] = r.bound;
    j["pct_of_floor"] = r.pct_of_floor;
  }
  if (r.speedup) j["speedup"] = *r.speedup;
  if (r.speedup_ci) j["speedup_ci"] = {r.speedup_ci->lo, r.speedup_ci->hi};
  if (r.rounds > 1) j["rounds"] = r.rounds;
  if (!r.profiled.empty()) j["profiled"] = r.profiled;
  if (!r.timing_note.empty()) j["timing_note"] = r.timing_note;
  for (const StageTiming& st : r.stages)
    j["stages"].push_back({{"name", st.name}, {"what", st.what}, {"mean_ms", st.ms.mean}, {"p50_ms", st.ms.median},
                           {"p99_ms", st.p99}, {"min_ms", st.ms.min}, {"max_ms", st.ms.max}, {"runs", st.runs}});
  for (size_t i = 0; i < r.stages.size(); ++i)
    if (r.stages[i].floor_ms > 0) j["stages"][i]["floor_ms"] = r.stages[i].floor_ms;
  for (size_t i = 0; i < r.stages.size(); ++i)
    if (r.stages[i].tokens > 0 && r.stages[i].ms.mean > 0)
      j["stages"][i]["tokens_per_s"] = 1e3 * r.stages[i].tokens / r.stages[i].ms.mean;
  return j;
}

namespace {

// Everything of the json report but its rows.
nlohmann::json json_head(const RunMeta& m) {
  nlohmann::json j;
  j["schema"] = kJsonSchema;
  j["attnbench"] = {{"version", m.version}, {"command", m.command_line}, {"date", m.date}, {"mode", m.mode},
                    {"timing_mode", m.timing_mode.empty() ? "per case" : m.timing_mode},
                    {"load_ms", m.load_ms}, {"elapsed_ms", m.elapsed_ms}, {"complete", m.complete},
                    {"build", build_identity()}};
  if (m.plan) j["plan"] = plan_json(*m.plan);
  for (const auto& p : m.plugins)
    j["plugins"].push_back({{"file", p.file}, {"library", p.library}, {"variants", p.variants}});
  if (m.device) {
    const DeviceInfo& d = *m.device;
    j["device"] = {{"name", d.name},
                   {"index", d.index},
                   {"sm_count", d.caps.sm_count},
                   {"compute_capability", std::to_string(d.caps.cc_major) + "." + std::to_string(d.caps.cc_minor)},
                   {"memory_bytes", d.total_memory},
                   {"l2_bytes", d.caps.l2_bytes},
                   {"driver", cuda_version_string(d.driver_version)},
                   {"cuda_runtime", cuda_version_string(d.runtime_version)},
                   {"pci_bus_id", d.pci_bus_id},
                   {"sm_clock_max_mhz", d.sm_clock_max_mhz},
                   {"nvml", d.nvml}};
  }
  if (m.ceilings) {
    const Ceilings& c = *m.ceilings;
    j["ceilings"] = {{"copy_gbps", c.copy_gbps},     {"read_gbps", c.read_gbps},     {"write_gbps", c.write_gbps},
                     {"fp32_tflops", c.fp32_tflops}, {"fp16_tflops", c.fp16_tflops}, {"bf16_tflops", c.bf16_tflops},
                     {"tf32_tflops", c.tf32_tflops}, {"mma_sync_bf16_tflops", c.mma_sync_bf16_tflops},
                     {"wgmma_bf16_tflops", c.wgmma_bf16_tflops}, {"fp8_tflops", c.fp8_tflops}};
  }
  if (m.device)
    if (const auto d = datasheet_for(m.device->name))
      j["datasheet"] = {{"card", d->card},
                        {"hbm_gbps", d->hbm_gbps},
                        {"fp32_tflops", d->fp32_tflops},
                        {"tf32_tflops", d->tf32_tflops},
                        {"fp16_tflops", d->fp16_tflops},
                        {"bf16_tflops", d->bf16_tflops}};
  return j;
}

// One row as an element of the report's "rows" array (indented as the document's dump(1) would).
std::string json_row_text(const ResultRow& r, bool keep_samples) {
  std::string text = "  " + row_json(r, keep_samples).dump(1);
  for (size_t p = 0; (p = text.find('\n', p)) != std::string::npos; p += 3) text.replace(p, 1, "\n  ");
  return text;
}

// The document: the head's dump with its rows spliced in where the placeholder stands.
void write_json_document(std::ostream& out, const RunMeta& m, const std::vector<std::string>& rows) {
  static const char* const kRows = "@rows@";
  nlohmann::json j = json_head(m);
  j["rows"] = kRows;
  const std::string head = j.dump(1);
  const size_t at = head.find(std::string("\"") + kRows + "\"");
  out << head.substr(0, at) << "[";
  for (size_t i = 0; i < rows.size(); ++i) out << (i ? ",\n" : "\n") << rows[i];
  out << (rows.empty() ? "]" : "\n ]") << head.substr(at + std::strlen(kRows) + 2) << "\n";
}


}  // namespace

void write_report(std::ostream& out, Format f, const RunMeta& meta, const std::vector<ResultRow>& rows,
                  const TableColumns& columns) {
  switch (f) {
    case Format::table: {
      TableWriter t(out, meta.mode == "run", any_other_modes(rows), columns);
      for (size_t i = 0; i < rows.size(); ++i) {
        if (i == 0 || rows[i].case_name != rows[i - 1].case_name) {
          size_t w = 0;
          for (const auto& x : rows)
            if (x.case_name == rows[i].case_name) w = std::max(w, x.point.size());
          t.begin_case(rows[i].case_name, "", w);
        }
        t.row(rows[i]);
      }
      t.finish();
      break;
    }
    case Format::markdown: write_markdown(out, meta, rows); break;
    case Format::csv:
      out << kCsvHeader;
      for (const auto& r : rows) out << csv_line(r);
      break;
    case Format::json: {
      std::vector<std::string> text;
      for (const auto& r : rows) text.push_back(json_row_text(r, meta.keep_samples));
      write_json_document(out, meta, text);
      break;
    }
  }
}

void ReportFile::write(const RunMeta& meta, const std::vector<ResultRow>& rows) {
  const bool cached = format_ == Format::json || format_ == Format::csv;
  for (size_t i = rendered_.size(); cached && i < rows.size(); ++i)
    rendered_.push_back(format_ == Format::json ? json_row_text(rows[i], meta.keep_samples) : csv_line(rows[i]));
  write_file(path_, [&](std::ostream& out) {
    if (format_ == Format::json)
      write_json_document(out, meta, rendered_);
    else if (format_ == Format::csv)
      for (size_t i = 0; i <= rendered_.size(); ++i) out << (i == 0 ? kCsvHeader : rendered_[i - 1].c_str());
    else
      write_report(out, format_, meta, rows, columns_);
  });
}

}  // namespace attnbench
