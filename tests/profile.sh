#!/usr/bin/env bash
# profile.sh ATTNBENCH CASE_DIR OUT_DIR: `run --profile` on the GPU (docs/profiling.md).
#  1. `run CASE_DIR/softmax.toml --profile -o OUT_DIR/profile.json` exits 0; every verified row
#     says "profiled" with its NVTX ranges and shows no time; the json has no "timing", a
#     "profiled" string on every verified row and "timing_mode": "profile".
#  2. Where Nsight Compute is installed and may read the counters: the --nvtx-include string a
#     row gives selects exactly that variant's one launch (not the verification's launches,
#     the warm-up or another variant's), and --launch-skip counts only the included launches.
# Exit 3 (skipped) without a GPU.
bin=$1 cases=$2 out=$3
mkdir -p "$out"
json="$out/profile.json"
fail() { echo "profile.sh: $1" >&2; exit 1; }

table=$("$bin" run "$cases/softmax.toml" --profile -o "$json" 2>&1); rc=$?
printf '%s\n' "$table"
if [ "$rc" = 3 ] && printf '%s\n' "$table" | grep -q "no CUDA device\|no usable CUDA device"; then echo "skipped: no GPU"; exit 3; fi
[ "$rc" = 0 ] || fail "expected exit 0, got $rc"
verified=$(printf '%s\n' "$table" | grep -Ec '^  .* verified ')
profiled=$(printf '%s\n' "$table" | grep -Ec '^  .* verified .* profiled +- +- ')
[ "$verified" -gt 0 ] || fail "expected verified rows"
[ "$profiled" = "$verified" ] || fail "$profiled of $verified verified rows show 'profiled' and no timing"
printf '%s\n' "$table" | grep -q "profiled: --nvtx-include 'softmax/dtype=fp32 cols=1000/warp_online/'" ||
  fail "expected the row's NVTX ranges under it"
grep -q '"timing_mode": "profile"' "$json" || fail "the json does not say timing_mode profile"
! grep -q '"timing":' "$json" || fail "the json has timings"
[ "$(grep -c '"profiled": "softmax/' "$json")" = "$(grep -c '"status": "verified"' "$json")" ] ||
  fail "not every verified row in the json has its \"profiled\" ranges"

if ! command -v ncu >/dev/null; then echo "ok (ncu not installed: the Nsight Compute part not run)"; exit 0; fi
# ncu_kernels ARGS...: the kernels ncu profiled, one name a line; exit 3 when ncu may not read the counters.
ncu_kernels() {
  local log
  log=$(ncu --nvtx "$@" "$bin" run "$cases/softmax.toml" --profile 2>&1)
  if printf '%s\n' "$log" | grep -q "ERR_NVGPUCTRPERM"; then echo "skipped: ncu may not read the GPU counters" >&2; exit 3; fi
  printf '%s\n' "$log" | sed -n 's/^==PROF== Profiling "\([^"]*\)".*/\1/p'
}
one=$(ncu_kernels --nvtx-include 'softmax/dtype=fp32 cols=1000/warp_online/') || exit $?
echo "ncu, one variant: $one"
[ "$(printf '%s\n' "$one" | grep -c .)" = 1 ] || fail "expected ncu to profile 1 kernel for warp_online, got: $one"
printf '%s\n' "$one" | grep -q warp_online || fail "expected the warp_online kernel, got: $one"
all=$(ncu_kernels --nvtx-include 'softmax/dtype=fp32 cols=1000/') || exit $?
echo "ncu, every variant: $all"
[ "$(printf '%s\n' "$all" | grep -c .)" = 3 ] || fail "expected 3 kernels (one launch per variant of the point), got: $all"
second=$(ncu_kernels --nvtx-include 'softmax/dtype=fp32 cols=1000/' --launch-skip 1 --launch-count 1) || exit $?
echo "ncu, --launch-skip 1: $second"
printf '%s\n' "$second" | grep -q block_reduce || fail "expected --launch-skip 1 to pick block_reduce, got: $second"
echo "ok: profiled rows, json and Nsight Compute's selection"
