"""A run's offline analysis fanned out over a Ray cluster: N tasks, task I running `podscope analyze RUN --hosts I/N`
on whichever node Ray places it (each writes its shard's host databases beside the host files), then
`podscope analyze RUN` here merges them into the pod's outputs and traces (docs/analysis.md, "Per-host databases,
parallel and sharded analysis"). RUN must be where every node reads and writes it: a bucket (gs://, s3://, with
credentials on every node) or a file system they all mount; `podscope` must be on every node.

  python scripts/ray_analyze.py RUN [--shards N] [--jobs J] [--address ADDRESS] [--podscope PATH]

Without --address a local Ray cluster is started (ray.init's own); --shards defaults to the cluster's CPUs over
--jobs. Exits as the merge does (0, or 3 when some host file could not be read), 1 when a shard failed."""
import argparse
import shutil
import subprocess
import sys

import ray


@ray.remote
def analyze_shard(podscope, run, index, shards, jobs):
    done = subprocess.run([podscope, "analyze", run, f"--hosts={index}/{shards}", f"--jobs={jobs}"],
                          capture_output=True, text=True)
    return index, done.returncode, done.stdout + done.stderr


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run")
    parser.add_argument("--shards", type=int, default=0, help="N (default: the cluster's CPUs / --jobs)")
    parser.add_argument("--jobs", type=int, default=1, help="host files each task analyses at once (its CPUs)")
    parser.add_argument("--address", default=None, help="a Ray cluster's address (default: start a local one)")
    parser.add_argument("--podscope", default=shutil.which("podscope") or "podscope")
    args = parser.parse_args()
    if args.jobs < 1 or args.shards < 0:
        parser.error("--jobs must be at least 1 and --shards at least 0")

    ray.init(address=args.address, include_dashboard=False, logging_level="WARNING")
    shards = args.shards or max(1, int(ray.cluster_resources().get("CPU", 1)) // args.jobs)
    tasks = [analyze_shard.options(num_cpus=args.jobs).remote(args.podscope, args.run, index, shards, args.jobs)
             for index in range(shards)]
    failed = []
    for index, code, output in ray.get(tasks):
        sys.stdout.write(output)
        # 3: some of its files could not be read, which the merge names again.
        if code not in (0, 3):
            failed.append(f"shard {index}/{shards} exited {code}")
    ray.shutdown()
    if failed:
        print("ray_analyze: " + "; ".join(failed) + ": not merged", file=sys.stderr)
        return 1
    return subprocess.run([args.podscope, "analyze", args.run, f"--jobs={args.jobs}"]).returncode


if __name__ == "__main__":
    sys.exit(main())
