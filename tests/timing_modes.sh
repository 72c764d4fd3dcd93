#!/usr/bin/env bash
# timing_modes.sh ATTNBENCH SMOKE_DIR: `run --mode all --interleave 3` on the softmax and
# decode smoke cases. Every timed row has the four modes; its cold graph rotated over
# copies of the point's tensors that together are over twice the L2, and graph_hot used
# one; every row was timed in three rounds; every speedup but the baseline's has a 95%
# interval around it. Exit 3 (skipped) without a GPU.
# max_time_ms stops a round whatever its sample count (docs/measuring.md), so it is set far
# above what ten samples take: at 90 ms, a GPU shared with `verify all` (run 275) gave one
# softmax row 19 samples in its three rounds, and the >= 3 x 10 assertion below failed for the
# wrong reason.
bin=$1 smoke=$2
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
"$bin" run "$smoke/softmax.toml" "$smoke/decode.toml" --mode all --interleave 3 --set verify.trials=1 \
  --set bench.warmup_ms=1 --set bench.min_time_ms=3 --set bench.max_time_ms=1500 -o "$dir/run.json" \
  >"$dir/stdout" 2>"$dir/stderr"; rc=$?
if [ "$rc" = 3 ] && grep -q "no CUDA device\|no usable CUDA device" "$dir/stderr"; then echo "skipped: no GPU"; exit 3; fi
[ "$rc" = 0 ] || { echo "run failed: exit $rc"; cat "$dir/stderr"; exit 1; }
grep -q "hot ms  *graph ms  *graph hot ms" "$dir/stdout" || { echo "expected the three extra mode columns"; exit 1; }
python3 - "$dir/run.json" <<'PY' || exit 1
import json, sys
doc = json.load(open(sys.argv[1]))
assert doc["schema"] >= 4, doc["schema"]
l2 = doc["device"]["l2_bytes"]
rows = [r for r in doc["rows"] if r.get("timing")]
assert rows, "no timed rows"
for r in rows:
    name = f"{r['case']} {r['point']} {r['variant']}"
    t = r["timings"]
    assert set(t) == {"cold", "hot", "graph", "graph_hot"}, (name, sorted(t))
    copies = t["graph"]["copies"]
    assert copies >= 2, (name, copies)  # smoke points are far below twice the L2
    assert "copies" not in t["graph_hot"], name
    assert r["rounds"] == 3, (name, r.get("rounds"))
    # Every round takes its own minimum of samples: at least 3 x 10.
    assert r["timing"]["samples"] >= 30, (name, r["timing"]["samples"])
    if r["baseline"]:
        assert "speedup_ci" not in r, name
    else:
        lo, hi = r["speedup_ci"]
        # The interval's ends are 1 / (now / base) of resampled medians: equal to the speedup
        # itself, when they are, only to the last bit.
        assert lo * (1 - 1e-12) <= r["speedup"] <= hi * (1 + 1e-12), (name, lo, r["speedup"], hi)
print(f"ok: {len(rows)} rows, four modes each, cold graphs over copies, three rounds, speedup intervals")
PY
