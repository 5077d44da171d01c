#!/usr/bin/env bash
# Fails when a C/C++ or JavaScript file tracked by git (report.html's scripts among them) is not formatted as
# .clang-format says, by the clang-format that python/requirements/format.txt pins (the same on every release), from
# the environment scripts/python_envs.sh makes in BUILD_DIR/venv/format.
# Fix with: git ls-files '*.cc' '*.h' '*.c' '*.cu' '*.js' | xargs BUILD_DIR/venv/format/bin/clang-format -i
# Usage: bash scripts/check_format.sh [BUILD_DIR]   (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
clang_format="${1:-build}/venv/format/bin/clang-format"
if [[ ! -x "$clang_format" ]]; then
  # As the framework tests do where their environment could not be installed (an offline box): said, and skipped,
  # except where PODSCOPE_REQUIRE_FRAMEWORKS=1 (CI) makes it an error.
  echo "check_format: no $clang_format (make it with: bash scripts/python_envs.sh ${1:-build}); not checked" >&2
  [[ "${PODSCOPE_REQUIRE_FRAMEWORKS:-}" == 1 ]] && exit 1
  exit 0
fi
git ls-files -z '*.cc' '*.h' '*.c' '*.cu' '*.js' | xargs -0 "$clang_format" --dry-run -Werror
