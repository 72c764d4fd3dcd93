#!/usr/bin/env python3
"""Writes the json reports tests/doc_commands.py puts in place of the files the docs name
(base.json, today.json, peers-report.json, results/part-*.json, ...), from the compare
fixtures that tests/compare/make-samples.py writes:

    base.json           two timed rows of tests/compare/samples-base.json (schema 4)
    new.json            the same two rows from samples-new.json: one SAME, one FAST, so
                        `compare base.json new.json` exits 0 as a doc example should
    peers-old.json      base.json's rows as tools/peers.py --report writes a peer's
    peers-report.json   new.json's rows the same way
    part-0.json, part-1.json
                        new.json as the two parts of a `--shard I/2` run, for `merge`

Run from anywhere: python3 tests/docs/make-fixtures.py (it writes beside itself).
"""
import copy
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
COMPARE = os.path.join(HERE, "..", "compare")
KEEP = ["cols=1000", "cols=16384"]  # SAME and FAST in samples-new.json


def load(name):
    with open(os.path.join(COMPARE, name)) as f:
        return json.load(f)


def keep(report):
    r = copy.deepcopy(report)
    r["rows"] = [row for row in r["rows"] if row["point"] in KEEP]
    assert [row["point"] for row in r["rows"]] == KEEP
    return r


def peers(report):
    """The rows as a peer's, as tools/peers.py's report_row() writes them."""
    r = copy.deepcopy(report)
    r["attnbench"]["version"] = "peers"
    r["attnbench"]["command"] = "python3 tools/peers.py --report peers-report.json"
    for row in r["rows"]:
        row.pop("verify", None)
        row.pop("verify_time", None)
        for k in ("floor_ms", "floor_compute_ms", "floor_memory_ms", "bound", "pct_of_floor"):
            row.pop(k, None)
        row.update(variant="torch_softmax", status="peer",
                   command="python3 tools/peers.py --cases softmax-fp32 --variant torch_softmax --flush read",
                   peer={"library": "torch", "version": "2.9.0", "backend": "softmax", "flush": "read"})
    return r


def part(report, index):
    r = copy.deepcopy(report)
    points = [[row["case"], row["point"]] for row in report["rows"]]
    r["attnbench"]["command"] += f" --shard {index}/2"
    r["plan"] = {"by": "shard", "index": index, "count": 2, "points": points, "done": [index]}
    r["rows"] = [report["rows"][index]]
    return r


def write(name, doc):
    with open(os.path.join(HERE, name), "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


base, new = keep(load("samples-base.json")), keep(load("samples-new.json"))
write("base.json", base)
write("new.json", new)
write("peers-old.json", peers(base))
write("peers-report.json", peers(new))
for i in range(2):
    write(f"part-{i}.json", part(new, i))
