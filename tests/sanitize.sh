#!/usr/bin/env bash
# sanitize.sh ATTNBENCH CASES: runs `attnbench verify CASES` under
# compute-sanitizer's memcheck and racecheck; both must report no errors. One verification trial
# of at most 64 rows a point: every variant's launches run whole under the tool all the same (what
# it watches), while the trials and the rows checked are the host's work, not the kernels' (run
# 278: the default trials took smoke past 240 s under memcheck alone).
# Exit 3 (skipped) without a GPU.
bin=$1 cases=$2
if ! "$bin" info >/dev/null 2>&1; then echo "skipped: no GPU"; exit 3; fi
san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
[ -x "$san" ] || { echo "compute-sanitizer not found"; exit 1; }
for tool in memcheck racecheck; do
  echo "== $tool"
  "$san" --tool "$tool" --error-exitcode 99 "$bin" verify "$cases" --set verify.trials=1 --set verify.max_rows=64 || { echo "$tool failed"; exit 1; }
done
