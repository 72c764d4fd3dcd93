#!/usr/bin/env bash
# Tool: one of our variants against a peer library at matched clocks (interleaved rounds).
# Our variant against a peer library at matched clocks: ROUNDS rounds, each timing the peer
# (tools/peers.py) and then our variant on the same cases/perf shapes, both with the write
# flush, so that the card's power throttling falls on both sides alike rather than on
# whichever ran second. Each round's pair is judged by `attnbench compare --pair` (bootstrap
# ratio of medians); the summary lists every row of every round with both medians, the SM
# clock each ran at, and the ratio.
#   tools/interleave_peers.sh ROUNDS 'attention-*16-*' flash_ws torch_sdpa_cudnn OUT_DIR
# Needs a GPU, torch, and build/bin/attnbench.
set -uo pipefail
rounds=$1 glob=$2 ours=$3 peer=$4 out=$5
bin=${ATTNBENCH:-build/bin/attnbench}
mkdir -p "$out"
cases=$(ls cases/perf/$glob.toml) || exit 1
for r in $(seq 1 "$rounds"); do
  PYTHONUNBUFFERED=1 python3 tools/peers.py --cases "$glob" --variant "$peer" --report "$out/peer-$r.json" \
    > "$out/peer-$r.txt" 2>&1 || { echo "peers.py failed (round $r): $(tail -1 "$out/peer-$r.txt")"; exit 1; }
  # shellcheck disable=SC2086
  "$bin" run $cases -k "$ours" --wide --flush write --set verify.trials=1 --set verify.max_rows=64 -o "$out/ours-$r.json" \
    > "$out/ours-$r.txt" 2>&1 || { echo "attnbench failed (round $r)"; exit 1; }
  "$bin" compare "$out/peer-$r.json" "$out/ours-$r.json" --pair "$peer=$ours" > "$out/compare-$r.txt" 2>&1
done
# Every row of every round: both medians with the mean SM clock their samples ran at, and
# peer / ours (above 1: ours is faster); compare-N.txt has each round's bootstrap verdicts.
python3 - "$out" "$rounds" "$ours" "$peer" <<'PY'
import json, sys
out, rounds, ours, peer = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
def rows(path, variant):
    got = {}
    for r in json.load(open(path))["rows"]:
        t = r.get("timing")
        if r.get("variant") == variant and t:
            got[(r["case"], r["point"])] = (t["median_ms"], t.get("clock", {}).get("mean_mhz"))
    return got
print("%-36s %-14s %5s %10s %6s %10s %6s %11s" % ("case", "point", "round", peer[:10] + " ms", "MHz", "ours ms", "MHz", "peer / ours"))
for r in range(1, rounds + 1):
    theirs, mine = rows(f"{out}/peer-{r}.json", peer), rows(f"{out}/ours-{r}.json", ours)
    for key in sorted(theirs.keys() & mine.keys()):
        (tp, cp), (to, co) = theirs[key], mine[key]
        mhz = lambda c: "%6.0f" % c if c else "     -"
        print("%-36s %-14s %5d %10.4f %s %10.4f %s %10.3fx" % (key[0], key[1] or "-", r, tp, mhz(cp), to, mhz(co), tp / to))
PY
