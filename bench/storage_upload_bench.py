"""A host file's upload to a local S3 server (SeaweedFS, started here): podscope's storage interface
(storage_upload_bench) against boto3's upload_file and, where Debian's rclone is installed, `rclone copyto`, on the
same file, alternating, in the same run. Prints each run's time, the ratio to boto3, and podscope's peak RSS above
what the process held before its upload. Run in the storage environment:
  build/venv/storage/bin/python bench/storage_upload_bench.py [--mib 1024] [--rounds 2]"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "integration"))
from bucket_runs_test import ACCESS_KEY, SECRET_KEY, Seaweed, clean_env  # noqa: E402

BIN = os.environ.get("PODSCOPE_BIN", os.path.join(os.path.dirname(__file__), "..", "build", "bin"))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mib", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="podscope_upload_bench_") as tmp:
        s3 = Seaweed(tmp)
        try:
            path = os.path.join(tmp, "host.xplane.pb")
            with open(path, "wb") as f:
                for _ in range(args.mib):
                    f.write(os.urandom(1 << 20))
            env = clean_env(s3.env())
            import boto3
            client = boto3.client("s3", endpoint_url=s3.endpoint, aws_access_key_id=ACCESS_KEY,
                                  aws_secret_access_key=SECRET_KEY, region_name="us-east-1")
            rclone = shutil.which("rclone")
            for round_number in range(args.rounds):
                start = time.monotonic()
                ours = subprocess.run([os.path.join(BIN, "storage_upload_bench"), path, "s3://runs/bench",
                                       f"ours{round_number}"], env=env, capture_output=True, text=True)
                ours_s = time.monotonic() - start
                if ours.returncode != 0:
                    sys.exit(ours.stderr)
                start = time.monotonic()
                client.upload_file(path, "runs", f"bench/boto{round_number}")
                boto_s = time.monotonic() - start
                line = f"round {round_number}: podscope {ours_s:.2f} s, boto3 {boto_s:.2f} s, ratio {ours_s / boto_s:.2f}"
                if rclone:
                    start = time.monotonic()
                    subprocess.run([rclone, "copyto", path, f":s3:runs/bench/rclone{round_number}",
                                    "--s3-provider", "Other", "--s3-endpoint", s3.endpoint, "--s3-access-key-id",
                                    ACCESS_KEY, "--s3-secret-access-key", SECRET_KEY], env=env, check=True)
                    line += f", rclone {time.monotonic() - start:.2f} s"
                print(line, "|", ours.stdout.strip(), flush=True)
        finally:
            s3.stop()


if __name__ == "__main__":
    main()
