#!/usr/bin/env bash
# python_plugins.sh ATTNBENCH CASES_DIR SOURCE_DIR: the Python plugins on the GPU (issue 47).
# Every peer file in kernels/peers/ and every Python example in kernels/plugin/examples/ is
# loaded beside the built-in variants and verified on the smoke cases (and on smoke variations
# that reach the options each one takes: GQA and MHA, square and not, both causal alignments,
# soft-capping, ALiBi, windows, block-sparse, a ragged batch, SDPA's backward kernels on
# attention_backward), then timed briefly in graph mode,
# which captures the Python launches in a CUDA graph. Fails when any of their rows is FAILED or
# ERROR, or when a file has no verified row at all. Rows a variant skips are not failures: each
# file's supports() refuses what it does not compute exactly.
# Exit 3 (skipped) without a GPU, or when the python3 attnbench runs (ATTNBENCH_PYTHON, else
# the one on PATH) cannot import torch; the Triton examples also need triton.
set -u
bin=$1 cases=$2 src=$3
py=${ATTNBENCH_PYTHON:-python3}
if ! "$py" -c "import torch" >/dev/null 2>&1; then echo "skipped: $py cannot import torch"; exit 3; fi
have_triton=1
"$py" -c "import triton" >/dev/null 2>&1 || have_triton=0
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
peers=$src/kernels/peers examples=$src/kernels/plugin/examples
# A short timing: enough to capture and replay the graph, not to measure.
quick=(--set bench.warmup_ms=5 --set bench.min_time_ms=10 --set bench.max_time_ms=50 --mode graph)

n=0
# check CMD PLUGIN PATTERN BASELINE CASE [ARGS...]: `attnbench CMD CASE` with one plugin file,
# its variants (-k PATTERN) and the op's baseline, the report kept for the judgement below.
check() {
  local cmd=$1 plugin=$2 pattern=$3 base=$4 case=$5
  shift 5
  n=$((n + 1))
  "$bin" "$cmd" "$case" --cases-dir "$cases" --plugin "$plugin" -k "$pattern" -k "$base" "$@" \
    --format json -o "$work/$n.json" </dev/null >"$work/$n.out" 2>&1
  local rc=$?
  echo "[$n] attnbench $cmd $case --plugin ${plugin#"$src"/} -k '$pattern' $*: exit $rc"
  if [ $rc = 3 ] && grep -q "no usable CUDA device\|no CUDA device" "$work/$n.out"; then
    echo "skipped: no GPU"
    exit 3
  fi
  # 0: every row verified; 1: some row did not (judged below, with the others). Else: shown.
  [ $rc = 0 ] || [ $rc = 1 ] || tail -n 5 "$work/$n.out" | sed 's/^/    /'
  printf '%s\t%s\t%s\t%s\n' "$n" "$(basename "$plugin")" "$pattern" "$rc" >>"$work/manifest.tsv"
}

# PyTorch's softmax and GEMM.
check verify "$peers/torch_ops.py" 'torch_*' naive smoke/softmax
check verify "$peers/torch_ops.py" 'torch_*' cublas smoke/gemm
check verify "$peers/torch_ops.py" 'torch_*' cublas smoke/gemm-odd
check run "$peers/torch_ops.py" 'torch_*' naive smoke/softmax --set dtype=bf16 --set shape.cols=4096 "${quick[@]}"

# SDPA's backends: GQA 2:1 with seq_q < seq_k (bottom-right causal: the FA2 op, explicit masks),
# MHA, square (is_causal), top-left.
check verify "$peers/torch_sdpa.py" 'torch_sdpa_*' naive smoke/attention
check verify "$peers/torch_sdpa.py" 'torch_sdpa_*' naive smoke/attention --set dtype=bf16 --set shape.kv_heads=4
check verify "$peers/torch_sdpa.py" 'torch_sdpa_*' naive smoke/attention --set dtype=fp16 --set shape.seq_k=33
check verify "$peers/torch_sdpa.py" 'torch_sdpa_*' naive smoke/attention --set dtype=bf16 --set shape.causal=top_left
check run "$peers/torch_sdpa.py" 'torch_sdpa_*' naive smoke/attention --set dtype=bf16 "${quick[@]}"

# SDPA's backward kernels alone (attention_backward, issue 50): FA2's and cuDNN's backward on
# attnbench's o and lse. The smoke case is GQA 4:2 with seq_q 33 < seq_k 70, so FA2 runs causal
# bottom-right and cuDNN top-left (each skips the other alignment); then MHA square fp16 at
# head_dim 128, where both run every mask; then graph mode, which captures the backward ops.
check verify "$peers/torch_sdpa.py" 'torch_sdpa_*_bwd' naive smoke/attention_backward --set dtype=bf16
check verify "$peers/torch_sdpa.py" 'torch_sdpa_*_bwd' naive smoke/attention_backward --set dtype=fp16 \
  --set shape.kv_heads=4 --set shape.seq_k=33 --set shape.head_dim=128
check run "$peers/torch_sdpa.py" 'torch_sdpa_*_bwd' naive smoke/attention_backward --set dtype=bf16 "${quick[@]}"

# The absorbed MLA in PyTorch (mla, issue 49): its gather through the block tables and its two
# fp32 batched matmuls, over the smoke case's every point (fp32 and bf16 queries, the cache in the
# dtype and in FlashMLA's fp8 layout, s_q 1 and 2, blocks of 64 and 24); then graph mode, which
# captures the gather's temporaries.
check verify "$peers/torch_mla.py" torch_mla naive smoke/mla
check run "$peers/torch_mla.py" torch_mla naive smoke/mla --set dtype=bf16 "${quick[@]}"

# FlexAttention: masks, score_mods, block-sparse (blocks of 64 and 128), the ragged batch
# (sinks off: the smoke batches have them, which FlexAttention refuses).
flex=$peers/flex_attention.py
check verify "$flex" 'torch_flex*' naive smoke/attention --set dtype=bf16
check verify "$flex" 'torch_flex*' naive smoke/attention --set dtype=fp16 --set shape.softcap=20 \
  --set shape.alibi=true --set shape.window=16
check verify "$flex" 'torch_flex*' naive smoke/attention --set dtype=bf16 --set shape.causal=top_left --set shape.window=9
check verify "$flex" 'torch_flex*' naive smoke/attention --set dtype=bf16 --set shape.seq_q=300 --set shape.seq_k=300 \
  --set 'shape.sparse_block=[64,128]' --set shape.sparse_local=1 --set shape.sparse_random=1 --set shape.sparse_global=1
check verify "$flex" 'torch_flex*' naive smoke/ragged-same-dtype --set shape.sinks=false --set dtype=bf16
check verify "$flex" 'torch_flex*' naive smoke/ragged-same-dtype --set shape.sinks=false --set dtype=fp16 \
  --set shape.kv_heads=2 --set shape.window=8 --set shape.softcap=20 --set shape.alibi=true
check run "$flex" 'torch_flex*' naive smoke/attention --set dtype=bf16 "${quick[@]}"
check run "$flex" 'torch_flex*' naive smoke/ragged-same-dtype --set shape.sinks=false --set dtype=bf16 \
  --set shape.kv_heads=2 "${quick[@]}"

# The Triton examples.
if [ $have_triton = 1 ]; then
  check verify "$examples/triton_softmax.py" triton_softmax naive smoke/softmax
  check verify "$examples/triton_flash_attention.py" triton_flash naive smoke/attention
  check verify "$examples/triton_flash_attention.py" triton_flash naive smoke/attention --set dtype=bf16 \
    --set shape.seq_q=130 --set shape.seq_k=130 --set shape.head_dim=128
  check verify "$examples/triton_flash_attention.py" triton_flash naive smoke/attention --set dtype=fp16 \
    --set shape.causal=top_left
  check run "$examples/triton_softmax.py" triton_softmax naive smoke/softmax --set dtype=bf16 --set shape.cols=4096 \
    "${quick[@]}"
  check run "$examples/triton_flash_attention.py" triton_flash naive smoke/attention --set dtype=bf16 "${quick[@]}"
  # docs/plugins.md's five-minute Python tutorial, as the page shows it.
  awk '/Save this as `my_softmax.py`/ {seen = 1} seen && /^```python$/ {on = 1; next} on && /^```$/ {exit} on' \
    "$src/docs/plugins.md" > "$work/my_softmax.py"
  if [ -s "$work/my_softmax.py" ]; then
    check verify "$work/my_softmax.py" 'my_*' naive smoke/softmax
  else
    echo "FAIL: docs/plugins.md has no \`\`\`python block after \"Save this as \`my_softmax.py\`\""
    exit 1
  fi
else
  echo "the Triton examples skipped: $py cannot import triton"
fi

# An exception in launch() or supports() is the row's ERROR, never a crash; the run goes on
# (tests/plugins/py_raises.py: its rows must be ERROR, and naive beside them verified).
check verify "$src/tests/plugins/py_raises.py" 'raises_*' naive smoke/softmax --set dtype=fp32 --set shape.cols=33

# The judgement (tests/python_plugins_judge.py, tested on the CPU by test_python_plugins_judge.py).
"$py" "$src/tests/python_plugins_judge.py" "$work"
