#!/usr/bin/env bash
# Installs every Debian package podscope needs to build, test and run its demo, when missing.
# The one list of dependencies: build tools, libraries, and the tools tests drive (promtool, chromium, ip, python3's
# venv for the framework test environments, whose packages come from PyPI: python/requirements/).
set -euo pipefail

packages=(
  # build tools
  build-essential cmake pkg-config git
  # the instrumented build (ASan + UBSan + libFuzzer) and the format check: clang 14 by name, on Debian 12 (its default)
  # and on Debian 13 (whose default is 19), so both releases build and format the tree alike
  clang-14 libclang-rt-14-dev clang-format-14
  # libraries
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libboost-dev libyaml-cpp-dev prometheus-cpp-dev libcli11-dev
  zlib1g-dev libzstd-dev libsystemd-dev libsimdjson-dev
  # object storage (storage/): HTTP with SigV4 signing, hashes and JWT signatures, XML answers
  libcurl4-openssl-dev libssl-dev libexpat1-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  # tools the tests and the demo run
  prometheus python3 python3-venv python3-websocket chromium iproute2 systemd procps
)

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
