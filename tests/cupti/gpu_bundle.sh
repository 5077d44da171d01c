#!/usr/bin/env bash
# Packs what tests/cupti/gpu_machine_check.sh needs into one folder that can travel to a GPU machine that has
# the NVIDIA driver but none of our build dependencies: the agent, the CLI, the CUPTI injection library with
# libpodscope, the CUDA test program, libcupti, and every shared library they load except glibc's and the C++
# runtime's (the target's own are newer).
# Usage: bash tests/cupti/gpu_bundle.sh BUILD_DIR BUNDLE_DIR
set -euo pipefail
build="$(cd "${1:?usage: $0 BUILD_DIR BUNDLE_DIR}" && pwd)"
bundle="${2:?usage: $0 BUILD_DIR BUNDLE_DIR}"
mkdir -p "$bundle/bin" "$bundle/lib"
cmake --build "$build" --target podscope-agent podscope podscope_cupti cuda_training_loop >/dev/null
cp "$build/bin/podscope-agent" "$build/bin/podscope" "$build/bin/cuda_training_loop" "$bundle/bin/"
cp -P "$build"/lib/libpodscope_cupti.so "$build"/lib/libpodscope.so* "$bundle/lib/"
for f in "$bundle"/bin/podscope-agent "$bundle"/bin/podscope "$bundle"/lib/libpodscope_cupti.so; do
  ldd "$f" | awk '/=> \// {print $3}'
done | sort -u | grep -Ev '/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*|libstdc\+\+|libgcc_s|libutil|libresolv)\.so' |
  while read -r lib; do [[ -e "$bundle/lib/$(basename "$lib")" ]] || cp -L "$lib" "$bundle/lib/"; done
cp "$(dirname "$0")/gpu_machine_check.sh" "$bundle/"
du -sh "$bundle"
