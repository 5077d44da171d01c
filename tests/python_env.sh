#!/usr/bin/env bash
# Runs COMMAND... with the framework environment ENV_DIR (made by scripts/python_envs.sh) first on PATH, so `python`
# is that environment's. When the environment is missing: exit 77, which ctest reports as a skip, or, with
# PODSCOPE_REQUIRE_FRAMEWORKS=1 (CI), fail.
# Usage: tests/python_env.sh ENV_DIR COMMAND...
env_dir="${1:?usage: $0 ENV_DIR COMMAND...}"
shift
if [[ ! -x "$env_dir/bin/python" ]]; then
  if [[ "${PODSCOPE_REQUIRE_FRAMEWORKS:-}" == 1 ]]; then
    echo "framework environment $env_dir is missing and PODSCOPE_REQUIRE_FRAMEWORKS is set" >&2
    exit 1
  fi
  echo "skipped: framework environment $env_dir is missing (bash scripts/python_envs.sh BUILD_DIR makes it)" >&2
  exit 77
fi
export PATH="$env_dir/bin:$PATH" VIRTUAL_ENV="$env_dir"
exec "$@"
