#!/usr/bin/env bash
# The two Quick start commands: `./run.sh demo` (a local demo pod, captured and analysed) and `./run.sh test`.
set -euo pipefail
cd "$(dirname "$0")"

build() {
  bash scripts/deps.sh
  cmake -S . -B build -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-Release}" >/dev/null
  cmake --build build -j"$(nproc)"
}

case "${1:-}" in
  demo)
    build
    exec bash scripts/demo_pod.sh build
    ;;
  test)
    build
    exec ctest --test-dir build --output-on-failure --timeout 600 -j"$(nproc)"
    ;;
  *)
    echo "usage: $0 demo|test" >&2
    exit 2
    ;;
esac
