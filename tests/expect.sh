#!/usr/bin/env bash
# expect.sh [--gpu] CODE REGEX COMMAND...
# Passes when COMMAND exits with CODE and its output (stdout and stderr) matches
# the extended regex REGEX. With --gpu, exit code 3 (no GPU) is passed through so
# CTest reports the test as skipped (SKIP_RETURN_CODE 3).
gpu=0
if [ "$1" = "--gpu" ]; then gpu=1; shift; fi
code=$1 regex=$2
shift 2
out=$("$@" 2>&1)
rc=$?
if [ $gpu = 1 ] && [ $rc = 3 ] && [ "$code" != 3 ]; then
  echo "skipped: no GPU ($out)"
  exit 3
fi
printf '%s\n' "$out"
if [ "$rc" != "$code" ]; then
  echo "expect.sh: exit code $rc, expected $code" >&2
  exit 1
fi
if ! printf '%s\n' "$out" | grep -Eq -- "$regex"; then
  echo "expect.sh: output does not match /$regex/" >&2
  exit 1
fi
exit 0
