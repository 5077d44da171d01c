"""A pod's analysis as it grows: runs of N = 16, 64, 256, 1024 hosts, each host a real recorded capture of a fast rank
(tests/data/analysis/ring_trainer_offsets, four ranks of the ring trainer) replicated under its own host name, core
and clock (its timestamps and clock offset shifted alike by up to ±50 ms, so the merged pod is the recorded one's),
and for each N, in the same run:
  (a) `podscope analyze RUN --jobs J` with no per-host database: every host file read and analysed (J = 1 and the
      machine's cores);
  (b) the same command once every host has its database (as the agents leave them after a capture into a bucket,
      and as (a) leaves them): the pod merged from them;
  XProf: xprof's own conversion of the run's overview page from all N XSpaces (raw_to_tool_data, no saved result),
      in a child process, as TensorBoard's profile plugin makes it when the run is opened.
Prints each one's wall time, CPU time and peak RSS (the child's, from wait4), per host, and the ratios (b)/(a) and
ours/XProf's. Run with the TensorFlow environment's Python (build/venv/tf):
  build/venv/tf/bin/python bench/pod_scale_bench.py [--hosts 16,64,256,1024] [--rounds 3] [--xprof_max_hosts 1024]"""
import argparse
import glob
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
BIN = os.environ.get("PODSCOPE_BIN", os.path.join(SOURCE, "build", "bin"))
RECORDED = os.path.join(SOURCE, "tests", "data", "analysis", "ring_trainer_offsets")
SHIFTED_STATS = {"clock_offset_ns", "capture_start_ns", "capture_end_ns", "recorded_whole_since_ns"}


def replicate(recorded, hosts, run):
    """Writes `hosts` host files into `run`: host k is recorded rank k % 4 as host h<k>, core k, clock shifted."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2
    bases = []
    for path in sorted(glob.glob(os.path.join(recorded, "*.xplane.pb"))):
        space = xplane_pb2.XSpace()
        with open(path, "rb") as f:
            space.ParseFromString(f.read())
        bases.append(space)
    shifts = random.Random(1).sample(range(-50_000_000, 50_000_000), hosts)
    for host in range(hosts):
        space = xplane_pb2.XSpace()
        space.CopyFrom(bases[host % len(bases)])
        base_core = host % len(bases)
        name = f"h{host}"
        del space.hostnames[:]
        space.hostnames.append(name)
        for plane in space.planes:
            if plane.name.startswith("/device:CUSTOM:"):
                plane.name = f"/device:CUSTOM:{host}"
            names = {key: meta.name for key, meta in plane.stat_metadata.items()}
            for stat in plane.stats:
                if names.get(stat.metadata_id) == "host_name":
                    stat.str_value = name
                elif names.get(stat.metadata_id) in SHIFTED_STATS and stat.WhichOneof("value") == "int64_value":
                    stat.int64_value += shifts[host]
                elif names.get(stat.metadata_id) in SHIFTED_STATS and stat.WhichOneof("value") == "uint64_value":
                    stat.uint64_value += shifts[host]
            for line in plane.lines:
                line.timestamp_ns += shifts[host]
                for event in line.events:
                    for stat in event.stats:
                        if names.get(stat.metadata_id) in ("src_core", "dst_core"):
                            stat.int64_value += host - base_core
        with open(os.path.join(run, f"h{host:04d}.xplane.pb"), "wb") as f:
            f.write(space.SerializeToString())


def measured(command):
    """Runs `command`; its wall seconds, CPU seconds, peak RSS in MiB and output."""
    start = time.monotonic()
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = child.stdout.read().decode(errors="replace")
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.monotonic() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{command[:3]} exited {os.waitstatus_to_exitcode(status)}:\n{out[-3000:]}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, out


XPROF_OVERVIEW = """
import glob, sys
from xprof.convert import raw_to_tool_data
files = sorted(glob.glob(sys.argv[1] + "/*.xplane.pb"))
data, _ = raw_to_tool_data.xspace_to_tool_data(files, "overview_page", {"use_saved_result": False})
assert data, "xprof made no overview page"
"""


def analyze(run, jobs):
    return measured([os.path.join(BIN, "podscope"), "analyze", run, "--jobs", str(jobs)])


def remove_databases(run):
    for path in glob.glob(os.path.join(run, "*.host_analysis.pb")):
        os.remove(path)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--hosts", default="16,64,256,1024")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--xprof_max_hosts", type=int, default=1024,
                        help="XProf converts runs of at most this many hosts (its time grows past the bench's)")
    parser.add_argument("--replicate_into", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.replicate_into:
        replicate(RECORDED, int(args.hosts), args.replicate_into)
        return
    cores = os.cpu_count() or 1
    print(f"{cores} cores, load average {os.getloadavg()[0]:.1f}; medians of {args.rounds} rounds")
    print(f"{'N':>5} {'way':<28} {'wall s':>8} {'cpu s':>8} {'rss MiB':>8} {'wall/host ms':>12}   vs (a) --jobs 1")
    for hosts in (int(n) for n in args.hosts.split(",")):
        with tempfile.TemporaryDirectory(prefix=f"podscope_pod_scale_{hosts}_") as run:
            # In a child: the parent stays small, or every child's peak RSS (inherited at fork) would read as its.
            measured([sys.executable, __file__, "--replicate_into", run, "--hosts", str(hosts)])
            ways = {"(a) analysed, --jobs 1": [], f"(a) analysed, --jobs {cores}": [], "(b) merged": []}
            if hosts <= args.xprof_max_hosts:
                ways["XProf overview conversion"] = []
            for _ in range(args.rounds):
                for way, figures in ways.items():
                    if way.startswith("XProf"):
                        figures.append(measured([sys.executable, "-c", XPROF_OVERVIEW, run])[:3])
                        continue
                    if way.startswith("(a)"):
                        remove_databases(run)
                    wall, cpu, rss, out = analyze(run, int(way.rsplit(" ", 1)[1]) if "--jobs" in way else 1)
                    merged = f"{hosts} of {hosts} hosts merged" in out
                    if merged != way.startswith("(b)"):
                        raise RuntimeError(f"{way}: the command said otherwise:\n{out[-3000:]}")
                    figures.append((wall, cpu, rss))
            base = [statistics.median(f[i] for f in ways["(a) analysed, --jobs 1"]) for i in range(3)]
            for way, figures in ways.items():
                m = [statistics.median(f[i] for f in figures) for i in range(3)]
                print(f"{hosts:>5} {way:<28} {m[0]:>8.2f} {m[1]:>8.2f} {m[2]:>8.0f} {1000 * m[0] / hosts:>12.2f}   "
                      f"wall {m[0] / base[0]:.3f}x cpu {m[1] / base[1]:.3f}x rss {m[2] / base[2]:.2f}x", flush=True)


if __name__ == "__main__":
    main()
