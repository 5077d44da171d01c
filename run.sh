#!/usr/bin/env bash
# The two Quick start commands: `./run.sh demo` (a local demo pod, captured and analysed) and `./run.sh test` (the
# whole suite: the build's tests, then the fuzz targets' deterministic smoke runs in an instrumented clang build).
# `./run.sh test-sanitize` runs the whole suite in that instrumented build (ASan + UBSan), for hostile-input work.
set -euo pipefail
cd "$(dirname "$0")"

build() {
  bash scripts/deps.sh
  cmake -S . -B build -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-Release}" >/dev/null
  cmake --build build -j"$(nproc)"
}

# The instrumented clang build (ASan + UBSan + libFuzzer), in its own directory; TARGETS... or everything.
sanitized_build() {
  local dir="$1"
  shift
  CC=clang CXX=clang++ cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPODSCOPE_SANITIZE=ON >/dev/null
  cmake --build "$dir" -j"$(nproc)" ${1:+--target "$@"}
}

case "${1:-}" in
  demo)
    build
    exec bash scripts/demo_pod.sh build
    ;;
  test)
    build
    bash scripts/check_format.sh
    ctest --test-dir build --output-on-failure --timeout 600 -j"$(nproc)"
    sanitized_build build-fuzz fuzzers
    exec ctest --test-dir build-fuzz --output-on-failure -L fuzz -j"$(nproc)"
    ;;
  test-sanitize)
    bash scripts/deps.sh
    sanitized_build build-sanitize
    exec ctest --test-dir build-sanitize --output-on-failure --timeout 900 -j"$(nproc)"
    ;;
  *)
    echo "usage: $0 demo|test|test-sanitize" >&2
    exit 2
    ;;
esac
