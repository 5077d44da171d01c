#!/usr/bin/env bash
# Installs the Debian packages podscope needs, when missing: `deps.sh` what the demo needs (build tools, libraries),
# `deps.sh test` that and the tools tests drive (promtool, chromium, ip, clang for the instrumented build and the
# format check, python3's venv for the framework test environments, whose packages come from PyPI:
# python/requirements/). The one list of dependencies.
# Usage: bash scripts/deps.sh [test]
set -euo pipefail

packages=(
  # build tools
  build-essential cmake pkg-config git
  # libraries (the test and benchmark frameworks too: the one configuration of the tree finds them)
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libboost-dev libyaml-cpp-dev prometheus-cpp-dev libcli11-dev
  zlib1g-dev libzstd-dev libsystemd-dev libsimdjson-dev libssl-dev libcrypt-dev libacl1-dev
  # HTTP: upstream profilers over gRPC's wire, object storage (storage/) with SigV4 signing; its XML answers
  libcurl4-openssl-dev libexpat1-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  # what the demo runs beside the binaries
  python3 procps
)
test_packages=(
  # the instrumented build (ASan + UBSan + libFuzzer): the release's clang (14 on Debian 12, 19 on Debian 13; the format
  # check's clang-format is pinned from PyPI instead, so both releases format alike)
  clang libclang-rt-dev
  # tools the tests run (file: CPack's look at the binaries the Debian package test builds; python3-yaml: the deploy
  # tests read the manifests)
  prometheus python3-venv python3-websocket python3-yaml file chromium iproute2 systemd curl
)
case "${1:-}" in
  "") ;;
  test) packages+=("${test_packages[@]}") ;;
  *)
    echo "usage: $0 [test]" >&2
    exit 2
    ;;
esac

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "podscope: installing ${missing[*]}" >&2
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO=sudo
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
