"""The allocation hook end to end: 2 real podscope-agent processes, 2 real ring_trainer ranks (one per agent)
that report their buffers through libpodscope's alloc/free hook, a real `podscope capture`, and the memory
profile it writes into the run directory: each rank's per-step allocator peaks at exactly the live bytes the
rank itself counted at its peak (it prints them when it exits)."""
import json
import os
import re
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from coord_pod import Pod, podscope, run_dir_of  # noqa: E402

WORLD = 2
CAPTURE_MS = 1000
WARMUP_S = 0.5
STEP_ALLOCATOR = "ring_trainer_step"


class MemoryProfileTest(unittest.TestCase):
    def test_peak_of_each_rank_equals_the_bytes_it_held_at_its_peak(self):
        pod = Pod([0] * WORLD, trainer=True)
        try:
            pod.trainer.wait_for(r"ring formed", count=WORLD)
            time.sleep(WARMUP_S)
            with tempfile.TemporaryDirectory(prefix="podscope_memory_") as logdir:
                code, out = podscope("capture", "--service_addr", ",".join(pod.addresses), "--logdir", logdir,
                                     "--duration_ms", str(CAPTURE_MS))
                self.assertEqual(code, 0, out)
                with open(os.path.join(run_dir_of(logdir), "memory_profile.json")) as f:
                    profile = json.load(f)
            pod.trainer.stop()
            printed = {}
            for line in pod.trainer.lines:
                m = re.search(r"ring_trainer rank (\d+) \(pid \d+\): allocator (\S+) peaked at (\d+) live bytes", line)
                if m:
                    printed[(int(m.group(1)), m.group(2))] = int(m.group(3))
        finally:
            pod.close()

        per_allocator = profile["memoryProfilePerAllocator"]
        # The model's buffers were allocated before the capture and live through it: no event, no allocator.
        self.assertEqual(sorted(per_allocator), [f"host{rank}/{STEP_ALLOCATOR}" for rank in range(WORLD)])
        for rank in range(WORLD):
            held = printed[(rank, STEP_ALLOCATOR)]
            self.assertGreater(held, 0)
            summary = per_allocator[f"host{rank}/{STEP_ALLOCATOR}"]["profileSummary"]
            peak = summary["peakStats"]
            self.assertEqual(int(peak["heapAllocatedBytes"]), held, f"rank {rank}: {summary}")
            self.assertEqual(int(peak.get("stackReservedBytes", 0)), 0)
            self.assertEqual(int(summary["peakBytesUsageLifetime"]), held)
        self.assertEqual(profile.get("numHosts"), WORLD)


if __name__ == "__main__":
    unittest.main()
