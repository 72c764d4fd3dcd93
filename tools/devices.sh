#!/usr/bin/env bash
# Tool: the two-GPU figures of docs/cluster.md (--devices and merge against one GPU), by hand.
# devices.sh OUT: the multi-GPU measurements of --devices and merge, on a machine with two
# GPUs (by hand, or from the device session; docs/cluster.md). Writes its logs under OUT:
#   1. after a warm-up, `verify all` on GPU 0 alone, on --devices 0,1, and on GPU 0 alone
#      again: wall and CPU times (how many of the host's cores each kept busy: the fp64
#      references compete for them), the same rows. Whichever run comes first on a fresh
#      machine is slower (bench notes runs 182-183: 1.96x with one GPU first, 1.78x with two
#      GPUs first), hence the one-GPU runs on both sides;
#   2. a 64-point sweep, timed, on GPU 0 alone and on --devices 0,1: wall times, and
#      `attnbench compare` of the two (each point's timing within noise: no interference);
#   3. smoke cases as --shard 0/2 and 1/2 merged by `attnbench merge`, against one run.
set -uo pipefail
out=${1:-out}; mkdir -p "$out"
bin=build/bin/attnbench
same_rows() {  # the rows' identity and status, in order
  python3 - "$1" "$2" <<'PY'
import json, sys
rows = [[(r["case"], r["point"], r["variant"], r["status"]) for r in json.load(open(f))["rows"]] for f in sys.argv[1:]]
print("rows:", len(rows[0]), "and", len(rows[1]), "- same rows in the same order:" , rows[0] == rows[1])
if rows[0] != rows[1]:
    a, b = set(rows[0]), set(rows[1])
    print("only in first:", sorted(a - b)[:10]); print("only in second:", sorted(b - a)[:10])
PY
}
sweep=(run softmax-fp32-32768x4096 -k warp_online --set 'shape.rows=[2048,4096,8192,16384,24576,32768,49152,65536]'
       --set 'shape.cols=[512,1024,1536,2048,3072,4096,6144,8192]')

# timed NAME COMMAND...: COMMAND's output to NAME.txt; NAME.time gets its wall seconds and the
# CPU seconds (user + system) of it and of the workers it waits for.
timed() {
  local name=$1 TIMEFORMAT='%R %U %S'
  shift
  { time "$@" > "$out/$name.txt" 2>&1; } 2> "$out/$name.time"
}
# speedup WHAT NAME1 RC1 NAME2 RC2: one summary line, with how many cores each run kept busy.
speedup() {
  python3 - "$out" "$@" "$(nproc)" <<'PY' | tee -a "$out/summary.txt"
import sys
out, what, n1, rc1, n2, rc2, cores = sys.argv[1:]
def t(n):
    wall, user, sys_ = map(float, open(f"{out}/{n}.time").read().split()[-3:])
    return wall, user + sys_
(a, ca), (b, cb) = t(n1), t(n2)
print(f"{what}: 1 GPU {a:.1f} s (exit {rc1}; CPU {ca:.0f} s, {ca / a:.1f} of {cores} cores busy), "
      f"2 GPUs {b:.1f} s (exit {rc2}; CPU {cb:.0f} s, {cb / b:.1f} busy): {a / b:.2f}x")
PY
}

# The warm-up: both GPUs' first contexts, the binary and the cases in the page cache.
$bin verify smoke --devices 0,1 > "$out/warm-up.txt" 2>&1
timed verify-1gpu $bin verify all --device 0 -o "$out/verify-1gpu.json"; rc1=$?
timed verify-2gpu $bin verify all --devices 0,1 -o "$out/verify-2gpu.json"; rc2=$?
timed verify-1gpu-again $bin verify all --device 0 -o "$out/verify-1gpu-again.json"; rc3=$?
: > "$out/summary.txt"
speedup "verify all (one GPU before)" verify-1gpu $rc1 verify-2gpu $rc2
speedup "verify all (one GPU after)" verify-1gpu-again $rc3 verify-2gpu $rc2
tail -q -n 1 "$out/verify-1gpu.txt" "$out/verify-2gpu.txt" | tee -a "$out/summary.txt"
same_rows "$out/verify-1gpu.json" "$out/verify-2gpu.json" | tee -a "$out/summary.txt"

# Both cards' ceilings into the cache first: a timed run would measure them inside its time.
$bin info --device 0 > "$out/info-0.txt" 2>&1
$bin info --device 1 > "$out/info-1.txt" 2>&1
timed sweep-1gpu $bin "${sweep[@]}" --device 0 -o "$out/sweep-1gpu.json"; rc1=$?
timed sweep-2gpu $bin "${sweep[@]}" --devices 0,1 -o "$out/sweep-2gpu.json"; rc2=$?
speedup "sweep of 64 points" sweep-1gpu $rc1 sweep-2gpu $rc2
same_rows "$out/sweep-1gpu.json" "$out/sweep-2gpu.json" | tee -a "$out/summary.txt"
$bin compare "$out/sweep-1gpu.json" "$out/sweep-2gpu.json" > "$out/sweep-compare.txt" 2>&1
tail -3 "$out/sweep-compare.txt" | tee -a "$out/summary.txt"

$bin verify smoke --device 0 -o "$out/smoke-whole.json" > /dev/null 2>&1
$bin verify smoke --shard 0/2 --device 0 -o "$out/smoke-0.json" > /dev/null 2>&1
$bin verify smoke --shard 1/2 --device 1 -o "$out/smoke-1.json" > /dev/null 2>&1
$bin merge "$out/smoke-0.json" "$out/smoke-1.json" -o "$out/smoke-merged.json" | tee -a "$out/summary.txt"
same_rows "$out/smoke-whole.json" "$out/smoke-merged.json" | sed 's/^/shard+merge vs one run: /' | tee -a "$out/summary.txt"
python3 tests/check_schema.py "$out/verify-2gpu.json" "$out/smoke-merged.json" "$out/smoke-0.json" 2>&1 | tail -2 | tee -a "$out/summary.txt"

# 4. A worker that faults (test_trap on the rows = 3 point): exit 3, one line naming the GPU,
#    the other worker's rows and the finished ones kept, the faulted point's ERROR row.
build/bin/attnbench_testvariants verify tests/cli/fault.toml --devices 0,1 -o "$out/fault-2gpu.json" \
  > "$out/fault-2gpu.txt" 2> "$out/fault-2gpu.err"; rc=$?
echo "a faulting worker: exit $rc; stderr: $(grep -v '^devices ' "$out/fault-2gpu.err")" | tee -a "$out/summary.txt"
python3 - "$out/fault-2gpu.json" <<'PY' | tee -a "$out/summary.txt"
import json, sys, collections
r = json.load(open(sys.argv[1]))
print("  rows by status:", dict(collections.Counter(x["status"] for x in r["rows"])), "complete:", r["attnbench"]["complete"])
for x in r["rows"]:
    if x["status"] == "ERROR": print("  ERROR", x["case"], x["point"], x["variant"], "-", x.get("reason", "")[:160])
PY
