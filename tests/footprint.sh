#!/usr/bin/env bash
# footprint.sh ATTNBENCH SMOKE_DIR: every timed row of the attention and decode smoke cases
# carries its kernels' footprint, read from a captured launch: each kernel's grid, block,
# registers and resident blocks per SM (our kernels and cuBLAS's alike); the naive rung's
# workspace (the O(N^2) score matrix) is larger than flash_mma's; a variant's kernels show
# in the table's regs column. Exit 3 (skipped) without a GPU.
bin=$1 smoke=$2
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
"$bin" run "$smoke/attention.toml" "$smoke/decode.toml" --wide --set verify.trials=1 --set bench.warmup_ms=1 \
  --set bench.min_time_ms=2 --set bench.max_time_ms=5 -o "$dir/run.json" >"$dir/stdout" 2>"$dir/stderr"; rc=$?
if [ "$rc" = 3 ] && grep -q "no CUDA device\|no usable CUDA device" "$dir/stderr"; then echo "skipped: no GPU"; exit 3; fi
[ "$rc" = 0 ] || { echo "run failed: exit $rc"; cat "$dir/stderr"; exit 1; }
grep -q "regs  *smem  *blk/SM  *waves  *memory" "$dir/stdout" || { echo "expected the footprint columns"; exit 1; }
python3 - "$dir/run.json" <<'PY' || exit 1
import json, sys
rows = [r for r in json.load(open(sys.argv[1]))["rows"] if r["status"] == "verified"]
assert rows, "no verified rows"
by_point = {}
for r in rows:
    f = r.get("footprint")
    assert f and not f.get("error"), f"{r['case']} {r['point']} {r['variant']}: no footprint: {f}"
    assert f["kernels"], f"{r['variant']}: no kernel captured"
    for k in f["kernels"]:
        assert k["blocks"] > 0 and k["threads"] > 0, k
        assert k.get("registers", 0) > 0 and k.get("blocks_per_sm", 0) > 0, f"{r['variant']}: {k}"
        assert k.get("waves", 0) > 0, k
    by_point.setdefault((r["case"], r["point"]), {})[r["variant"]] = f
for (case, point), variants in by_point.items():
    assert len({f["tensor_bytes"] for f in variants.values()}) == 1, f"{case} {point}: tensor bytes differ"
    if "flash_mma" in variants:
        assert any(k["name"].startswith("flash") and "<" not in k["name"] for k in variants["flash_mma"]["kernels"]), variants["flash_mma"]
    if "naive" in variants and "flash_mma" in variants and case == "attention":
        assert variants["naive"]["workspace_bytes"] > variants["flash_mma"]["workspace_bytes"], (case, point)
    if "cublas" in variants:  # a library's kernels are read too
        assert variants["cublas"]["kernels"], (case, point)
print(f"ok: {len(rows)} rows, each with its kernels' footprint")
PY
