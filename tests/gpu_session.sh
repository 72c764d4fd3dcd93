#!/usr/bin/env bash
# One GPU session, in one call (GPU.md): the gpu-labelled CTest tests, `verify
# all`, the perf cases, and the peers on the same card. Logs go to $OUT.
#   tests/gpu_session.sh [PEERS_PY]
# Expects build/bin (built here for sm_90a) and build's CTestTestfile.cmake files,
# whose absolute paths are this checkout's: the script links that path to here.
# `verify all` runs as four processes beside the CTest tests (one process takes
# over five minutes on an H200 machine: the fp64 references are the long part);
# timings run alone afterwards, so that nothing shares the card with them.
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
  2>&1 | tee "$OUT/card.txt"
$bin info --remeasure 2>&1 | tee -a "$OUT/card.txt"
( cd build && ctest -L gpu --output-on-failure ) > "$OUT/ctest-gpu.txt" 2>&1 &
$bin verify cases/perf > "$OUT/verify-1.txt" 2>&1 &
$bin verify cases/attention cases/softmax > "$OUT/verify-2.txt" 2>&1 &
$bin verify cases/decode cases/paged cases/pipeline > "$OUT/verify-3.txt" 2>&1 &
$bin verify cases/smoke cases/gemm > "$OUT/verify-4.txt" 2>&1 &
wait
tail -5 "$OUT/ctest-gpu.txt"
cat "$OUT"/verify-[1-4].txt > "$OUT/verify.txt" && rm -f "$OUT"/verify-[1-4].txt
grep -E "passed,|FAILED|ERROR" "$OUT/verify.txt"
$bin run cases/perf -o "$OUT/perf.json" 2>&1 | tee "$OUT/perf.txt"
$bin run cases/perf/decode-*.toml -k split_kv --set baseline=split_kv --flush write 2>&1 | tee "$OUT/perf-write.txt"
if [ -n "${1:-}" ]; then
  PYTHONUNBUFFERED=1 python3 "$1" --json "$OUT/peers.json" 2>&1 | tee "$OUT/peers.txt"
  PYTHONUNBUFFERED=1 python3 tests/peer_decode_flush.py 2>&1 | tee "$OUT/peers-flush.txt"
fi
exit 0
