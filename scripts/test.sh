#!/usr/bin/env bash
#===- test.sh - Install, build, and run every test -----------------------===#
#
# The README's second command and what CI runs (.ci/run): unit tests
# (GoogleTest) and lit + FileCheck tests, all through ctest.
#
#===----------------------------------------------------------------------===#
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bash "$root/scripts/install-deps.sh"
bash "$root/scripts/build.sh"
build="${STG_BUILD_DIR:-$root/build}"
cd "$build"
ctest --output-on-failure -j2
