"""Triggered pod snapshots with real processes: a 4-rank ring_trainer pod whose agents (injected clock offsets,
flight recorder on) register with a coordinator; rank 1 is made slow for a few steps. The agents' slow-step
triggers make one pod snapshot on the coordinator whose window holds the slow steps of every rank, whose analysis
names rank 1 for them and whose clocks are merged; `podscope capture --last_ms --coordinator` returns the past of
every rank at once."""
import json
import os
import re
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from coord_pod import Pod, offset_errors_ns, podscope, run_dir_of  # noqa: E402

OFFSETS = [0, 2_000_000_000, -1_500_000_000, 700_000_000]
# Step 2000 comes past the agents' 2 s warm-up however fast the host (ring_trainer's steps take 2-4 ms on an idle
# 2-core host, 5-25 ms on a loaded one: 4-50 s in); a factor of 10 stays clear of that load's jitter (single steps up
# to ~5× the median) and below the slow steps' 20× and more.
SLOW_START, SLOW_COUNT, SLOW_MS = 2000, 3, 500
TRIGGER_FACTOR = 10


def per_step_compute_us(pod_viewer):
    """{step: {core: device compute µs}} from pod_viewer.json."""
    out = {}
    for entry in pod_viewer["podStatsSequence"]["podStatsMap"]:
        cores = {}
        for core, record in entry["podStatsPerCore"].items():
            cores[int(core)] = record["highFlopsComputeUs"] + record["lowFlopsComputeUs"]
        out[int(entry["stepNum"])] = cores
    return out


class PodSnapshotTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.pod = Pod(OFFSETS, coordinator=True, trainer=True,
                      agent_args=["--flight_recorder_seconds", "20", "--trigger_cooldown_s", "30",
                                  "--trigger_step_factor", str(TRIGGER_FACTOR)],
                      trainer_args=["--slow_steps", f"{SLOW_START}:{SLOW_COUNT}:{SLOW_MS}", "--slow_rank", "1"])
        cls.runs = os.path.join(cls.pod.tmp.name, "coordinator_repo", "plugins", "profile")

    @classmethod
    def tearDownClass(cls):
        cls.pod.close()

    def test_slow_steps_of_rank_1_make_one_pod_snapshot_that_names_rank_1_on_merged_clocks(self):
        # A loaded host's own stalls may trigger a snapshot first; the slow steps still make theirs, one for the
        # reports of every agent.
        slow_pattern = r"pod snapshot (\S+_slow_step_(?:%s)) of job" % "|".join(
            str(s) for s in range(SLOW_START, SLOW_START + SLOW_COUNT))
        m = self.pod.coordinator.wait_for(slow_pattern, timeout=150)
        run_name = m.group(1)
        run_dir = os.path.join(self.runs, run_name)
        deadline = time.monotonic() + 90
        while not os.path.exists(os.path.join(run_dir, "pod_viewer.json")):
            self.assertLess(time.monotonic(), deadline, f"no analysis in {run_dir}")
            time.sleep(0.5)
        time.sleep(3.0)  # every agent's trigger has been reported by now: none may make a second pod snapshot
        snapshots = [r for r in os.listdir(self.runs) if re.search(r"_slow_step_(\d+)$", r)
                     and int(re.search(r"_slow_step_(\d+)$", r).group(1)) in range(SLOW_START, SLOW_START + SLOW_COUNT)]
        self.assertEqual(snapshots, [run_name])

        with open(os.path.join(run_dir, "capture.json")) as f:
            capture = json.load(f)
        window = capture["recorded_window"]
        self.assertEqual(window["kind"], "triggered_snapshot", window)
        trigger = window["trigger"]
        self.assertEqual(trigger["reason"], "slow_step")
        self.assertIn(trigger["step_num"], range(SLOW_START, SLOW_START + SLOW_COUNT), trigger)
        self.assertGreater(trigger["times_median"], TRIGGER_FACTOR, trigger)
        self.assertTrue(any("CUPTI" in item for item in window["left_out"]), window)
        self.assertTrue(all(h["ok"] for h in capture["hosts"]), capture["hosts"])
        for core, (error, bound) in offset_errors_ns(capture["hosts"], OFFSETS).items():
            self.assertLessEqual(abs(error), bound, f"core {core}: measured offset off by {error} ns")

        with open(os.path.join(run_dir, "pod_viewer.json")) as f:
            compute = per_step_compute_us(json.load(f))
        for step in range(SLOW_START, SLOW_START + SLOW_COUNT):
            self.assertIn(step, compute, f"slow step {step} is not in the snapshot")
            cores = compute[step]
            self.assertEqual(sorted(cores), [0, 1, 2, 3], f"step {step}: cores {cores}")
            self.assertEqual(max(cores, key=cores.get), 1, f"step {step}: compute by core {cores}")
            self.assertGreater(cores[1], SLOW_MS * 1000 * 0.9, cores)

        code, out = podscope("status", "--service_addr", self.pod.addresses[1])
        self.assertEqual(code, 0, out)
        self.assertRegex(out, r"[1-9]\d* stored snapshot\(s\) \(\d+ triggered")
        self.assertRegex(out, r"snapshot \S+_slow_step_\d+: slow_step, pid \d+ \(\S+\) core 1 step \d+")

    def test_last_ms_through_the_coordinator_collects_5_s_of_every_rank_within_3_s(self):
        # After the pod snapshot (the coordinator runs one capture at a time), with 6 s of steps since it.
        self.pod.coordinator.wait_for(r"capture \S+_slow_step_\d+ of 4 worker", timeout=150)
        time.sleep(6.0)
        with tempfile.TemporaryDirectory() as logdir:
            # A loaded host's own stalls may make another pod snapshot now and then; the coordinator runs one
            # capture at a time and says so.
            deadline = time.monotonic() + 60
            while True:
                began = time.monotonic()
                code, out = podscope("capture", "--coordinator", self.pod.coordinator_addr, "--last_ms", "5000",
                                     "--logdir", logdir)
                took = time.monotonic() - began
                if "a capture is already running" not in out or time.monotonic() > deadline:
                    break
                time.sleep(1.0)
            self.assertEqual(code, 0, out)
            with open(os.path.join(run_dir_of(logdir), "capture.json")) as f:
                capture = json.load(f)
            window = capture["recorded_window"]
            self.assertEqual(window["kind"], "last_ms")
            # The window of every agent is in the coordinator's hands within 3 s; the whole command adds the
            # transfer and the pod analysis of 4 × 5 s of steps, which takes seconds of its own on a loaded 2-core
            # host (measured 4-6 s there for `podscope analyze` of such a run alone).
            self.assertLessEqual(capture["collected_in_ms"], 3000, capture)
            self.assertLess(took, 20.0, out)
            # 5 s of a rank fit an agent's recorder: every host says it holds all of them, and nothing warns.
            for host in capture["hosts"]:
                self.assertGreaterEqual(host["recorded_held_ms"], 4950, host)
            self.assertEqual([w for w in capture["warnings"] if "holds only" in w], [], capture)
        cores = re.findall(r"core (\d+) \(.*?\): (\d+) steps, average step ([\d.]+) ms", out)
        self.assertEqual(sorted(int(c) for c, _, _ in cores), [0, 1, 2, 3], out)
        for core, steps, average_ms in cores:
            self.assertGreaterEqual(int(steps) * float(average_ms), 4500, out)


if __name__ == "__main__":
    unittest.main()
