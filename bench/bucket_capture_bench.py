"""A pod capture into a bucket against the same capture into a local logdir, in the same run: 16 real agents (each
beside a rank of a real ring_trainer, so the host files hold the ranks' steps, collectives and channels) and a local
S3 server (SeaweedFS, started here). Rounds alternate the two logdirs. Each round prints the capture's wall time, the
host files' total size, and what the `podscope capture` process itself cost: its peak RSS and the bytes it read from
files (rchar). A last round of each runs under strace to count the bytes the process received from its sockets
(recvmsg, recvfrom: the agents' answers over gRPC, the bucket's over HTTP) against the host files' size; it is not
timed. Run in the storage environment:
  build/venv/storage/bin/python bench/bucket_capture_bench.py [--hosts 16] [--duration_ms 2000] [--rounds 3]"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "integration"))
from bucket_runs_test import Seaweed, clean_env  # noqa: E402
from coord_pod import BIN, Daemon, free_port_block  # noqa: E402


def run_measured(argv, env):
    """Runs `argv`; its exit code, output, wall seconds, peak RSS (KiB) and /proc/<pid>/io read as it exits."""
    start = time.monotonic()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out = proc.stdout.read()
    os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)  # a zombie still shows its accounting
    with open(f"/proc/{proc.pid}/io") as f:
        io = dict(line.split(": ") for line in f.read().split("\n") if line)
    _, status, usage = os.wait4(proc.pid, 0)
    return os.waitstatus_to_exitcode(status), out, time.monotonic() - start, usage.ru_maxrss, io


def received_bytes(argv, env, tmp):
    """Runs `argv` under strace; the bytes its socket receives returned, in all, and its output."""
    trace = os.path.join(tmp, "strace.out")
    done = subprocess.run(["strace", "-f", "-qq", "-e", "trace=recvmsg,recvfrom", "-e", "signal=none", "-o", trace,
                           *argv], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    total = 0
    with open(trace) as f:
        for line in f:
            m = re.search(r"= (\d+)$", line.strip())
            if m:
                total += int(m.group(1))
    os.remove(trace)
    return total, done


def host_files_bytes_local(run_dir):
    return sum(os.path.getsize(os.path.join(run_dir, f)) for f in os.listdir(run_dir) if f.endswith(".xplane.pb"))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--hosts", type=int, default=16)
    parser.add_argument("--duration_ms", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--matrix", type=int, default=48)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="podscope_bucket_bench_") as tmp:
        s3 = Seaweed(tmp)
        env = clean_env(s3.env())
        daemons = []
        try:
            sockets, addresses = [], []
            for i in range(args.hosts):
                sock = os.path.join(tmp, f"host{i}.sock")
                agent = Daemon([f"{BIN}/podscope-agent", "--listen", "127.0.0.1:0", "--metrics_listen",
                                "127.0.0.1:0", "--host_name", f"host{i}", "--socket", sock, "--sample_interval_ms",
                                "100", "--kineto_endpoint", "", "--allowed_repository_roots", "s3://runs/bench/",
                                "--failed_uploads_directory", os.path.join(tmp, f"failed{i}")], env=env)
                daemons.append(agent)
                addresses.append(agent.wait_for(r"listening grpc=(\S+) metrics=(\S+)").group(1))
                sockets.append(sock)
            daemons.append(Daemon([f"{BIN}/ring_trainer", "--spawn", "--world", str(args.hosts), "--base_port",
                                   str(free_port_block(args.hosts)), "--steps", "0", "--matrix", str(args.matrix),
                                   "--agent_sockets", ",".join(sockets)]))
            time.sleep(3)  # the ring forms and the ranks register
            client = s3.client()
            figures = {"local": [], "bucket": []}
            for round_number in range(args.rounds):
                for kind in ("local", "bucket"):
                    logdir = os.path.join(tmp, "logs") if kind == "local" else "s3://runs/bench/logs"
                    code, out, seconds, rss_kib, io = run_measured(
                        [f"{BIN}/podscope", "capture", "--service_addr", ",".join(addresses), "--logdir", logdir,
                         "--duration_ms", str(args.duration_ms), "--quiet"], env)
                    if code != 0:
                        sys.exit(f"{kind} capture exited {code}:\n{out}")
                    run = re.search(r"Run directory: (\S+)", out).group(1)
                    if kind == "local":
                        hosts_bytes = host_files_bytes_local(run)
                        with open(os.path.join(run, "capture.json")) as f:
                            record = json.load(f)
                    else:
                        prefix = run[len("s3://runs/"):] + "/"
                        listed = client.list_objects_v2(Bucket="runs", Prefix=prefix).get("Contents", [])
                        hosts_bytes = sum(o["Size"] for o in listed if o["Key"].endswith(".xplane.pb"))
                        record = json.loads(client.get_object(Bucket="runs", Key=prefix + "capture.json")["Body"].read())
                    rchar, wchar = int(io["rchar"]), int(io["wchar"])
                    figures[kind].append(seconds)
                    # The capture's phases as capture.json records them; the rest is checks before and writing after.
                    collected, analyzed = record["collected_in_ms"] / 1000, record.get("analyzed_in_ms", 0) / 1000
                    print(f"round {round_number} {kind:6}: {seconds:6.2f} s (collected {collected:.2f} s, analysed "
                          f"{analyzed:.2f} s, the rest {seconds - collected - analyzed:.2f} s), host files "
                          f"{hosts_bytes / 2**20:7.2f} MiB, CLI peak RSS {rss_kib / 1024:6.1f} MiB, read "
                          f"{rchar / 2**20:7.2f} MiB ({rchar / hosts_bytes:.2f}x the host files), wrote "
                          f"{wchar / 2**20:7.2f} MiB", flush=True)
            for kind in ("local", "bucket"):
                logdir = os.path.join(tmp, "logs") if kind == "local" else "s3://runs/bench/logs"
                received, done = received_bytes(
                    [f"{BIN}/podscope", "capture", "--service_addr", ",".join(addresses), "--logdir", logdir,
                     "--duration_ms", str(args.duration_ms), "--quiet"], env, tmp)
                run = re.search(r"Run directory: (\S+)", done.stdout).group(1)
                if kind == "local":
                    hosts_bytes = host_files_bytes_local(run)
                else:
                    prefix = run[len("s3://runs/"):] + "/"
                    listed = client.list_objects_v2(Bucket="runs", Prefix=prefix).get("Contents", [])
                    hosts_bytes = sum(o["Size"] for o in listed if o["Key"].endswith(".xplane.pb"))
                print(f"received from sockets, {kind:6}: {received / 2**20:7.2f} MiB, host files"
                      f" {hosts_bytes / 2**20:7.2f} MiB ({received / hosts_bytes:.3f}x)", flush=True)
            local, bucket = statistics.median(figures["local"]), statistics.median(figures["bucket"])
            print(f"median wall time: local {local:.2f} s, bucket {bucket:.2f} s, ratio {bucket / local:.2f}")
        finally:
            for d in reversed(daemons):
                d.stop()
            s3.stop()


if __name__ == "__main__":
    main()
