#!/usr/bin/env bash
#===- run-fuzzer.sh - Build and run a libFuzzer target ---------------------===#
#
# Usage: test/fuzz/run-fuzzer.sh [--target NAME] SECONDS [JOBS] [FLAG...]
#
#   NAME     parse (default), import, perturb-spec, device, measured, comm-groups,
#            system, requests or command-line: the target stg-fuzz-NAME.
#   SECONDS  how long to fuzz (libFuzzer -max_total_time).
#   JOBS     parallel fuzzing processes (default 1; >1 uses -fork=JOBS).
#   Further arguments are passed to libFuzzer as they are (e.g. -seed=1).
#
# Configures build-fuzz/ (once; clang-14, -DSTG_ENABLE_FUZZER=ON, every
# library instrumented with -fsanitize=fuzzer-no-link,address,undefined),
# builds the target and runs it with its seed corpus (test/fuzz/corpus/ for
# parse, with the dictionary test/fuzz/stg.dict; test/fuzz/corpora/NAME/
# for the others). New inputs go to a scratch corpus,
# build-fuzz/corpus-work[-NAME]/ (kept between runs, so later runs resume
# from it; the committed corpus is only read). Crash, leak, timeout and OOM
# inputs are written to build-fuzz/artifacts/. The full log is
# build-fuzz/fuzz-[NAME-]<time>.log.
#
# Exits 0 after a clean run and non-zero if libFuzzer found anything (or the
# build failed). To reproduce or minimise an artifact:
#
#   build-fuzz/test/fuzz/stg-fuzz-parse build-fuzz/artifacts/crash-...
#   build-fuzz/test/fuzz/stg-fuzz-parse -minimize_crash=1 -runs=10000 \
#       -exact_artifact_path=min.stg build-fuzz/artifacts/crash-...
#
# Environment: STG_FUZZ_BUILD_DIR (default <source>/build-fuzz),
# STG_FUZZ_CC/STG_FUZZ_CXX (default clang-14/clang++-14; CC and CXX are not
# read, so a gcc in the environment does not leak in), STG_FUZZ_BUILD_JOBS
# (default 2), STG_FUZZ_TIMEOUT seconds per input before it counts as a hang
# (default 10), STG_FUZZ_MAX_LEN largest input in bytes (default 4096).
#
# See docs/fuzzing.md.
#
#===----------------------------------------------------------------------===#

set -euo pipefail

usage() {
  sed -n '3,11p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

TARGET=parse
if [[ $# -ge 2 && $1 == --target ]]; then
  TARGET=$2
  shift 2
fi
case $TARGET in
  parse|perturb-spec|device|measured|comm-groups|system|requests|command-line|import) ;;
  *) echo "run-fuzzer: unknown target '$TARGET'" >&2; usage ;;
esac
[[ $# -ge 1 ]] || usage
SECONDS_TO_RUN=$1
shift
JOBS=1
if [[ $# -ge 1 && $1 != -* ]]; then
  JOBS=$1
  shift
fi
[[ $SECONDS_TO_RUN =~ ^[0-9]+$ && $SECONDS_TO_RUN -gt 0 ]] || usage
[[ $JOBS =~ ^[0-9]+$ && $JOBS -ge 1 ]] || usage

FUZZ_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SOURCE_DIR=$(cd "$FUZZ_DIR/../.." && pwd)
BUILD_DIR=${STG_FUZZ_BUILD_DIR:-$SOURCE_DIR/build-fuzz}
BUILD_JOBS=${STG_FUZZ_BUILD_JOBS:-2}
TIMEOUT=${STG_FUZZ_TIMEOUT:-10}
MAX_LEN=${STG_FUZZ_MAX_LEN:-4096}

if [[ $TARGET == parse ]]; then
  SEED_CORPUS=$FUZZ_DIR/corpus
  DICT=$FUZZ_DIR/stg.dict
  WORK_CORPUS=$BUILD_DIR/corpus-work
  LOG_NAME=fuzz
else
  SEED_CORPUS=$FUZZ_DIR/corpora/$TARGET
  DICT=
  WORK_CORPUS=$BUILD_DIR/corpus-work-$TARGET
  LOG_NAME=fuzz-$TARGET
fi
ARTIFACTS=$BUILD_DIR/artifacts
FUZZER=$BUILD_DIR/test/fuzz/stg-fuzz-$TARGET

# Configure once; later runs only rebuild what changed.
if [[ ! -f $BUILD_DIR/CMakeCache.txt ]]; then
  # RelWithDebInfo without -DNDEBUG: assertions stay on while fuzzing.
  CC=${STG_FUZZ_CC:-clang-14} CXX=${STG_FUZZ_CXX:-clang++-14} cmake \
    -S "$SOURCE_DIR" \
    -B "$BUILD_DIR" -G Ninja \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g" \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" \
    -DSTG_ENABLE_FUZZER=ON \
    -DSTG_BUILD_TESTS=OFF
fi
cmake --build "$BUILD_DIR" --target "stg-fuzz-$TARGET" -j "$BUILD_JOBS"

mkdir -p "$WORK_CORPUS" "$ARTIFACTS"
LOG=$BUILD_DIR/$LOG_NAME-$(date +%Y%m%d-%H%M%S).log
MARKER=$(mktemp "$BUILD_DIR/.fuzz-start.XXXXXX")
trap 'rm -f "$MARKER"' EXIT

FLAGS=(
  -max_total_time="$SECONDS_TO_RUN"
  -timeout="$TIMEOUT"
  -max_len="$MAX_LEN"
  -artifact_prefix="$ARTIFACTS/$TARGET-"
  -print_final_stats=1
)
if [[ -n $DICT ]]; then
  FLAGS+=(-dict="$DICT")
fi
if [[ $JOBS -gt 1 ]]; then
  FLAGS+=(-fork="$JOBS")
fi

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:symbolize=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

echo "run-fuzzer: $FUZZER for ${SECONDS_TO_RUN}s, $JOBS job(s); log $LOG" >&2
status=0
# The work corpus comes first: libFuzzer writes new inputs there only.
(cd "$BUILD_DIR" &&
  "$FUZZER" "${FLAGS[@]}" "$@" "$WORK_CORPUS" "$SEED_CORPUS") 2>&1 |
  tee "$LOG" || status=$?

# Anything libFuzzer wrote to artifacts/ during this run is a finding.
mapfile -t found < <(find "$ARTIFACTS" -type f -newer "$MARKER" \
  \( -name "$TARGET-crash-*" -o -name "$TARGET-leak-*" \
     -o -name "$TARGET-timeout-*" -o -name "$TARGET-oom-*" \
     -o -name "$TARGET-slow-unit-*" \) | sort)
if [[ ${#found[@]} -gt 0 ]]; then
  echo "run-fuzzer: libFuzzer wrote ${#found[@]} artifact(s):" >&2
  printf '  %s\n' "${found[@]}" >&2
  [[ $status -ne 0 ]] || status=1
fi
if [[ $status -ne 0 ]]; then
  echo "run-fuzzer: FAILED (status $status); see $LOG" >&2
  exit "$status"
fi
echo "run-fuzzer: clean run; corpus $(find "$WORK_CORPUS" -type f | wc -l) inputs" >&2
