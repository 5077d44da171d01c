"""Acceptance of the pod analysis on real workloads: 4 real podscope-agent processes, 4 real
ring_trainer ranks (one per agent), a real `podscope capture`, and the analysis it writes into the run
directory (pod_viewer.json in the legacy schema, pod_summary.txt), checked against what the trainer was told
to do: a straggler, slow input, and agents whose clocks are off by milliseconds."""
import json
import os
import re
import statistics
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from coord_pod import Pod, podscope, run_dir_of  # noqa: E402

WORLD = 4
STRAGGLER_RANK = 2
STRAGGLER_DELAY_MS = 20
INPUT_DELAY_MS = 30
OFFSETS_NS = [0, 5_000_000, -3_000_000, 20_000_000]
CAPTURE_MS = 1500
# How long a pod trains before it is captured: the ranks have connected to their agents and are past the first
# steps' one-off costs (page faults, the ring's first transfers). (Pod runs ring_trainer with a 64×64 matrix,
# so on a 2-core machine the ranks mostly wait rather than compete for the cores.)
WARMUP_S = 0.5


def capture(pod, logdir):
    """Captures `pod` into `logdir`; returns (pod_viewer.json as a dict, pod_summary.txt, capture.json's hosts)."""
    code, out = podscope("capture", "--service_addr", ",".join(pod.addresses), "--logdir", logdir,
                         "--duration_ms", str(CAPTURE_MS))
    if code != 0:
        raise AssertionError(f"podscope capture exited {code}:\n{out}")
    run_dir = run_dir_of(logdir)
    with open(os.path.join(run_dir, "pod_viewer.json")) as f:
        viewer = json.load(f)
    with open(os.path.join(run_dir, "pod_summary.txt")) as f:
        summary = f.read()
    with open(os.path.join(run_dir, "capture.json")) as f:
        hosts = json.load(f)["hosts"]
    return viewer, summary, hosts


def started_pod(offsets_ns, **trainer):
    pod = Pod(offsets_ns, trainer=True, **trainer)
    try:
        pod.trainer.wait_for(r"ring formed", count=WORLD)
        time.sleep(WARMUP_S)
    except BaseException:
        pod.close()
        raise
    return pod


def records_by_core(viewer):
    """{core id: [per-step record of pod_viewer.json]} over every step in the capture."""
    out = {}
    for step in viewer["podStatsSequence"]["podStatsMap"]:
        for core, record in step["podStatsPerCore"].items():
            out.setdefault(int(core), []).append(record)
    return out


def median_ms(records, *keys):
    return statistics.median(sum(r[k] for k in keys) for r in records) / 1000.0


def channels(viewer):
    """{channel id: ((source core, destination core), [duration µs per step])}."""
    out = {}
    for step in viewer["podStatsSequence"]["podStatsMap"]:
        for channel in step["channelDb"]:
            entry = out.setdefault(channel["channelId"], ((channel["srcCoreId"], channel["dstCoreId"]), []))
            entry[1].append(channel["durationUs"])
    return out


# pod_viewer.json keys of a core's step that are not one of the analysis's own step categories.
GENERIC_AND_TOTAL_KEYS = {"totalDurationUs", "deviceComputeUs", "deviceCollectiveCommunicationUs", "kernelLaunchUs",
                          "hostComputeUs", "deviceToDeviceUs", "compilationUs", "inputUs", "outputUs", "allOthersUs"}


def stragglers(summary):
    return [int(m.group(1)) for m in re.finditer(r"^straggler: core (\d+) ", summary, re.M)]


class StragglerAndClockOffsetsTest(unittest.TestCase):
    """One workload (rank 2 a straggler) on two pods: agents sharing one clock, and agents whose clocks are off
    by 0, +5, −3 and +20 ms. The straggler must be found on both (a step breakdown is a difference of times of
    one host); the channel durations, which compare times of two hosts, must not depend on the offsets."""

    @classmethod
    def setUpClass(cls):
        cls.results = {}
        for name, offsets in (("same clock", [0] * WORLD), ("offsets", OFFSETS_NS)):
            pod = started_pod(offsets, straggler_rank=STRAGGLER_RANK, straggler_delay_ms=STRAGGLER_DELAY_MS)
            try:
                with tempfile.TemporaryDirectory(prefix="podscope_accept_") as logdir:
                    cls.results[name] = capture(pod, logdir)
            finally:
                pod.close()

    def check_straggler(self, name):
        viewer, summary, _ = self.results[name]
        by_core = records_by_core(viewer)
        self.assertEqual(sorted(by_core), list(range(WORLD)), summary)
        steps = min(len(r) for r in by_core.values())
        self.assertGreaterEqual(steps, 10, f"only {steps} whole steps in {CAPTURE_MS} ms:\n{summary}")
        sync = {c: median_ms(r, "allReduceSyncDurationUs") for c, r in by_core.items()}
        compute = {c: median_ms(r, "highFlopsComputeUs", "lowFlopsComputeUs") for c, r in by_core.items()}
        figures = (f"{name}: {steps} steps; median per step, ms: all-reduce sync "
                   f"{({c: round(v, 2) for c, v in sync.items()})}, compute "
                   f"{({c: round(v, 2) for c, v in compute.items()})}\n{summary}")
        print(f"\n{figures.splitlines()[0]}", file=sys.stderr)

        self.assertEqual(stragglers(summary), [STRAGGLER_RANK], figures)
        tolerance = 0.2 * STRAGGLER_DELAY_MS
        self.assertLess(sync[STRAGGLER_RANK], tolerance, f"the straggler's sync is not about 0; {figures}")
        for core in sorted(set(range(WORLD)) - {STRAGGLER_RANK}):
            self.assertAlmostEqual(sync[core], STRAGGLER_DELAY_MS, delta=tolerance,
                                   msg=f"core {core}'s sync; {figures}")
            self.assertAlmostEqual(compute[STRAGGLER_RANK] - compute[core], STRAGGLER_DELAY_MS, delta=tolerance,
                                   msg=f"core {STRAGGLER_RANK}'s extra compute over core {core}; {figures}")

    def test_straggler_is_found_and_its_cost_measured(self):
        self.check_straggler("same clock")

    def test_straggler_is_found_with_clock_offsets(self):
        self.check_straggler("offsets")

    def test_channel_durations_are_not_negative_and_do_not_depend_on_the_offsets(self):
        same = channels(self.results["same clock"][0])
        offset = channels(self.results["offsets"][0])
        self.assertEqual(len(same), 2 * (WORLD - 1) * WORLD,
                         f"a ring all-reduce sends 2 × (world − 1) chunks over each of the world's links: {same}")
        self.assertEqual(sorted(same), sorted(offset))
        # Per link, over its chunks and steps. The link into the straggler is left out of the comparison: its
        # duration (recv-done end − send begin) includes the sender's wait for the straggler to reach its
        # recv-done, which varies by ms from run to run whatever the clocks (both ends of it are compared
        # on the other links, so every host's offset still is).
        links = sorted({link for link, _ in same.values()})
        compared = [link for link in links if link[1] != STRAGGLER_RANK]
        link_same = {k: statistics.median(d for link, v in same.values() if link == k for d in v) for k in links}
        link_offset = {k: statistics.median(d for link, v in offset.values() if link == k for d in v) for k in links}
        pod_same = statistics.median(d for _, v in same.values() for d in v)
        pod_offset = statistics.median(d for _, v in offset.values() for d in v)
        smallest = {name: min(min(v) for _, v in by_channel.values())
                    for name, by_channel in (("same clock", same), ("offsets", offset))}
        offset_errors = [round((h["clock_offset_ns"] - injected) / 1e3, 1)
                         for h, injected in zip(self.results["offsets"][2], OFFSETS_NS)]
        figures = (f"median channel duration, µs, without / with offsets: pod {pod_same:.1f} / {pod_offset:.1f}; "
                   f"per link {', '.join(f'{a}->{b} {link_same[a, b]:.1f} / {link_offset[a, b]:.1f}' for a, b in links)}"
                   f"; smallest {smallest['same clock']:.1f} / {smallest['offsets']:.1f}; measured − injected "
                   f"offset per host, µs: {offset_errors}")
        print(f"\n{figures}", file=sys.stderr)
        figures += f"\n{self.results['offsets'][1]}"

        for name, by_channel in (("same clock", same), ("offsets", offset)):
            negative = {c: [d for d in v if d < 0] for c, (_, v) in by_channel.items() if min(v) < 0}
            self.assertEqual(negative, {}, f"negative channel durations (µs), {name}; {figures}")
        self.assertLessEqual(abs(pod_offset - pod_same), 200.0, figures)
        for link in compared:
            self.assertLessEqual(abs(link_offset[link] - link_same[link]), 200.0, f"link {link}; {figures}")


class InputBoundTest(unittest.TestCase):
    """Every rank's input pipeline takes INPUT_DELAY_MS per batch, far longer than the rest of a step."""

    def test_infeed_dominates_and_is_the_bottleneck_of_every_core(self):
        pod = started_pod([0] * WORLD, input_delay_ms=INPUT_DELAY_MS)
        try:
            with tempfile.TemporaryDirectory(prefix="podscope_accept_") as logdir:
                viewer, summary, _ = capture(pod, logdir)
        finally:
            pod.close()
        by_core = records_by_core(viewer)
        self.assertEqual(sorted(by_core), list(range(WORLD)), summary)
        categories = [k for k in by_core[0][0] if k.endswith("Us") and k not in GENERIC_AND_TOTAL_KEYS]
        means = {c: {k: statistics.mean(r[k] for r in records) / 1000.0 for k in categories}
                 for c, records in by_core.items()}
        step = {c: statistics.mean(r["totalDurationUs"] for r in records) / 1000.0 for c, records in by_core.items()}
        figures = (f"mean per step, ms: infeed {({c: round(m['hostInfeedDurationUs'], 2) for c, m in means.items()})}"
                   f", all-reduce sync {({c: round(m['allReduceSyncDurationUs'], 2) for c, m in means.items()})}"
                   f", step {({c: round(v, 2) for c, v in step.items()})}\n{summary}")
        print(f"\n{figures.splitlines()[0]}", file=sys.stderr)
        for core, mean in means.items():
            self.assertEqual(max(mean, key=mean.get), "hostInfeedDurationUs", f"core {core}; {figures}")
            self.assertGreater(mean["hostInfeedDurationUs"], 0.5 * step[core], f"core {core}; {figures}")
            self.assertAlmostEqual(mean["hostInfeedDurationUs"], INPUT_DELAY_MS, delta=0.2 * INPUT_DELAY_MS,
                                   msg=f"core {core}; {figures}")
            self.assertRegex(summary, rf"(?m)^core {core} \(.*bottleneck Infeed$", figures)
            # Per step too, but for the odd step a loaded machine stalls elsewhere.
            infeed_bound = sum(r["bottleneck"] == "Infeed" for r in by_core[core])
            self.assertGreaterEqual(infeed_bound, 0.9 * len(by_core[core]),
                                    f"core {core}: {infeed_bound} of {len(by_core[core])} steps; {figures}")


if __name__ == "__main__":
    unittest.main()
