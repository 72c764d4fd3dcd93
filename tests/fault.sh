#!/usr/bin/env bash
# fault.sh ATTNBENCH CASE VARIANT VERIFIED [ARGS...]: a kernel VARIANT that faults on the
# case's third point (rows = 3) must stop the run with exit 3 and one line on stderr naming
# the case, the point and the variant, while -o holds every row finished before it (VERIFIED
# verified rows), in a report that parses, says it is not complete and matches the schema
# (when python3-jsonschema is there). Exit 3 (skipped) without a GPU.
bin=$1 case=$2 variant=$3 expected=$4
shift 4
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
"$bin" verify "$case" "$@" -o "$dir/report.json" >"$dir/stdout" 2>"$dir/stderr"; rc=$?
err=$(cat "$dir/stderr")
echo "exit $rc; stderr: $err"
if [ "$rc" = 3 ] && grep -q "no CUDA device\|no usable CUDA device" "$dir/stderr"; then echo "skipped: no GPU"; exit 3; fi
[ "$rc" = 3 ] || { echo "expected exit 3"; exit 1; }
# A plugin's "compiling plugin ..." progress line may come first; the fault is one line.
[ "$(grep -vc '^attnbench: compiling plugin ' "$dir/stderr")" = 1 ] || { echo "expected one line on stderr"; exit 1; }
grep -q "fault \\[rows=3\\] $variant: " "$dir/stderr" || { echo "expected the case, point and variant"; exit 1; }
[ -s "$dir/report.json" ] || { echo "expected the report on disk"; exit 1; }
grep -q '"complete": false' "$dir/report.json" || { echo "expected \"complete\": false"; exit 1; }
verified=$(grep -c '"status": "verified"' "$dir/report.json")
# The other variants on all three points: on rows=3 they ran, and verified, before the trap.
[ "$verified" = "$expected" ] || { echo "expected $expected verified rows, found $verified"; exit 1; }
grep -q '"status": "ERROR"' "$dir/report.json" || { echo "expected $variant's ERROR row"; exit 1; }
# What a fault leaves is still a report: it must match docs/report.schema.json.
python3 "$(dirname "$0")/check_schema.py" "$dir/report.json"; schema_rc=$?
[ "$schema_rc" = 0 ] || [ "$schema_rc" = 77 ] || { echo "expected a report the schema accepts"; exit 1; }
echo "ok: the fault named its point; the $verified finished rows were on disk"
