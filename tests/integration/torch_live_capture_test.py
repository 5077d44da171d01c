"""A live PyTorch pod captured without a line of podscope in it: examples/torch_ddp's DDP ranks (gloo on CPU, one rank
computing 30 ms more per step) started with KINETO_USE_DAEMON=1 beside real podscope-agent processes, which serve
Kineto's daemon endpoint; `podscope capture` hands every rank a trace request at its next poll, and the run holds all
ranks on one clock, the slow rank named the straggler (its cost the delay it was given, the recommendation leading
with it) and the others waiting for it in the all-reduce. 4 ranks with one agent, and with two (two torchrun nodes of
2 ranks, each beside its own agent with a socket directory of its own, as on two hosts), so that the traces are
merged across hosts; pods of 2 and of 3 ranks with one agent; and 4 ranks with a slow DataLoader instead, which the
run calls input-bound, naming the DataLoader. Needs the torch environment."""
import gzip
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from coord_pod import BIN, Daemon, free_port_block, podscope, run_dir_of  # noqa: E402

SOURCE_DIR = os.environ.get("PODSCOPE_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
TRAIN = os.path.join(SOURCE_DIR, "examples", "torch_ddp", "train.py")
SLOW_MS = 30.0
CAPTURE_MS = 2000


class LivePod:
    """`len(socket_dirs)` agents, each serving Kineto's endpoint in its own directory, and one torchrun node of
    world / len(socket_dirs) ranks beside each, training until closed."""

    def __init__(self, tmp, world, agents, job_flags):
        self.world = world
        self.daemons, self.nodes, self.addresses = [], [], []
        try:
            self.socket_dirs = [tempfile.mkdtemp(dir=tmp, prefix=f"kineto{i}_") for i in range(agents)]
            for i, socket_dir in enumerate(self.socket_dirs):
                agent = Daemon([f"{BIN}/podscope-agent", "--listen", "127.0.0.1:0", "--metrics_listen", "127.0.0.1:0",
                                "--host_name", f"host{i}", "--socket", os.path.join(tmp, f"agent{i}.sock"),
                                "--kineto_endpoint", os.path.join(socket_dir, "dynolog"),
                                "--kineto_trace_dir", os.path.join(tmp, f"traces{i}", "kineto")])
                self.daemons.append(agent)
                self.addresses.append(agent.wait_for(r"listening grpc=(\S+) metrics=(\S+)").group(1))
            port = free_port_block(1)
            for node, socket_dir in enumerate(self.socket_dirs):
                env = dict(os.environ, OMP_NUM_THREADS="1", KINETO_USE_DAEMON="1", KINETO_IPC_SOCKET_DIR=socket_dir)
                self.nodes.append(subprocess.Popen(
                    [sys.executable, "-m", "torch.distributed.run", "--nnodes", str(agents), "--node_rank", str(node),
                     "--nproc_per_node", str(world // agents), "--master_addr", "127.0.0.1", "--master_port",
                     str(port), TRAIN, "--steps", "0", "--seconds", "120", *job_flags],
                    env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True))
            self.output = [[] for _ in self.nodes]
            self.readers = [threading.Thread(target=self._read, args=(i,), daemon=True) for i in range(agents)]
            for reader in self.readers:
                reader.start()
        except BaseException:
            self.close()
            raise

    def _read(self, node):
        for line in self.nodes[node].stdout:
            self.output[node].append(line.decode(errors="replace"))

    def wait_for_training(self, timeout_s=150):
        """Until every rank has trained a step and every agent lists its ranks among the Kineto processes polling
        it."""
        deadline = time.monotonic() + timeout_s
        want = self.world // len(self.addresses)
        while time.monotonic() < deadline:
            training = sum(len(re.findall(r"rank \d+: training", "".join(list(lines)))) for lines in self.output)
            counts = []
            for address in self.addresses:
                _, out = podscope("status", "--service_addr", address)
                counts.append(len(re.findall(r"\bpid \d+", out)))
            if training == self.world and all(c >= want for c in counts):
                return
            for i, node in enumerate(self.nodes):
                if node.poll() is not None:
                    raise AssertionError(f"torchrun exited {node.returncode}:\n{''.join(self.output[i])[-3000:]}")
            time.sleep(1)
        raise AssertionError(f"the ranks did not all train and poll their agents: {self.output} {out}")

    def close(self):
        for node in self.nodes:
            if node.poll() is None:
                os.killpg(node.pid, signal.SIGTERM)
        for node in self.nodes:
            try:
                node.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(node.pid, signal.SIGKILL)
                node.wait()
        for d in reversed(self.daemons):
            d.stop()


class TorchLiveCapture(unittest.TestCase):
    def capture(self, world, slow_rank, agents, job_flags=None, tool=None):
        """Captures the live job; returns the capture's output, its pod viewer, its merged pod trace and, with `tool`,
        that tool's page of the run."""
        if job_flags is None:
            job_flags = ("--slow-rank", str(slow_rank), "--slow-ms", str(SLOW_MS))
        with tempfile.TemporaryDirectory(prefix="podscope_torch_live_") as tmp:
            pod = LivePod(tmp, world, agents, job_flags)
            try:
                pod.wait_for_training()
                logdir = os.path.join(tmp, "logdir")
                code, out = podscope("capture", "--service_addr", ",".join(pod.addresses), "--logdir", logdir,
                                     "--duration_ms", str(CAPTURE_MS), timeout=180)
                self.assertEqual(code, 0, out)
                run_dir = run_dir_of(logdir)
                with open(os.path.join(run_dir, "pod_viewer.json")) as f:
                    viewer = json.load(f)
                with gzip.open(os.path.join(run_dir, "pod.trace.json.gz"), "rt") as f:
                    trace = json.load(f)
                page = None
                if tool:
                    code, page = podscope("analyze", run_dir, "--tool", tool)
                    self.assertEqual(code, 0, page)
            finally:
                pod.close()
        return out, viewer, trace, page

    def check_pod(self, world, slow_rank, out, viewer, trace):
        # A rank's first or last step may be cut by its trace's window (each rank's Kineto starts and stops on its
        # own timer): the steps every rank has are the pod's.
        steps = [s for s in viewer["podStatsSequence"]["podStatsMap"] if len(s["podStatsPerCore"]) == world]
        self.assertGreaterEqual(len(steps), 10, out)
        for step in steps:
            cores = step["podStatsPerCore"]
            self.assertEqual(sorted(int(c) for c in cores), list(range(world)), out)
            self.assertEqual({cores[c]["hostName"] for c in cores}, {f"rank {r}" for r in range(world)})
        self.check_straggler(world, slow_rank, out)
        self.check_waits(world, slow_rank, out, steps)
        self.check_step_times(steps, trace)
        self.check_one_clock(world, trace)

    def check_straggler(self, world, slow_rank, out):
        """The summary names the slow rank in nearly every step; the others waited for it most of the 30 ms it was
        told to add (more where a loaded machine stretches its compute), each of them; the recommendation leads with
        it."""
        found = re.search(r"straggler: core (\d+) \(rank (\d+)\): the others waited for it in (\d+) of (\d+) steps, "
                          r"([\d.]+) ms per step .*costing the other (?:core|\d+ cores) ([\d.]+) ms", out)
        self.assertIsNotNone(found, out)
        self.assertEqual((int(found.group(1)), int(found.group(2))), (slow_rank, slow_rank), out)
        straggling, compared = int(found.group(3)), int(found.group(4))
        waited_ms, cost_ms = float(found.group(5)), float(found.group(6))
        print(f"torch live, {world} ranks: rank {slow_rank} the straggler in {straggling} of {compared} steps, the "
              f"others waited {waited_ms:.3f} ms per step for it, {cost_ms:.3f} ms in all (given {SLOW_MS} ms each)",
              flush=True)
        # In 80 % of the steps at least: on the loaded 2-core box a gloo thread descheduled after the reduction
        # closes the slow rank's all-reduce late, and in such a step its span is no longer the shortest (seen: 19 of
        # 23 steps of a pod of two while the box ran other builds; 44 of 44 to 49 of 51 otherwise).
        self.assertGreaterEqual(straggling / compared, 0.8, found.group(0))
        self.assertGreaterEqual(waited_ms, 0.7 * SLOW_MS, found.group(0))
        per_other_ms = cost_ms / (world - 1)
        self.assertGreaterEqual(per_other_ms, 0.6 * waited_ms, found.group(0))
        self.assertLessEqual(per_other_ms, 1.3 * max(waited_ms, SLOW_MS), found.group(0))
        lead = out[out.index("recommendation"):].splitlines()[1]
        self.assertIn(f"Core {slow_rank} (rank {slow_rank}) is a straggler", lead)

    def check_waits(self, world, slow_rank, out, steps):
        """The other ranks wait for the slow one in each step's all-reduce: 30 ms ± 30 % (median over their steps),
        as offline (torch_ddp_test.py). Each rank's all-reduce is gloo's `gloo:all_reduce` on one of its two gloo
        threads; its wait is its duration less the shortest of the ranks' (the slow rank's, which arrives last)."""
        waits = [step["podStatsPerCore"][str(core)]["allReduceSyncDurationUs"] / 1e3
                 for step in steps for core in range(world) if core != slow_rank]
        print(f"torch live: the other ranks' all-reduce wait {statistics.median(waits):.1f} ms (median over "
              f"{len(steps)} steps)", flush=True)
        self.assertAlmostEqual(statistics.median(waits), SLOW_MS, delta=0.3 * SLOW_MS, msg=(waits, out))

    def check_step_times(self, steps, trace):
        """Each rank's step time is its trace's own step: Kineto's ProfilerStep#N span, which the merged pod trace
        holds as the rank's `Steps` event (the agent deletes Kineto's file once converted)."""
        cores = [(e["pid"], re.search(r"/device:CUSTOM:(\d+)$", e["args"]["name"]))
                 for e in trace["traceEvents"] if e.get("ph") == "M" and e.get("name") == "process_name"]
        rank_of = {pid: int(core.group(1)) for pid, core in cores if core}
        steps_line = {(e["pid"], e["tid"]) for e in trace["traceEvents"]
                      if e.get("ph") == "M" and e.get("name") == "thread_name" and e["args"]["name"] == "Steps"}
        traced_ms = {(rank_of[e["pid"]], e["args"]["step_num"]): e["dur"] / 1e3 for e in trace["traceEvents"]
                     if e.get("ph") == "X" and (e["pid"], e["tid"]) in steps_line and e["pid"] in rank_of}
        for step in steps:
            for core, record in step["podStatsPerCore"].items():
                self.assertAlmostEqual(record["totalDurationUs"] / 1e3, traced_ms[int(core), step["stepNum"]],
                                       delta=1e-3, msg=f"rank {core} step {step['stepNum']}")

    def check_one_clock(self, world, trace):
        """The ranks leave each step's all-reduce together, so on the merged trace the ends of one step (each rank's
        optimizer step, right after it) lie near each other on every rank: well within a step (~50 ms), a few ms
        apart unloaded."""
        ends = {}
        for e in trace["traceEvents"]:
            if e.get("ph") == "X" and e.get("name", "").startswith("Optimizer.step#"):
                ends.setdefault(e["pid"], []).append(e["ts"] + e["dur"])
        self.assertEqual(len(ends), world, sorted(ends))
        ranks = list(ends.values())
        gaps = [min(abs(end - other) for other in ranks[j]) for i, rank in enumerate(ranks) for end in rank
                for j in range(len(ranks)) if j != i]
        self.assertLess(statistics.median(gaps) / 1e3, 15.0, gaps)

    def test_one_agent_captures_the_four_ranks(self):
        self.check_pod(4, 2, *self.capture(4, 2, agents=1)[:3])

    def test_two_agents_merge_their_ranks_on_one_clock(self):
        self.check_pod(4, 2, *self.capture(4, 2, agents=2)[:3])

    def test_a_pod_of_two_ranks_names_the_one_the_other_waits_for(self):
        self.check_pod(2, 1, *self.capture(2, 1, agents=1)[:3])

    def test_a_pod_of_three_ranks_names_the_one_the_others_wait_for(self):
        self.check_pod(3, 1, *self.capture(3, 1, agents=1)[:3])

    def test_a_slow_data_loader_is_input_bound_and_named(self):
        out, _, _, page = self.capture(4, -1, agents=1, job_flags=("--slow-loader-ms", "30"), tool="input_pipeline")
        self.assertRegex(out, r"Your program is (HIGHLY|MODERATELY) input-bound")
        self.assertRegex(page, r"Your program is (HIGHLY|MODERATELY) input-bound")
        self.assertRegex(page, r"slowest input stage is enumerate\(DataLoader\)#")


if __name__ == "__main__":
    unittest.main()
