"""`podscope analyze RUN` of one run, alternating in the same run: every host analysed (--jobs 1), every host merged
from its per-host database (--jobs 1), every host analysed with --jobs 2 and with --jobs 4; and the hosts' analysis
alone, `--hosts 0/1` (every host into its database: no merge, no output, no pod trace), with --jobs 1 and 2. The run is
a real capture replicated under N host file names (default: the shared 8-GPU TensorFlow file, 16 times). Prints each
command's wall time, CPU time and peak RSS (the child's, from wait4), and the medians' ratios to the first way's. The
whole command writes the pod traces too, which read every host file whichever way its analysis went.
  python3 bench/host_databases_bench.py [--file PATH] [--hosts 16] [--rounds 3]"""
import argparse
import glob
import os
import shutil
import statistics
import subprocess
import tempfile
import time

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
BIN = os.environ.get("PODSCOPE_BIN", os.path.join(SOURCE, "build", "bin"))
DEFAULT_FILE = os.path.join(SOURCE, "..", "shared", "testdata", "tf_bert_8gpu_host0.xplane.pb")


def analyze(run, jobs, shard):
    """Runs `podscope analyze RUN --jobs N [--hosts 0/1]`; its wall seconds, CPU seconds, peak RSS in MiB, stdout."""
    start = time.monotonic()
    child = subprocess.Popen([os.path.join(BIN, "podscope"), "analyze", run, "--jobs", str(jobs)] +
                             (["--hosts", "0/1"] if shard else []),
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = child.stdout.read().decode()
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.monotonic() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise RuntimeError(f"podscope analyze exited {child.returncode}:\n{out}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, out


def remove_databases(run):
    for path in glob.glob(os.path.join(run, "*.host_analysis.pb")):
        os.remove(path)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--file", default=DEFAULT_FILE)
    parser.add_argument("--hosts", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="podscope_host_databases_bench_") as run:
        for host in range(args.hosts):
            shutil.copyfile(args.file, os.path.join(run, f"host{host:04d}.xplane.pb"))
        size = os.path.getsize(args.file) * args.hosts / 2**20
        print(f"{args.hosts} hosts, {size:.1f} MiB of host files ({os.path.basename(args.file)} each)")
        ways = {"analysed, --jobs 1": [], "merged, --jobs 1": [], "analysed, --jobs 2": [], "analysed, --jobs 4": [],
                "hosts alone, --jobs 1": [], "hosts alone, --jobs 2": []}
        for round_ in range(args.rounds):
            for way, figures in ways.items():
                if not way.startswith("merged"):
                    remove_databases(run)
                jobs = int(way.rsplit(" ", 1)[1])
                shard = way.startswith("hosts alone")
                wall, cpu, rss, out = analyze(run, jobs, shard)
                merged = f"{args.hosts} of {args.hosts} hosts merged" in out
                if merged != way.startswith("merged") or shard != (f"{args.hosts} host databases" in out):
                    raise RuntimeError(f"{way}: the command said otherwise:\n{out}")
                figures.append((wall, cpu, rss))
                print(f"round {round_ + 1} {way}: wall {wall:.2f} s, cpu {cpu:.2f} s, peak rss {rss:.0f} MiB")
        base = [statistics.median(f[i] for f in ways["analysed, --jobs 1"]) for i in range(3)]
        for way, figures in ways.items():
            median = [statistics.median(f[i] for f in figures) for i in range(3)]
            print(f"median {way}: wall {median[0]:.2f} s ({median[0] / base[0]:.2f}x), cpu {median[1]:.2f} s "
                  f"({median[1] / base[1]:.2f}x), peak rss {median[2]:.0f} MiB ({median[2] / base[2]:.2f}x)")


if __name__ == "__main__":
    main()
