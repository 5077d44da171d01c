"""scripts/ray_analyze.py on a real local Ray cluster (the one ray.init starts): a 64-host run, each host a real
torch.profiler trace of an H100 (tests/data/kineto) under its own rank and file name, analysed in 8 shards by Ray
tasks (`podscope analyze RUN --hosts I/8`) and then merged, gives every output byte for byte as the same run analysed
on one machine by one `podscope analyze`; the merge analyses no host.

Runs in the ray environment (python/requirements/ray.txt); PODSCOPE_BIN names the built binaries."""
import glob
import gzip
import json
import os
import subprocess
import sys
import tempfile
import unittest

SOURCE = os.environ.get("PODSCOPE_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.environ.get("PODSCOPE_BIN", os.path.join(SOURCE, "build", "bin"))
HOSTS = 64


def write_run(run):
    with gzip.open(os.path.join(SOURCE, "tests/data/kineto/h100_linear_relu_sgd.pt.trace.json.gz"), "rt") as f:
        trace = json.load(f)
    for rank in range(HOSTS):
        trace["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": HOSTS}
        with gzip.open(os.path.join(run, f"rank{rank:02d}.pt.trace.json.gz"), "wt") as f:
            json.dump(trace, f)


def outputs(run):
    """Every file the analysis wrote, by name: all but the host files and their databases."""
    found = {}
    for path in sorted(glob.glob(os.path.join(run, "*"))):
        name = os.path.basename(path)
        if not name.endswith((".pt.trace.json.gz", ".host_analysis.pb")):
            with open(path, "rb") as f:
                found[name] = f.read()
    return found


def remove_all_but_hosts(run):
    for path in glob.glob(os.path.join(run, "*")):
        if not path.endswith(".pt.trace.json.gz"):
            os.remove(path)


class RayAnalyze(unittest.TestCase):
    def test_a_64_host_run_sharded_over_ray_then_merged_is_the_single_machine_analysis(self):
        with tempfile.TemporaryDirectory(prefix="podscope_ray_analyze_") as tmp:
            run = os.path.join(tmp, "run")
            os.makedirs(run)
            write_run(run)
            alone = subprocess.run([os.path.join(BIN, "podscope"), "analyze", run, "--jobs", "1"],
                                   capture_output=True, text=True, timeout=300)
            self.assertEqual(alone.returncode, 0, alone.stdout + alone.stderr)
            self.assertIn(f"0 of {HOSTS} hosts merged", alone.stdout)
            expected = outputs(run)
            self.assertIn("report.html", expected)
            self.assertIn("pod.trace.json.gz", expected)
            remove_all_but_hosts(run)

            env = dict(os.environ, RAY_ADDRESS="", RAY_USAGE_STATS_ENABLED="0")
            fanned = subprocess.run(
                [sys.executable, os.path.join(SOURCE, "scripts/ray_analyze.py"), run, "--shards", "8",
                 "--podscope", os.path.join(BIN, "podscope")],
                capture_output=True, text=True, timeout=600, env=env)
            self.assertEqual(fanned.returncode, 0, fanned.stdout + fanned.stderr)
            for shard in range(8):
                self.assertIn(f"shard {shard}/8: 8 host databases", fanned.stdout)
            self.assertIn(f"{HOSTS} of {HOSTS} hosts merged from their host databases", fanned.stdout)
            self.assertEqual(len(glob.glob(os.path.join(run, "*.host_analysis.pb"))), HOSTS)
            got = outputs(run)
            self.assertEqual(sorted(got), sorted(expected))
            for name, content in expected.items():
                self.assertTrue(got[name] == content, f"{name} differs")


if __name__ == "__main__":
    unittest.main()
