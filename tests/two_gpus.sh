#!/usr/bin/env bash
# two_gpus.sh ATTNBENCH CASES: `verify CASES --devices 0,1` must report the rows, in the order
# and with the statuses, of `verify CASES` on GPU 0 alone, in one report that names both
# parts. Exit 3 (skipped) on a machine with fewer than two GPUs.
bin=$1 cases=$2
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
if [ "${gpus:-0}" -lt 2 ]; then echo "skipped: ${gpus:-0} GPU(s), two needed"; exit 3; fi
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
"$bin" verify "$cases" --device 0 -o "$dir/one.json" > "$dir/one.txt" 2>&1 || { cat "$dir/one.txt"; exit 1; }
"$bin" verify "$cases" --devices 0,1 -o "$dir/two.json" > "$dir/two.txt" 2>&1 || { cat "$dir/two.txt"; exit 1; }
python3 - "$dir/one.json" "$dir/two.json" <<'PY'
import json, sys
one, two = (json.load(open(f)) for f in sys.argv[1:])
key = lambda r: (r["case"], r["point"], r["variant"], r["status"])
a, b = [key(r) for r in one["rows"]], [key(r) for r in two["rows"]]
print(f"{len(a)} rows on one GPU, {len(b)} on two")
if a != b:
    print("only on one GPU:", sorted(set(a) - set(b))[:5], "only on two:", sorted(set(b) - set(a))[:5])
    sys.exit(1)
parts = two.get("parts", [])
if len(parts) != 2:
    print(f"expected the report to name 2 parts, found {len(parts)}")
    sys.exit(1)
print("ok: the same rows in the same order, from", [p["device"]["name"] for p in parts])
PY
