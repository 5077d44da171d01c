"""Real PyTorch pods (examples/torch_ddp: DistributedDataParallel over gloo on CPU, 2, 3 and 4 ranks under torchrun),
each rank writing its torch.profiler trace, analysed offline by `podscope analyze DIR`; checked against what the job
was told to do: one rank computes 30 ms more per step (the straggler the others wait for: named, in what share of the
steps, and what it costs against the delay it was given), or every batch loads slowly (input-bound). Holistic Trace
Analysis runs beside ours on the same traces: on these CPU-only ranks its temporal breakdown raises, ours answers.
Needs the torch environment (scripts/python_envs.sh)."""
import glob
import gzip
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import unittest

SOURCE_DIR = os.environ.get("PODSCOPE_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
PODSCOPE = os.path.join(os.environ.get("PODSCOPE_BIN", ""), "podscope")
TRAIN = os.path.join(SOURCE_DIR, "examples", "torch_ddp", "train.py")
SLOW_MS = 30.0
TRACED_STEPS = 10


def train(trace_dir, world, *flags):
    """Runs a `world`-rank job under torchrun, each rank tracing TRACED_STEPS steps into `trace_dir`."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(world), TRAIN,
               "--trace-dir", trace_dir, "--trace-steps", str(TRACED_STEPS), *flags]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=240)
    if result.returncode != 0:
        raise AssertionError(f"torchrun exited {result.returncode}:\n{result.stdout}\n{result.stderr[-4000:]}")
    traces = glob.glob(os.path.join(trace_dir, "*.pt.trace.json.gz"))
    if len(traces) != world:
        raise AssertionError(f"expected {world} traces in {trace_dir}, found {traces}")


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


def straggler_figures(output):
    """(core, rank, straggling steps, compared steps, ms per step the others waited, cost in all ms) of the summary's
    straggler line, or None."""
    found = re.search(r"straggler: core (\d+) \(rank (\d+)\): the others waited for it in (\d+) of (\d+) steps, "
                      r"([\d.]+) ms per step .*costing the other (?:core|\d+ cores) ([\d.]+) ms", output)
    if not found:
        return None
    return (int(found.group(1)), int(found.group(2)), int(found.group(3)), int(found.group(4)), float(found.group(5)),
            float(found.group(6)))


class DdpPod:
    """A pod of WORLD ranks, SLOW_RANK computing SLOW_MS more per step, traced and analysed once per class."""
    WORLD = 4
    SLOW_RANK = 2

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="podscope_torch_ddp_")
        cls.slow_rank_dir = os.path.join(cls.tmp.name, "slow_rank")
        train(cls.slow_rank_dir, cls.WORLD, "--slow-rank", str(cls.SLOW_RANK), "--slow-ms", str(SLOW_MS))
        cls.slow_rank_output = analyze(cls.slow_rank_dir)
        with open(os.path.join(cls.slow_rank_dir, "pod_viewer.json")) as f:
            cls.viewer = json.load(f)
        cls.steps = cls.viewer["podStatsSequence"]["podStatsMap"]

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_the_ranks_are_one_pod(self):
        self.assertEqual(len(self.steps), TRACED_STEPS, self.slow_rank_output)
        for step in self.steps:
            cores = step["podStatsPerCore"]
            self.assertEqual(sorted(int(c) for c in cores), list(range(self.WORLD)))
            self.assertEqual({cores[c]["hostName"] for c in cores}, {f"rank {r}" for r in range(self.WORLD)})

    def test_each_ranks_step_times_are_its_traces_own(self):
        expected = profiler_steps_ms(self.slow_rank_dir)
        for step in self.steps:
            for core, record in step["podStatsPerCore"].items():
                self.assertAlmostEqual(record["totalDurationUs"] / 1e3, expected[int(core)][step["stepNum"]], delta=1e-3,
                                       msg=f"rank {core} step {step['stepNum']}")

    def test_the_slow_rank_is_the_straggler_and_its_cost_is_the_delay_it_was_given(self):
        figures = straggler_figures(self.slow_rank_output)
        self.assertIsNotNone(figures, self.slow_rank_output)
        core, rank, straggling, compared, waited_ms, cost_ms = figures
        print(f"\n{self.WORLD} ranks: rank {rank} the straggler in {straggling} of {compared} steps, the others waited "
              f"{waited_ms:.3f} ms per step for it, {cost_ms:.3f} ms in all (given: {SLOW_MS} ms, "
              f"{(self.WORLD - 1) * SLOW_MS} ms in all)", flush=True)
        self.assertEqual((core, rank), (self.SLOW_RANK, self.SLOW_RANK))
        self.assertGreaterEqual(straggling / compared, 0.9, figures)
        self.assertAlmostEqual(waited_ms, SLOW_MS, delta=0.3 * SLOW_MS, msg=figures)
        self.assertAlmostEqual(cost_ms, (self.WORLD - 1) * SLOW_MS, delta=0.3 * (self.WORLD - 1) * SLOW_MS, msg=figures)
        # The recommendation leads with it.
        lead = self.slow_rank_output[self.slow_rank_output.index("recommendation"):].splitlines()[1]
        self.assertIn(f"Core {self.SLOW_RANK} (rank {self.SLOW_RANK}) is a straggler", lead)

    def test_the_others_wait_for_it_in_the_all_reduce(self):
        waits = [step["podStatsPerCore"][str(core)]["allReduceSyncDurationUs"] / 1e3
                 for step in self.steps for core in range(self.WORLD) if core != self.SLOW_RANK]
        self.assertAlmostEqual(statistics.median(waits), SLOW_MS, delta=0.3 * SLOW_MS, msg=waits)

    def test_beside_hta_whose_temporal_breakdown_raises_on_cpu_ranks(self):
        """HTA reads the same traces (in a directory of its own): its temporal breakdown raises on ranks without a GPU
        event; our trace analysis gives each rank its idle, compute and non-compute shares, the slow rank's compute
        the largest."""
        os.environ["HTA_DISABLE_NS_ROUNDING"] = "1"
        from hta.trace_analysis import TraceAnalysis
        hta_dir = os.path.join(self.tmp.name, "hta")
        os.makedirs(hta_dir, exist_ok=True)
        for trace in glob.glob(os.path.join(self.slow_rank_dir, "*.pt.trace.json.gz")):
            shutil.copy(trace, hta_dir)
        hta = TraceAnalysis(trace_dir=hta_dir, include_last_profiler_step=True)
        with self.assertRaises(Exception):
            hta.get_temporal_breakdown(visualize=False)
        with open(os.path.join(self.slow_rank_dir, "trace_analysis.json")) as f:
            ranks = {r["coreId"]: r for r in json.load(f)["ranks"]}
        self.assertEqual(sorted(ranks), list(range(self.WORLD)))
        for rank in ranks.values():
            shares = rank.get("idlePercent", 0) + rank.get("computePercent", 0) + rank.get("nonComputePercent", 0)
            self.assertAlmostEqual(shares, 100.0, delta=1e-6)
        slowest = max(ranks.values(), key=lambda r: r.get("computePercent", 0))
        self.assertEqual(slowest["coreId"], self.SLOW_RANK)


class TorchDdpPodOfTwo(DdpPod, unittest.TestCase):
    """The most common pod: two ranks, no median to stand out from."""
    WORLD = 2
    SLOW_RANK = 1


class TorchDdpPodOfThree(DdpPod, unittest.TestCase):
    WORLD = 3
    SLOW_RANK = 1


class TorchDdpPod(DdpPod, unittest.TestCase):
    WORLD = 4
    SLOW_RANK = 2

    def test_a_slow_data_loader_is_input_bound_and_named(self):
        run_dir = os.path.join(self.tmp.name, "slow_loader")
        train(run_dir, self.WORLD, "--slow-loader-ms", "30")
        output = analyze(run_dir, "--tool", "input_pipeline")
        self.assertRegex(output, r"Your program is (HIGHLY|MODERATELY) input-bound")
        self.assertRegex(output, r"slowest input stage is enumerate\(DataLoader\)#")
        # The advice is the DataLoader's, not TensorFlow's tf.data tool.
        if "HIGHLY" in output:
            self.assertIn("PyTorch's DataLoader loads each batch while the step waits", output)
            self.assertNotIn("--tool tf_data", output)


if __name__ == "__main__":
    unittest.main()
