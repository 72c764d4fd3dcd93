#!/usr/bin/env bash
# One GPU session (GPU.md) in two calls on the same machine, each under the device's
# 10-minute limit: the gpu-labelled CTest tests and `verify all`, then every timing on
# its own, with the peers, so that all timings compare within one call. Logs go to $OUT.
#   tests/gpu_session.sh verify           # ctest -L gpu beside `verify all`
#   tests/gpu_session.sh perf [PEERS_PY]  # perf cases, write flush, block sizes, peers
# Expects build/bin (built here for sm_90a) and build's CTestTestfile.cmake files,
# whose absolute paths are this checkout's: the script links that path to here.
set -uo pipefail
OUT=${OUT:-out}
mkdir -p "$OUT"
here=$(pwd)
src=$(sed -n 's/^# Source directory: //p' build/CTestTestfile.cmake)
if [ -n "$src" ] && [ "$src" != "$here" ] && [ ! -e "$src" ]; then
  mkdir -p "$(dirname "$src")" && ln -s "$here" "$src"
fi
bin=build/bin/attnbench
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv; date -u; } \
  2>&1 | tee -a "$OUT/card.txt"
case "${1:-}" in
verify)
  # `verify all` as eight processes (the fp64 references are the long part: cases/perf
  # alone took over five minutes in one process on an H200 machine).
  ( cd build && ctest -L gpu --output-on-failure ) > "$OUT/ctest-gpu.txt" 2>&1 &
  n=0
  for set in "cases/perf/attention-*" "cases/perf/decode-* cases/perf/pipeline-*" "cases/perf/paged-*" \
    "cases/perf/gemm-* cases/perf/softmax-*" "cases/attention" "cases/softmax cases/gemm" \
    "cases/decode cases/paged cases/pipeline" "cases/smoke"; do
    n=$((n + 1))
    # shellcheck disable=SC2086  # the globs are meant to expand here
    $bin verify $set > "$OUT/verify-$n.txt" 2>&1 &
  done
  wait
  tail -5 "$OUT/ctest-gpu.txt"
  cat "$OUT"/verify-[0-9].txt > "$OUT/verify.txt" && rm -f "$OUT"/verify-[0-9].txt
  grep -E "passed,|FAILED|ERROR" "$OUT/verify.txt"
  ;;
perf)
  # Timings alone on the card, one verification trial of 64 rows each (`verify` did the rest).
  q=(--set verify.trials=1 --set verify.max_rows=64)
  $bin info --remeasure 2>&1 | tee -a "$OUT/card.txt"
  $bin run cases/perf "${q[@]}" -o "$OUT/perf.json" 2>&1 | tee "$OUT/perf.txt"
  $bin run cases/perf/decode-*.toml -k split_kv --set baseline=split_kv --flush write "${q[@]}" 2>&1 |
    tee "$OUT/perf-write.txt"
  $bin run cases/perf/paged-*-b8-ctx32768.toml -k paged_flash --set baseline=paged_flash \
    --set "shape.block_size=[8,32]" "${q[@]}" 2>&1 | tee "$OUT/perf-blocks.txt"
  if [ -n "${2:-}" ]; then
    PYTHONUNBUFFERED=1 python3 "$2" --json "$OUT/peers.json" 2>&1 | tee "$OUT/peers.txt"
    PYTHONUNBUFFERED=1 python3 tests/peer_decode_flush.py 2>&1 | tee "$OUT/peers-flush.txt"
  fi
  ;;
*)
  echo "usage: tests/gpu_session.sh verify | perf [PEERS_PY]" >&2
  exit 2
  ;;
esac
exit 0
