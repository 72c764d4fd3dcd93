#!/usr/bin/env bash
# One GPU session, in one call (GPU.md): the gpu-labelled CTest tests, `verify
# all`, the perf cases, and the peers on the same card. Logs go to $OUT.
#   tests/gpu_session.sh [PEERS_PY]
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
  2>&1 | tee "$OUT/card.txt"
$bin info --remeasure 2>&1 | tee -a "$OUT/card.txt"
( cd build && ctest -L gpu --output-on-failure ) > "$OUT/ctest-gpu.txt" 2>&1
echo "ctest -L gpu: exit $?"; tail -5 "$OUT/ctest-gpu.txt"
$bin verify all > "$OUT/verify.txt" 2>&1
echo "verify all: exit $?"; grep -E "FAILED|ERROR" "$OUT/verify.txt" | head -20; tail -2 "$OUT/verify.txt"
$bin run cases/perf -o "$OUT/perf.json" 2>&1 | tee "$OUT/perf.txt"
[ -n "${1:-}" ] && PYTHONUNBUFFERED=1 python3 "$1" --json "$OUT/peers.json" 2>&1 | tee "$OUT/peers.txt"
exit 0
