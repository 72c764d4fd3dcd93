#!/usr/bin/env bash
# report.sh ATTNBENCH PYTHON FIXTURES OUT_DIR [plots]: `attnbench report` on the json reports
# in FIXTURES (run.json, base.json: written by the report code from made-up rows).
#   without "plots": the interpreter is one that does not exist, so the page must be written
#     without plots and say why, on the page and in one line on stderr;
#   with "plots": PYTHON runs the plot script, and the page must link the PNGs it drew.
#     Skipped (exit 77) when PYTHON has no matplotlib.
bin=$1 python=$2 fixtures=$3 out=$4 mode=${5:-}
fail() { echo "report.sh: $1" >&2; exit 1; }
if [ "$mode" = plots ]; then
  "$python" -c "import matplotlib" 2>/dev/null || { echo "skipped: no matplotlib for $python"; exit 77; }
  export ATTNBENCH_PYTHON=$python
else
  export ATTNBENCH_PYTHON=$out/no-such-python
fi
rm -rf "$out" && mkdir -p "$out"
page=$out/page
"$bin" report "$fixtures/run.json" --compare "$fixtures/base.json" -o "$page" >"$out/stdout" 2>"$out/stderr"; rc=$?
cat "$out/stdout" "$out/stderr"
[ "$rc" = 0 ] || fail "expected exit 0, got $rc"
md=$page/Results.md
[ -f "$md" ] || fail "no $md"
has() { grep -qF -- "$1" "$md" || fail "Results.md lacks: $1"; }
count() { grep -cF -- "$1" "$md"; }

# The card, the run, one section and one table per case, the rows as `run --format md` prints them.
has "# attnbench results: NVIDIA H100 80GB HBM3"
has "- **card:** NVIDIA H100 80GB HBM3, 132 SMs, compute capability 9.0, driver 13.0, CUDA runtime 13.0"
has "- **run:** 2026-11-26T10:00:00Z, attnbench 0.1.0"
has "- **measured ceilings:** copy 2900, read 3250, write 3100 GB/s"
has "## softmax"
has "## attention-bf16-b4-h16-s4096-d128"
[ "$(count "| case | point | variant | status | max abs err |")" = 2 ] || fail "expected one table per case"
has "| softmax | dtype=fp32 cols=1000 | warp_online | verified | 5.96e-08 | 1.90e-08 | - | 0.0128 | 0.3% | - | 1479 | 0.0065 | 51.0% M | 7.43x | 1980 | - | - | - | - | - |  |"
has "| attention-bf16-b4-h16-s4096-d128 | causal=false | flash_fp32 | skipped |"
has "| attention-bf16-b4-h16-s4096-d128 | causal=true | flash_wgmma | FAILED |"
has "12 of 4000 checked elements outside"
[ "$(count '`*` baseline; floor:')" = 1 ] || fail "expected the legend once"
# The comparison, as `compare --format markdown` prints it.
grep -q '^## Compared with .*base\.json$' "$md" || fail "no section for the comparison"
has "6 FAST, 6 SLOW, 11 SAME, 0 UNSURE, 1 FAILED (threshold 5%"

if [ "$mode" = plots ]; then
  for png in throughput-softmax.png throughput-attention-bf16-b4-h16-s4096-d128.png compare.png; do
    has "]($png)"
    head -c 8 "$page/$png" | od -An -c | grep -q "P   N   G" || fail "$png is not a PNG"
  done
  ! grep -q "No plots" "$md" || fail "the page says there are no plots"
  grep -q "^wrote $page/Results.md and 3 plot(s)$" "$out/stdout" || fail "expected 'wrote ... and 3 plot(s)'"
  echo "ok: Results.md with its tables and 3 plots"
else
  grep -q '^> No plots: .*no-such-python could not be started' "$md" || fail "the page does not say why there are no plots"
  ! grep -qF "](" "$md" || fail "an image linked without plots"
  [ "$(wc -l <"$out/stderr")" = 1 ] || fail "expected one line on stderr"
  grep -q "^attnbench: warning: no plots: .*could not be started" "$out/stderr" || fail "expected the warning"
  echo "ok: Results.md with its tables, and why there are no plots"
fi
