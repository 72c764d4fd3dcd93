#!/usr/bin/env bash
# plugins.sh ATTNBENCH CASES_DIR EXAMPLES_DIR: the four example plugins, loaded beside the
# built-in variants, must each verify on every smoke point they support, and the run must
# fail nothing. Exit 3 (skipped) without a GPU.
bin=$1 cases=$2 examples=$3
out=$("$bin" verify smoke/softmax smoke/gemm smoke/decode smoke/paged --cases-dir "$cases" \
  --plugin "$examples/softmax_rows.cu" --plugin "$examples/tiled_gemm.cu" \
  --plugin "$examples/decode_simple.cu" --plugin "$examples/paged_v1.cu" 2>&1)
rc=$?
printf '%s\n' "$out"
if [ $rc = 3 ] && grep -q "no usable CUDA device" <<<"$out"; then echo "skipped: no GPU"; exit 3; fi
[ $rc = 0 ] || { echo "plugins.sh: exit $rc, expected 0"; exit 1; }
for v in my_softmax my_tiled_gemm my_decode my_paged_v1; do
  n=$(grep -cE "^ *.* $v +verified" <<<"$out")
  [ "$n" -gt 0 ] || { echo "plugins.sh: no verified row of $v"; exit 1; }
  echo "$v: $n verified rows"
done
grep -qE "^[0-9]+ passed, 0 failed" <<<"$out" || { echo "plugins.sh: expected 0 failed"; exit 1; }
