"""A real PyTorch pod (examples/torch_ddp: DistributedDataParallel over gloo on CPU, 4 ranks under torchrun), each rank
writing its torch.profiler trace, analysed offline by `podscope analyze DIR`; checked against what the job was told
to do: rank 2 computes 30 ms more per step (the straggler the others wait for), or every batch loads slowly
(input-bound). Needs the torch environment (scripts/python_envs.sh)."""
import glob
import gzip
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import unittest

SOURCE_DIR = os.environ.get("PODSCOPE_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
PODSCOPE = os.path.join(os.environ.get("PODSCOPE_BIN", ""), "podscope")
TRAIN = os.path.join(SOURCE_DIR, "examples", "torch_ddp", "train.py")
WORLD = 4
SLOW_RANK = 2
SLOW_MS = 30.0
TRACED_STEPS = 8


def train(trace_dir, *flags):
    """Runs the 4-rank job under torchrun, each rank tracing TRACED_STEPS steps into `trace_dir`."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(WORLD), TRAIN,
               "--trace-dir", trace_dir, "--trace-steps", str(TRACED_STEPS), *flags]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=240)
    if result.returncode != 0:
        raise AssertionError(f"torchrun exited {result.returncode}:\n{result.stdout}\n{result.stderr[-4000:]}")
    traces = glob.glob(os.path.join(trace_dir, "*.pt.trace.json.gz"))
    if len(traces) != WORLD:
        raise AssertionError(f"expected {WORLD} traces in {trace_dir}, found {traces}")


def analyze(run_dir, *flags):
    result = subprocess.run([PODSCOPE, "analyze", run_dir, *flags], capture_output=True, text=True, timeout=120)
    if result.returncode != 0:
        raise AssertionError(f"podscope analyze exited {result.returncode}:\n{result.stdout}\n{result.stderr}")
    return result.stdout + result.stderr


def profiler_steps_ms(trace_dir):
    """rank → {step number: the ProfilerStep#N duration in ms}, read from the traces themselves."""
    steps = {}
    for path in glob.glob(os.path.join(trace_dir, "*.pt.trace.json.gz")):
        with gzip.open(path, "rt") as f:
            trace = json.load(f)
        rank = trace["distributedInfo"]["rank"]
        steps[rank] = {int(e["name"].split("#")[1]): e["dur"] / 1e3 for e in trace["traceEvents"]
                       if e.get("ph") == "X" and e.get("name", "").startswith("ProfilerStep#")}
    return steps


class TorchDdpPod(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="podscope_torch_ddp_")
        cls.slow_rank_dir = os.path.join(cls.tmp.name, "slow_rank")
        train(cls.slow_rank_dir, "--slow-rank", str(SLOW_RANK), "--slow-ms", str(SLOW_MS))
        cls.slow_rank_output = analyze(cls.slow_rank_dir)
        with open(os.path.join(cls.slow_rank_dir, "pod_viewer.json")) as f:
            cls.viewer = json.load(f)
        cls.steps = cls.viewer["podStatsSequence"]["podStatsMap"]

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_the_four_ranks_are_one_pod(self):
        self.assertEqual(len(self.steps), TRACED_STEPS, self.slow_rank_output)
        for step in self.steps:
            cores = step["podStatsPerCore"]
            self.assertEqual(sorted(int(c) for c in cores), list(range(WORLD)))
            self.assertEqual({cores[c]["hostName"] for c in cores}, {f"rank {r}" for r in range(WORLD)})

    def test_each_ranks_step_times_are_its_traces_own(self):
        expected = profiler_steps_ms(self.slow_rank_dir)
        for step in self.steps:
            for core, record in step["podStatsPerCore"].items():
                self.assertAlmostEqual(record["totalDurationUs"] / 1e3, expected[int(core)][step["stepNum"]], delta=1e-3,
                                       msg=f"rank {core} step {step['stepNum']}")

    def test_the_slow_rank_is_the_straggler(self):
        found = re.search(r"straggler: core (\d+) \(rank (\d+)\):.* in (\d+) of (\d+) steps", self.slow_rank_output)
        self.assertIsNotNone(found, self.slow_rank_output)
        self.assertEqual(int(found.group(1)), SLOW_RANK)
        self.assertGreaterEqual(int(found.group(3)) / int(found.group(4)), 0.9, found.group(0))

    def test_the_others_wait_for_it_in_the_all_reduce(self):
        waits = [step["podStatsPerCore"][str(core)]["allReduceSyncDurationUs"] / 1e3
                 for step in self.steps for core in range(WORLD) if core != SLOW_RANK]
        self.assertAlmostEqual(statistics.median(waits), SLOW_MS, delta=0.3 * SLOW_MS, msg=waits)

    def test_a_slow_data_loader_is_input_bound_and_named(self):
        run_dir = os.path.join(self.tmp.name, "slow_loader")
        train(run_dir, "--slow-loader-ms", "30")
        output = analyze(run_dir, "--tool", "input_pipeline")
        self.assertRegex(output, r"Your program is (HIGHLY|MODERATELY) input-bound")
        self.assertRegex(output, r"slowest input stage is enumerate\(DataLoader\)#")
        # The advice is the DataLoader's, not TensorFlow's tf.data tool.
        if "HIGHLY" in output:
            self.assertIn("PyTorch's DataLoader loads each batch while the step waits", output)
            self.assertNotIn("--tool tf_data", output)


if __name__ == "__main__":
    unittest.main()
