#!/usr/bin/env bash
# plot.sh PYTHON SCRIPT FIXTURES OUT_DIR: app/plot/attnbench_plot.py on the json reports in
# FIXTURES draws one throughput PNG per case and, with --compare, compare.png, and lists them
# in plots.json; --peers (tools/peers.py's --json format) adds the peer's line to the plot of
# the case it times and changes no other. Skipped (exit 77) when PYTHON has no matplotlib.
python=$1 script=$2 fixtures=$3 out=$4
fail() { echo "plot.sh: $1" >&2; exit 1; }
"$python" -c "import matplotlib" 2>/dev/null || { echo "skipped: no matplotlib for $python"; exit 77; }
rm -rf "$out"
"$python" "$script" "$fixtures/run.json" --compare "$fixtures/base.json" -o "$out/plain" || fail "exit $? (plain)"
"$python" "$script" "$fixtures/run.json" --peers "$fixtures/peers.json" -o "$out/peers" || fail "exit $? (peers)"
softmax=throughput-softmax.png attention=throughput-attention-bf16-b4-h16-s4096-d128.png
for f in "plain/$softmax" "plain/$attention" plain/compare.png "peers/$softmax" "peers/$attention"; do
  head -c 8 "$out/$f" 2>/dev/null | od -An -c | grep -q "P   N   G" || fail "$f is missing or not a PNG"
done
[ ! -e "$out/peers/compare.png" ] || fail "compare.png without --compare"
"$python" - "$out" "$softmax" "$attention" <<'PY' || fail "plots.json does not list the plots"
import json, sys
out, softmax, attention = sys.argv[1:]
plain = json.load(open(out + "/plain/plots.json"))
peers = json.load(open(out + "/peers/plots.json"))
want = {"softmax": softmax, "attention-bf16-b4-h16-s4096-d128": attention}
assert plain == {"throughput": want, "compare": "compare.png"}, plain
assert peers == {"throughput": want}, peers
PY
! cmp -s "$out/plain/$softmax" "$out/peers/$softmax" || fail "the peer's rows did not change the softmax plot"
cmp -s "$out/plain/$attention" "$out/peers/$attention" || fail "the peers file has no attention rows, yet that plot changed"
echo "ok: PNGs and plots.json; the peer drawn on its case only"
