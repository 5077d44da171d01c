#!/bin/sh
# deploy/systemd for the agent: the unit passes `systemd-analyze verify` (ExecStart pointed at the built binary),
# sysusers.d and tmpfiles.d apply to a scratch root, the Kineto trace directories lie in its RuntimeDirectory.
# Usage: systemd_units_test.sh SOURCE_DIR AGENT_BINARY. Exit 77 (skipped) when a tool can't run here.
set -u
src=$1
agent=$2
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
skipped=""

unit="$scratch/podscope-agent.service"
sed "s|/usr/bin/podscope-agent|$agent|" "$src/deploy/systemd/podscope-agent.service" > "$unit"
if command -v systemd-analyze >/dev/null 2>&1 && systemd-analyze --version >/dev/null 2>&1; then
  out=$(systemd-analyze verify "$unit" 2>&1)
  rc=$?
  # verify only warns (exit 0) about unknown keys: any line about our unit is a failure.
  if [ $rc -ne 0 ] || printf '%s' "$out" | grep -q "podscope-agent.service"; then
    echo "FAIL: systemd-analyze verify podscope-agent.service (rc $rc):"
    echo "$out"
    exit 1
  fi
  echo "ok: systemd-analyze verify"
else
  skipped="$skipped systemd-analyze"
fi

# The Kineto trace directories (kineto_trace_dir, default /run/podscope/kineto) lie in the unit's RuntimeDirectory,
# which every user may pass through to its own directory; the agent writes nowhere in /tmp (a private one).
service="$src/deploy/systemd/podscope-agent.service"
grep -qx 'RuntimeDirectory=podscope' "$service" || { echo "FAIL: no RuntimeDirectory=podscope"; exit 1; }
mode=$(sed -n 's/^RuntimeDirectoryMode=//p' "$service")
[ $((0$mode & 1)) -eq 1 ] || { echo "FAIL: RuntimeDirectoryMode=$mode: other users cannot reach their directories"; exit 1; }
grep -q '^kineto_trace_dir: /run/podscope/' "$src/configs/agent.yaml" ||
  { echo "FAIL: configs/agent.yaml's kineto_trace_dir is not under /run/podscope"; exit 1; }
grep -qx 'PrivateTmp=yes' "$service" || { echo "FAIL: the agent's /tmp is not private"; exit 1; }
if grep -q '^ReadWritePaths=.*/tmp' "$service"; then echo "FAIL: the agent writes in /tmp"; exit 1; fi
echo "ok: the Kineto trace directories lie in the RuntimeDirectory"

if command -v systemd-sysusers >/dev/null 2>&1 && command -v systemd-tmpfiles >/dev/null 2>&1; then
  mkdir -p "$scratch/root/etc"
  systemd-sysusers --root="$scratch/root" "$src/deploy/systemd/podscope-agent.sysusers.conf" ||
    { echo "FAIL: sysusers"; exit 1; }
  grep -q '^podscope:' "$scratch/root/etc/passwd" || { echo "FAIL: sysusers created no podscope user"; exit 1; }
  systemd-tmpfiles --root="$scratch/root" --create "$src/deploy/systemd/podscope-agent.tmpfiles.conf" ||
    { echo "FAIL: tmpfiles"; exit 1; }
  [ -d "$scratch/root/var/lib/podscope/captures" ] || { echo "FAIL: tmpfiles created no captures dir"; exit 1; }
  echo "ok: sysusers.d and tmpfiles.d"
else
  skipped="$skipped systemd-sysusers/tmpfiles"
fi

if [ -n "$skipped" ]; then
  echo "SKIPPED (not runnable in this environment):$skipped"
  exit 77
fi
exit 0
