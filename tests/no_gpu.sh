#!/usr/bin/env bash
# no_gpu.sh ATTNBENCH CASE: on a machine without a GPU, `attnbench verify` must
# say so in exactly one line on stderr, print nothing on stdout and exit 3.
# Skipped (exit 77) where a GPU is present.
bin=$1 case=$2
if "$bin" info >/dev/null 2>&1; then
  echo "skipped: this machine has a GPU"
  exit 77
fi
out=$("$bin" verify "$case" 2>/tmp/attnbench-no-gpu.$$) ; rc=$?
err=$(cat /tmp/attnbench-no-gpu.$$); rm -f /tmp/attnbench-no-gpu.$$
echo "exit $rc; stdout: '$out'; stderr: '$err'"
[ "$rc" = 3 ] || { echo "expected exit 3"; exit 1; }
[ -z "$out" ] || { echo "expected nothing on stdout"; exit 1; }
[ "$(printf '%s\n' "$err" | wc -l)" = 1 ] || { echo "expected one line on stderr"; exit 1; }
printf '%s\n' "$err" | grep -q "no CUDA device\|driver\|no usable CUDA device" || { echo "expected a no-GPU message"; exit 1; }
