#!/usr/bin/env bash
# no_gpu.sh ATTNBENCH CASE: on a machine without a GPU, `attnbench verify` must
# say so in exactly one line on stderr, print nothing on stdout and exit 3, on one
# GPU and spread over several (--devices: the workers find no GPU either).
# Skipped (exit 77) where a GPU is present.
bin=$1 case=$2
if "$bin" info >/dev/null 2>&1; then
  echo "skipped: this machine has a GPU"
  exit 77
fi
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
for spread in "" "--devices 0,1" "--devices all"; do
  # shellcheck disable=SC2086 # $spread is two words or none
  out=$("$bin" verify "$case" $spread -o "$dir/out.json" 2>"$dir/err") ; rc=$?
  err=$(cat "$dir/err")
  echo "verify $spread: exit $rc; stdout: '$out'; stderr: '$err'"
  [ "$rc" = 3 ] || { echo "expected exit 3"; exit 1; }
  [ -z "$out" ] || { echo "expected nothing on stdout"; exit 1; }
  [ "$(printf '%s\n' "$err" | wc -l)" = 1 ] || { echo "expected one line on stderr"; exit 1; }
  printf '%s\n' "$err" | grep -q "no CUDA device\|driver\|no usable CUDA device" || { echo "expected a no-GPU message"; exit 1; }
  [ ! -e "$dir/out.json.parts" ] || { echo "expected no workers' folder left behind"; exit 1; }
done
