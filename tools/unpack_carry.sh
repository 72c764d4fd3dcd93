#!/usr/bin/env bash
# Tool, used by the GPU workflow: unpacks the binaries carried to the GPU machine into build/.
# Nothing in the tree calls it, yet it is in use: a GPU session's command starts with
# `bash tools/unpack_carry.sh`, then runs tools/gpu_session.sh (tools/README.md).
# On the GPU machine: unpacks build-carry/ (binaries built here for sm_90a, xz-compressed
# to fit the device tool's carry limit, and the CTest files) into build/, and links the
# source path the CTest files name to this checkout.
set -e
mkdir -p build/bin build/tests
for f in build-carry/*.xz; do xz -dc "$f" > "build/bin/$(basename "$f" .xz)"; chmod +x "build/bin/$(basename "$f" .xz)"; done
cp build-carry/CTestTestfile.cmake build/
cp build-carry/tests-CTestTestfile.cmake build/tests/CTestTestfile.cmake
src=$(sed -n 's/^# Source directory: //p' build/CTestTestfile.cmake)
if [ -n "$src" ] && [ "$src" != "$PWD" ] && [ ! -e "$src" ]; then mkdir -p "$(dirname "$src")" && ln -s "$PWD" "$src"; fi
ls -la build/bin
