#!/bin/bash
# link_system_archives.sh LIB_DIR LINK_COMMAND...: runs the link command with each shared library of LIB_DIR (the
# system's library directory) replaced by its static archive where the system has one (libgrpc++.so.1.51 →
# libgrpc++.a, -lre2 → libre2.a). For the `podscope` CLI (cli/CMakeLists.txt): a process linked against ~60 shared
# libraries spends ~6 ms of CPU in the dynamic loader before main, more than `podscope analyze` needs for a small
# run. Libraries without an archive (glibc, libstdc++, simdjson...) stay shared.
set -euo pipefail
lib_dir=$1
shift
args=()
swapped=()
kept=()
for arg in "$@"; do
  archive=""
  if [[ "$arg" =~ ^${lib_dir}/(lib[^/]+)\.so(\.[0-9.]+)?$ ]]; then
    archive="${lib_dir}/${BASH_REMATCH[1]}.a"
  elif [[ "$arg" =~ ^-l([A-Za-z0-9_+-]+)$ ]]; then
    archive="${lib_dir}/lib${BASH_REMATCH[1]}.a"
  fi
  # glibc's own libraries (-lm, -ldl, -lrt, -lpthread) stay shared: a static one beside the shared libc breaks.
  case "$archive" in
    */libm.a | */libdl.a | */librt.a | */libpthread.a | */libc.a) archive="" ;;
  esac
  if [[ -n "$archive" && -f "$archive" ]]; then
    args+=("$archive")
    swapped+=("$(basename "$archive" .a)")
  else
    args+=("$arg")
    [[ "$arg" =~ ^${lib_dir}/lib[^/]+\.so ]] && kept+=("$arg")
  fi
done
# A library that stays shared but needs one made static would bring a second copy of it: then nothing is swapped.
for lib in "${kept[@]}"; do
  for needed in $(readelf -d "$lib" 2>/dev/null | sed -n 's/.*Shared library: \[\(lib[^.]*\)\.so.*/\1/p'); do
    for name in "${swapped[@]}"; do
      if [[ "$needed" == "$name" ]]; then exec "$@"; fi
    done
  done
done
exec "${args[@]}"
