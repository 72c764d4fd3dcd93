#!/usr/bin/env bash
# mutants.sh [--suite-only] ATTNBENCH [WORKDIR]: the mutant suite (tests/mutants/README.md). Each line of
# SUITE below runs attnbench once: one plugin of tests/mutants/, one case of
# tests/mutants/cases/, `verify` or `run`, and the variants named. Every mut_* variant (a
# correct kernel with one bug) must come out FAILED on every point of its case: skipped or
# ERROR is not caught. Every ctl_* variant (the same kernel without the bug) must be verified
# on every point. A variant with fewer rows than its case has points counts as not run.
# Prints the catch table in markdown at the end. Exit 0 when every mutant was caught and
# every control passed, 1 otherwise, 3 (skipped) without a GPU. WORKDIR (default: a new
# temporary directory) keeps each run's json report, stdout and stderr.
set -u
suite_only=0
if [ "${1:-}" = "--suite-only" ]; then suite_only=1; shift; fi
bin=${1:?usage: mutants.sh [--suite-only] ATTNBENCH [WORKDIR]}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mutants=$here/mutants
work=${2:-$(mktemp -d "${TMPDIR:-/tmp}/attnbench-mutants.XXXXXX")}
mkdir -p "$work" || exit 1

# plugin        case (cases/)            command  points  variants
SUITE='
softmax.cu      softmax-odd.toml         verify   6       ctl_softmax mut_softmax_zeros mut_softmax_twice mut_softmax_last_row
softmax.cu      softmax-wide.toml        verify   4       ctl_softmax mut_softmax_zeros mut_softmax_twice mut_softmax_lowp_sum
softmax.cu      softmax-large.toml       verify   4       ctl_softmax mut_softmax_no_max
gemm.cu         gemm-odd.toml            verify   6       ctl_gemm mut_gemm_k_tail mut_gemm_no_sync
gemm.cu         gemm-nn.toml             verify   2       ctl_gemm mut_gemm_nn_as_nt
gemm.cu         gemm-lowp.toml           verify   2       ctl_gemm mut_gemm_lowp_acc
gemm.cu         gemm-timed.toml          run      1       ctl_gemm mut_gemm_stale
gemm.cu         gemm-timed.toml          run      1       mut_gemm_side_stream
attention.cu    attention-causal-br.toml verify   4       ctl_attention mut_attn_causal_past1 mut_attn_br_as_tl mut_attn_drop_last mut_attn_kv_tail mut_attn_gqa_mod
attention.cu    attention-causal-tl.toml verify   4       ctl_attention mut_attn_causal_short1 mut_attn_tl_as_br mut_attn_drop_last mut_attn_kv_tail mut_attn_gqa_mod
attention.cu    attention-tail.toml      verify   6       ctl_attention mut_attn_kv_tail mut_attn_gqa_mod
attention.cu    attention-large.toml     verify   2       ctl_attention mut_attn_no_max
attention.cu    attention-scale.toml     verify   4       ctl_attention mut_attn_scale_d1
attention.cu    attention-lowp.toml      verify   2       ctl_attention mut_attn_pv_lowp
attention.cu    attention-sinks.toml     verify   4       ctl_attention mut_attn_sink_ignored mut_attn_sink_head0
decode.cu       decode-varlen.toml       verify   3       ctl_decode mut_decode_len0 mut_decode_seq0 mut_decode_drop_last mut_decode_no_rescale
paged.cu        paged-blocks.toml        verify   2       ctl_paged mut_paged_logical_block mut_paged_table0 mut_paged_k_layout
paged.cu        paged-fp8.toml           verify   2       ctl_paged mut_paged_fp8_noscale mut_paged_logical_block mut_paged_table0 mut_paged_k_layout
ragged.cu       ragged-batch.toml        verify   4       ctl_ragged mut_ragged_top_left mut_ragged_seq_off_by_one mut_ragged_past_context mut_ragged_logical_block mut_ragged_table0
ragged.cu       ragged-fp8.toml          verify   2       ctl_ragged mut_ragged_fp8_noscale mut_ragged_top_left mut_ragged_seq_off_by_one mut_ragged_past_context mut_ragged_logical_block mut_ragged_table0
ragged.cu       ragged-sinks.toml        verify   8       ctl_ragged mut_ragged_sink_ignored
ragged.cu       ragged-window.toml       verify   6       ctl_ragged mut_ragged_window_off_by_one mut_ragged_past_context mut_ragged_top_left
backward.cu     backward-causal-br.toml  verify   4       ctl_backward mut_bwd_no_d mut_bwd_dk_unscaled mut_bwd_dv_from_ds mut_bwd_gqa_first_head mut_bwd_top_left mut_bwd_lse_log2 mut_bwd_dq_drop_last
backward.cu     backward-softcap.toml    verify   2       ctl_backward mut_bwd_no_cap_slope mut_bwd_no_d
backward.cu     backward-alibi.toml      verify   2       ctl_backward mut_bwd_alibi_sign mut_bwd_top_left
backward.cu     backward-lowp.toml       verify   2       ctl_backward mut_bwd_dk_lowp_acc
'
# The side-stream mutant runs alone: its kernel may still be writing the shared output
# buffer when the next variant of the point starts.

# --suite-only (CTest mutants_suite, no GPU): the table itself checked. Every variant the
# plugins declare is on a line of it, every line's case loads with its plugin, and each variant
# named runs on every point of its case (a dry run lists it, not among the skipped): a mutant
# refused by its own case would never be caught.
if [ "$suite_only" = 1 ]; then
  plugin_args=()
  for f in "$mutants"/*.cu; do plugin_args+=(--plugin "$f"); done
  "$bin" list kernels "${plugin_args[@]}" </dev/null >"$work/declared.txt" 2>"$work/declared.err" ||
    { echo "mutants.sh: attnbench list kernels failed:"; cat "$work/declared.err"; exit 1; }
  declared=$(sed -n 's/^ \{1,\}\(\(ctl\|mut\)_[A-Za-z0-9_]*\) .*/\1/p' "$work/declared.txt" | sort -u)
  named=$(awk 'NF >= 5 { for (i = 5; i <= NF; ++i) print $i }' <<<"$SUITE" | sort -u)
  bad=0
  for v in $(comm -23 <(echo "$declared") <(echo "$named")); do echo "declared but on no line: $v"; bad=1; done
  for v in $(comm -13 <(echo "$declared") <(echo "$named")); do echo "on a line but declared by no plugin: $v"; bad=1; done
  while read -r plugin case cmd points variants; do
    [ -n "$plugin" ] || continue
    out=$("$bin" verify "$mutants/cases/$case" --plugin "$mutants/$plugin" --dry-run </dev/null 2>&1) ||
      { echo "$case with $plugin does not load:"; echo "$out" | tail -n 3; bad=1; continue; }
    got=$(grep -c 'variants: ' <<<"$out")
    [ "$got" = "$points" ] || { echo "$case: $got points, the table says $points"; bad=1; }
    for v in $variants; do
      runs=$(grep 'variants: ' <<<"$out" | sed 's/; skips .*//' | grep -c " $v\( \|$\)")
      [ "$runs" = "$got" ] || { echo "$case: $v runs on $runs of its $got points"; bad=1; }
    done
  done <<<"$SUITE"
  [ $bad = 0 ] && echo "mutant suite table: $(wc -l <<<"$declared") variants, every one on a line that runs it on every point"
  exit $bad
fi

if command -v nvidia-smi >/dev/null 2>&1 && ! nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
  echo "skipped: nvidia-smi -L lists no GPU"
  exit 3
fi

manifest=$work/manifest.tsv
: >"$manifest"
total=$(grep -c '[^[:space:]]' <<<"$SUITE")
n=0
while read -r plugin case cmd points variants; do
  [ -n "$plugin" ] || continue
  n=$((n + 1))
  id=$(printf '%02d' "$n")
  ks=()
  for v in $variants; do ks+=(-k "$v"); done
  rm -f "$work/$id.json" "$work/$id.out" "$work/$id.err"  # never judge a report of an earlier run
  "$bin" "$cmd" "$mutants/cases/$case" --plugin "$mutants/$plugin" "${ks[@]}" --format json -o "$work/$id.json" </dev/null \
    >"$work/$id.out" 2>"$work/$id.err"
  rc=$?
  echo "[$n/$total] attnbench $cmd $case --plugin $plugin: exit $rc"
  if [ "$rc" = 3 ] && grep -q "no usable CUDA device\|no CUDA device" "$work/$id.err"; then
    tail -n 3 "$work/$id.err"
    echo "skipped: no GPU"
    exit 3
  fi
  # 0: all verified; 1: a row failed (what a mutant should do). Anything else is shown.
  if [ "$rc" != 0 ] && [ "$rc" != 1 ]; then sed 's/^/    /' "$work/$id.err" | tail -n 5; fi
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$id" "$plugin" "$case" "$cmd" "$points" "$rc" "$variants" >>"$manifest"
done <<<"$SUITE"

# Every variant the plugins declare must be in the suite: a new mutant without a case fails.
plugin_args=()
for f in "$mutants"/*.cu; do plugin_args+=(--plugin "$f"); done
"$bin" list kernels "${plugin_args[@]}" </dev/null >"$work/declared.txt" 2>"$work/declared.err" ||
  { echo "mutants.sh: attnbench list kernels failed:"; cat "$work/declared.err"; exit 1; }

python3 - "$work" <<'PY'
import json, os, re, sys

work = sys.argv[1]
entries = []
with open(os.path.join(work, "manifest.tsv")) as f:
    for line in f:
        id_, plugin, case, cmd, points, rc, variants = line.rstrip("\n").split("\t")
        entries.append(dict(id=id_, plugin=plugin, case=case, cmd=cmd, points=int(points), rc=int(rc),
                            variants=variants.split()))

declared = set()
with open(os.path.join(work, "declared.txt")) as f:
    for line in f:
        m = re.match(r"^\s+((?:ctl|mut)_[A-Za-z0-9_]+)\s", line)
        if m:
            declared.add(m.group(1))


def cell(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


def num(x):
    return "inf" if x is None else "%.3g" % x


def how(row):
    """Why the row has its status: its reason, else the verification's numbers."""
    parts = []
    if row.get("reason"):
        parts.append(row["reason"])
    v = row.get("verify")
    if v and (not parts or row.get("status") != "FAILED"):
        b = v.get("bound")
        if v.get("nonfinite"):
            parts.append("%d NaN/Inf in the output" % v["nonfinite"])
        elif isinstance(b, dict) and "allowed_max" in b:
            # Bounds scaled to an honest kernel's error: margin = error / allowed (> 1 fails).
            s = "max err %s of %s allowed, rel-L2 %s of %s" % (num(v.get("max_abs")), num(b.get("allowed_max")),
                                                               num(v.get("rel_l2")), num(b.get("allowed_l2")))
            if "margin" in v:
                s = "margin %s: %s" % (num(v["margin"]), s)
            parts.append(s)
        else:
            parts.append("max err %s, rel-L2 %s vs atol %s + rtol %s; %s of %s elements off" %
                         (num(v.get("max_abs")), num(v.get("rel_l2")), num(v.get("atol")), num(v.get("rtol")),
                          v.get("mismatches"), v.get("elements_checked")))
    return "; ".join(parts) if parts else "-"


catch, controls, problems = [], [], []
in_suite = set()
for e in entries:
    path = os.path.join(work, e["id"] + ".json")
    label = "%s %s" % (e["cmd"], e["case"])
    try:
        with open(path) as f:
            report = json.load(f)
        rows = report["rows"]
    except (OSError, ValueError, KeyError, TypeError) as err:
        report, rows = None, []
        errfile = os.path.join(work, e["id"] + ".err")
        last = ""
        if os.path.exists(errfile):
            with open(errfile, errors="replace") as f:
                lines = [l.strip() for l in f if l.strip()]
            last = lines[-1] if lines else ""
        problems.append("%s: no report (attnbench exit %d): %s" % (label, e["rc"], last or err))
    if report is not None and not report.get("attnbench", {}).get("complete", False):
        problems.append("%s: the report is not complete (attnbench exit %d)" % (label, e["rc"]))
    case_name = e["case"][:-5] if e["case"].endswith(".toml") else e["case"]
    for v in e["variants"]:
        in_suite.add(v)
        mine = [r for r in rows if r.get("variant") == v]
        points = {r.get("point", "") for r in mine}
        if len(mine) != e["points"] or len(points) != e["points"]:
            problems.append("%s: %s has %d row(s) over %d point(s), expected one on each of %d points" %
                            (label, v, len(mine), len(points), e["points"]))
        for r in mine:
            status = str(r.get("status", "?"))
            point = r.get("point") or "-"
            if v.startswith("mut_"):
                ok = status.upper() == "FAILED"
                catch.append((v, case_name, e["cmd"], point, ok, status, how(r)))
            else:
                ok = status == "verified"
                controls.append((v, case_name, e["cmd"], point, ok, status, how(r)))
        if not mine:
            (catch if v.startswith("mut_") else controls).append((v, case_name, e["cmd"], "-", False, "not run", "-"))

for v in sorted(declared - in_suite):
    problems.append("%s is declared by a plugin in tests/mutants/ but runs on no case of the suite" % v)
for v in sorted(in_suite - declared):
    problems.append("%s is in the suite but no plugin in tests/mutants/ declares it" % v)

print()
print("## Mutants: every row must be FAILED")
print()
print("| mutant | case | command | point | caught? | how |")
print("| --- | --- | --- | --- | --- | --- |")
for v, case, cmd, point, ok, status, text in catch:
    verdict = "yes" if ok else "**NO** (%s)" % status
    print("| %s | %s | %s | %s | %s | %s |" % (v, case, cmd, cell(point), verdict, cell(text)))
print()
print("## Controls: every row must be verified")
print()
print("| control | case | command | point | status | errors |")
print("| --- | --- | --- | --- | --- | --- |")
for v, case, cmd, point, ok, status, text in controls:
    print("| %s | %s | %s | %s | %s | %s |" % (v, case, cmd, cell(point), status if ok else "**%s**" % status,
                                              cell(text)))
print()

mutants = sorted({c[0] for c in catch})
missed = sorted({c[0] for c in catch if not c[4]})
bad_controls = [c for c in controls if not c[4]]
print("%d of %d mutants caught on every point (%d rows); %d of %d control rows verified" %
      (len(mutants) - len(missed), len(mutants), len(catch), len(controls) - len(bad_controls), len(controls)))
for p in problems:
    print("mutants.sh: " + p)
for v in missed:
    print("mutants.sh: not caught everywhere: " + v)
for c in bad_controls:
    print("mutants.sh: control %s on %s %s: %s" % (c[0], c[1], c[3], c[5]))
sys.exit(0 if not missed and not bad_controls and not problems and catch else 1)
PY
rc=$?
echo "mutants.sh: reports in $work"
exit $rc
