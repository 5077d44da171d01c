#!/bin/sh
# Runs one libFuzzer target over its seed corpora without writing into them: new inputs go to a fresh scratch
# corpus. CI: `run_fuzzer.sh TARGET -runs=N` (deterministic with -seed=1); long runs: scripts/fuzz.sh.
# Usage: run_fuzzer.sh TARGET SCRATCH_DIR SEED_DIRS... -- LIBFUZZER_FLAGS...
set -eu
target="$1"; scratch="$2"; shift 2
rm -rf "$scratch" && mkdir -p "$scratch"
seeds=""
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  [ -d "$1" ] && seeds="$seeds $1"
  shift
done
[ $# -gt 0 ] && shift
# Abseil's hash tables poison their empty slots for ASan in header code, which the uninstrumented system Abseil (Debian
# 13's) does not keep in step: without this our instrumented inserts read as use-after-poison. scripts/fuzz.sh too.
export ASAN_OPTIONS="allow_user_poisoning=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
# shellcheck disable=SC2086 # seed directories are separate arguments
exec "$target" -artifact_prefix="$scratch/" "$@" "$scratch" $seeds
