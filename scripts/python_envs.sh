#!/usr/bin/env bash
# Creates the framework test environments, one virtual environment per python/requirements/<env>.txt in
# BUILD_DIR/venv/<env> (one per framework family, as their pins conflict). A stamp of the requirements and of the
# interpreter makes a second run install nothing. An environment that cannot be installed (an offline box) is said
# so and left out, and the tests that need it skip; with PODSCOPE_REQUIRE_FRAMEWORKS=1 (CI) that is an error.
# Usage: bash scripts/python_envs.sh BUILD_DIR
set -uo pipefail
cd "$(dirname "$0")/.."
build="${1:?usage: $0 BUILD_DIR}"
status=0
for requirements in python/requirements/*.txt; do
  env="$(basename "$requirements" .txt)"
  dir="$build/venv/$env"
  want="$( (python3 --version; cat "$requirements") | sha256sum | cut -d' ' -f1)"
  if [[ -x "$dir/bin/python" && "$(cat "$dir/.stamp" 2>/dev/null)" == "$want" ]]; then
    echo "python environment $env: up to date ($dir)"
    continue
  fi
  echo "python environment $env: installing $(grep -v '^#' "$requirements" | xargs) into $dir"
  rm -rf "$dir"
  if python3 -m venv "$dir" && "$dir/bin/pip" install -q --disable-pip-version-check -r "$requirements" \
    2> >(grep -v 'is ignored: it is neither a file nor a directory' >&2); then
    echo "$want" >"$dir/.stamp"
  else
    rm -rf "$dir"
    echo "python environment $env: could not be installed; the tests that need it will skip" >&2
    [[ "${PODSCOPE_REQUIRE_FRAMEWORKS:-}" == 1 ]] && status=1
  fi
done
exit "$status"
