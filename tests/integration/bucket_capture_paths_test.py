"""The other ways a pod run reaches a bucket, with real servers on loopback (SeaweedFS checking every SigV4 signature,
as in bucket_runs_test) and real agents beside real ring_trainer ranks: through a coordinator that writes the pod's
files with its own credentials, and of the flight recorder's last seconds (`--last_ms`); each run read back by
`podscope analyze s3://…/<run>`. A full local disk (a tmpfs filled to the last byte, where the agents keep failed
uploads and the CLI and coordinator have their temp space) changes nothing while the bucket is fine, and with the
bucket down too each host says why its capture could not be kept, nothing half written. Keys from the instance
metadata service (the stand-in of tests/storage/cloud_credentials_standin.py) write a whole run, and no secret shows
in any output, log or capture.json; a metadata service that refuses is named. TensorFlow's own client (the tf
environment's, in a process of its own) traces an agent into an s3:// and a gs:// logdir: it writes nothing itself,
the agent writes the run.

Runs in the storage environment (python/requirements/storage.txt); PODSCOPE_BIN names the built binaries."""
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from bucket_runs_test import (ACCESS_KEY, SECRET_KEY, FakeGcs, Seaweed, capture_while_the_server_stops,  # noqa: E402
                              clean_env)
from coord_pod import BIN, Daemon, Pod  # noqa: E402

STANDIN = os.path.join(os.path.dirname(__file__), "..", "storage", "cloud_credentials_standin.py")
RUN = re.compile(r"Run directory: s3://runs/(\S+)")


class FullDisk:
    """A tmpfs of 1 MiB mounted at `path`, filled until the kernel refuses another byte (ENOSPC); None when this
    process may not mount (not root, or no CAP_SYS_ADMIN)."""

    @staticmethod
    def mount(path):
        os.makedirs(path)
        if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", path], capture_output=True).returncode:
            return None
        disk = FullDisk(path)
        try:
            # Unbuffered, a page and then a byte at a time, until the kernel refuses the next byte.
            with open(os.path.join(path, "filler"), "wb", buffering=0) as f:
                for size in (4096, 1):
                    try:
                        while True:
                            f.write(b"\0" * size)
                    except OSError:
                        pass
        except BaseException:
            disk.unmount()
            raise
        return disk

    def __init__(self, path):
        self.path = path

    def free_bytes(self):
        stat = os.statvfs(self.path)
        return stat.f_bavail * stat.f_frsize

    def entries(self):
        return sorted(os.path.relpath(os.path.join(d, f), self.path) for d, _, files in os.walk(self.path)
                      for f in files)

    def unmount(self):
        subprocess.run(["umount", "-l", self.path], capture_output=True)


class BucketCapturePaths(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="podscope_bucket_paths_")
        cls.saved_environ = dict(os.environ)  # Pod starts its daemons with this process's environment
        cls.s3 = cls.disk = cls.pod = None
        try:
            cls.s3 = Seaweed(cls.tmp.name)
            cls.disk = FullDisk.mount(os.path.join(cls.tmp.name, "full"))
            # The agents' failed uploads, and the CLI's and coordinator's temp space, on the full disk if there is one.
            local = cls.disk.path if cls.disk else os.path.join(cls.tmp.name, "local")
            os.makedirs(local, exist_ok=True)
            cls.env = clean_env({**cls.s3.env(), "TMPDIR": local})
            os.environ.clear()
            os.environ.update(cls.env)  # the pod's daemons inherit it (and nothing else started here)
            try:
                cls.pod = Pod([0, 2_000_000], coordinator=True, trainer=True, agent_args=[
                    "--allowed_repository_roots", "s3://runs/team/", "--failed_uploads_directory",
                    os.path.join(local, "failed"), "--flight_recorder_seconds", "10", "--kineto_endpoint", ""])
            finally:
                os.environ.clear()
                os.environ.update(cls.saved_environ)
            cls.pod.wait_until_registered()
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        if cls.pod:
            cls.pod.close()
        if cls.s3:
            cls.s3.stop()
        if cls.disk:
            cls.disk.unmount()
        cls.tmp.cleanup()

    def podscope(self, *args, env=None, timeout=240):
        return subprocess.run([f"{BIN}/podscope", *args], env=env or self.env, capture_output=True, text=True,
                              timeout=timeout)

    def assert_whole_run(self, done, logdir_key):
        """The run `done` reported is in the bucket with every host's file and the pod's, and analyses from there."""
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        run = RUN.search(done.stdout).group(1)
        self.assertTrue(run.startswith(logdir_key + "/plugins/profile/"), run)
        objects = self.s3.objects(run + "/")
        names = {k.rsplit("/", 1)[1] for k in objects}
        hosts = {a.replace(":", "_") + ".xplane.pb" for a in self.pod.addresses}
        self.assertTrue(hosts <= names, names)
        self.assertIn("capture.json", names)
        self.assertFalse([k for k in objects if ".tmp" in k or "write-check" in k], objects)
        self.assertTrue(all(objects[f"{run}/{host}"] > 0 for host in hosts), objects)
        record = json.loads(self.s3.client().get_object(Bucket="runs", Key=run + "/capture.json")["Body"].read())
        self.assertEqual(sorted(h["file"] for h in record["hosts"]), sorted(hosts))
        self.assertTrue(all(h["ok"] for h in record["hosts"]), record["hosts"])
        analyzed = self.podscope("analyze", f"s3://runs/{run}")
        self.assertEqual(analyzed.returncode, 0, analyzed.stdout + analyzed.stderr)
        self.assertIn(f"wrote s3://runs/{run}/pod.perfetto-trace", analyzed.stdout)
        self.assertIn(f"{len(hosts)} of {len(hosts)} hosts merged from their host databases", analyzed.stdout)
        return run, record

    def test_a_run_through_the_coordinator_lands_in_the_bucket_and_analyzes_from_there(self):
        done = self.podscope("capture", "--coordinator", self.pod.coordinator_addr, "--logdir",
                             "s3://runs/team/coordinated", "--duration_ms", "1000")
        run, record = self.assert_whole_run(done, "team/coordinated")
        # The coordinator wrote the pod's files into the bucket itself: nothing of the run in its repository root
        # (which holds only the pod snapshots slow steps trigger).
        self.assertIn("pod_viewer.json", {k.rsplit("/", 1)[1] for k in self.s3.objects(run + "/")})
        local_runs = os.path.join(self.pod.tmp.name, "coordinator_repo", "plugins", "profile")
        self.assertNotIn(run.rsplit("/", 1)[1], os.listdir(local_runs) if os.path.isdir(local_runs) else [])

    def test_the_flight_recorders_window_lands_in_the_bucket_and_analyzes_from_there(self):
        time.sleep(3.0)  # the recorder holds seconds of the ranks' steps
        done = self.podscope("capture", "--service_addr", ",".join(self.pod.addresses), "--last_ms", "2000",
                             "--logdir", "s3://runs/team/recent")
        run, record = self.assert_whole_run(done, "team/recent")
        self.assertEqual(record["duration_ms"], 2000, record)
        analyzed = self.podscope("analyze", f"s3://runs/{run}")
        self.assertRegex(analyzed.stdout, r"core \d+ \(.*?\): \d+ steps")

    def test_a_full_local_disk_changes_nothing_while_the_bucket_is_fine(self):
        if not self.disk:
            self.skipTest("mount -t tmpfs is not permitted here (CI runs as root): no full disk to capture beside")
        before = self.disk.entries()
        self.assertLess(self.disk.free_bytes(), 4096)
        done = self.podscope("capture", "--service_addr", ",".join(self.pod.addresses), "--logdir",
                             "s3://runs/team/fulldisk", "--duration_ms", "1000")
        self.assert_whole_run(done, "team/fulldisk")
        self.assertEqual(self.disk.entries(), before)

    def test_a_full_local_disk_with_the_bucket_down_says_why_each_capture_was_not_kept(self):
        if not self.disk:
            self.skipTest("mount -t tmpfs is not permitted here (CI runs as root): no full disk to capture beside")
        code, out, err = capture_while_the_server_stops(self.s3, ",".join(self.pod.addresses),
                                                        "s3://runs/team/nowhere", self.env)
        self.assertEqual(code, 1, out + err)
        lost = re.findall(r"the upload of (s3://runs/team/nowhere/plugins/profile/\S+\.xplane\.pb) failed: .*?"
                          r"could not be kept either: ([^\n]*)", out + err)
        self.assertEqual(len(lost), 2, out + err)
        for url, why in lost:
            self.assertRegex(why, r"[Nn]o space left on device", why)
        # Nothing half written: no host file in the bucket, no partial file on the disk.
        self.assertEqual([k for k in self.s3.objects("team/nowhere/") if k.endswith(".xplane.pb")], [])
        self.assertEqual([e for e in self.disk.entries() if e != "filler"], [])


class CredentialsFromInstanceMetadata(unittest.TestCase):
    """Agents and the CLI with no keys of their own, finding them at the instance metadata service."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="podscope_bucket_imds_")
        cls.s3 = Seaweed(cls.tmp.name)

    @classmethod
    def tearDownClass(cls):
        cls.s3.stop()
        cls.tmp.cleanup()

    def metadata_service(self, name, refuse):
        """The IMDSv2 stand-in handing out SeaweedFS's keys (without a session token: SeaweedFS takes one for its own
        STS's); its address."""
        state = os.path.join(self.tmp.name, name)
        os.makedirs(state)
        with open(os.path.join(state, "config.json"), "w") as f:
            json.dump({"aws_keys": [{"AccessKeyId": ACCESS_KEY, "SecretAccessKey": SECRET_KEY, "Token": "",
                                     "expires_in_s": 6 * 3600}], "imds_role": "podscope-node-role",
                       "refuse": refuse}, f)
        standin = subprocess.Popen([sys.executable, "-B", STANDIN, state, os.path.join(state, "config.json")],
                                   start_new_session=True)
        self.addCleanup(standin.wait)
        self.addCleanup(standin.kill)
        until = time.time() + 60
        while not os.path.exists(os.path.join(state, "port")):
            self.assertLess(time.time(), until, "the metadata stand-in did not start")
            time.sleep(0.05)
        with open(os.path.join(state, "port")) as f:
            return f"http://127.0.0.1:{f.read()}"

    def env_of(self, imds):
        env = clean_env({"AWS_ENDPOINT_URL": self.s3.endpoint, "AWS_REGION": "us-east-1",
                         "AWS_EC2_METADATA_DISABLED": "false", "AWS_EC2_METADATA_SERVICE_ENDPOINT": imds})
        return env

    def start_agent(self, name, env):
        argv = [f"{BIN}/podscope-agent", "--listen", "127.0.0.1:0", "--metrics_listen", "127.0.0.1:0",
                "--host_name", name, "--socket", os.path.join(self.tmp.name, f"{name}.sock"),
                "--sample_interval_ms", "100", "--kineto_endpoint", "", "--allowed_repository_roots", "s3://runs/",
                "--failed_uploads_directory", os.path.join(self.tmp.name, f"failed_{name}")]
        agent = Daemon(argv, env=env)
        self.addCleanup(agent.stop)
        return agent, agent.wait_for(r"listening grpc=(\S+) metrics=(\S+)").group(1)

    def test_keys_from_the_metadata_service_write_a_whole_run_and_no_secret_shows_anywhere(self):
        env = self.env_of(self.metadata_service("imds", refuse=False))
        agents = [self.start_agent(f"host{i}", env) for i in range(2)]
        done = subprocess.run([f"{BIN}/podscope", "capture", "--service_addr", ",".join(a for _, a in agents),
                               "--logdir", "s3://runs/imds", "--duration_ms", "1000"], env=env, capture_output=True,
                              text=True, timeout=240)
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        run = RUN.search(done.stdout).group(1)
        client = self.s3.client()
        listed = client.list_objects_v2(Bucket="runs", Prefix=run + "/")["Contents"]
        names = {o["Key"].rsplit("/", 1)[1] for o in listed}
        self.assertTrue({a.replace(":", "_") + ".xplane.pb" for _, a in agents} <= names, names)
        record = client.get_object(Bucket="runs", Key=run + "/capture.json")["Body"].read().decode()
        agent_logs = "".join("".join(agent.lines) for agent, _ in agents)
        for text in (done.stdout, done.stderr, record, agent_logs):
            self.assertNotIn(SECRET_KEY, text)
            self.assertNotIn("imds-session-", text)  # the metadata service's session tokens

    def test_a_metadata_service_that_refuses_fails_the_capture_before_it_starts_naming_it(self):
        imds = self.metadata_service("refusing", refuse=True)
        env = self.env_of(imds)
        done = subprocess.run([f"{BIN}/podscope", "capture", "--service_addr", "127.0.0.1:9", "--logdir",
                               "s3://runs/refused", "--duration_ms", "1000"], env=env, capture_output=True, text=True,
                              timeout=120)
        self.assertEqual(done.returncode, 1, done.stdout + done.stderr)
        self.assertIn(f"the instance metadata service (IMDSv2) at {imds}", done.stderr)
        self.assertIn("s3://runs/refused", done.stderr)


class TensorFlowsClientWithABucketLogdir(unittest.TestCase):
    """`tf.profiler.experimental.client.trace(agent, 's3://…' or 'gs://…')`: TensorFlow has no s3 file system since
    2.x (it moved to tensorflow-io) and its GCS file system takes no emulator endpoint, yet its client passes the
    logdir to the server as the repository root and writes nothing itself: the agent writes the run."""

    TF_PYTHON = os.path.join(BIN, "..", "venv", "tf", "bin", "python")

    @classmethod
    def setUpClass(cls):
        if not os.path.exists(cls.TF_PYTHON):
            if os.environ.get("PODSCOPE_REQUIRE_FRAMEWORKS"):
                raise RuntimeError("the tf environment is missing")
            raise unittest.SkipTest("the tf environment is missing (scripts/python_envs.sh makes it)")
        cls.tmp = tempfile.TemporaryDirectory(prefix="podscope_tf_bucket_")
        cls.s3 = Seaweed(cls.tmp.name)
        cls.gcs = FakeGcs(cls.tmp.name)
        env = clean_env({**cls.s3.env(), "STORAGE_EMULATOR_HOST": cls.gcs.endpoint})
        argv = [f"{BIN}/podscope-agent", "--listen", "127.0.0.1:0", "--metrics_listen", "127.0.0.1:0",
                "--host_name", "worker0", "--socket", os.path.join(cls.tmp.name, "agent.sock"), "--kineto_endpoint",
                "", "--allowed_repository_roots", "s3://runs/,gs://runs/", "--failed_uploads_directory",
                os.path.join(cls.tmp.name, "failed")]
        cls.agent = Daemon(argv, env=env)
        cls.address = cls.agent.wait_for(r"listening grpc=(\S+) metrics=(\S+)").group(1)

    @classmethod
    def tearDownClass(cls):
        cls.agent.stop()
        cls.s3.stop()
        cls.gcs.stop()
        cls.tmp.cleanup()

    def trace(self, logdir):
        """TensorFlow's client in its own process, every way out of it but to loopback (the agent's address) leading
        to a listener that counts connections: its proxy (for Google's APIs) and its metadata server. The client's
        output and that count."""
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        listener.settimeout(0.2)
        connections, done = [], threading.Event()

        def count():
            while not done.is_set():
                try:
                    connections.append(listener.accept()[0])
                except OSError:
                    pass

        counter = threading.Thread(target=count)
        counter.start()
        trap = f"127.0.0.1:{listener.getsockname()[1]}"
        env = clean_env({"TF_CPP_MIN_LOG_LEVEL": "2", "GCE_METADATA_HOST": trap, "https_proxy": f"http://{trap}",
                         "HTTPS_PROXY": f"http://{trap}", "no_proxy": "127.0.0.1", "NO_PROXY": "127.0.0.1",
                         "GCS_RETRY_CONFIG_MAX_RETRIES": "0"})
        # After the trace, for s3:// only, what TensorFlow's own file system layer makes of the logdir (for gs:// it
        # would go to the trap, which never answers).
        code = ("import sys, tensorflow as tf\n"
                "tf.profiler.experimental.client.trace(sys.argv[1], sys.argv[2], 1000)\n"
                "if sys.argv[2].startswith('s3://'):\n"
                "    try:\n        tf.io.gfile.exists(sys.argv[2])\n    except Exception as e:\n"
                "        print('gfile:', type(e).__name__, e)\n")
        try:
            done_trace = subprocess.run([self.TF_PYTHON, "-c", code, f"grpc://{self.address}", logdir], env=env,
                                        capture_output=True, text=True, timeout=300)
        finally:
            done.set()
            counter.join()
            listener.close()
            for c in connections:
                c.close()
        return done_trace, len(connections)

    def test_an_s3_logdir_is_written_by_the_agent_though_tensorflow_has_no_s3_file_system(self):
        done, connections = self.trace("s3://runs/team/tf")
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        # TensorFlow's own file system layer does not know s3:// at all.
        self.assertIn("gfile: UnimplementedError File system scheme 's3' not implemented", done.stdout)
        client = self.s3.client()
        keys = [o["Key"] for o in client.list_objects_v2(Bucket="runs", Prefix="team/tf/").get("Contents", [])]
        host = self.address.replace(":", "_") + ".xplane.pb"
        self.assertEqual(sorted(k.rsplit("/", 1)[1] for k in keys), [host, host + ".host_analysis.pb"], keys)
        self.assertTrue(all(re.fullmatch(r"team/tf/plugins/profile/[\w]+/[\w.]+", k) for k in keys), keys)
        self.assertEqual(connections, 0)

    def test_a_gs_logdir_is_written_by_the_agent_and_tensorflows_gcs_file_system_is_never_asked(self):
        done, connections = self.trace("gs://runs/team/tf")
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        import urllib.request
        with urllib.request.urlopen(f"{self.gcs.endpoint}/storage/v1/b/runs/o?prefix=team/tf/") as answer:
            names = [item["name"] for item in json.load(answer).get("items", [])]
        host = self.address.replace(":", "_") + ".xplane.pb"
        self.assertEqual(sorted(n.rsplit("/", 1)[1] for n in names), [host, host + ".host_analysis.pb"], names)
        # The trace asked nothing of Google's APIs (through the proxy) or of the metadata server.
        self.assertEqual(connections, 0)


if __name__ == "__main__":
    unittest.main()
