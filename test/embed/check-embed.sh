#!/usr/bin/env bash
#===- check-embed.sh - Build examples/embed against an installed stagec --===#
#
# Usage: check-embed.sh BUILD_DIR SOURCE_DIR
# Installs the build into a scratch prefix, configures and builds the
# out-of-tree example with find_package(STG), runs it on the Llama template
# and checks that its own pass ran after the built-in ones; builds plan-time
# (the driver and the performance model) and checks its step estimate.
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

# The driver and the performance model through the installed package: a
# two-stage pipeline of the small Llama on H100 gives two stages, each with
# compute and communication, and a step no shorter than either stage's work.
out="$("$work/build/plan-time" "$src/templates/llama.stg" H100 tp=2 pp=2 \
       L=4 S=256 D=512 F=1024 NH=8 KVH=4 V=1024)"
echo "$out"
grep -qx 'ranks: 4' <<<"$out"
grep -qE '^stage 1: compute [0-9.]+ ms, communication [0-9.]+ ms$' <<<"$out"
awk '/^stage/ { if ($4 + 0 > busy) busy = $4 + 0 }
     /^step:/ { step = $2 + 0 }
     END { exit !(step > 0 && step >= busy) }' <<<"$out"
echo "embed example: OK"
