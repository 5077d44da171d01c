"""Our whole analysis (`podscope analyze DIR`: every tool, every output written) beside Holistic Trace Analysis' on the
same torch.profiler traces, in the same run. Ours is the whole `podscope analyze` process. HTA runs in a fresh
python process that loads the traces and computes its kernel breakdown and temporal breakdown (the figures
docs/analysis.md compares with ours): timed twice, its analysis alone (after its import) and the whole process
(python's start and HTA's import, ~1.5 s of CPU, included), as a user running either from a shell pays it. Each is
run --repeat times, interleaved; the best wall and CPU time (the child's user + system, its own children included)
is kept; on a shared, loaded machine the CPU ratio is the figure to read. Run it with the torch environment's python:

  build/venv/torch/bin/python bench/hta_bench.py --podscope build/bin/podscope [--baseline OLD/podscope] [--repeat 3] [DIR...]

With --baseline, another podscope binary (an older build's) is timed the same way, interleaved, and its CPU ratio
printed beside ours: before/after figures of one run.

Each DIR is one run (its *.pt.trace.json[.gz] files). Without DIRs: the golden H100 rank and the shared traces.
"""
import argparse
import glob
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

SOURCE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")

HTA_CHILD = r"""
import os, resource, sys, time, json
os.environ["HTA_DISABLE_NS_ROUNDING"] = "1"
def cpu():
    own, workers = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + workers.ru_utime + workers.ru_stime
t0 = time.perf_counter()
from hta.trace_analysis import TraceAnalysis
t1, c1 = time.perf_counter(), cpu()
failed = []
analysis = TraceAnalysis(trace_dir=sys.argv[1], include_last_profiler_step=True)
for tool in ("get_gpu_kernel_breakdown", "get_temporal_breakdown"):
    try:
        getattr(analysis, tool)(visualize=False)
    except Exception as e:  # HTA fails on some real traces: said, and timed all the same
        failed.append(f"{tool}: {type(e).__name__}")
t2, c2 = time.perf_counter(), cpu()
print(json.dumps({"import_s": t1 - t0, "analysis_s": t2 - t1, "analysis_cpu_s": c2 - c1, "failed": failed}))
"""


def default_runs():
    runs = {"h100": [os.path.join(SOURCE_DIR, "tests/data/kineto/h100_linear_relu_sgd.pt.trace.json.gz")]}
    shared = os.path.join(SOURCE_DIR, "..", "shared", "testdata", "kineto")
    for name, files in (("nccl_2rank_rank0", ["nccl_2rank_rank0"]), ("sampled_2_ranks", ["sampled_rank-0", "sampled_rank-1"]),
                        ("gloo_cpu_rank", ["gloo_cpu_only_rank34"])):
        paths = [os.path.join(shared, f + ".pt.trace.json.gz") for f in files]
        if all(os.path.exists(p) for p in paths):
            runs[name] = paths
    return runs


def timed(command):
    """(wall s, CPU s of the child and its children, stdout) of one run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode != 0:
        raise SystemExit(f"{command[0]} failed ({result.returncode}):\n{result.stdout}\n{result.stderr[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, result.stdout


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--podscope", required=True)
    p.add_argument("--baseline", help="another podscope binary, timed the same way in the same run")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("dirs", nargs="*")
    args = p.parse_args()
    runs = {os.path.basename(os.path.normpath(d)): sorted(glob.glob(os.path.join(d, "*.pt.trace.json*")))
            for d in args.dirs} or default_runs()
    print(f"{'run':18} {'traces':>6} {'MiB':>6} | {'ours wall':>9} {'ours CPU':>9} | {'HTA wall':>9} {'HTA CPU':>9}"
          f" | {'wall ratio':>10} {'CPU ratio':>9} | {'HTA process CPU':>15} {'CPU ratio':>9} | HTA failures")
    for name, traces in runs.items():
        with tempfile.TemporaryDirectory(prefix="podscope_hta_bench_") as tmp:
            ours_dir, hta_dir = os.path.join(tmp, "ours"), os.path.join(tmp, "hta")
            for d in (ours_dir, hta_dir):
                os.makedirs(d)
                for t in traces:
                    shutil.copy(t, d)
            best = {"ours": [float("inf")] * 2, "hta": [float("inf")] * 2, "baseline": [float("inf")] * 2}
            failed, import_s = [], 0.0
            for _ in range(args.repeat):
                for key, binary in (("ours", args.podscope), ("baseline", args.baseline)):
                    if binary is None:
                        continue
                    for path in glob.glob(os.path.join(ours_dir, "*")):
                        if not path.endswith((".pt.trace.json", ".pt.trace.json.gz")):
                            os.remove(path)
                    wall, cpu, _ = timed([binary, "analyze", ours_dir])
                    best[key] = [min(best[key][0], wall), min(best[key][1], cpu)]
                wall, cpu, out = timed([sys.executable, "-c", HTA_CHILD, hta_dir])
                figures = json.loads(out.strip().splitlines()[-1])
                failed, import_s = figures["failed"], figures["import_s"]
                best["hta"] = [min(best["hta"][0], figures["analysis_s"]),
                               min(best["hta"][1], figures["analysis_cpu_s"])]
                best["hta process"] = [min(best.get("hta process", [wall])[0], wall),
                                       min(best.get("hta process", [wall, cpu])[1], cpu)]
            size = sum(os.path.getsize(t) for t in traces) / 2**20
            print(f"{name:18} {len(traces):>6} {size:>6.2f} | {best['ours'][0]:>8.3f}s {best['ours'][1]:>8.3f}s | "
                  f"{best['hta'][0]:>8.3f}s {best['hta'][1]:>8.3f}s | {best['ours'][0] / best['hta'][0]:>10.3f} "
                  f"{best['ours'][1] / best['hta'][1]:>9.3f} | {best['hta process'][1]:>14.3f}s "
                  f"{best['ours'][1] / best['hta process'][1]:>9.3f} | {best['baseline'][1]:>11.3f}s "
                  f"{best['baseline'][1] / best['hta'][1]:>9.3f} | {', '.join(failed) or '-'} (import {import_s:.2f}s)",
                  flush=True)


if __name__ == "__main__":
    main()
