#!/usr/bin/env bash
# cheat.sh ATTNBENCH_TESTVARIANTS CASE MODE: test_cheat computes on its first two
# launches only (the verification trials). In `run --mode MODE` the output of its last
# timed launch must fail verification, while the honest variants beside it (naive,
# warp_online) pass the same check. Exit 3 (skipped) where there is no GPU.
bin=$1 case=$2 mode=$3
out=$("$bin" run "$case" --mode "$mode" 2>&1); rc=$?
printf '%s\n' "$out"
if [ "$rc" = 3 ] && printf '%s\n' "$out" | grep -q "no CUDA device\|no usable CUDA device"; then echo "skipped: no GPU"; exit 3; fi
fail() { echo "cheat.sh ($mode): $1" >&2; exit 1; }
[ "$rc" = 1 ] || fail "expected exit 1, got $rc"
printf '%s\n' "$out" | grep -Eq 'naive\* +verified' || fail "expected the baseline naive verified"
printf '%s\n' "$out" | grep -Eq 'warp_online +verified' || fail "expected warp_online verified"
printf '%s\n' "$out" | grep -Eq 'test_cheat +FAILED' || fail "expected test_cheat FAILED"
[ "$(printf '%s\n' "$out" | grep -cE 'test_cheat +FAILED')" = 1 ] || fail "expected exactly one row caught"
# The reason is the row's footnote, folded to the terminal's width: read as one line.
reason=$(printf '%s\n' "$out" | tr '\n' ' ' | tr -s ' ')
printf '%s\n' "$reason" | grep -q "last timed launch ($mode) is wrong" || fail "expected the reason to name mode $mode"
# The cheat left the poisoned output as it was: the device's scan counts all 64 x 256 NaN.
printf '%s\n' "$reason" | grep -q " 16384 NaN/Inf" || fail "expected all 16384 elements counted NaN"
echo "ok: the cheat was caught in $mode mode; the honest variants passed the same check"
