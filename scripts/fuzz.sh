#!/usr/bin/env bash
# A long fuzzing run of one target: ./scripts/fuzz.sh TARGET SECONDS (targets: tests/fuzz/*_fuzzer.cc).
# Builds the instrumented clang build (build-sanitize/) when needed, starts from the target's seed corpora plus what
# earlier long runs found (kept in build-sanitize/corpus/TARGET), with the smoke run's flags (-max_len), and prints
# libFuzzer's final figures (execs, exec/s).
set -euo pipefail
cd "$(dirname "$0")/.."
target="${1:?usage: $0 TARGET SECONDS}"
seconds="${2:?usage: $0 TARGET SECONDS}"
bash scripts/deps.sh test
CC=clang CXX=clang++ cmake -S . -B build-sanitize -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPODSCOPE_SANITIZE=ON >/dev/null
cmake --build build-sanitize -j"$(nproc)" --target "$target"
seeds=$(while read -r dir; do [[ -d "$dir" ]] && echo "$dir"; done <"build-sanitize/fuzz/$target.seeds")
flags=$(cat "build-sanitize/fuzz/$target.flags")
corpus="build-sanitize/corpus/$target"
mkdir -p "$corpus"
# As tests/fuzz/run_fuzzer.sh: the system Abseil does not keep its slot poisoning in step with instrumented code.
export ASAN_OPTIONS="allow_user_poisoning=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
# shellcheck disable=SC2086 # flags and seed directories are separate arguments
exec "build-sanitize/fuzz/$target" $flags -max_total_time="$seconds" -print_final_stats=1 -artifact_prefix="$corpus/" \
  "$corpus" $seeds
