#!/usr/bin/env python3
"""app/plot/attnbench_plot.py reads peer rows: a peer report's (tools/peers.py --report; rows of status "peer")
as --peers, and a run's own, become peer lines at the case and point of attnbench's rows for the same point;
tools/peers.py --json rows of the same measurements land on the same points; a report's verified rows are read
as before. Needs no matplotlib; where it is installed, also draws a peer report alone and as --peers.

    python3 tests/test_plot_data.py

Exit codes: 0 passed; 1 a check failed (each on one line); 77 skipped (tools/peers.py needs tomllib or tomli).
"""
import copy
import importlib.util
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TOOLS = os.path.join(HERE, "..", "tools")
PLOT = os.path.join(HERE, "..", "app", "plot", "attnbench_plot.py")
FIXTURES = os.path.join(HERE, "report")
DEVICE = {"name": "NVIDIA H100 80GB HBM3", "index": 0, "sm_count": 132, "compute_capability": "9.0",
          "memory_bytes": 85017493504, "cuda_runtime": "13.0", "sm_clock_max_mhz": 0, "nvml": False}
META = dict(command="python3 tools/peers.py --report peers-report.json", date="2026-11-27T02:19:00Z",
            elapsed_ms=1000.0, complete=True, device=DEVICE, library="torch", version="2.11.0+cu130",
            flush="write", script="tools/peers.py", budget_ms=100, max_samples=500)

failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
    return ok


def load_plot():
    spec = importlib.util.spec_from_file_location("attnbench_plot", PLOT)
    plot = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(plot)
    return plot


def made_up_results(peers):
    """Every cases/perf point with peers, each peer timed (made-up samples) but the first flash, unavailable."""
    results = []
    for p in peers.select("*"):
        if isinstance(p["plan"], str):
            continue
        for peer in p["plan"][1]:
            r = dict(point=p, peer=peer, flops=p["plan"][3], bytes=p["plan"][4])
            if not results:
                r["unavailable"] = "made up"
            else:
                r.update(samples_ms=[0.2 + 0.01 * (len(results) % 5) + 0.001 * k for k in range(7)], mhz=[1980],
                         elapsed_ms=5.0)
            results.append(r)
    return results


def main():
    sys.path.insert(0, HERE)
    sys.path.insert(0, TOOLS)  # peers.py
    try:
        import peers
    except ImportError as e:
        print(f"skipped: tools/peers.py cannot be imported here ({e}): it needs Python 3.11 or tomli")
        return 77
    plot = load_plot()
    results = made_up_results(peers)
    doc = peers.peer_report(results, META)
    timed = [row for row in doc["rows"] if row["status"] == "peer"]
    check(len(timed) == len(results) - 1 and len(timed) > 10, f"{len(timed)} peer rows")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "peers-report.json")
        with open(path, "w") as f:
            json.dump(doc, f)
        # --peers FILE, FILE a peer report: every timed peer row, named after the file and the variant.
        rows = plot.peer_rows(path)
        check([(r.case, r.point, r.series) for r in rows] ==
              [(row["case"], row["point"], "peers-report: " + row["variant"]) for row in timed],
              "peer_rows() of a peer report are not its peer rows")
        for r, row in zip(rows, timed):
            check(r.median == row["timing"]["median_ms"] and r.tflops == row["tflops"] and r.gbps == row["gbps"],
                  f"{r.case} [{r.point}] {r.series}: median or rates not the row's")
        # A run's own peer rows are drawn as peers; its verified rows are read as before.
        check(plot.report_rows(doc) == [], "a peer report's rows read as verified rows")
        own = plot.report_rows(doc, status="peer")
        check([r.series for r in own] == [row["variant"] for row in timed], "a run's own peer rows")
        run = plot.load_report(os.path.join(FIXTURES, "run.json"))
        mixed = copy.deepcopy(run)
        mixed["rows"] += timed
        before = [(r.case, r.point, r.series, r.median) for r in plot.report_rows(run)]
        check(before and [(r.case, r.point, r.series, r.median) for r in plot.report_rows(mixed)] == before,
              "peer rows in a run change its verified rows")
        check(len(plot.report_rows(mixed, status="peer")) == len(timed), "a run's peer rows are not all read")
        # tools/peers.py --json of the same measurements: the same (case, point) for each peer.
        jpath = os.path.join(tmp, "peers.json")
        with open(jpath, "w") as f:
            json.dump(dict(device=DEVICE["name"], torch="2.11.0+cu130",
                           rows=[peers.json_row(r, "write") for r in results]), f)
        from_json = plot.peer_rows(jpath)
        check([(r.case, r.point) for r in from_json] == [(row["case"], row["point"]) for row in timed],
              "--json rows and the report's rows of the same measurements land on different points")
        check(len(plot.peer_rows(os.path.join(FIXTURES, "peers.json"))) > 0, "the --json fixture is no longer read")
        # A panel of peer rows only: TFLOP/s for attention and GEMM, GB/s for decode and softmax.
        for r in own:
            r.is_peer = True
        for case, want in (("attention-bf16-b4-h16-s4096-d128", True), ("gemm-fp32-nn-4096", True),
                           ("decode-bf16-b64-kv8-ctx4096", False), ("softmax-fp32-65536x1024", False)):
            got = plot.compute_bound([r for r in own if r.case == case])
            check(got == want, f"{case}: peer rows alone plotted as {'TFLOP/s' if got else 'GB/s'}")
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            print("note: no matplotlib; drawing not checked (tests/plot.sh draws the fixtures where it is)")
        else:
            out = os.path.join(tmp, "alone")
            check(plot.main([path, "-o", out]) == 0, "plotting a peer report alone failed")
            with open(os.path.join(out, "plots.json")) as f:
                drawn = json.load(f)["throughput"]
            want = list(dict.fromkeys(row["case"] for row in timed))
            check(list(drawn) == want and all(os.path.getsize(os.path.join(out, v)) > 0 for v in drawn.values()),
                  f"a peer report alone: plots for {list(drawn)}, want {want}")
            plain, beside = os.path.join(tmp, "plain"), os.path.join(tmp, "beside")
            check(plot.main([os.path.join(FIXTURES, "run.json"), "-o", plain]) == 0 and
                  plot.main([os.path.join(FIXTURES, "run.json"), "--peers", path, "-o", beside]) == 0,
                  "plotting the run with a peer report as --peers failed")
            with open(os.path.join(plain, "plots.json")) as a, open(os.path.join(beside, "plots.json")) as b:
                check(json.load(a) == json.load(b), "--peers added or dropped a plot")
            mpath = os.path.join(tmp, "mixed.json")
            with open(mpath, "w") as f:
                json.dump(mixed, f)
            out = os.path.join(tmp, "mixed")
            check(plot.main([mpath, "-o", out]) == 0, "plotting a run with its own peer rows failed")
            with open(os.path.join(out, "plots.json")) as f:
                drawn = json.load(f)["throughput"]
            check(set(drawn) == {r.case for r in plot.report_rows(run)} | set(want),
                  f"a run with peer rows: plots for {sorted(drawn)}")
    for f in failures:
        print(f"test_plot_data: FAILED: {f}")
    if failures:
        return 1
    print(f"ok: {len(timed)} peer rows read as peers (report, run, --json alike)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
