#!/usr/bin/env python3
# Tool: how close each op's rows came to the scaled bound, over a GPU session's verify reports.
"""margins.py REPORT.json...: how close each op's rows came to the scaled bound (issue 45).

Prints the rows that failed or errored with their reason, then per op and dtype the number of
rows with a bound and their largest, 90th-percentile and median margin (error over the bound;
above 1 fails) with the four closest rows, then every variant's worst margin. For a GPU
session's `verify all` reports (tools/gpu_session.sh): the evidence that honest kernels sit
well inside the bound, and where they do not."""
import collections
import json
import sys


def main(paths):
    rows = []
    for f in paths:
        try:
            with open(f) as fh:
                rows += json.load(fh)["rows"]
        except (OSError, ValueError, KeyError) as e:
            print("unreadable", f, e)
    print("rows:", dict(collections.Counter(r["status"] for r in rows)))
    print("\n## failed / error")
    for r in rows:
        if r["status"] in ("FAILED", "ERROR"):
            v = r.get("verify", {})
            print(r["case"], "|", r["point"], "|", r["variant"], "|", r["status"], "| margin", v.get("margin"), "|",
                  (r.get("reason") or "")[:300])
    print("\n## margins per op and dtype")
    groups = collections.defaultdict(list)
    for r in rows:
        v = r.get("verify")
        if v and "bound" in v:
            m = v.get("margin")
            b = v["bound"]
            groups[(r["op"], r["dtype"])].append((float("inf") if m is None else m, r["variant"], r["case"], r["point"],
                                                  v.get("rel_l2"), b.get("faithful_l2"), v.get("max_abs"),
                                                  b.get("faithful_max")))
    worst = collections.defaultdict(float)
    for key in sorted(groups):
        g = sorted(groups[key], key=lambda x: -x[0])
        ms = [x[0] for x in g]
        print("%s %s: n=%d max=%.3g p90=%.3g median=%.3g" % (key[0], key[1], len(ms), ms[0], ms[len(ms) // 10],
                                                           ms[len(ms) // 2]))
        for x in g[:4]:
            print("   %.3g %s %s [%s] rel-L2 %s (faithful %s), max %s (faithful %s)" % x)
        for x in g:
            worst[(key[0], x[1])] = max(worst[(key[0], x[1])], x[0])
    print("\n## every variant's worst margin")
    for k in sorted(worst, key=lambda k: -worst[k]):
        print("%8.3g %s %s" % (worst[k], k[0], k[1]))


if __name__ == "__main__":
    main(sys.argv[1:])
