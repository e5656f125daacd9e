#!/usr/bin/env bash
#===- quickstart.sh - Install, build, and run stagec on a template -------===#
#
# The README's first command: on a fresh Debian 12 machine it installs what
# is missing, builds, and compiles the shipped Llama-3-70B template.
#
#===----------------------------------------------------------------------===#
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bash "$root/scripts/install-deps.sh"
bash "$root/scripts/build.sh"
build="${STG_BUILD_DIR:-$root/build}"
echo "== stage-opt templates/llama70b.stg"
"$build/tools/stage-opt/stage-opt" "$root/templates/llama70b.stg"
