#!/usr/bin/env python3
"""The judgement of tests/python_plugins.sh: python_plugins_judge.py WORK

WORK holds manifest.tsv (one line a run: its number, the plugin file's name, the -k pattern of
its variants, attnbench's exit code) and each run's report N.json and output N.out. Judged: every
row of a plugin's variants (rows of the baseline beside them are not). A FAILED or ERROR row is a
problem, and so is any status but verified and skipped; a plugin file without one verified row is
a problem; the backward peers' rows (variants ending in _bwd) are counted apart, never problems
(SDPA's backward kernels skip what they do not run). tests/plugins/py_raises.py's run must give
exactly ERROR for its two raising variants and verified for naive.
Exit 0: no problem; 1: problems, each on a line starting FAIL.
"""
import fnmatch, json, os, sys


def judge(work):
    """Prints the judgement of the runs in WORK; returns the problems (empty: passed)."""
    problems, verified, judged, failing, backward = [], {}, 0, [], {}
    for line in open(os.path.join(work, "manifest.tsv")):
        n, plugin, pattern, rc = line.rstrip("\n").split("\t")
        if plugin == "py_raises.py":
            try:
                rows = json.load(open(os.path.join(work, n + ".json"))).get("rows", [])
            except (OSError, ValueError) as e:
                problems.append("[%s] %s: no report (attnbench exit %s): %s" % (n, plugin, rc, e))
                continue
            statuses = {r.get("variant"): r.get("status") for r in rows}
            want = {"raises_in_supports": "ERROR", "raises_in_launch": "ERROR", "naive": "verified"}
            if statuses != want:
                problems.append("[%s] %s: rows %s, expected %s" % (n, plugin, statuses, want))
            continue
        verified.setdefault(plugin, 0)
        try:
            report = json.load(open(os.path.join(work, n + ".json")))
        except (OSError, ValueError) as e:
            problems.append("[%s] %s: no report (attnbench exit %s): %s" % (n, plugin, rc, e))
            continue
        for r in report.get("rows", []):
            if not fnmatch.fnmatchcase(r.get("variant", ""), pattern):
                continue  # the baseline
            judged += 1
            status = r.get("status")
            where = "[%s] %s %s [%s]" % (n, r.get("variant"), r.get("case"), r.get("point") or "-")
            if status == "verified":
                verified[plugin] += 1
            if r.get("variant", "").endswith("_bwd"):  # the backward peers: their rows, told apart
                backward.setdefault(r.get("variant"), {}).setdefault(status, 0)
                backward[r.get("variant")][status] += 1
            elif status in ("FAILED", "ERROR"):
                problems.append("%s: %s: %s" % (where, status, r.get("reason", "")))
                failing.append(n)
            elif status not in ("verified", "skipped"):
                problems.append("%s: status %r" % (where, status))
    for plugin, count in sorted(verified.items()):
        print("%s: %d verified rows" % (plugin, count))
        if count == 0:
            problems.append("%s: no verified row" % plugin)
    for variant, statuses in sorted(backward.items()):
        print("%s: %s" % (variant, ", ".join("%d %s" % (c, st) for st, c in sorted(statuses.items()))))
    for n in sorted(set(failing), key=int):  # the table of each run with a bad row, for the reader
        print("---- run [%s]:" % n)
        print("".join(open(os.path.join(work, n + ".out")).readlines()[-30:]), end="")
    for p in problems:
        print("FAIL " + p)
    print("%d rows of the Python variants judged, %d problems" % (judged, len(problems)))
    return problems


if __name__ == "__main__":
    sys.exit(1 if judge(sys.argv[1]) else 0)
