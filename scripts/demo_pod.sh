#!/usr/bin/env bash
# The demo pod on this one machine: a coordinator, 4 agents (host0..host3, each with its own ports and
# socket), 4 ring_trainer ranks (one per agent, rank 2 a straggler); a 2 s capture through the coordinator,
# the pod summary, 3 monitoring level-2 queries, then everything it started is stopped.
# Usage: bash scripts/demo_pod.sh BUILD_DIR
set -euo pipefail

build_dir="$(cd "${1:?usage: $0 BUILD_DIR}" && pwd)"
bin="$build_dir/bin"
for b in podscope podscope-agent podscope-coordinator ring_trainer; do
  [[ -x "$bin/$b" ]] || { echo "demo: $bin/$b is missing; build first (./run.sh demo builds)" >&2; exit 1; }
done

work="$(mktemp -d -t podscope-demo.XXXXXX)"
pids=()
cleanup() {
  local pid
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
    pid="${pids[i]}"
    kill -TERM "$pid" 2>/dev/null || true
  done
  for pid in "${pids[@]}"; do
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  echo "demo: stopped ${#pids[@]} process(es); logs were in $work (removed), capture kept in $logdir"
  rm -rf "$work"
}
logdir="${PODSCOPE_DEMO_LOGDIR:-$(mktemp -d -t podscope-demo-logdir.XXXXXX)}"
trap cleanup EXIT
trap 'exit 130' INT TERM

# Waits for a daemon's "listening grpc=H:P metrics=H:P" line and prints "H:P H:P".
wait_listening() {
  local log="$1" line
  for _ in $(seq 200); do
    line="$(grep -o 'listening grpc=[^ ]* metrics=[^ ]*' "$log" 2>/dev/null | head -1 || true)"
    if [[ -n "$line" ]]; then
      line="${line#listening grpc=}"
      echo "${line%% metrics=*} ${line##* metrics=}"
      return 0
    fi
    sleep 0.05
  done
  echo "demo: no listening line in $log:" >&2
  tail -20 "$log" >&2
  return 1
}

"$bin/podscope-coordinator" --listen 127.0.0.1:0 --metrics_listen 127.0.0.1:0 \
  --repository_root "$work/coordinator" --heartbeat_interval_ms 500 --clock_sync_interval_ms 2000 \
  2>"$work/coordinator.log" &
pids+=($!)
read -r coordinator coordinator_metrics < <(wait_listening "$work/coordinator.log")
echo "coordinator: grpc $coordinator, metrics http://$coordinator_metrics/metrics"

agents=()
sockets=()
for i in 0 1 2 3; do
  "$bin/podscope-agent" --listen 127.0.0.1:0 --metrics_listen 127.0.0.1:0 --host_name "host$i" \
    --socket "$work/agent$i.sock" --coordinator "$coordinator" --sample_interval_ms 200 \
    2>"$work/agent$i.log" &
  pids+=($!)
  read -r grpc metrics < <(wait_listening "$work/agent$i.log")
  agents+=("$grpc")
  sockets+=("$work/agent$i.sock")
  echo "agent host$i: grpc $grpc, metrics http://$metrics/metrics"
done

base_port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
"$bin/ring_trainer" --spawn --world 4 --base_port "$base_port" --steps 0 --straggler_rank 2 \
  --straggler_delay_ms 20 --agent_sockets "$(IFS=,; echo "${sockets[*]}")" >"$work/trainer.log" 2>&1 &
pids+=($!)
echo "ring_trainer: 4 ranks on ports $base_port..$((base_port + 3)), rank 2 a straggler (+20 ms/step)"

# Every agent registered and up.
for _ in $(seq 100); do
  up="$("$bin/podscope" status --coordinator "$coordinator" 2>/dev/null | grep -c ' up' || true)"
  [[ "$up" == 4 ]] && break
  sleep 0.1
done
"$bin/podscope" status --coordinator "$coordinator"
sleep 1  # a few training steps before the capture

echo
echo "== capture: 2 s of the whole pod through the coordinator =="
set +e
"$bin/podscope" capture --coordinator "$coordinator" --logdir "$logdir" --duration_ms 2000
code=$?
set -e
run_dir="$(ls -d "$logdir"/plugins/profile/*/ 2>/dev/null | tail -1)"
run_dir="${run_dir%/}"
echo "capture exit code $code; files:"
ls -l "$run_dir"
echo "TensorBoard: tensorboard --logdir $logdir"
echo "merged traces (ui.perfetto.dev): $run_dir/pod.perfetto-trace, $run_dir/pod.trace.json.gz"
[[ -f "$run_dir/report.html" ]] && echo "pod report: $run_dir/report.html"

echo
echo "== monitoring level 2, 3 queries =="
"$bin/podscope" capture --service_addr "$(IFS=,; echo "${agents[*]}")" --monitoring_level 2 --num_queries 3 \
  --duration_ms 500
