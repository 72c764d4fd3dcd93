#!/usr/bin/env python3
"""tests/python_plugins_judge.py on made-up runs: what gpu_python_plugins passes and fails.

Run 280 found its judgement flagging every verified row as a problem (only a GPU run reached
it); these cases pin each rule on the CPU. Exit 0 passed, 1 a check failed."""
import contextlib
import io
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import python_plugins_judge as j  # noqa: E402

failures = []


def row(variant, status, point="-", case="smoke"):
    return {"variant": variant, "status": status, "point": point, "case": case, "reason": "why"}


def judged(runs):
    """runs: [(plugin, pattern, rc, rows or None (no report))]; the problems judge() returns."""
    with tempfile.TemporaryDirectory() as work:
        with open(os.path.join(work, "manifest.tsv"), "w") as m:
            for n, (plugin, pattern, rc, rows) in enumerate(runs, 1):
                m.write("%d\t%s\t%s\t%d\n" % (n, plugin, pattern, rc))
                with open(os.path.join(work, "%d.out" % n), "w") as f:
                    f.write("table of run %d\n" % n)
                if rows is not None:
                    with open(os.path.join(work, "%d.json" % n), "w") as f:
                        json.dump({"rows": rows}, f)
        with contextlib.redirect_stdout(io.StringIO()):
            return j.judge(work)


def check(name, runs, expect_problems):
    problems = judged(runs)
    if bool(problems) != expect_problems or (expect_problems and not all(isinstance(p, str) for p in problems)):
        failures.append("%s: problems %r (expected %s)" % (name, problems, "some" if expect_problems else "none"))


good = ("torch_ops.py", "torch_*", 0, [row("torch_softmax", "verified"), row("torch_softmax", "skipped"),
                                       row("naive", "verified")])
check("verified and skipped rows pass", [good], False)
check("the baseline's rows are not judged", [("torch_ops.py", "torch_*", 1,
                                              [row("torch_softmax", "verified"), row("naive", "FAILED")])], False)
check("a FAILED row fails", [good, ("flex.py", "torch_flex*", 1, [row("torch_flex", "verified"),
                                                                  row("torch_flex", "FAILED")])], True)
check("an ERROR row fails", [("flex.py", "torch_flex*", 1, [row("torch_flex", "verified"),
                                                            row("torch_flex_ragged", "ERROR")])], True)
check("another status fails", [("flex.py", "torch_flex*", 0, [row("torch_flex", "verified"),
                                                              row("torch_flex", "profiled")])], True)
check("a file without a verified row fails", [good, ("t.py", "t_*", 0, [row("t_a", "skipped")])], True)
check("a run without a report fails", [good, ("t.py", "t_*", 2, None)], True)
check("the backward peers' rows are counted, not judged",
      [good, ("torch_sdpa.py", "torch_sdpa_*_bwd", 1, [row("torch_sdpa_flash_bwd", "verified"),
                                                       row("torch_sdpa_cudnn_bwd", "skipped"),
                                                       row("torch_sdpa_cudnn_bwd", "FAILED")])], False)
raises_ok = [row("raises_in_supports", "ERROR"), row("raises_in_launch", "ERROR"), row("naive", "verified")]
check("py_raises: both ERROR, naive verified", [good, ("py_raises.py", "raises_*", 1, raises_ok)], False)
check("py_raises: a raise that did not become ERROR fails",
      [good, ("py_raises.py", "raises_*", 1, raises_ok[:1] + [row("raises_in_launch", "verified")] + raises_ok[2:])],
      True)
check("py_raises: a lost naive row fails", [good, ("py_raises.py", "raises_*", 1, raises_ok[:2])], True)

for f in failures:
    print("FAIL " + f)
print("%d checks failed" % len(failures) if failures else "all python_plugins_judge checks passed")
sys.exit(1 if failures else 0)
