#!/usr/bin/env bash
# Runs on a GPU machine, from a bundle made by gpu_bundle.sh: the CUPTI injection library and the NVML collector
# for real. (1) the CUDA program traced to a file; (2) a podscope-agent with NVML, the program injected and
# connected to it, a 2 s capture + analysis through the CLI, a Monitor query and a /metrics scrape.
# Usage: bash gpu_machine_check.sh OUT_DIR   (writes standalone.xplane.pb, capture.tgz, logs into OUT_DIR)
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="$(mkdir -p "${1:?usage: $0 OUT_DIR}" && cd "$1" && pwd)"
export LD_LIBRARY_PATH="$here/lib"
cupti="$here/lib/libpodscope_cupti.so"
work="$(mktemp -d)"

echo "== GPU"; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv

echo "== 1. standalone trace file"
PODSCOPE_CUPTI_TRACE_FILE="$out/standalone.xplane.pb" CUDA_INJECTION64_PATH="$cupti" NVTX_INJECTION64_PATH="$cupti" \
  "$here/bin/cuda_training_loop"
echo "exit $?"; ls -l "$out/standalone.xplane.pb"

echo "== 2. agent + injected program + capture"
"$here/bin/podscope-agent" --listen 127.0.0.1:8466 --metrics_listen 127.0.0.1:9466 --host_name gpuhost \
  --socket "$work/agent.sock" --sample_interval_ms 200 2>"$out/agent.log" &
agent=$!
sleep 2
PODSCOPE_AGENT_SOCKET="$work/agent.sock" CUDA_INJECTION64_PATH="$cupti" NVTX_INJECTION64_PATH="$cupti" \
  "$here/bin/cuda_training_loop" 8 >"$out/program.log" 2>&1 &
program=$!
sleep 3
"$here/bin/podscope" status --service_addr 127.0.0.1:8466
"$here/bin/podscope" capture --service_addr 127.0.0.1:8466 --logdir "$work/tb" --duration_ms 2000
echo "capture exit $?"
"$here/bin/podscope" capture --service_addr 127.0.0.1:8466 --monitoring_level 2 --num_queries 1 --duration_ms 1000
python3 -c 'import urllib.request; print(urllib.request.urlopen("http://127.0.0.1:9466/metrics").read().decode())' \
  | grep -E '^podscope_(gpu|collector_status)' >"$out/metrics.txt"
wait "$program"; echo "program exit $?"
kill -TERM "$agent"; wait "$agent"
tar czf "$out/capture.tgz" -C "$work" tb
cat "$out/program.log"
echo "== metrics"; head -40 "$out/metrics.txt"
rm -rf "$work"
