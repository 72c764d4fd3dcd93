#!/usr/bin/env python3
"""Plots of attnbench json reports, for `attnbench report` and by hand (docs/results.md).

  attnbench_plot.py RUN.json -o DIR [--compare BASE.json] [--peers PEERS.json]

writes into DIR:
  throughput-CASE.png  for each case with timed rows: each variant's TFLOP/s (compute-bound rows) or
                       GB/s (memory-bound rows) against the swept shape key, one panel for each value of
                       the other swept keys; the card's measured ceilings the rows' floors use as
                       horizontal lines; the rows of PEERS (another attnbench report, a peer report of
                       tools/peers.py --report, or its --json) on the same case as dashed lines, and so
                       are RUN's own peer rows (status "peer"); a case with peer rows only is drawn too
  compare.png          with --compare: RUN's median over BASE's for every row timed in both, as bars
                       (below 1: RUN is faster), whiskers from the interquartile ranges
  plots.json           which file shows what, read by `attnbench report`:
                       {"throughput": {"CASE": "throughput-CASE.png", ...}, "compare": "compare.png"}

Exit codes: 0 written; 2 bad input (one line on stderr); 3 matplotlib is not installed.
Needs Python 3.8 and matplotlib (Debian: python3-matplotlib); nothing else.
"""
import argparse
import json
import math
import os
import re
import sys

# The json report schemas this script reads (app/report.hpp's kJsonSchema is the newest; a test
# in tests/test_results.cpp fails when it moves past NEWEST_SCHEMA). Every key read here means
# the same in all of them: rows' case, point, variant, baseline, status, flops, bytes, tflops,
# gbps, bound, floor_compute_ms, floor_memory_ms, timing and timings (mode, median_ms, q1_ms,
# q3_ms); device.name; ceilings. Status "peer" (a peer library's row, tools/peers.py --report)
# is schema 3's; older reports have none. Schema 4 made mode "graph" cold (rotating copies of the
# inputs) and named the warm graph of schemas 1-3 "graph_hot": older reports' graph timings are
# read as graph_hot, as `attnbench compare` reads them.
OLDEST_SCHEMA, NEWEST_SCHEMA = 1, 4
MAX_PANELS = 12     # a case with more combinations of its other swept keys is drawn as one panel by label
MAX_BARS = 1000     # compare rows past this are left out (the page's table has them all)


class BadInput(Exception):
    pass


# ------------------------------------------------------------------------------------------- reading
def number(obj, key):
    """obj[key] when it is a finite number, else None (a report written by hand may lack anything)."""
    v = obj.get(key) if isinstance(obj, dict) else None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        return None
    return float(v)


def text(obj, key):
    v = obj.get(key) if isinstance(obj, dict) else None
    return v if isinstance(v, str) else ""


def load(path, what):
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except OSError as e:
        raise BadInput(f"{path}: cannot read the {what}: {e.strerror}")
    except (ValueError, UnicodeDecodeError) as e:
        raise BadInput(f"{path}: not valid json: {e}")
    if not isinstance(doc, dict) or not isinstance(doc.get("rows"), list):
        raise BadInput(f"{path}: not an attnbench json report (expected an object with \"rows\")")
    return doc


def load_report(path, what="report"):
    doc = load(path, what)
    schema = doc.get("schema")
    if isinstance(schema, bool) or not isinstance(schema, int):
        raise BadInput(f"{path}: not an attnbench json report: no integer \"schema\"")
    if not OLDEST_SCHEMA <= schema <= NEWEST_SCHEMA:
        raise BadInput(f"{path}: the report has schema {schema}; this script reads schema "
                       f"{OLDEST_SCHEMA} to {NEWEST_SCHEMA}")
    if schema < 4:
        for row in doc["rows"]:
            if not isinstance(row, dict):
                continue
            if isinstance(row.get("timings"), dict) and "graph" in row["timings"]:
                row["timings"]["graph_hot"] = row["timings"].pop("graph")
            for t in [row.get("timing")] + list((row.get("timings") or {}).values()):
                if isinstance(t, dict) and t.get("mode") == "graph":
                    t["mode"] = "graph_hot"
    return doc


def timings(row):
    """{mode: (median, q1, q3)} of one row: `timings` when there, else its one `timing`."""
    out = {}
    many = row.get("timings")
    items = list(many.items()) if isinstance(many, dict) else []
    one = row.get("timing")
    if not items and isinstance(one, dict):
        items = [(text(one, "mode") or "cold", one)]
    for mode, t in items:
        median = number(t, "median_ms")
        if median is None or median <= 0:
            continue
        q1, q3 = number(t, "q1_ms"), number(t, "q3_ms")
        out[mode] = (median, q1 if q1 is not None else median, q3 if q3 is not None else median)
    return out


def parse_point(label):
    """'dtype=fp32 cols=1000' -> {'dtype': 'fp32', 'cols': '1000'}; None when it is not key=value words."""
    if not label:
        return {}
    point = {}
    for word in label.split(" "):
        key, eq, value = word.partition("=")
        if not eq or not key:
            return None
        point[key] = value
    return point


def numeric(value):
    try:
        v = float(value)
    except ValueError:
        return None
    return v if math.isfinite(v) else None


class Row:
    """One timed, verified row of a report, or one peer's time on a case point."""

    def __init__(self, case, point, series, row, median):
        self.case, self.point, self.series = case, point, series
        self.median = median
        self.flops, self.bytes = number(row, "flops") or 0, number(row, "bytes") or 0
        self.tflops, self.gbps = number(row, "tflops"), number(row, "gbps")
        if self.tflops is None and self.flops:
            self.tflops = self.flops / (median * 1e9)
        if self.gbps is None and self.bytes:
            self.gbps = self.bytes / (median * 1e6)
        self.bound = text(row, "bound")
        self.is_peer = False  # drawn as a peer (dashed) even where it sets a panel's axes
        # The ceilings the row's floor divided by, recovered from the floor's two terms.
        fc, fm = number(row, "floor_compute_ms"), number(row, "floor_memory_ms")
        self.compute_ceiling = self.flops / (fc * 1e9) if fc and self.flops else None
        self.memory_ceiling = self.bytes / (fm * 1e6) if fm and self.bytes else None


def report_rows(doc, prefix="", status="verified"):
    """The timed rows that verified (a wrong answer's speed is no result), each in its own mode; with
    status="peer", the peer rows instead (a peer library's, timed by tools/peers.py, not verified)."""
    rows = []
    for row in doc["rows"]:
        if not isinstance(row, dict) or text(row, "status") != status:
            continue
        t = row.get("timing")
        mode = text(t, "mode") if isinstance(t, dict) else ""
        times = timings(row)
        if not times:
            continue
        median = times.get(mode, next(iter(times.values())))[0]
        series = prefix + text(row, "variant") + ("*" if row.get("baseline") is True and not prefix else "")
        rows.append(Row(text(row, "case"), text(row, "point"), series, row, median))
    return rows


def peers_py_rows(doc, prefix):
    """tools/peers.py --json: rows {case: 'STEM [k=v,k2=v2]', peer, ms, tflops, gbps}, as attnbench rows."""
    rows = []
    for row in doc["rows"]:
        ms = number(row, "ms")
        m = re.match(r"^(\S+)(?: \[(.*)\])?( prefill)?$", text(row, "case"))
        if ms is None or ms <= 0 or not m:
            continue
        # Commas separate the keys, and also a list's values: split only where a key follows.
        point = " ".join(re.split(r",(?=[A-Za-z_][A-Za-z_0-9]*=)", m.group(2))) if m.group(2) else ""
        rows.append(Row(m.group(1), point, prefix + text(row, "peer"), row, ms))
    return rows


def peer_rows(path):
    doc = load(path, "peers file")
    prefix = os.path.splitext(os.path.basename(path))[0] + ": "
    if "schema" in doc:
        load_report(path, "peers file")  # the same checks as a run's
        return report_rows(doc, prefix) + report_rows(doc, prefix, "peer")
    return peers_py_rows(doc, prefix)


# ------------------------------------------------------------------------------------------- drawing
def slug(name):
    s = re.sub(r"[^A-Za-z0-9=.,-]", "_", name)[:100]
    return s if s not in ("", ".", "..") else "_"


def ceiling_name(doc, value, unit):
    """The ceilings entry a value came from: 'bf16 GEMM (cuBLAS)', 'read bandwidth'."""
    names = {"copy_gbps": "copy bandwidth", "read_gbps": "read bandwidth", "write_gbps": "write bandwidth",
             "fp32_tflops": "fp32 GEMM (cuBLAS)", "tf32_tflops": "tf32 GEMM (cuBLAS)",
             "fp16_tflops": "fp16 GEMM (cuBLAS)", "bf16_tflops": "bf16 GEMM (cuBLAS)"}
    ceilings = doc.get("ceilings") if isinstance(doc.get("ceilings"), dict) else {}
    for key, name in names.items():
        c = number(ceilings, key)
        if c and abs(c - value) <= 1e-3 * c:
            return f"{name}: {value:.0f} {unit}"
    return f"measured ceiling: {value:.0f} {unit}"


def layout(rows):
    """(x key or None, panel keys) for a case: x is the numeric swept key with the most values."""
    points = [parse_point(r.point) for r in rows]
    if any(p is None for p in points):
        return None, []
    keys = []
    for p in points:
        keys += [k for k in p if k not in keys]
    values = {k: {p.get(k, "") for p in points} for k in keys}
    numeric_keys = [k for k in keys if len(values[k]) > 1 and all(numeric(v) is not None for v in values[k])]
    if not numeric_keys:
        return None, []
    x = max(reversed(numeric_keys), key=lambda k: len(values[k]))
    return x, [k for k in keys if k != x and len(values[k]) > 1]


def compute_bound(rows):
    """Whether to plot TFLOP/s: most rows are compute-bound. Peer rows have no bound (a peer report has no
    floors): a panel of peer rows only goes by most of them doing 100 FLOP or more per byte moved (past the
    ridge point of the cards attnbench knows, in fp16 and bf16)."""
    if rows and all(r.is_peer for r in rows):
        return sum(r.bytes > 0 and r.flops >= 100 * r.bytes for r in rows) > len(rows) / 2
    return sum(r.bound == "compute" and r.flops > 0 for r in rows) > len(rows) / 2


def draw_panel(ax, rows, peers, x_key, doc):
    if not rows:  # a case with peer rows only: they set the axes
        rows, peers = peers, []
        for r in rows:
            r.is_peer = True
    compute = compute_bound(rows)
    unit = "TFLOP/s" if compute else "GB/s"
    rate = (lambda r: r.tflops) if compute else (lambda r: r.gbps)
    series = []
    for r in rows + peers:
        if r.series not in series:
            series.append(r.series)
    if x_key:
        for name in series:
            pts = sorted((numeric(parse_point(r.point).get(x_key, "")), rate(r)) for r in rows + peers
                         if r.series == name and rate(r) is not None and numeric(parse_point(r.point).get(x_key, "")) is not None)
            if pts:
                is_peer = any(r.series == name for r in peers) or any(r.series == name and r.is_peer for r in rows)
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", linestyle="--" if is_peer else "-",
                        label=name)
        xs = sorted({numeric(parse_point(r.point)[x_key]) for r in rows})
        if xs[0] > 0 and xs[-1] / xs[0] >= 8:
            ax.set_xscale("log", base=2)
        ax.set_xticks(xs)
        ax.set_xticklabels([f"{v:g}" for v in xs], rotation=45 if len(xs) > 6 else 0)
        ax.minorticks_off()
        ax.set_xlabel(x_key)
    else:
        labels = []
        for r in rows:
            if (r.point or "-") not in labels:
                labels.append(r.point or "-")
        width = 0.8 / max(1, len(series))
        for i, name in enumerate(series):
            pts = [(labels.index(r.point or "-"), rate(r)) for r in rows + peers
                   if r.series == name and rate(r) is not None and (r.point or "-") in labels]
            if pts:
                is_peer = any(r.series == name for r in peers) or any(r.series == name and r.is_peer for r in rows)
                ax.bar([p[0] - 0.4 + width * (i + 0.5) for p in pts], [p[1] for p in pts], width, label=name,
                       hatch="//" if is_peer else None)
        ax.set_xticks(range(len(labels)))
        ax.set_xticklabels(labels, rotation=30 if len(labels) > 3 else 0, ha="right" if len(labels) > 3 else "center")
    ceilings = sorted({round(c, 3) for c in ((r.compute_ceiling if compute else r.memory_ceiling) for r in rows) if c})
    for c in ceilings:
        ax.axhline(c, color="black", linestyle=":", linewidth=1)
        ax.annotate(ceiling_name(doc, c, unit), (0.01, c), xycoords=("axes fraction", "data"),
                    va="bottom", fontsize=7)
    ax.set_ylabel(unit)
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)


def throughput_plot(plt, case, rows, peers, doc, path):
    x_key, panel_keys = layout(rows or peers)
    panels = {}
    for r in rows:
        p = parse_point(r.point) or {}
        panels.setdefault(tuple(p.get(k, "") for k in panel_keys), []).append(r)
    if not rows:  # peer rows only: each panel's are its peers
        for r in peers:
            p = parse_point(r.point) or {}
            panels.setdefault(tuple(p.get(k, "") for k in panel_keys), [])
    if len(panels) > MAX_PANELS:  # too many to read side by side: one panel, by label
        x_key, panel_keys, panels = None, [], {(): rows}
    n = len(panels)
    cols = min(3, n)
    fig, axes = plt.subplots((n + cols - 1) // cols, cols, figsize=(6.4 * cols, 4.2 * ((n + cols - 1) // cols)),
                             squeeze=False)
    for ax, (values, panel_rows) in zip(axes.flat, panels.items()):
        want = dict(zip(panel_keys, values))
        panel_peers = [r for r in peers
                       if all((parse_point(r.point) or {}).get(k) == v for k, v in want.items())]
        draw_panel(ax, panel_rows, panel_peers, x_key, doc)
        ax.set_title(" ".join(f"{k}={v}" for k, v in want.items()) or case, fontsize=9)
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[n:]:
        ax.set_visible(False)
    device = text(doc.get("device"), "name")
    fig.suptitle(case + (f" on {device}" if device else ""))
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def compare_plot(plt, base, now, path, base_name, now_name):
    def by_key(doc):
        out = {}
        for row in doc["rows"]:
            if isinstance(row, dict):
                for mode, t in timings(row).items():
                    out[(text(row, "case"), text(row, "point"), text(row, "variant"), mode)] = (t, text(row, "status"))
        return out
    b, n = by_key(base), by_key(now)
    bars = []
    for key, (bt, _) in b.items():
        if key in n and n[key][1] in ("verified", "peer"):  # peer: two peer reports compared
            nt = n[key][0]
            ratio = nt[0] / bt[0]
            lo, hi = nt[1] / bt[2], nt[2] / bt[1]  # the ratio's range, from the two interquartile ranges
            case, point, variant, mode = key
            bars.append((f"{case} [{point}] {variant} ({mode})" if point else f"{case} {variant} ({mode})",
                         ratio, min(lo, ratio), max(hi, ratio)))
    if not bars:
        return False
    bars = bars[:MAX_BARS]
    fig, ax = plt.subplots(figsize=(10, max(2.5, 0.28 * len(bars) + 1.2)))
    ys = range(len(bars))
    ax.barh(ys, [r - 1 for _, r, _, _ in bars], left=1,
            color=["tab:green" if r < 1 else "tab:red" for _, r, _, _ in bars],
            xerr=[[r - lo for _, r, lo, _ in bars], [hi - r for _, r, _, hi in bars]], capsize=2)
    ax.axvline(1, color="black", linewidth=1)
    lo, hi = min(min(b[2] for b in bars), 1), max(max(b[3] for b in bars), 1)
    ax.set_xlim(lo - 0.05 * (hi - lo) - 0.01, hi + 0.05 * (hi - lo) + 0.01)
    ax.set_yticks(list(ys))
    ax.set_yticklabels([b[0] for b in bars], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel(f"median of {now_name} / median of {base_name} (below 1: faster)")
    ax.grid(True, axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


# ------------------------------------------------------------------------------------------- main
def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", help="the run's json report (attnbench run -o RUN.json)")
    ap.add_argument("-o", "--output", required=True, help="directory for the PNG files and plots.json")
    ap.add_argument("--compare", metavar="BASE", help="a json report to compare RUN with")
    ap.add_argument("--peers", help="peer rows: an attnbench json report, or tools/peers.py --json")
    args = ap.parse_args(argv)
    try:
        run = load_report(args.run)
        base = load_report(args.compare, "base report") if args.compare else None
        peers = peer_rows(args.peers) if args.peers else []
        os.makedirs(args.output, exist_ok=True)
    except BadInput as e:
        print(f"attnbench_plot: error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"attnbench_plot: error: {args.output}: {e.strerror}", file=sys.stderr)
        return 2
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("attnbench_plot: matplotlib is not installed for " + sys.executable +
              " (Debian: apt install python3-matplotlib; else: pip install matplotlib)", file=sys.stderr)
        return 3

    rows = report_rows(run)
    own_peers = report_rows(run, status="peer")  # the run's own peer rows (a peer report's are all such)
    peers = own_peers + peers
    manifest = {"throughput": {}}
    used = set()
    for case in dict.fromkeys(r.case for r in rows + own_peers):
        name = "throughput-" + slug(case)
        while name in used:
            name += "_"
        used.add(name)
        throughput_plot(plt, case, [r for r in rows if r.case == case], [r for r in peers if r.case == case], run,
                        os.path.join(args.output, name + ".png"))
        manifest["throughput"][case] = name + ".png"
    if base is not None and compare_plot(plt, base, run, os.path.join(args.output, "compare.png"),
                                         os.path.basename(args.compare), os.path.basename(args.run)):
        manifest["compare"] = "compare.png"
    with open(os.path.join(args.output, "plots.json"), "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=1)
    print(f"attnbench_plot: {len(manifest['throughput']) + ('compare' in manifest)} plot(s) in {args.output}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
