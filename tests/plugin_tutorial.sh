#!/usr/bin/env bash
# plugin_tutorial.sh cpu|gpu ATTNBENCH CASES_DIR DOC: the softmax plugin docs/plugins.md
# teaches (its first ```cuda block) must compile and plan on CPU (its variant on the fp32
# points, skipped with the tutorial's reason on fp16), and verify on a GPU. Exit 3
# (skipped) in gpu mode without a GPU.
mode=$1 bin=$2 cases=$3 doc=$4
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
awk '/^```cuda$/{on=1; next} on && /^```$/{exit} on' "$doc" > "$dir/my_softmax.cu"
[ -s "$dir/my_softmax.cu" ] || { echo "no \`\`\`cuda block in $doc"; exit 1; }
if [ "$mode" = cpu ]; then
  out=$("$bin" verify smoke/softmax --cases-dir "$cases" --plugin "$dir/my_softmax.cu" --dry-run 2>&1); rc=$?
  printf '%s\n' "$out"
  [ $rc = 0 ] || { echo "exit $rc, expected 0"; exit 1; }
  grep -qE "dtype=fp32 cols=1000\]: .* my_softmax$" <<<"$out" || { echo "expected my_softmax on the fp32 points"; exit 1; }
  grep -qE "dtype=fp16 cols=1000\]: .*; skips my_softmax \[1\]" <<<"$out" && grep -qE "^\[1\] my_softmax: fp32 only" <<<"$out" ||
    { echo "expected my_softmax skipped on fp16 with the tutorial's reason"; exit 1; }
else
  out=$("$bin" verify smoke/softmax --cases-dir "$cases" --plugin "$dir/my_softmax.cu" -k my_softmax 2>&1); rc=$?
  printf '%s\n' "$out"
  if [ $rc = 3 ] && grep -q "no usable CUDA device" <<<"$out"; then echo "skipped: no GPU"; exit 3; fi
  [ $rc = 0 ] || { echo "exit $rc, expected 0"; exit 1; }
  grep -qE "my_softmax +verified" <<<"$out" || { echo "expected verified rows of my_softmax"; exit 1; }
  ! grep -qE "my_softmax +FAILED" <<<"$out" || { echo "a row of my_softmax failed"; exit 1; }
fi
echo "ok: the tutorial's plugin works ($mode)"
