#!/usr/bin/env bash
# The two Quick start commands: `./run.sh demo` (a local demo pod, captured and analysed) and `./run.sh test` (the
# whole suite: the framework test environments, made once and cached in build/venv; the build's tests; then the fuzz
# targets' deterministic smoke runs in an instrumented clang build).
# `./run.sh test-sanitize` runs the whole suite in that instrumented build (ASan + UBSan), for hostile-input work.
set -euo pipefail
cd "$(dirname "$0")"

# ccache, where installed, makes a rebuild of unchanged sources (a fresh clone, another checkout) a cache read; it
# caches compiles that use the precompiled header (cmake/precompiled_headers.cmake) only with this sloppiness.
launcher=()
command -v ccache >/dev/null && launcher=(
  "-DCMAKE_CXX_COMPILER_LAUNCHER=env;CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime;ccache"
  -DCMAKE_C_COMPILER_LAUNCHER=ccache)

# build PACKAGES [TARGETS...]: the packages scripts/deps.sh names PACKAGES ("" the demo's, "test" the tests' too),
# then TARGETS, or everything.
build() {
  local packages="$1"
  shift
  bash scripts/deps.sh ${packages:+"$packages"}
  cmake -S . -B build -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-Release}" "${launcher[@]}" >/dev/null
  cmake --build build -j"$(nproc)" ${1:+--target "$@"}
}

# The instrumented clang build (ASan + UBSan + libFuzzer) in build-sanitize/, one directory for `test` (the fuzz
# targets), `test-sanitize` (everything) and scripts/fuzz.sh, so none rebuilds what another built; TARGETS... or
# everything.
sanitized_build() {
  CC=clang CXX=clang++ cmake -S . -B build-sanitize -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPODSCOPE_SANITIZE=ON \
    "${launcher[@]}" >/dev/null
  cmake --build build-sanitize -j"$(nproc)" ${1:+--target "$@"}
}

# The tests run processes as other users (nobody, and uids no account has) that must reach the build: a checkout in
# a home only its owner may enter (root's /root) is refused at once, rather than by those tests one by one.
check_others_reach_checkout() {
  [ "$(id -u)" -ne 0 ] && return 0
  setpriv --reuid=65534 --regid=65534 --clear-groups test -x "$PWD/run.sh" && return 0
  echo "podscope: the tests run processes as other users (nobody), who cannot reach $PWD: a directory above it is" \
    "closed to them (\`namei -m $PWD\` shows which). Clone into a directory they may enter, such as /srv or /opt," \
    "or open that directory to them with \`chmod o+x DIR\`." >&2
  exit 1
}

case "${1:-}" in
  demo)
    # Only what the demo runs: the tests and benchmarks are most of the tree's build.
    build "" podscope podscope-agent podscope-coordinator ring_trainer
    exec bash scripts/demo_pod.sh build
    ;;
  test)
    check_others_reach_checkout
    build test
    bash scripts/python_envs.sh build
    bash scripts/check_format.sh build
    ctest --test-dir build --output-on-failure --timeout 600 -j"$(nproc)"
    sanitized_build fuzzers
    exec ctest --test-dir build-sanitize --output-on-failure -L fuzz -j"$(nproc)"
    ;;
  test-sanitize)
    check_others_reach_checkout
    bash scripts/deps.sh test
    sanitized_build
    exec ctest --test-dir build-sanitize --output-on-failure --timeout 900 -j"$(nproc)"
    ;;
  *)
    echo "usage: $0 demo|test|test-sanitize" >&2
    exit 2
    ;;
esac
