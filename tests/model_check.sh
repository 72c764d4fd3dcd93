#!/usr/bin/env bash
# model_check.sh ATTNBENCH PYTHON SOURCE_DIR [--real-shapes]: GPT-2 on attnbench's kernels
# against an independent plain-PyTorch GPT-2 (tests/gpt2_check.py) on the same Hugging Face
# checkpoint: a small random one written here in the real file format (with GPT-2's
# causal-mask buffers, which the loader must ignore), or one at GPT-2 124M's shapes. Every
# variant's logits and greedy tokens are compared. Exit 3 (skipped) without a GPU, or without
# numpy and torch.
bin=$1 python=$2 src=$3 real=${4:-}
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
# CTest names the Python the build found; a GPU machine running a build made elsewhere has its own.
command -v "$python" >/dev/null || python=python3
"$python" -c "import numpy, torch" 2>/dev/null || { echo "skipped: no numpy or torch"; exit 3; }
if [ "$real" = --real-shapes ]; then
  "$python" "$src/tests/gpt2_check.py" write "$dir/gpt2.safetensors" --real-shapes --seed 5 || exit 1
  sizes='preset = "gpt2"'; generate=8; kernels='["flash_fp32+split_kv+small_linear", "flash_mma+split_kv+launches", "flash_mma+split_kv+small_linear"]'; dtypes='["fp32", "bf16"]'
else
  "$python" "$src/tests/gpt2_check.py" write "$dir/gpt2.safetensors" --layers 3 --d-model 128 --heads 2 \
    --vocab 1000 --max-positions 64 --seed 5 --prefix transformer. || exit 1
  sizes='heads = 2'; generate=24
  kernels='["naive+naive+launches", "naive+naive+small_linear", "flash_fp32+split_kv+small_linear", "flash_mma+split_kv+small_linear", "flash_mma+flash_decode+small_linear"]'
  dtypes='["fp32", "fp16", "bf16"]'
fi
cat >"$dir/case.toml" <<TOML
op = "model"
weights = "gpt2.safetensors"
kernels = $kernels

[shape]
$sizes
batch = 2
prompt = [464, 68, 758, 218, 180, 625, 262, 169, 329, 13, 5, 99]
generate = $generate

[verify]
trials = 1
max_rows = 0

[sweep]
dtype = $dtypes
TOML
"$bin" verify "$dir/case.toml" --dump "$dir/dump" >"$dir/stdout" 2>"$dir/stderr"; rc=$?
cat "$dir/stdout"
if [ "$rc" = 3 ] && grep -q "no CUDA device\|no usable CUDA device" "$dir/stderr"; then echo "skipped: no GPU"; exit 3; fi
[ "$rc" = 0 ] || { echo "attnbench verify failed: exit $rc"; cat "$dir/stderr"; exit 1; }
"$python" "$src/tests/gpt2_check.py" check "$dir/dump" --weights "$dir/gpt2.safetensors"
