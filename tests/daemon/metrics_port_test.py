"""The metrics port of a real podscope-agent as Prometheus users meet it (daemon/metrics_server.h):

- a real Prometheus scrapes it over TLS with basic auth (metrics_web_config, exporter-toolkit's web-config format);
  a job with a wrong password gets 401 and one in plain HTTP 400, both as Prometheus reports them;
- curl and Python: plain HTTP refused on the TLS port, gzip served and decoded (curl --compressed, Python's gzip),
  a wrong password 401;
- the file read again while the agent runs: client certificates required (RequireAndVerifyClientCert), a rotated
  certificate served, a change that would turn TLS off refused; client_allowed_sans; a bad file stops the agent with
  exit 2;
- 64 clients that ask for a 5.7 MB /metrics and never read keep the agent's RSS bounded, and a scrape still answers.

Environment: PODSCOPE_BIN (built binaries; the client library in PODSCOPE_BIN/../lib). Skipped without Prometheus.
"""
import ctypes
import gzip
import json
import os
import re
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../integration"))
from coord_pod import BIN, Daemon  # noqa: E402
from test_certs import make_test_certs, served_serial  # noqa: E402

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../..")
PASSWORD = "correct horse battery staple"


def bcrypt(password, cost=5):
    """A bcrypt hash as `htpasswd -nBC COST` writes one, made by libxcrypt."""
    crypt = ctypes.CDLL("libcrypt.so.1")
    crypt.crypt_gensalt.restype = ctypes.c_char_p
    crypt.crypt_gensalt.argtypes = [ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p, ctypes.c_int]
    crypt.crypt.restype = ctypes.c_char_p
    crypt.crypt.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    return crypt.crypt(password.encode(), crypt.crypt_gensalt(b"$2y$", cost, None, 0)).decode()


def write_web_config(path, tls=None, users=None):
    lines = []
    if tls:
        lines.append("tls_server_config:")
        lines += [f"  {key}: {value}" for key, value in tls.items()]
    if users:
        lines.append("basic_auth_users:")
        lines += [f"  {user}: {hash}" for user, hash in users.items()]
    with open(path + ".new", "w") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(path + ".new", path)


def start_agent(tmp, *args):
    agent = Daemon([f"{BIN}/podscope-agent", "--listen", "127.0.0.1:0", "--metrics_listen", "127.0.0.1:0",
                    "--host_name", "node-0", "--socket", os.path.join(tmp, f"agent{time.monotonic_ns()}.sock"), *args])
    try:
        address = agent.wait_for(r"listening grpc=\S+ metrics=(\S+)").group(1)
    except BaseException:
        agent.stop()
        raise
    return agent, address


def curl(*args):
    return subprocess.run(["curl", "-sS", "--max-time", "10", *args], capture_output=True, timeout=20)


def sample(text, series):
    m = re.search(r"(?m)^" + re.escape(series) + r" (\S+)$", text)
    return float(m.group(1)) if m else None


class PrometheusScrapesOverTlsWithBasicAuthTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if shutil.which("prometheus") is None:
            raise unittest.SkipTest("prometheus is not installed (scripts/deps.sh installs it)")
        cls.tmp = tempfile.TemporaryDirectory(prefix="podscope_metrics_port_")
        cls.certs = make_test_certs(os.path.join(cls.tmp.name, "certs"))
        cls.web_config = os.path.join(cls.tmp.name, "web.yml")
        # Relative paths, as the format reads them: from the file's folder.
        write_web_config(cls.web_config, tls={"cert_file": "certs/server.pem", "key_file": "certs/server.key"},
                         users={"prometheus": bcrypt(PASSWORD)})
        cls.prometheus = None
        cls.agent, cls.address = start_agent(cls.tmp.name, "--metrics_web_config", cls.web_config)
        try:
            cls.prometheus, cls.prometheus_address = cls.start_prometheus()
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def start_prometheus(cls):
        for name, password in (("password", PASSWORD), ("wrong_password", "guess")):
            with open(os.path.join(cls.tmp.name, name), "w") as f:
                f.write(password)
        tls = {"ca_file": cls.certs["ca"]}
        target = {"targets": [cls.address]}
        config = {
            "global": {"scrape_interval": "1s", "scrape_timeout": "1s"},
            "scrape_configs": [
                {"job_name": "agent", "scheme": "https", "tls_config": tls, "static_configs": [target],
                 "basic_auth": {"username": "prometheus", "password_file": os.path.join(cls.tmp.name, "password")}},
                {"job_name": "wrong_password", "scheme": "https", "tls_config": tls, "static_configs": [target],
                 "basic_auth": {"username": "prometheus",
                                "password_file": os.path.join(cls.tmp.name, "wrong_password")}},
                {"job_name": "plain_http", "static_configs": [target]},
            ],
        }
        path = os.path.join(cls.tmp.name, "prometheus.yml")
        with open(path, "w") as f:
            json.dump(config, f)  # JSON is YAML
        prometheus = Daemon(["prometheus", f"--config.file={path}",
                             f"--storage.tsdb.path={os.path.join(cls.tmp.name, 'tsdb')}",
                             "--web.listen-address=127.0.0.1:0"])
        address = prometheus.wait_for(r'msg="Listening on" address=(\S+)', timeout=60).group(1)
        return prometheus, address

    @classmethod
    def tearDownClass(cls):
        for daemon in (cls.prometheus, cls.agent):
            if daemon is not None:
                daemon.stop()
        cls.tmp.cleanup()

    def prometheus_api(self, path):
        with urllib.request.urlopen(f"http://{self.prometheus_address}/api/v1/{path}", timeout=10) as response:
            return json.load(response)["data"]

    def scraped_targets(self):
        """Each job's target once Prometheus has scraped every one of them at least twice."""
        deadline = time.monotonic() + 90
        while True:
            targets = {t["labels"]["job"]: t for t in self.prometheus_api("targets")["activeTargets"]}
            if len(targets) == 3 and all(t["health"] != "unknown" for t in targets.values()):
                if targets["agent"]["health"] == "up" or time.monotonic() > deadline:
                    return targets
            if time.monotonic() > deadline:
                self.fail(f"Prometheus scraped not every target in 90 s: {targets}")
            time.sleep(0.5)

    def test_prometheus_scrapes_over_tls_with_basic_auth_and_refused_jobs_say_why(self):
        targets = self.scraped_targets()
        self.assertEqual(targets["agent"]["health"], "up", targets["agent"]["lastError"])
        self.assertEqual(targets["wrong_password"]["health"], "down")
        self.assertIn("401 Unauthorized", targets["wrong_password"]["lastError"])
        self.assertEqual(targets["plain_http"]["health"], "down")
        self.assertIn("400 Bad Request", targets["plain_http"]["lastError"])
        # What Prometheus stored from the agent: its own series, and the refusals counted by reason.
        deadline = time.monotonic() + 30
        while True:
            result = self.prometheus_api(
                "query?query=podscope_metrics_requests_unauthorized_total%7Breason%3D%22wrong_credentials%22%7D")
            values = [float(r["value"][1]) for r in result["result"]]
            if values and values[0] > 0:
                break
            self.assertLess(time.monotonic(), deadline, f"no wrong_credentials counted in Prometheus: {result}")
            time.sleep(1)
        up = self.prometheus_api("query?query=up%7Bjob%3D%22agent%22%7D")["result"]
        self.assertEqual(up[0]["value"][1], "1")

    def test_plain_http_is_refused_on_the_tls_port(self):
        answer = curl("-i", f"http://{self.address}/metrics")
        self.assertEqual(answer.returncode, 0, answer.stderr)
        self.assertTrue(answer.stdout.startswith(b"HTTP/1.0 400 Bad Request"), answer.stdout)
        self.assertIn(b"Client sent an HTTP request to an HTTPS server.", answer.stdout)
        with self.assertRaises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"http://{self.address}/metrics", timeout=5)
        self.assertEqual(refused.exception.code, 400)

    def test_a_wrong_or_missing_password_is_401(self):
        for credentials in (["-u", "prometheus:guess"], ["-u", "nobody:" + PASSWORD], []):
            answer = curl("-i", "--cacert", self.certs["ca"], *credentials, f"https://{self.address}/metrics")
            self.assertEqual(answer.returncode, 0, answer.stderr)
            self.assertTrue(answer.stdout.startswith(b"HTTP/1.1 401 Unauthorized"), answer.stdout[:200])
            self.assertIn(b'WWW-Authenticate: Basic realm="podscope"', answer.stdout)

    def test_gzip_is_served_and_decoded_by_curl_and_python(self):
        headers = os.path.join(self.tmp.name, "headers")
        answer = curl("--compressed", "-D", headers, "--cacert", self.certs["ca"], "-u", f"prometheus:{PASSWORD}",
                      f"https://{self.address}/metrics")
        self.assertEqual(answer.returncode, 0, answer.stderr)
        with open(headers) as f:
            self.assertIn("content-encoding: gzip", f.read().lower())
        self.assertIn(b'podscope_metrics_connections_closed_total{host="node-0",reason="request_timeout"}',
                      answer.stdout)

        context = ssl.create_default_context(cafile=self.certs["ca"])
        authorization = "Basic " + __import__("base64").b64encode(f"prometheus:{PASSWORD}".encode()).decode()

        def fetch(encoding):
            request = urllib.request.Request(f"https://{self.address}/metrics",
                                             headers={"Authorization": authorization, "Accept-Encoding": encoding})
            with urllib.request.urlopen(request, context=context, timeout=10) as response:
                return response.headers.get("Content-Encoding"), response.read()

        encoding, zipped = fetch("gzip")
        self.assertEqual(encoding, "gzip")
        text = gzip.decompress(zipped).decode()
        _, plain = fetch("identity")
        names = lambda body: {line.split("{")[0].split(" ")[0] for line in body.splitlines() if line[:1] != "#"}
        self.assertEqual(names(text), names(plain.decode()))
        self.assertLess(len(zipped) * 4, len(plain))


class WebConfigReadAgainTest(unittest.TestCase):
    """The agent reads metrics_web_config again when it or its files change, as node_exporter does."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="podscope_web_config_")
        self.addCleanup(self.tmp.cleanup)
        self.certs = make_test_certs(os.path.join(self.tmp.name, "certs"))
        self.web_config = os.path.join(self.tmp.name, "web.yml")

    def tls(self, **extra):
        server_cert, server_key = self.certs["server"]
        return dict(cert_file=server_cert, key_file=server_key, **extra)

    def handshake(self, client=None):
        """Whether a TLS handshake with the metrics port succeeds, presenting the test certificate `client`."""
        context = ssl.create_default_context(cafile=self.certs["ca"])
        if client is not None:
            context.load_cert_chain(*self.certs[client])
        try:
            with socket.create_connection(tuple(self.address.rsplit(":", 1)), timeout=5) as raw:
                with context.wrap_socket(raw, server_hostname="localhost") as tls:
                    # TLS 1.3 sends the refusal of a client certificate after the handshake: a request shows it.
                    tls.sendall(b"GET /healthz HTTP/1.0\r\n\r\n")
                    return tls.recv(64).startswith(b"HTTP/1.1 200")
        except OSError:  # ssl.SSLError among them
            return False

    def wait_until(self, condition, what):
        deadline = time.monotonic() + 15
        while not condition():
            self.assertLess(time.monotonic(), deadline, what)
            time.sleep(0.3)

    def test_client_certificates_a_rotated_certificate_and_a_refused_change_apply_without_restart(self):
        write_web_config(self.web_config, tls=self.tls())
        agent, self.address = start_agent(self.tmp.name, "--metrics_web_config", self.web_config)
        self.addCleanup(agent.stop)
        self.assertTrue(self.handshake())
        write_web_config(self.web_config, tls=self.tls(client_auth_type="RequireAndVerifyClientCert",
                                                       client_ca_file=self.certs["ca"]))
        self.wait_until(lambda: not self.handshake(), "a client without a certificate still served")
        self.assertTrue(self.handshake("cli"))
        self.assertFalse(self.handshake("other_ca_cli"))

        # Rotated in place, as cert-manager or a deploy script replaces the files.
        cli_cert, cli_key = self.certs["cli"]
        self.assertEqual(served_serial(self.address, cli_cert, cli_key, self.certs["ca"]), "03E9")
        for name in ("server.key", "server.pem"):
            shutil.copyfile(os.path.join(self.tmp.name, "certs", name.replace("server", "server_rotated")),
                            os.path.join(self.tmp.name, "certs", name))
        self.wait_until(lambda: served_serial(self.address, cli_cert, cli_key, self.certs["ca"]) == "03EA",
                        "the rotated certificate is not served")

        write_web_config(self.web_config, users={"prometheus": bcrypt(PASSWORD)})  # TLS off: refused
        refused = re.compile(r"metrics_web_config .* changed but cannot be used; the running configuration stays: "
                             r"tls_server_config removed: turning TLS on or off takes a restart")
        self.wait_until(lambda: self.handshake("cli") and any(map(refused.search, agent.lines)),
                        "a change that turns TLS off was not refused")

    def test_client_allowed_sans_admit_only_the_certificates_they_name(self):
        write_web_config(self.web_config, tls=self.tls(client_auth_type="RequireAndVerifyClientCert",
                                                       client_ca_file=self.certs["ca"],
                                                       client_allowed_sans="[cli.podscope.test]"))
        agent, self.address = start_agent(self.tmp.name, "--metrics_web_config", self.web_config)
        self.addCleanup(agent.stop)
        self.assertTrue(self.handshake("cli"))  # DNS:cli.podscope.test
        self.assertFalse(self.handshake("intruder"))  # the same CA, another name
        self.assertFalse(self.handshake("spiffe"))  # the same CA, a URI not listed
        self.assertFalse(self.handshake())
        cli_cert, cli_key = self.certs["cli"]
        context = ssl.create_default_context(cafile=self.certs["ca"])
        context.load_cert_chain(cli_cert, cli_key)
        request = urllib.request.Request(f"https://{self.address}/metrics")
        with urllib.request.urlopen(request, context=context, timeout=10) as response:
            text = response.read().decode()
        self.assertEqual(sample(text, 'podscope_metrics_connections_closed_total{host="node-0",'
                                      'reason="tls_handshake_failed"}'), 3)

    def test_a_bad_web_config_stops_the_agent_with_exit_2_naming_the_file_and_line(self):
        with open(self.web_config, "w") as f:
            f.write("tls_server_config:\n  cert_file: server.pem\n  key_file: server.key\n  cipher_suites: [X]\n")
        agent = Daemon([f"{BIN}/podscope-agent", "--listen", "127.0.0.1:0", "--metrics_listen", "127.0.0.1:0",
                        "--socket", os.path.join(self.tmp.name, "agent.sock"), "--metrics_web_config",
                        self.web_config])
        self.assertEqual(agent.proc.wait(30), 2)
        agent.reader.join(5)
        self.assertIn(f"podscope-agent: metrics_web_config {self.web_config}:4: tls_server_config.cipher_suites: "
                      "is not supported by podscope", "".join(agent.lines))
        agent.stop()


class ClientsThatNeverReadTest(unittest.TestCase):
    """64 clients ask for a big /metrics (3,000 annotated cores' step series, about 5.7 MB) and never read: the
    agent's memory stays bounded (renders are shared, at most two held) and a scrape is still answered."""

    PROCESSES, CORES = 12, 250  # the client library declares at most 256 cores per process

    def rss_mb(self, pid):
        with open(f"/proc/{pid}/status") as f:
            return int(re.search(r"VmRSS:\s+(\d+) kB", f.read()).group(1)) / 1024

    def test_64_clients_that_never_read_a_big_metrics_keep_the_agents_rss_bounded(self):
        if os.environ.get("PODSCOPE_SANITIZED") == "1":
            self.skipTest("RSS under ASan is the sanitizer's, not the agent's")
        tmp = tempfile.TemporaryDirectory(prefix="podscope_slow_readers_")
        self.addCleanup(tmp.cleanup)
        agent, address = start_agent(tmp.name)
        self.addCleanup(agent.stop)
        socket_path = agent.argv[agent.argv.index("--socket") + 1]
        env = dict(os.environ, PYTHONPATH=os.path.join(SOURCE, "client/python"),
                   PODSCOPE_LIBRARY=os.path.join(os.path.dirname(BIN), "lib", "libpodscope.so"))
        annotate = ("import sys, time, podscope\n"
                    "first, n = int(sys.argv[1]), int(sys.argv[2])\n"
                    "podscope.init(cores=list(range(first, first + n)), job='wide', socket_path=sys.argv[3])\n"
                    "while not podscope.agent_connected(): time.sleep(0.05)\n"
                    "for core in range(first, first + n):\n"
                    "    podscope.set_thread_core(core)\n"
                    "    with podscope.step(0): pass\n"
                    "print('stepped', flush=True)\n"
                    "time.sleep(600)\n")
        processes = [Daemon([sys.executable, "-c", annotate, str(i * self.CORES), str(self.CORES), socket_path],
                            env=env, with_stdout=True) for i in range(self.PROCESSES)]
        for p in processes:
            self.addCleanup(p.stop)
        for p in processes:
            p.wait_for("stepped", timeout=60)
        text = ""
        deadline = time.monotonic() + 30
        while text.count("podscope_step_time_seconds_count{") < self.PROCESSES * self.CORES:
            self.assertLess(time.monotonic(), deadline, "the step series of every core did not appear")
            time.sleep(0.5)
            text = urllib.request.urlopen(f"http://{address}/metrics", timeout=10).read().decode()
        self.assertGreater(len(text), 5 << 20)
        for _ in range(3):  # the heap a few ordinary scrapes settle at
            urllib.request.urlopen(f"http://{address}/metrics", timeout=10).read()
        before = self.rss_mb(agent.proc.pid)

        host, port = address.rsplit(":", 1)
        stalled = []
        for _ in range(64):
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.connect((host, int(port)))
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: agent\r\n\r\n")
            stalled.append(s)
        self.addCleanup(lambda: [s.close() for s in stalled])
        # The peak while they hold their answers (the write timeout closes them at 10 s).
        during = before
        for _ in range(32):
            time.sleep(0.25)
            during = max(during, self.rss_mb(agent.proc.pid))
        print(f"\nagent RSS: {before:.1f} MB after ordinary scrapes of a {len(text) / 1e6:.2f} MB /metrics, "
              f"{during:.1f} MB with 64 clients that never read (+{during - before:.1f} MB)", file=sys.stderr)
        started = time.monotonic()
        scraped = urllib.request.urlopen(f"http://{address}/metrics", timeout=10).read()
        print(f"a scrape meanwhile: {(time.monotonic() - started) * 1000:.0f} ms", file=sys.stderr)
        self.assertGreater(len(scraped), 5 << 20)
        # Two held renders of the body, and what a render costs while it is made: far below one copy per client.
        self.assertLess(during - before, 64, f"RSS {before:.1f} -> {during:.1f} MB")


if __name__ == "__main__":
    unittest.main()
