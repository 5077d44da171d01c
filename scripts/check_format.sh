#!/usr/bin/env bash
# Fails when a C/C++ or JavaScript file tracked by git (report.html's scripts among them) is not formatted as
# .clang-format says (Debian's clang-format 14).
# Fix with: git ls-files '*.cc' '*.h' '*.c' '*.cu' '*.js' | xargs clang-format-14 -i
set -euo pipefail
cd "$(dirname "$0")/.."
git ls-files -z '*.cc' '*.h' '*.c' '*.cu' '*.js' | xargs -0 clang-format-14 --dry-run -Werror
