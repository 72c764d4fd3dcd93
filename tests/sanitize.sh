#!/usr/bin/env bash
# sanitize.sh ATTNBENCH CASES: runs `attnbench verify CASES` under
# compute-sanitizer's memcheck and racecheck; both must report no errors.
# Exit 3 (skipped) without a GPU.
bin=$1 cases=$2
if ! "$bin" info >/dev/null 2>&1; then echo "skipped: no GPU"; exit 3; fi
san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
[ -x "$san" ] || { echo "compute-sanitizer not found"; exit 1; }
for tool in memcheck racecheck; do
  echo "== $tool"
  "$san" --tool "$tool" --error-exitcode 99 "$bin" verify "$cases" || { echo "$tool failed"; exit 1; }
done
