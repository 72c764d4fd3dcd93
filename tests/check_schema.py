#!/usr/bin/env python3
"""Checks attnbench json reports against docs/report.schema.json (JSON Schema 2020-12): attnbench's
own, and the peer reports of tools/peers.py --report.

    python3 tests/check_schema.py REPORT.json...             every report must be valid
    python3 tests/check_schema.py --drift REPORT.json...     the schema must refuse each report
                                                             changed as drift would change it

Needs python3-jsonschema (Debian; .ci/deps installs it). Exit codes: 0 all as expected,
1 a report is invalid (each error on one line: file, where, what) or, with --drift, a
change the schema let through; 2 bad usage or an unreadable file; 77 jsonschema missing
(CTest reports the test as skipped, with the reason).
"""
import argparse
import copy
import json
import os
import sys

SCHEMA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "docs", "report.schema.json")


def load(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        print(f"{path}: error: cannot read json: {e}", file=sys.stderr)
        sys.exit(2)


def where(error):
    return "/" + "/".join(str(p) for p in error.absolute_path)


def errors_of(validator, report):
    return sorted(validator.iter_errors(report), key=lambda e: list(map(str, e.absolute_path)))


def drifts(report):
    """(what, changed report) pairs: each a change the schema must refuse."""
    out = []

    def changed(what, fn):
        r = copy.deepcopy(report)
        if fn(r) is not False:
            out.append((what, r))

    def first_peer(r):
        return next((row for row in r["rows"] if row.get("status") == "peer"), None)

    def first_timing(r):
        for row in r["rows"]:
            if "timing" in row:
                return row["timing"]
        return None

    changed("a key the schema does not know, at the top", lambda r: r.__setitem__("extra", 1))
    changed("a key the schema does not know, in attnbench", lambda r: r["attnbench"].__setitem__("extra", 1))
    changed("a key the schema does not know, in a row", lambda r: r["rows"][0].__setitem__("extra", 1))
    changed("a required key removed from a row", lambda r: r["rows"][0].pop("command"))
    changed("another schema number", lambda r: r.__setitem__("schema", r["schema"] + 1))
    changed("a status the report never writes", lambda r: r["rows"][0].__setitem__("status", "passed"))
    t = first_timing(report)
    if t is not None:
        changed("a key the schema does not know, in a timing", lambda r: first_timing(r).__setitem__("p90_ms", 1.0))
        changed("a time of the wrong type", lambda r: first_timing(r).__setitem__("median_ms", "1.0"))
        changed("a negative time", lambda r: first_timing(r).__setitem__("min_ms", -1.0))
        if "samples_ms" in t:
            changed("a sample of the wrong type", lambda r: first_timing(r)["samples_ms"].__setitem__(0, None))
    if first_peer(report) is not None:
        changed("a peer row without its peer", lambda r: first_peer(r).pop("peer"))
        changed("a key the schema does not know, in a peer", lambda r: first_peer(r)["peer"].__setitem__("extra", 1))
        changed("a peer row without its timing",
                lambda r: [first_peer(r).pop(k) for k in ("timing", "timings", "tflops", "gbps")])
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("reports", nargs="+", metavar="REPORT.json")
    ap.add_argument("--schema", default=SCHEMA, help="the schema file (default: docs/report.schema.json)")
    ap.add_argument("--drift", action="store_true",
                    help="check that the schema refuses each report changed in ways drift would change it")
    args = ap.parse_args()
    try:
        import jsonschema
    except ImportError:
        print("skipped: python3-jsonschema is not installed (.ci/deps installs it; or pip install jsonschema)")
        return 77
    schema = load(args.schema)
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    validator = cls(schema)

    failed = 0
    for path in args.reports:
        report = load(path)
        if args.drift:
            # The report itself must pass, or refusing its changes proves nothing.
            if errors_of(validator, report):
                print(f"{path}: error: not valid to begin with; run without --drift")
                failed += 1
                continue
            cases = drifts(report)
            for what, r in cases:
                if not errors_of(validator, r):
                    print(f"{path}: error: the schema accepts {what}")
                    failed += 1
            print(f"{path}: the schema refuses all {len(cases)} changes")
            continue
        errs = errors_of(validator, report)
        for e in errs[:20]:
            print(f"{path}: error: at {where(e)}: {e.message[:300]}")
        if len(errs) > 20:
            print(f"{path}: ... and {len(errs) - 20} more errors")
        if errs:
            failed += 1
        else:
            rows = report.get("rows", [])
            print(f"{path}: valid (schema {report.get('schema')}, {len(rows)} rows)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
