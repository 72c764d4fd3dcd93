#!/usr/bin/env bash
# Tool: a whole GPU session in one device call: gpu CTest tests, `verify all`, perf cases, peers.
# One GPU session: the gpu-labelled CTest tests and `verify all`, then every timing on its
# own with the peers (tools/peers.py), so that all timings compare within one call. Logs go
# to $OUT.
#   tools/gpu_session.sh all [PEERS_PY]    # everything below in one call (~6 min on an H200)
#   tools/gpu_session.sh verify            # ctest -L gpu beside `verify all`
#   tools/gpu_session.sh perf [PEERS_PY]   # perf cases, write flush, block sizes, peers
#   tools/gpu_session.sh compare OLD_BIN [OLD_TREE]
#                                          # perf cases with OLD_BIN, then with build/bin, then
#                                          # `attnbench compare` of the two (a refactor's proof);
#                                          # OLD_TREE: a folder with the old commit's cases/perf
#                                          # (git archive OLD cases/perf | tar -x -C DIR), for
#                                          # when cases changed since; PAIRS (env): --pair args
#   tools/gpu_session.sh python              # the Python peers as variants (kernels/peers, the
#                                          # Triton examples) on cases/perf's prefill, softmax and
#                                          # gemm shapes, timed by attnbench (write flush), then the
#                                          # same kernels by triton's do_bench (tools/do_bench_check.py),
#                                          # and the backward beside SDPA's backward kernels
#   tools/gpu_session.sh pending 1|2|3|4|5|6|7|9|10|11|12|13 [SECONDS]
#                                          # the rungs not yet run on a GPU (the list in pending()
#                                          # below, kept by the session that wrote them; the bench
#                                          # notes give each one's prediction): their verification,
#                                          # sanitizers and repeats side by side, then their timings
#                                          # (part 1), then what else is due (part 2); every step
#                                          # under its own timeout, within SECONDS (each part fills
#                                          # one call)
#   tools/gpu_session.sh soak memcheck|racecheck|seeds [SECONDS]
#                                          # the soak after a kernel change: every case folder
#                                          # but perf under memcheck, the shared-memory kernels
#                                          # under racecheck, or 10 seeds of every case folder
#                                          # but perf; each stops cleanly after SECONDS
# PEERS_PY defaults to this repo's tools/peers.py. `all` leaves out perf's extras (paged
# block sizes 8/32, peer_decode_flush.py) so that it fits the device's 10-minute limit.
# Expects build/bin (built here for sm_90a) and build's CTestTestfile.cmake files, whose
# absolute paths are this checkout's: the script links that path to here.
set -uo pipefail
OUT=${OUT:-out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)  # absolute: compare runs the old binary from another folder
here=$(pwd)
src=$(sed -n 's/^# Source directory: //p' build/CTestTestfile.cmake)
if [ -n "$src" ] && [ "$src" != "$here" ] && [ ! -e "$src" ]; then
  mkdir -p "$(dirname "$src")" && ln -s "$here" "$src"
fi
bin=build/bin/attnbench
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv; date -u; } \
  2>&1 | tee -a "$OUT/card.txt"

# `verify all`, one process per case file, as many at once as there are cores (the fp64
# references are the long part: cases/perf alone took over five minutes in one process).
verify_all() {
  ( cd build && ctest -L gpu --output-on-failure ) > "$OUT/ctest-gpu.txt" 2>&1 &
  verify_cases
  wait
  tail -5 "$OUT/ctest-gpu.txt"
}

# `verify all` alone (what verify_all runs beside the gpu CTest tests); SECONDS: stop there (the
# case files not finished say so in verify.txt by their missing summary).
verify_cases() {
  mkdir -p "$OUT/verify"
  find cases -name '*.toml' | sort |
    timeout "${1:-86400}" xargs -P "$(nproc)" -I{} sh -c 'f="$3/verify/$(echo "$2" | tr / _)"; "$1" verify "$2" -o "$f.json" > "$f.txt" 2>&1' \
      _ "$bin" {} "$OUT"
  cat "$OUT"/verify/*.txt > "$OUT/verify.txt"
  # Where the verification's host time goes: the slowest points' inputs, reference and checks.
  python3 - "$OUT"/verify/*.json > "$OUT/verify-time.txt" <<'PY'
import json, sys
rows = {}
for f in sys.argv[1:]:
    try:
        for r in json.load(open(f))["rows"]:
            t = r.get("verify_time")
            if t:
                key = (r["case"], r["point"])
                p = rows.setdefault(key, [t["inputs_ms"], t["reference_ms"], 0.0])
                p[2] += t["check_ms"]
    except Exception as e:
        print("unreadable", f, e)
total = [sum(v[i] for v in rows.values()) / 1e3 for i in range(3)]
print("host seconds over all points: inputs %.1f, reference %.1f, launch+check %.1f" % tuple(total))
for (c, p), v in sorted(rows.items(), key=lambda kv: -sum(kv[1]))[:25]:
    print("%9.1f s  inputs %8.1f  reference %8.1f  checks %8.1f  %s %s" % (sum(v) / 1e3, v[0] / 1e3, v[1] / 1e3, v[2] / 1e3, c, p))
PY
  cat "$OUT/verify-time.txt" | head -8
  # Every report the card wrote must match docs/report.schema.json (exit 77: no jsonschema here).
  # How close every row came to the scaled bound, per op and dtype (docs/measuring.md).
  python3 tools/margins.py "$OUT"/verify/*.json > "$OUT/margins.txt" 2>&1
  head -40 "$OUT/margins.txt"
  python3 tests/check_schema.py "$OUT"/verify/*.json > "$OUT/schema.txt" 2>&1
  echo "schema check of the verify reports: exit $? ($(tail -1 "$OUT/schema.txt"))"
  rm -rf "$OUT/verify"
  grep -E "FAILED|ERROR" "$OUT/verify.txt"
  awk '/ passed, / { p += $1; f += $3 } END { print "verify all: " p " passed, " f " failed" }' "$OUT/verify.txt"
}

# Timings alone on the card, one verification trial of 64 rows each (`verify` did the rest).
perf() {
  q=(--set verify.trials=1 --set verify.max_rows=64)
  $bin info --remeasure 2>&1 | tee -a "$OUT/card.txt"
  $bin run cases/perf "${q[@]}" -o "$OUT/perf.json" 2>&1 | tee "$OUT/perf.txt"
  $bin run cases/perf/decode-*.toml -k split_kv --set baseline=split_kv --flush write "${q[@]}" 2>&1 |
    tee "$OUT/perf-write.txt"
  if [ "$1" = extras ]; then
    $bin run cases/perf/paged-*-b8-ctx32768.toml -k paged_flash --set baseline=paged_flash \
      --set "shape.block_size=[8,32]" "${q[@]}" 2>&1 | tee "$OUT/perf-blocks.txt"
  fi
  PYTHONUNBUFFERED=1 python3 "$2" --json "$OUT/peers.json" 2>&1 | tee "$OUT/peers.txt"
  # The model's peer: the same GPT-2 in PyTorch eager (cases/perf/model-*.toml's shapes).
  for b in 1 8; do
    python3 tests/gpt2_check.py bench --batch $b --prompt 512 --generate 128 --dtype bf16 \
      --json "$OUT/peer-gpt2-b$b.json" 2>&1 | tee "$OUT/peer-gpt2-b$b.txt"
  done
  if [ "$1" = extras ]; then
    PYTHONUNBUFFERED=1 python3 tools/peer_decode_flush.py --json "$OUT/peers-flush.json" 2>&1 |
      tee "$OUT/peers-flush.txt"
  fi
}

# The peers as Python variants, in attnbench's own loop beside ours (issue 47), then do_bench's
# medians of the same prefill kernels, each against attnbench's row (tools/do_bench_check.py).
python_peers() {
  q=(--set verify.trials=1 --set verify.max_rows=64)
  local plugins=(--plugin kernels/peers/torch_sdpa.py --plugin kernels/peers/flex_attention.py
                 --plugin kernels/peers/torch_ops.py --plugin kernels/plugin/examples/triton_flash_attention.py
                 --plugin kernels/plugin/examples/triton_softmax.py)
  $bin run cases/perf/attention-bf16-*.toml cases/perf/attention-fp16-*.toml cases/perf/softmax-*.toml \
    cases/perf/gemm-*.toml "${plugins[@]}" --flush write "${q[@]}" -o "$OUT/python-peers.json" 2>&1 |
    tee "$OUT/python-peers.txt"
  PYTHONUNBUFFERED=1 python3 tools/do_bench_check.py --attnbench "$OUT/python-peers.json" \
    --json "$OUT/do_bench.json" 2>&1 | tee "$OUT/do_bench.txt"
  # The backward beside PyTorch's FA2 and cuDNN SDPA backward kernels (issue 50's peers): the
  # perf cases name only our rungs, so the peers join by name.
  $bin run cases/perf/attention_backward-*.toml --plugin kernels/peers/torch_sdpa.py \
    --set 'kernels=[flash_mma,flash_mma_det,flash_wgmma,flash_wgmma_det,torch_sdpa_flash_bwd,torch_sdpa_cudnn_bwd]' --flush write "${q[@]}" \
    -o "$OUT/python-backward.json" 2>&1 | tee "$OUT/python-backward.txt"
}

# A refactor's proof: the perf cases timed by the old build, then the new, on one card.
compare_builds() {
  q=(--set verify.trials=1 --set verify.max_rows=64)
  local old_bin old_tree=${2:-.}
  old_bin=$(realpath "$1")
  (cd "$old_tree" && "$old_bin" run cases/perf "${q[@]}" -o "$OUT/perf-old.json") > "$OUT/perf-old.txt" 2>&1
  $bin run cases/perf "${q[@]}" -o "$OUT/perf-new.json" > "$OUT/perf-new.txt" 2>&1
  # shellcheck disable=SC2086  # PAIRS is a list of --pair arguments
  $bin compare "$OUT/perf-old.json" "$OUT/perf-new.json" ${PAIRS:-} 2>&1 | tee "$OUT/compare.txt"
}

# The soak: compute-sanitizer over the cases that reach every variant at small shapes
# (cases/perf's shapes would take hours under it), one trial of 64 rows per point.
soak() {
  local tool=$1 budget=${2:-540} start=$SECONDS
  local san; san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  local q=(--set verify.trials=1 --set verify.max_rows=64)
  local dirs; dirs=$(find cases -mindepth 1 -maxdepth 1 -type d ! -name perf | sort)
  local log="$OUT/soak-$tool.txt"
  : > "$log"
  run_one() {  # LABEL COMMAND...: runs it inside what is left of the budget, logs a line per run
    local label=$1; shift
    local left=$((budget - (SECONDS - start)))
    if [ "$left" -le 5 ]; then echo "NOT RUN (budget) $label" >> "$log"; return; fi
    timeout "$left" "$@" > "$OUT/soak.tmp" 2>&1; local rc=$?
    local errors; errors=$(grep -Eo 'ERROR SUMMARY: [0-9]+' "$OUT/soak.tmp" | awk '{s += $3} END {print s + 0}')
    local passed; passed=$(awk '/ passed, / {p += $1; f += $3} END {print p + 0 " passed, " f + 0 " failed"}' "$OUT/soak.tmp")
    echo "rc=$rc sanitizer-errors=$errors $passed $((SECONDS - start))s $label" >> "$log"
    [ "$rc" = 0 ] || grep -E "ERROR|FAILED|Invalid|Race|hazard|error" "$OUT/soak.tmp" | head -20 >> "$log"
  }
  case "$tool" in
  memcheck)
    for d in $dirs; do run_one "$d" "$san" --tool memcheck --error-exitcode 99 "$bin" verify "$d" "${q[@]}"; done ;;
  racecheck)
    # The kernels that share memory within a block: every family's tiled rungs.
    for d in cases/smoke cases/softmax cases/attention cases/decode cases/paged cases/gemm; do
      [ -d "$d" ] && run_one "$d" "$san" --tool racecheck --racecheck-report hazard --error-exitcode 99 "$bin" verify "$d" "${q[@]}"
    done ;;
  seeds)
    for s in 11 22 33 44 55 66 77 88 99 110; do
      for d in $dirs; do run_one "seed $s $d" "$bin" verify "$d" --seed "$s" "${q[@]}"; done
    done ;;
  esac
  rm -f "$OUT/soak.tmp"
  cat "$log"
}

# Session 28's calls, three in all. Part 1: ragged ws and ws_tma with their row tiles launched
# in reverse (the longest causal tiles first; run 282 timed the launch order before it), and
# varlen and split_kv with the warps past a block's rows idle in the loop, ws with consumer 1
# leaving row tiles of <= 64 rows to consumer 0 (decodes), under
# verification, repeats, racecheck and memcheck, their perf cases beside split_kv and the
# all-decode yardstick paged_flash, FlexAttention's ragged peer on the prefill shapes (issue
# 48's peer), then `verify all` (every case file, side by side). Part 2: gpu_python_plugins
# with its fixed judgement and the FlexAttention ragged peer's BACKEND option (run 280: 410 s);
# PART3=1 (env) runs part 3 beside it. Part 3: the rest of the gpu CTest tests. Part 4: parts 1
# and 2 in one call (when the device time left is one call's). Part 5: the least of part 1. Part 6:
# gemm_q's stream_gemv (issue 52) and FlexAttention's ragged peer with a longer timeout. Verification
# steps run side by side (at most 6 at once); a step that hangs (a deadlocked ring) costs only its own timeout. Each step's last
# "passed," line goes to card.txt.
pending() {
  local part=$1 budget=${2:-560} start=$SECONDS
  local q=(--set verify.trials=1 --set verify.max_rows=64)
  step() {  # NAME SECONDS COMMAND...
    local name=$1 t=$2; shift 2
    local left=$((budget - (SECONDS - start)))
    [ "$t" -gt "$left" ] && t=$left
    if [ "$t" -lt 10 ]; then echo "$name NOT RUN (budget)" >> "$OUT/card.txt"; return; fi
    timeout "$t" "$@" > "$OUT/$name.txt" 2>&1
    echo "$name rc=$? at $((SECONDS - start)) s: $(grep -h 'passed,' "$OUT/$name.txt" | tail -1)" >> "$OUT/card.txt"
  }
  par() { while [ "$(jobs -rp | wc -l)" -ge 6 ]; do wait -n; done; step "$@" & }
  # The steps parts 1, 4 and 5 share: the changed ragged rungs verified (sanitizers and repeats
  # beside; the caller waits), their timings with the all-decode yardstick paged_flash,
  # FlexAttention's ragged peer on the prefill shapes, and gemm_q at m = 1 under Nsight Compute
  # (issue 52: splitk_gemv slower than fused_mma, run 277; full sections with source counters,
  # the details page as text).
  local ws=(-k ws -k ws_tma) ncu
  ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
  ragged_checks() {
    par ragged 120 "$bin" verify smoke/ragged smoke/ragged-same-dtype cases/ragged "${ws[@]}" -k varlen -k split_kv
    par ragged-repeat 60 "$bin" verify smoke/ragged-same-dtype cases/ragged/options.toml "${ws[@]}" --set verify.repeat=10 "${q[@]}"
    par ragged-racecheck 90 "$bin" verify smoke/ragged-same-dtype cases/ragged/block-sizes.toml "${ws[@]}" \
      --sanitize racecheck "${q[@]}"
    par ragged-memcheck 90 "$bin" verify smoke/ragged cases/ragged/block-sizes.toml cases/ragged/window.toml "${ws[@]}" \
      --sanitize memcheck "${q[@]}"
  }
  ragged_timings() {
    step ragged-perf 75 "$bin" run perf/ragged-bf16-serving-mix perf/ragged-bf16-serving-mix-sinks \
      perf/ragged-bf16-serving-mix-prefill perf/ragged-bf16-serving-mix-decode perf/ragged-bf16-all-prefill \
      perf/ragged-bf16-all-decode --set 'kernels=[split_kv,ws,ws_tma]' "${q[@]}" -o "$OUT/ragged-perf.json"
    step paged-decode 30 "$bin" run perf/paged-bf16-b64-ctx4096 -k paged_flash "${q[@]}"  # all-decode's yardstick
  }
  ragged_flex() {  # [SECONDS [CASE...]]: 90 s, the mix's prefill part and all-prefill unless given
    local t=${1:-90} cases=(perf/ragged-bf16-serving-mix-prefill perf/ragged-bf16-all-prefill)
    [ $# -gt 1 ] && cases=("${@:2}")
    # Line-buffered (stdbuf, PYTHONUNBUFFERED): runs 286, 290 and 292 hit the timeout with an
    # empty log, everything buffered lost to the kill, so nothing says where the time went.
    PYTHONUNBUFFERED=1 step ragged-flex "$t" stdbuf -oL -eL "$bin" run "${cases[@]}" \
      --plugin kernels/peers/flex_attention.py --set 'kernels=[ws_tma,torch_flex_ragged]' --flush write "${q[@]}" \
      -o "$OUT/ragged-flex.json"
  }
  # A command under Nsight Compute, full sections with source counters: the report NAME.ncu-rep
  # and its details page as text, ncu-NAME.txt.
  ncu_profile() {  # NAME SECONDS NCU_OPTION... -- COMMAND...
    local name=$1 t=$2 opts=()
    shift 2
    while [ "$1" != -- ]; do opts+=("$1"); shift; done
    shift
    step "ncu-$name" "$t" "$ncu" "${opts[@]}" --set full --import-source yes -f -o "$OUT/$name" "$@"
    [ -f "$OUT/$name.ncu-rep" ] && "$ncu" -i "$OUT/$name.ncu-rep" --page details > "$OUT/ncu-$name.txt" 2>&1
  }
  ncu_gemmq() {  # SECONDS NAME -k VARIANT...
    local t=$1 name=$2
    shift 2
    ncu_profile "$name" "$t" --nvtx --nvtx-include 'gemm_q-fp16-int4-k4096-n4096/m=1/' -- \
      "$bin" run perf/gemm_q-fp16-int4-k4096-n4096 --profile "$@" --set 'sweep.m=[1]'
  }
  cand_checks() {  # BINARY -k VARIANT...: a candidate build's ragged rows verified, racecheck and memcheck
    local b=$1
    shift
    par cand-ragged 120 "$b" verify smoke/ragged smoke/ragged-same-dtype cases/ragged "$@"
    par cand-racecheck 90 "$b" verify smoke/ragged-same-dtype cases/ragged/block-sizes.toml "$@" \
      --sanitize racecheck "${q[@]}"
    par cand-memcheck 90 "$b" verify smoke/ragged cases/ragged/block-sizes.toml cases/ragged/window.toml "$@" \
      --sanitize memcheck "${q[@]}"
  }
  # mla split_kv_reg, bf16 against fp8 cache (issue 49: fp8 0.83x the bf16 speed, run 277).
  ncu_mla() {  # SECONDS
    ncu_profile mla "$1" --nvtx --nvtx-include 'mla-bf16-b64-h16-s1-ctx16384/' \
      --nvtx-include 'mla-fp8-b64-h16-s1-ctx16384/' -- \
      "$bin" run perf/mla-bf16-b64-h16-s1-ctx16384 perf/mla-fp8-b64-h16-s1-ctx16384 --profile -k split_kv_reg "${q[@]}"
  }
  # In what is left of the budget: `verify all` beside the gpu CTest tests but the Python
  # plugins' (420 s of their own: part 2); parts 7 and 11.
  # gpu_sanitizer last: beside `verify all`'s 16 processes it held every test after it until the
  # call ended (run 295).
  suite_rest() {
    local rest=$((budget - (SECONDS - start) - 15)) t0=$SECONDS
    ( cd build && timeout "$rest" ctest -L gpu -E 'gpu_python_plugins|gpu_sanitizer' --output-on-failure
      left=$((rest - (SECONDS - t0)))
      if [ "$left" -ge 10 ]; then timeout "$left" ctest -R gpu_sanitizer --output-on-failure; else echo "gpu_sanitizer NOT RUN (budget)"; fi
    ) > "$OUT/ctest-gpu.txt" 2>&1 &
    verify_cases "$rest" > "$OUT/verify-all.txt" 2>&1
    wait
    echo "at $((SECONDS - start)) s: $(tail -1 "$OUT/verify-all.txt"); ctest: $(grep -h 'tests passed\|NOT RUN' "$OUT/ctest-gpu.txt" | tr '\n' ' ')" >> "$OUT/card.txt"
  }
  local gemmq_rungs=(-k fused_mma -k splitk_gemv -k dense_cublas)
  if [ "$part" = 1 ]; then
  ragged_checks
  wait
  ragged_timings
  ragged_flex
  ncu_gemmq 90 gemmq "${gemmq_rungs[@]}"
  ncu_mla 90
  verify_cases $((budget - (SECONDS - start))) > "$OUT/verify-all.txt" 2>&1
  echo "at $((SECONDS - start)) s: $(tail -1 "$OUT/verify-all.txt")" >> "$OUT/card.txt"
  fi
  if [ "$part" = 4 ]; then
  # Parts 1 and 2 in one call, for a session with device time for one: part 1's timings first,
  # alone on the card, with gemm_q's small-m rows in every mode (how much of a 12 us row is the
  # launch: cold against graph) and its profile; then its verification, `verify all` and
  # gpu_python_plugins side by side (verification is fp64-reference-bound, not timed).
  ragged_timings
  step gemmq-modes 45 "$bin" run perf/gemm_q-fp16-int4-k4096-n4096 perf/gemm_q-fp16-int4-k4096-n14336 \
    -k fused_mma -k splitk_gemv -k dense_cublas --set 'sweep.m=[1,16]' --mode all "${q[@]}"
  ncu_gemmq 60 gemmq "${gemmq_rungs[@]}"
  ragged_flex
  local rest=$((budget - (SECONDS - start) - 20))
  if [ "$rest" -ge 420 ]; then  # run 280: 410 s
    par ctest-python "$rest" sh -c "cd build && ctest -V -R gpu_python_plugins"
  else
    echo "ctest-python NOT RUN ($rest s left, 420 wanted)" >> "$OUT/card.txt"
  fi
  ragged_checks
  verify_cases "$rest" > "$OUT/verify-all.txt" 2>&1
  echo "at $((SECONDS - start)) s: $(tail -1 "$OUT/verify-all.txt")" >> "$OUT/card.txt"
  wait
  fi
  if [ "$part" = 5 ]; then
  # The least of part 1, for a call of ~200 s (each step capped by the budget).
  ragged_checks
  wait
  ragged_timings
  fi
  if [ "$part" = 6 ]; then
  # The read-only model of the weight stream first, alone on the card, when it was built and
  # carried (tools/gemv_stream_bench.cu's header: nvcc, then xz into build-carry/).
  [ -x build/bin/gemv_stream_bench ] && step gemv-bench 40 build/bin/gemv_stream_bench
  # gemm_q's stream_gemv (issue 52): its verification beside memcheck and racecheck, then the
  # gemm_q perf cases alone (cold; the 4096-k int4 rows in every mode), its profile at m = 1,
  # then FlexAttention's ragged peer (issue 48; run 283's 90 s were too few for its compile;
  # FLEX=0 leaves it out).
  par gemmq-verify 150 "$bin" verify smoke/gemm_q cases/gemm_q
  par gemmq-memcheck 120 "$bin" verify cases/gemm_q/stream.toml cases/gemm_q/stream-tail.toml -k stream_gemv \
    --sanitize memcheck "${q[@]}"
  par gemmq-racecheck 120 "$bin" verify cases/gemm_q/stream.toml -k stream_gemv --sanitize racecheck "${q[@]}"
  wait
  step gemmq-perf 120 "$bin" run cases/perf/gemm_q-*.toml "${q[@]}" -o "$OUT/gemmq-perf.json"
  step gemmq-modes 60 "$bin" run perf/gemm_q-fp16-int4-k4096-n4096 perf/gemm_q-fp16-int4-k4096-n14336 \
    -k fused_mma -k stream_gemv -k dense_cublas --set 'sweep.m=[1,4,16]' --mode all "${q[@]}"
  ncu_gemmq 60 stream -k stream_gemv -k fused_mma
  # all-prefill (issue 48: ws_tma 0.82x separate, run 283): ws_tma's kernel beside separate's
  # flash_ws on the same 4 x 4096 causal prefills, one launch each, full sections.
  ncu_profile prefill 90 --nvtx --nvtx-include 'ragged-bf16-all-prefill/' -k 'regex:ragged_ws|flash_ws' -c 12 -- \
    "$bin" run perf/ragged-bf16-all-prefill --profile -k ws_tma -k separate "${q[@]}"
  [ "${FLEX:-1}" = 1 ] && ragged_flex 200
  fi
  if [ "$part" = 7 ]; then
  # A kernel change against the build before it (OLD_BIN, env: e.g. build/bin/attnbench_old,
  # carried beside): the ragged perf cases by each binary in turn, twice, alone on the card; then
  # the ragged checks (sanitizers, repeats); then the gpu CTest tests (gpu_python_plugins apart:
  # 420 s of its own, part 2) beside `verify all` in what is left of the budget.
  # A CANDIDATE binary (env; build/bin/attnbench_cand when carried) joins the timings, and its
  # ragged rows are verified (racecheck and memcheck beside) next to the checks of build/bin's.
  local old=${OLD_BIN:-build/bin/attnbench_old} cand=${CANDIDATE:-build/bin/attnbench_cand} bins
  bins=("$old" "$bin")
  [ -x "$cand" ] && bins+=("$cand")
  for i in 1 2; do
    for b in "${bins[@]}"; do
      step "ragged-ab-$(basename "$b")-$i" 45 "$b" run perf/ragged-bf16-all-prefill perf/ragged-bf16-serving-mix \
        perf/ragged-bf16-all-decode --set 'kernels=[ws_tma]' "${q[@]}" -o "$OUT/ragged-ab-$(basename "$b")-$i.json"
    done
  done
  ragged_checks
  [ -x "$cand" ] && cand_checks "$cand" -k ws_tma
  wait
  suite_rest
  fi
  # Part 8 (session 30's last call: ragged timings with a candidate, the LM-head checks, the gpu
  # tests run 288 cut) ran as part 9's first half in run 290 and is gone (git log -p).
  if [ "$part" = 9 ]; then
  # Session 31's first call (run 290). The deterministic backward's dQ writer (issue 50: flash_wgmma_det
  # 0.67x flash_wgmma, target 0.8x): the backward perf cases by the build before (OLD_BIN), this
  # build and a CANDIDATE (flash_wgmma with the writer too), each binary in turn, alone on the
  # card, with cuDNN's backward beside this build's; then the ragged and gemm_q timings of part
  # 8. Then side by side: the writer rungs verified (20 repeats bit for bit, racecheck, memcheck),
  # the candidate's ragged and gemm_q checks, the LM-head checks and the gpu CTest tests run
  # 288's budget cut (the mutants among them).
  local old=${OLD_BIN:-build/bin/attnbench_old} cand=${CANDIDATE:-build/bin/attnbench_cand}
  local bwd=(perf/attention_backward-bf16-b4-h16-s4096-d128 perf/attention_backward-bf16-b2-h32-kv4-s4096-d128
             perf/attention_backward-bf16-b16-h32-s1024-d64)
  local kb=(--set 'kernels=[flash_wgmma,flash_wgmma_det]' "${q[@]}")
  [ -x "$old" ] && step bwd-old 60 "$old" run "${bwd[@]}" "${kb[@]}" -o "$OUT/bwd-old.json"
  step bwd-new 90 "$bin" run "${bwd[@]}" --plugin kernels/peers/torch_sdpa.py \
    --set 'kernels=[flash_wgmma,flash_wgmma_det,torch_sdpa_cudnn_bwd]' "${q[@]}" -o "$OUT/bwd-new.json"
  [ -x "$cand" ] && step bwd-cand 60 "$cand" run "${bwd[@]}" "${kb[@]}" -o "$OUT/bwd-cand.json"
  local all_ragged=(perf/ragged-bf16-serving-mix perf/ragged-bf16-serving-mix-sinks perf/ragged-bf16-serving-mix-prefill
                    perf/ragged-bf16-serving-mix-decode perf/ragged-bf16-all-prefill perf/ragged-bf16-all-decode)
  step ragged-perf 60 "$bin" run "${all_ragged[@]}" --set 'kernels=[split_kv,ws,ws_tma]' "${q[@]}" -o "$OUT/ragged-perf.json"
  step paged-decode 25 "$bin" run perf/paged-bf16-b64-ctx4096 -k paged_flash "${q[@]}"
  [ -x "$cand" ] && step cand-perf 50 "$cand" run "${all_ragged[@]}" --set 'kernels=[ws,ws_tma]' "${q[@]}" \
    -o "$OUT/cand-perf.json"
  local gq=(perf/gemm_q-fp16-int4-k4096-n14336 perf/gemm_q-fp16-int8-k4096-n14336 -k stream_gemv -k dense_cublas
            --set 'sweep.m=[1,4,16]' "${q[@]}")
  if [ -x "$cand" ]; then
    step gemmq-main 30 "$bin" run "${gq[@]}"
    step gemmq-cand 30 "$cand" run "${gq[@]}"
  fi
  local w=(-k flash_wgmma_det) sm=(smoke/attention_backward cases/backward)
  par bwd-verify 150 "$bin" verify "${sm[@]}" -k flash_wgmma -k flash_wgmma_det
  par bwd-repeat 120 "$bin" verify "${sm[@]}" "${w[@]}" --set dtype=bf16 --set verify.repeat=20 "${q[@]}"
  par bwd-racecheck 120 "$bin" verify smoke/attention_backward "${w[@]}" --sanitize racecheck "${q[@]}"
  par bwd-memcheck 120 "$bin" verify smoke/attention_backward "${w[@]}" --sanitize memcheck "${q[@]}"
  if [ -x "$cand" ]; then
    par cand-bwd 150 "$cand" verify "${sm[@]}" -k flash_wgmma
    par cand-bwd-racecheck 120 "$cand" verify smoke/attention_backward -k flash_wgmma --sanitize racecheck "${q[@]}"
    cand_checks "$cand" -k ws -k ws_tma
    par cand-gemmq 90 "$cand" verify smoke/gemm_q cases/gemm_q -k stream_gemv
  fi
  par lm-head-verify 120 "$bin" verify smoke/sample-lm_head cases/sample
  par ctest-rest 200 sh -c "cd build && ctest -R 'gpu_plugin_examples|gpu_plugin_fault_keeps_rows|gpu_mutants|gpu_sample' --output-on-failure"
  wait
  fi
  if [ "$part" = 10 ]; then
  # After session 31 (runs 290-293), for a CANDIDATE built from main with the branches
  # next/bwd-two-writers (the deterministic backward's dQ writer as two threads),
  # next/ragged-mix-plan (ws/ws_tma: a row tile's splits adjacent in the grid, a mix's small row
  # tiles in their own chunk) and next/mla-wgmma (mla's Hopper rung) merged, run from a checkout
  # of that merge (its cases: smoke/mla-wgmma), with this build (main's) as build/bin/attnbench. Timings first, alone on the card, this build's then the
  # candidate's: the backward perf cases (flash_wgmma beside flash_wgmma_det) and the ragged ones
  # (ws, ws_tma; all-decode's yardstick paged_flash). Then side by side: the candidate's checks
  # (backward: verify, 20 repeats, racecheck, memcheck; ragged: cand_checks) and this build's
  # deterministic backward under memcheck (the rotated turns had racecheck only). Part 11 is
  # `verify all` with the gpu CTest tests.
  local cand=${CANDIDATE:-build/bin/attnbench_cand} b2
  local bwd=(perf/attention_backward-bf16-b4-h16-s4096-d128 perf/attention_backward-bf16-b2-h32-kv4-s4096-d128
             perf/attention_backward-bf16-b16-h32-s1024-d64)
  local kb=(--set 'kernels=[flash_wgmma,flash_wgmma_det]' --set verify.trials=1 --set verify.max_rows=16)
  local all_ragged=(perf/ragged-bf16-serving-mix perf/ragged-bf16-serving-mix-sinks perf/ragged-bf16-serving-mix-prefill
                    perf/ragged-bf16-serving-mix-decode perf/ragged-bf16-all-prefill perf/ragged-bf16-all-decode)
  for b2 in "$bin" "$cand"; do
    [ -x "$b2" ] || continue
    step "bwd-$(basename "$b2")" 75 "$b2" run "${bwd[@]}" "${kb[@]}" -o "$OUT/bwd-$(basename "$b2").json"
    step "ragged-$(basename "$b2")" 45 "$b2" run "${all_ragged[@]}" --set 'kernels=[ws,ws_tma]' "${q[@]}" \
      -o "$OUT/ragged-$(basename "$b2").json"
  done
  step paged-decode 25 "$bin" run perf/paged-bf16-b64-ctx4096 -k paged_flash "${q[@]}"
  local w=(-k flash_wgmma_det) sm=(smoke/attention_backward cases/backward)
  par bwd-memcheck 120 "$bin" verify smoke/attention_backward "${w[@]}" --sanitize memcheck "${q[@]}"
  if [ -x "$cand" ]; then
    par cand-bwd 120 "$cand" verify "${sm[@]}" "${w[@]}"
    par cand-bwd-repeat 120 "$cand" verify "${sm[@]}" "${w[@]}" --set dtype=bf16 --set verify.repeat=20 "${q[@]}"
    par cand-bwd-racecheck 120 "$cand" verify smoke/attention_backward "${w[@]}" --sanitize racecheck "${q[@]}"
    par cand-bwd-memcheck 120 "$cand" verify smoke/attention_backward "${w[@]}" --sanitize memcheck "${q[@]}"
    cand_checks "$cand" -k ws -k ws_tma
    # mla's Hopper rung: its first run. The smoke case first (the failing row names itself), then
    # the mla cases, both sanitizers on the smoke case; its timings last, once the checks are in.
    par cand-mla 150 "$cand" verify smoke/mla-wgmma cases/mla -k split_kv_wgmma -k split_kv_reg
    par cand-mla-memcheck 120 "$cand" verify smoke/mla-wgmma -k split_kv_wgmma --sanitize memcheck "${q[@]}"
    par cand-mla-racecheck 120 "$cand" verify smoke/mla-wgmma -k split_kv_wgmma --sanitize racecheck "${q[@]}"
  fi
  wait
  [ -x "$cand" ] && step cand-mla-perf 60 "$cand" run perf/mla-bf16-b64-h128-s1-ctx4096 perf/mla-bf16-b32-h128-s2-ctx8192 \
    -k split_kv -k split_kv_reg -k split_kv_wgmma "${q[@]}" -o "$OUT/cand-mla-perf.json"
  fi
  if [ "$part" = 11 ]; then
  suite_rest
  fi
  if [ "$part" = 12 ]; then
  # FlexAttention's ragged peer on the serving mix's prefill part alone (issue 48's peer), with
  # the whole call for its compilations, its log line by line.
  ragged_flex $((budget - 20)) perf/ragged-bf16-serving-mix-prefill
  fi
  if [ "$part" = 13 ]; then
  # After session 32 (runs 294-296), for a CANDIDATE built from branch cand/s32b (main with
  # next/bwd-rung4 and next/issue-order merged), run from a checkout of it, with main's build as
  # build/bin/attnbench. next/bwd-rung4's experimental variants flash_wgmma_rot and
  # flash_wgmma_w2 ask which half of flash_wgmma_det's lead over flash_wgmma at d128 is the
  # rotated walks and which the two dQ writers; next/issue-order issues the next tile's copies
  # after the tile's first wgmma products (backward wgmma rungs, mla's Hopper rung). Timings
  # first, alone on the card: main's backward at b4 d128 and the candidate's four wgmma rungs
  # with cuDNN's SDPA backward on the three perf shapes; mla's Hopper rung in both builds. Then
  # the candidate's checks side by side; then its mla rung under Nsight Compute (where the time
  # of 257.5 TFLOP/s goes, run 294); FlexAttention's ragged peer in what is left.
  local cand=${CANDIDATE:-build/bin/attnbench_cand}
  local bwd=(perf/attention_backward-bf16-b4-h16-s4096-d128 perf/attention_backward-bf16-b2-h32-kv4-s4096-d128
             perf/attention_backward-bf16-b16-h32-s1024-d64)
  local vq=(--set verify.trials=1 --set verify.max_rows=16)
  step bwd-main 50 "$bin" run "${bwd[0]}" --set 'kernels=[flash_wgmma,flash_wgmma_det]' "${vq[@]}" -o "$OUT/bwd-main.json"
  step bwd-cand 240 "$cand" run "${bwd[@]}" --plugin kernels/peers/torch_sdpa.py \
    --set 'kernels=[flash_wgmma,flash_wgmma_rot,flash_wgmma_w2,flash_wgmma_det,torch_sdpa_cudnn_bwd]' "${vq[@]}" \
    -o "$OUT/bwd-cand.json"
  local b2
  for b2 in "$bin" "$cand"; do
    step "mla-$(basename "$b2")" 25 "$b2" run perf/mla-bf16-b64-h128-s1-ctx4096 -k split_kv -k split_kv_wgmma "${q[@]}" \
      -o "$OUT/mla-$(basename "$b2").json"
  done
  local w=(-k flash_wgmma -k flash_wgmma_rot -k flash_wgmma_w2 -k flash_wgmma_det)
  par cand-bwd 150 "$cand" verify smoke/attention_backward cases/backward "${w[@]}"
  par cand-bwd-repeat 120 "$cand" verify smoke/attention_backward -k flash_wgmma_det --set dtype=bf16 --set verify.repeat=20 "${q[@]}"
  par cand-bwd-racecheck 120 "$cand" verify smoke/attention_backward "${w[@]}" --sanitize racecheck "${q[@]}"
  par cand-bwd-memcheck 120 "$cand" verify smoke/attention_backward "${w[@]}" --sanitize memcheck "${q[@]}"
  par cand-mla 120 "$cand" verify smoke/mla-wgmma cases/mla -k split_kv_wgmma
  par cand-mla-racecheck 90 "$cand" verify smoke/mla-wgmma -k split_kv_wgmma --sanitize racecheck "${q[@]}"
  wait
  ncu_profile mla-wgmma 60 --nvtx --nvtx-include 'mla-bf16-b64-h128-s1-ctx4096/' -- \
    "$cand" run perf/mla-bf16-b64-h128-s1-ctx4096 --profile -k split_kv_wgmma "${q[@]}"
  ragged_flex $((budget - (SECONDS - start) - 15)) perf/ragged-bf16-serving-mix-prefill
  fi
  if [ "$part" = 2 ]; then  # with part 3 beside it, when one call has to do for both
  par ctest-python 540 sh -c "cd build && ctest -V -R gpu_python_plugins"
  [ "${PART3:-0}" = 1 ] && par ctest-gpu 540 sh -c "cd build && ctest -L gpu -E 'gpu_python_plugins|gpu_sanitizer' --output-on-failure"
  wait
  fi
  if [ "$part" = 3 ]; then
  step ctest-gpu 540 sh -c "cd build && ctest -L gpu -E 'gpu_python_plugins|gpu_sanitizer' --output-on-failure"
  fi
  echo "pending part $part done at $((SECONDS - start)) s" >> "$OUT/card.txt"
}

case "${1:-}" in
all) verify_all; perf core "${2:-tools/peers.py}" ;;
verify) verify_all ;;
perf) perf extras "${2:-tools/peers.py}" ;;
python) python_peers ;;
compare) compare_builds "${2:?compare needs the old attnbench binary}" "${3:-.}" ;;
soak) soak "${2:?soak needs memcheck, racecheck or seeds}" "${3:-540}" ;;
pending) pending "${2:?pending needs its part: 1 to 7 or 9 to 13 (the list in pending())}" "${3:-560}" ;;
*)
  echo "usage: tools/gpu_session.sh all [PEERS_PY] | verify | perf [PEERS_PY] | python | compare OLD_BIN | pending 1|2|3|4|5|6|7|9|10|11|12|13 [SECONDS] | soak TOOL" >&2
  exit 2
  ;;
esac
exit 0
