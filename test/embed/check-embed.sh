#!/usr/bin/env bash
#===- check-embed.sh - Build examples/embed against an installed stagec --===#
#
# Usage: check-embed.sh BUILD_DIR SOURCE_DIR
# Installs the build into a scratch prefix, configures and builds the
# out-of-tree example with find_package(STG), runs it on the Llama template
# and checks that its own pass ran after the built-in ones.
#
#===----------------------------------------------------------------------===#
set -euo pipefail
build="$1"
src="$2"
work="$build/test/embed-work"
rm -rf "$work"
mkdir -p "$work"
cmake --install "$build" --prefix "$work/prefix" > "$work/install.log"
cmake -S "$src/examples/embed" -B "$work/build" -G Ninja \
  -DCMAKE_PREFIX_PATH="$work/prefix" > "$work/configure.log"
cmake --build "$work/build" > "$work/build.log"
out="$("$work/build/collective-census" "$src/templates/llama.stg" L=4)"
echo "$out"
# With sequence parallelism, each of the 4 layers gathers before and
# reduce-scatters after attention and the MLP, plus embedding and head.
grep -qx 'reducescatter over (tp): 9 x, .*' <<<"$out"
grep -qx 'allgather over (tp): 9 x, .*' <<<"$out"
grep -q 'allgather over (cp): 8 x' <<<"$out"
if grep -q allreduce <<<"$out"; then
  echo "unexpected allreduce with sequence parallelism" >&2
  exit 1
fi
echo "embed example: OK"
