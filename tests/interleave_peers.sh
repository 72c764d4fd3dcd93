#!/usr/bin/env bash
# Our variant against a peer library at matched clocks: ROUNDS rounds, each timing the peer
# (tests/peers.py) and then our variant on the same cases/perf shapes, both with the write
# flush, so that the card's power throttling falls on both sides alike rather than on
# whichever ran second. Each round's pair is judged by `attnbench compare --pair` (bootstrap
# ratio of medians, the SM clock of every row beside it); the summary lists each row's ratio
# in every round.
#   tests/interleave_peers.sh ROUNDS 'attention-*16-*' flash_ws torch_sdpa_cudnn OUT_DIR
# Needs a GPU, torch, and build/bin/attnbench.
set -uo pipefail
rounds=$1 glob=$2 ours=$3 peer=$4 out=$5
bin=${ATTNBENCH:-build/bin/attnbench}
mkdir -p "$out"
cases=$(ls cases/perf/$glob.toml) || exit 1
for r in $(seq 1 "$rounds"); do
  PYTHONUNBUFFERED=1 python3 tests/peers.py --cases "$glob" --variant "$peer" --report "$out/peer-$r.json" \
    > "$out/peer-$r.txt" 2>&1 || { echo "peers.py failed (round $r): $(tail -1 "$out/peer-$r.txt")"; exit 1; }
  # shellcheck disable=SC2086
  "$bin" run $cases -k "$ours" --flush write --set verify.trials=1 --set verify.max_rows=64 -o "$out/ours-$r.json" \
    > "$out/ours-$r.txt" 2>&1 || { echo "attnbench failed (round $r)"; exit 1; }
  "$bin" compare "$out/peer-$r.json" "$out/ours-$r.json" --pair "$peer=$ours" > "$out/compare-$r.txt" 2>&1
done
# One line per row: case, point and NEW/OLD time ratio (below 1: ours is faster) of every round.
for r in $(seq 1 "$rounds"); do
  grep -E " $ours " "$out/compare-$r.txt" | sed "s/^/round $r: /"
done
