#!/usr/bin/env bash
#===- build.sh - Configure and build stagec into build/ ------------------===#
#
# Usage: scripts/build.sh [extra cmake arguments]
# The build directory can be changed with STG_BUILD_DIR.
#
#===----------------------------------------------------------------------===#
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${STG_BUILD_DIR:-$root/build}"
if [ ! -f "$build/build.ninja" ]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@"
fi
ninja -C "$build"
