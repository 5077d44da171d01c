"""Our analysis beside Holistic Trace Analysis (HTA, the torch environment's pinned holistictraceanalysis) on the same
real torch.profiler traces: the golden H100 rank (tests/data/kineto) and the shared 2-rank NCCL job's rank 0
(../shared/testdata/kineto, when present). Per kernel our kernel stats agree with HTA's kernel breakdown within 1 %,
per kernel category (computation, communication) within 2 %, and our device idle / compute / other shares with HTA's
temporal breakdown within 2 points. HTA runs as docs/analysis.md ("Beside HTA") says why: without its rounding of
each event to whole µs, and with the last profiler step."""
import json
import os
import shutil
import subprocess
import tempfile
import unittest

os.environ["HTA_DISABLE_NS_ROUNDING"] = "1"  # read before hta is imported
from hta.trace_analysis import TraceAnalysis  # noqa: E402

SOURCE_DIR = os.environ.get("PODSCOPE_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
PODSCOPE = os.path.join(os.environ.get("PODSCOPE_BIN", ""), "podscope")
SHARED = os.environ.get("PODSCOPE_SHARED_TESTDATA", os.path.join(SOURCE_DIR, "..", "shared", "testdata"))
TRACES = {
    "h100": os.path.join(SOURCE_DIR, "tests", "data", "kineto", "h100_linear_relu_sgd.pt.trace.json.gz"),
    "nccl": os.path.join(SHARED, "kineto", "nccl_2rank_rank0.pt.trace.json.gz"),
}


def is_communication(kernel_name):
    return kernel_name.startswith("nccl")  # HTA's rule, and our classification's


class BesideHta(unittest.TestCase):
    def figures(self, trace):
        """(HTA's per-kernel sums and temporal breakdown, ours) for one trace; each tool gets a directory of its own
        (HTA reads every *.json beside the trace, our outputs included)."""
        if not os.path.exists(trace):
            if os.environ.get("PODSCOPE_REQUIRE_TESTDATA"):
                self.fail(f"{trace} is missing and PODSCOPE_REQUIRE_TESTDATA is set")
            self.skipTest(f"{trace} is missing (../shared/testdata)")
        with tempfile.TemporaryDirectory(prefix="podscope_hta_") as tmp:
            hta_dir, our_dir = os.path.join(tmp, "hta"), os.path.join(tmp, "ours")
            for d in (hta_dir, our_dir):
                os.makedirs(d)
                shutil.copy(trace, d)
            analysis = TraceAnalysis(trace_dir=hta_dir, include_last_profiler_step=True)
            _, kernels = analysis.get_gpu_kernel_breakdown(visualize=False, duration_ratio=1.0, num_kernels=1 << 20,
                                                           include_memory_kernels=False)
            temporal = analysis.get_temporal_breakdown(visualize=False).iloc[0]
            subprocess.run([PODSCOPE, "analyze", our_dir], check=True, capture_output=True, timeout=120)
            with open(os.path.join(our_dir, "kernel_stats.json")) as f:
                kernel_stats = json.load(f)
            with open(os.path.join(our_dir, "overview_page.json")) as f:
                overview = json.load(f)
        hta_kernels = {row["name"]: row["sum (us)"] for _, row in kernels.iterrows()}
        ours = {}
        for report in kernel_stats.get("reports", []):
            ours[report["name"]] = ours.get(report["name"], 0) + int(report["totalDurationNs"]) / 1e3
        idle = overview["analysis"]["deviceIdleTimePercent"]
        compute = overview["inputAnalysis"]["computePercent"]
        our_temporal = {"idle": idle, "compute": compute, "other": 100 - idle - compute}
        hta_temporal = {"idle": temporal["idle_time_pctg"], "compute": temporal["compute_time_pctg"],
                        "other": temporal["non_compute_time_pctg"]}
        return hta_kernels, hta_temporal, ours, our_temporal

    def check_agreement(self, name):
        hta_kernels, hta_temporal, ours, our_temporal = self.figures(TRACES[name])
        self.assertEqual(set(ours), set(hta_kernels))
        for kernel, hta_us in hta_kernels.items():
            self.assertAlmostEqual(ours[kernel], hta_us, delta=0.01 * hta_us, msg=kernel)
        for communication in (False, True):
            hta_sum = sum(us for k, us in hta_kernels.items() if is_communication(k) == communication)
            our_sum = sum(us for k, us in ours.items() if is_communication(k) == communication)
            self.assertAlmostEqual(our_sum, hta_sum, delta=0.02 * hta_sum, msg=f"communication={communication}")
        for share, hta_pct in hta_temporal.items():
            self.assertAlmostEqual(our_temporal[share], hta_pct, delta=2.0, msg=f"{share}: {our_temporal} vs {hta_temporal}")

    def test_h100_rank_agrees_with_hta(self):
        self.check_agreement("h100")

    def test_nccl_rank_agrees_with_hta(self):
        self.check_agreement("nccl")


if __name__ == "__main__":
    unittest.main()
