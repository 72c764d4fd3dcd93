#!/usr/bin/env bash
# Follows docs/design.md's two recipes, "Adding a variant" and "Adding an op", in a scratch
# copy of the committed tree, builds it, and checks that attnbench sees the results: a toy
# softmax rung (naive_copy, a copy of 1_naive.cu under a new name) and a toy op (scale,
# y = 2x, with its reference, adapter, one rung, cases and docs). It needs no GPU.
#
# A tool, not a CTest test: it builds the whole kernels library, about 10 minutes on 2 cores.
# Run it after changing the recipes or the files they name; when a step here no longer
# matches design.md, fix whichever is wrong and keep the two saying the same. The toy code
# lives in this script (heredocs) so the recipe and its test stay together.
#
#   tools/recipe_check.sh [-j JOBS] [--keep]      (JOBS defaults to 2; --keep leaves the copy)
set -euo pipefail

jobs=2
keep=0
while [ $# -gt 0 ]; do
  case "$1" in
    -j) jobs="$2"; shift 2 ;;
    -j*) jobs="${1#-j}"; shift ;;
    --keep) keep=1; shift ;;
    *) echo "usage: $0 [-j JOBS] [--keep]" >&2; exit 2 ;;
  esac
done

repo=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
scratch=$(mktemp -d "${TMPDIR:-/tmp}/recipe_check.XXXXXX")
if [ "$keep" = 0 ]; then trap 'rm -rf "$scratch"' EXIT; fi
src="$scratch/src"
build="$scratch/build"
mkdir -p "$src"
start=$(date +%s)
say() { echo "recipe_check: $*"; }
fail() { echo "recipe_check: FAILED: $*" >&2; exit 1; }

# The committed tree (HEAD), not the working tree: what a newcomer would check out.
git -C "$repo" archive HEAD | tar -x -C "$src"
say "copy of $(git -C "$repo" rev-parse --short HEAD) in $src"

# Configured before the recipes are applied: design.md says a new rung or op folder needs no
# CMake edit (CONFIGURE_DEPENDS globs), so the build below must find the new files by itself.
cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release >"$scratch/configure.log" 2>&1 ||
  { tail -20 "$scratch/configure.log"; fail "configure"; }

# Inserts `line` after the first line of `file` matching the fixed string `anchor`, or fails.
insert_after() {
  local file="$1" anchor="$2" line="$3"
  grep -qF -- "$anchor" "$file" || fail "$file has no line '$anchor' (the recipe's anchor moved)"
  ANCHOR="$anchor" LINE="$line" perl -0pi -e 's/^(.*\Q$ENV{ANCHOR}\E.*\n)/$1$ENV{LINE}\n/m' "$file"
}

# ---- Adding a variant (docs/design.md): a fourth softmax rung ----------------------------
cd "$src"
# 1. One new rung file, numbered by its place in the ladder. The toy is naive under a new name.
sed -e 's/softmax rung 1, naive:/softmax rung 4, naive_copy (recipe_check toy): rung 1 under a new name;/' \
    -e 's/naive_kernel/naive_copy_kernel/g' \
    -e 's/softmax_impl::naive(/softmax_impl::naive_copy(/' \
    -e 's#"softmax/naive"#"softmax/naive_copy"#' \
    kernels/softmax/1_naive.cu >kernels/softmax/4_naive_copy.cu
grep -q 'softmax_impl::naive_copy(' kernels/softmax/4_naive_copy.cu || fail "the copied rung has no naive_copy launcher"
# 2. Its launcher declared in the op's rungs.hpp.
insert_after kernels/softmax/rungs.hpp 'void warp_online(' \
  'void naive_copy(const SoftmaxParams& p, const LaunchContext& ctx);    // 4_naive_copy.cu'
# 3. One line in the op's table, variants.cpp: name, note, launcher, supports, workspace.
insert_after kernels/softmax/variants.cpp '       warp_online, supports, nullptr},' \
  '      {"naive_copy", "recipe_check toy: naive under a new name", naive_copy, supports, nullptr},'

# ---- Adding an op (docs/design.md): scale, y = 2x --------------------------------------
# 1. Kernels: the params header, rungs.hpp, one rung, the table.
mkdir -p kernels/scale
cat >kernels/scale/scale.hpp <<'EOF'
// scale (recipe_check toy): y = 2x, elementwise.
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/common/kernels.hpp"

namespace attnbench {

struct ScaleParams {
  const void* x;  // [n], dtype
  void* y;        // [n], dtype
  int64_t n = 0;
  DType dtype = DType::fp32;
};

const std::vector<Variant<ScaleParams>>& scale_variants();

}  // namespace attnbench
EOF
cat >kernels/scale/rungs.hpp <<'EOF'
// The scale ladder's launchers, one per rung file, for the variant table (variants.cpp).
#pragma once

#include "kernels/scale/scale.hpp"

namespace attnbench::scale_impl {

void naive(const ScaleParams& p, const LaunchContext& ctx);  // 1_naive.cu

}  // namespace attnbench::scale_impl
EOF
cat >kernels/scale/1_naive.cu <<'EOF'
// scale rung 1, naive: a grid-stride loop, one element per thread per step.
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/common/dispatch.cuh"
#include "kernels/common/storage.cuh"
#include "kernels/scale/rungs.hpp"

namespace attnbench {
namespace {

template <class T>
__global__ void naive_kernel(const T* x, T* y, int64_t n) {
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    y[i] = from_float<T>(2.f * to_float(x[i]));
}

}  // namespace

void scale_impl::naive(const ScaleParams& p, const LaunchContext& ctx) {
  with_storage(p.dtype, "scale", [&](auto tag) {
    using T = decltype(tag);
    constexpr int kBlock = 256;
    naive_kernel<T><<<grid_stride_blocks(p.n, kBlock), kBlock, 0, ctx.stream>>>(static_cast<const T*>(p.x),
                                                                              static_cast<T*>(p.y), p.n);
  });
  check_launch("scale/naive");
}

}  // namespace attnbench
EOF
cat >kernels/scale/variants.cpp <<'EOF'
// The scale ladder (recipe_check toy): 1_naive.cu.
#include <string>
#include <vector>

#include "kernels/scale/rungs.hpp"

namespace attnbench {
namespace {

std::string supports(const ScaleParams& p, const DeviceCaps&) {
  if (p.dtype == DType::fp8_e4m3) return "fp32, fp16 or bf16 only";
  return "";
}

}  // namespace

const std::vector<Variant<ScaleParams>>& scale_variants() {
  using namespace scale_impl;
  static const std::vector<Variant<ScaleParams>> table = with_added_variants<ScaleParams>({
      {"naive", "grid-stride loop, one element per thread per step", naive, supports, nullptr},
  });
  return table;
}

}  // namespace attnbench
EOF
# 2. Reference: reference/<op>.{hpp,cpp}, and the header listed in reference/reference.hpp.
cat >reference/scale.hpp <<'EOF'
// fp64 reference of scale (recipe_check toy).
#pragma once
#include "reference/common.hpp"

namespace attnbench::ref {

// yᵢⱼ = 2 xᵢⱼ. x: [rows, cols]; returns [rows.size(), cols].
Matrix scale(const float* x, int64_t cols, const Rows& rows);

}  // namespace attnbench::ref
EOF
cat >reference/scale.cpp <<'EOF'
#include "reference/scale.hpp"

namespace attnbench::ref {

Matrix scale(const float* x, int64_t cols, const Rows& rows) {
  Matrix y(static_cast<int64_t>(rows.size()), cols);
  for (size_t r = 0; r < rows.size(); ++r)
    for (int64_t c = 0; c < cols; ++c) y(static_cast<int64_t>(r), c) = 2.0 * x[rows[r] * cols + c];
  return y;
}

}  // namespace attnbench::ref
EOF
sed -i -e '$a\' reference/reference.hpp  # the file may end without a newline
echo '#include "reference/scale.hpp"' >>reference/reference.hpp
# 3. Adapter: app/ops/<op>.cpp, the OpSpec and a TableProblem. No plugin ABI (plugin_op 0).
cat >app/ops/scale.cpp <<'EOF'
// scale (recipe_check toy): y = 2x over x [rows, cols]. Bandwidth-bound.
#include "app/op.hpp"
#include "app/problem.hpp"
#include "kernels/scale/scale.hpp"

namespace attnbench {
namespace {

class ScaleProblem : public TableProblem<ScaleParams> {
 public:
  explicit ScaleProblem(const CasePoint& p)
      : TableProblem(p, scale_variants()), rows_(p.shape.num("rows")), cols_(p.shape.num("cols")) {
    add_input("x", p.dtype, {{"rows", rows_}, {"cols", cols_, 'd'}}, 1.f, false);
    add_output("y", p.dtype, {{"rows", rows_, 'i'}, {"cols", cols_, 'd'}}, 1);
  }
  Work work() const override { return {0, 2.0 * rows_ * cols_ * dtype_bytes(point().dtype), Bandwidth::copy}; }
  ref::Matrix reference(const ref::Rows& rows) const override { return ref::scale(input(0).host.data(), cols_, rows); }

 private:
  ScaleParams params() const override {
    return {input(0).device.get(), output().device.get(), rows_ * cols_, point().dtype};
  }
  int64_t rows_, cols_;
};

}  // namespace

OpSpec scale_op() {
  OpSpec op;
  op.name = "scale";
  op.summary = "y = 2x, elementwise (recipe_check toy)";
  op.keys = {
      int_key("rows", "rows of x"),
      int_key("cols", "elements per row"),
  };
  op.variants = [] { return variant_infos(scale_variants()); };
  op.make = [](const CasePoint& p) -> std::unique_ptr<Problem> { return std::make_unique<ScaleProblem>(p); };
  return op;
}

}  // namespace attnbench
EOF
# 4. Registry: the declaration and the entry in app/ops/registry.cpp.
insert_after app/ops/registry.cpp 'OpSpec model_op();' 'OpSpec scale_op();'
grep -qF 'reshape_and_cache_op(), mha_op(), model_op(),' app/ops/registry.cpp || fail "registry.cpp's list moved"
sed -i 's/reshape_and_cache_op(), mha_op(), model_op(),/reshape_and_cache_op(), mha_op(), model_op(), scale_op(),/' \
  app/ops/registry.cpp
# 5. Cases and docs: cases/<op>/, cases/smoke/<op>.toml, a docs/cases.md section.
mkdir -p cases/scale
cat >cases/scale/tiny.toml <<'EOF'
description = "recipe_check toy: scale over a few shapes"
op = "scale"

[shape]
rows = 4

[sweep]
dtype = ["fp32", "bf16"]
cols = [1, 100]
EOF
cp cases/scale/tiny.toml cases/smoke/scale.toml
cat >>docs/cases.md <<'EOF'

## op `scale`
The recipe_check toy: y = 2x over x `[rows, cols]`.

| key | type | default | meaning |
| --- | --- | --- | --- |
| `rows` | integer ≥ 1 | required | rows of x |
| `cols` | integer ≥ 1 | required | elements per row |
EOF
say "recipes applied: $(cd "$src" && find kernels/scale reference/scale.* app/ops/scale.cpp kernels/softmax/4_naive_copy.cu cases/scale -type f | wc -l) new files"

# ---- Build and check -----------------------------------------------------------------------
cmake --build "$build" -j"$jobs" --target attnbench test_docs test_ops >"$scratch/build.log" 2>&1 ||
  { grep -E "error|Error" "$scratch/build.log" | head -30; fail "build (log: $scratch/build.log)"; }
bin="$build/bin/attnbench"

list=$("$bin" list kernels)
# The variant sits under softmax: from "softmax:" to the next op's line.
echo "$list" | awk '/^softmax:/{in_op=1; next} /^[^ ]/{in_op=0} in_op' | grep -qE '^ +naive_copy ' ||
  fail "list kernels shows no softmax variant naive_copy"
echo "$list" | grep -qE '^scale: ' || fail "list kernels shows no op scale"
echo "$list" | awk '/^scale:/{in_op=1; next} /^[^ ]/{in_op=0} in_op' | grep -qE '^ +naive .*\[baseline\]' ||
  fail "list kernels shows no baseline naive under scale"
say "list kernels: softmax/naive_copy and scale/naive listed"

dry=$("$bin" verify cases/scale/tiny.toml --dry-run) || fail "verify cases/scale/tiny.toml --dry-run exited $?"
echo "$dry" | grep -qE '^tiny \[.*\]: scale .*variants: naive$' || { echo "$dry"; fail "the dry run does not run scale/naive"; }
echo "$dry" | tail -1
dry=$("$bin" verify cases/smoke/softmax.toml --dry-run -k naive_copy) || fail "softmax dry run with -k naive_copy"
echo "$dry" | grep -q 'variants: naive_copy$' || { echo "$dry"; fail "the dry run does not run softmax/naive_copy"; }
say "verify --dry-run: cases/scale/tiny.toml loads; -k naive_copy picks the new rung"

# The CPU tests the recipe names: docs/cases.md matches the registry, every entry is complete.
"$build/bin/test_docs" >"$scratch/test_docs.log" 2>&1 || { tail -20 "$scratch/test_docs.log"; fail "test_docs"; }
"$build/bin/test_ops" --gtest_filter='Registry.*' >"$scratch/test_ops.log" 2>&1 ||
  { tail -20 "$scratch/test_ops.log"; fail "test_ops Registry.*"; }
say "test_docs and test_ops Registry.* pass"

say "PASSED in $(($(date +%s) - start)) s"
