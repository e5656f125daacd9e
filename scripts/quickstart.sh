#!/usr/bin/env bash
#===- quickstart.sh - Install, build, and run stagec on a template -------===#
#
# The README's first command: on a fresh Debian 12 machine it installs what
# is missing, builds, compiles the shipped Llama-3-70B template for 32 GPUs
# (dp 8, tp 4) into out/llama70b/ with a report, and verifies the traces.
#
#===----------------------------------------------------------------------===#
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bash "$root/scripts/install-deps.sh"
bash "$root/scripts/build.sh"
build="${STG_BUILD_DIR:-$root/build}"
out="${STG_QUICKSTART_OUT:-$root/out/llama70b}"
echo "== stagec templates/llama70b.stg --dp 8 --tp 4 -o $out --report"
"$build/tools/stagec/stagec" "$root/templates/llama70b.stg" --dp 8 --tp 4 \
    --device H100 -o "$out" --report
echo "== stage-et verify $out"
"$build/tools/stage-et/stage-et" verify "$out"
