#!/usr/bin/env bash
# fault.sh ATTNBENCH_TESTVARIANTS CASE: a kernel that faults on the case's third
# point (test_trap) must stop the run with exit 3 and one line on stderr naming the
# case, the point and the variant, while -o holds every row finished before it, in a
# report that parses, says it is not complete and matches the schema (when
# python3-jsonschema is there). Exit 3 (skipped) without a GPU.
bin=$1 case=$2
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
"$bin" verify "$case" -o "$dir/report.json" >"$dir/stdout" 2>"$dir/stderr"; rc=$?
err=$(cat "$dir/stderr")
echo "exit $rc; stderr: $err"
if [ "$rc" = 3 ] && grep -q "no CUDA device\|no usable CUDA device" "$dir/stderr"; then echo "skipped: no GPU"; exit 3; fi
[ "$rc" = 3 ] || { echo "expected exit 3"; exit 1; }
[ "$(wc -l <"$dir/stderr")" = 1 ] || { echo "expected one line on stderr"; exit 1; }
grep -q 'fault \[rows=3\] test_trap: ' "$dir/stderr" || { echo "expected the case, point and variant"; exit 1; }
[ -s "$dir/report.json" ] || { echo "expected the report on disk"; exit 1; }
grep -q '"complete": false' "$dir/report.json" || { echo "expected \"complete\": false"; exit 1; }
verified=$(grep -c '"status": "verified"' "$dir/report.json")
# naive and warp_online on all three points: on rows=3 they ran, and verified, before the trap.
[ "$verified" = 6 ] || { echo "expected 6 verified rows (naive and warp_online, each point), found $verified"; exit 1; }
grep -q '"status": "ERROR"' "$dir/report.json" || { echo "expected test_trap's ERROR row"; exit 1; }
# What a fault leaves is still a report: it must match docs/report.schema.json.
python3 "$(dirname "$0")/check_schema.py" "$dir/report.json"; schema_rc=$?
[ "$schema_rc" = 0 ] || [ "$schema_rc" = 77 ] || { echo "expected a report the schema accepts"; exit 1; }
echo "ok: the fault named its point; the $verified finished rows were on disk"
