"""Transport security on the real binaries with certificates made by test_certs.py: mutual TLS refusals (no
certificate, another CA), allowed_clients (PERMISSION_DENIED naming the caller, counted; DNS, URI and CN names),
the plaintext loopback port, rotation within tls_refresh_s, the TLS metrics on a scrape, and a whole pod capture
(CLI -> coordinator -> agents) over mutual TLS."""
import os
import re
import tempfile
import time
import unittest
import urllib.request

from coord_pod import BIN, Daemon, Pod, podscope, run_dir_of
from test_certs import ALLOWED_CLIENTS, make_test_certs, served_serial


def scrape(address):
    return urllib.request.urlopen(f"http://{address}/metrics", timeout=5).read().decode()


def metric_value(metrics, pattern):
    m = re.search(r"(?m)^" + pattern + r" (\S+)$", metrics)
    return float(m.group(1)) if m else None


class TlsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="podscope_tls_")
        cls.certs = make_test_certs(os.path.join(cls.tmp.name, "certs"))

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def daemon_tls_args(self, cert_dir=None, allowed=ALLOWED_CLIENTS):
        server_cert, server_key = self.certs["server"]
        if cert_dir is not None:
            server_cert, server_key = os.path.join(cert_dir, "server.pem"), os.path.join(cert_dir, "server.key")
        args = ["--tls_cert", server_cert, "--tls_key", server_key, "--tls_client_ca", self.certs["ca"]]
        return args + (["--allowed_clients", allowed] if allowed else [])

    def cli_tls_args(self, name):
        cert, key = self.certs[name]
        return ["--tls_cert", cert, "--tls_key", key, "--tls_ca", self.certs["ca"]]

    def start_agent(self, *args):
        agent = Daemon([f"{BIN}/podscope-agent", "--metrics_listen", "127.0.0.1:0", "--host_name", "tlshost",
                        "--socket", os.path.join(self.tmp.name, f"agent{time.monotonic_ns()}.sock"), *args])
        self.addCleanup(agent.stop)
        return agent

    def capture(self, address, *args):
        with tempfile.TemporaryDirectory() as logdir:
            return podscope("capture", "--service_addr", address, "--logdir", logdir, "--duration_ms", "100",
                            "--num_tracing_attempts", "1", *args)

    def test_mutual_tls_refuses_unknown_callers_and_allowed_clients_decides_captures(self):
        agent = self.start_agent("--listen", "127.0.0.1:0", "--plaintext_listen", "127.0.0.1:0",
                                 *self.daemon_tls_args())
        m = agent.wait_for(r"listening grpc=(\S+) metrics=(\S+) plaintext=(\S+) tls")
        address, metrics_address, plaintext = m.group(1), m.group(2), m.group(3)

        code, out = self.capture(address)  # plaintext against the TLS port
        self.assertEqual(code, 1, out)
        code, out = self.capture(address, "--tls_ca", self.certs["ca"])  # TLS, but no client certificate
        self.assertEqual(code, 1, out)
        self.assertNotIn("PERMISSION_DENIED", out)
        code, out = self.capture(address, *self.cli_tls_args("other_ca_cli"))  # a certificate of another CA
        self.assertEqual(code, 1, out)
        self.assertNotIn("allowed_clients", out)
        # The failed handshakes are logged (at most a line a second) and each one counted.
        agent.wait_for(r"TLS handshake failed: ")
        failed = metric_value(scrape(metrics_address), r'podscope_tls_handshakes_failed_total\{host="tlshost"\}')
        self.assertIsNotNone(failed)
        self.assertGreaterEqual(failed, 3)

        code, out = self.capture(address, *self.cli_tls_args("intruder"))
        self.assertEqual(code, 1, out)
        self.assertIn('caller "intruder.podscope.test" is not in allowed_clients', out)
        agent.wait_for(r"refused Profile from intruder\.podscope\.test \(ipv4:127\.0\.0\.1:\d+\)")
        self.assertEqual(metric_value(scrape(metrics_address),
                                      r'podscope_grpc_calls_refused_total\{host="tlshost",method="Profile"\}'), 1)

        for name, identity in (("cli", "cli.podscope.test"), ("spiffe", "spiffe://podscope.test/cli"),
                               ("cn_only", "cn-only-client")):
            code, out = self.capture(address, *self.cli_tls_args(name))
            self.assertEqual(code, 0, f"{name}: {out}")
            agent.wait_for(r"audit: Profile by " + re.escape(identity) + r" \(ipv4:127\.0\.0\.1:\d+\)")

        # The plaintext loopback port serves a client without any certificate, as the node itself.
        code, out = self.capture(plaintext)
        self.assertEqual(code, 0, out)
        agent.wait_for(r"audit: Profile by local plaintext \(ipv4:127\.0\.0\.1:\d+\)")
        # Status stays open to any caller with a certificate of the CA, allowed or not.
        code, out = podscope("status", "--service_addr", address, *self.cli_tls_args("intruder"))
        self.assertEqual(code, 0, out)
        self.assertIn("tlshost", out)

        metrics = scrape(metrics_address)
        expiry = metric_value(metrics, r'podscope_tls_cert_expiry_seconds\{host="tlshost"\}')
        self.assertIsNotNone(expiry, metrics)
        self.assertAlmostEqual(expiry, 30 * 86400, delta=600)
        self.assertNotIn("podscope_plaintext_listen", metrics)  # plaintext only on loopback
        self.assertIn('podscope_grpc_self_check_passing{host="tlshost"} 1', metrics)

    def test_rotated_certificate_is_served_within_the_refresh_interval(self):
        cert_dir = os.path.join(self.tmp.name, "rotating")
        os.makedirs(cert_dir, exist_ok=True)
        for suffix in ("pem", "key"):
            with open(os.path.join(self.tmp.name, "certs", f"server.{suffix}"), "rb") as src, \
                    open(os.path.join(cert_dir, f"server.{suffix}"), "wb") as dst:
                dst.write(src.read())
        agent = self.start_agent("--listen", "127.0.0.1:0", "--tls_refresh_s", "1",
                                 *self.daemon_tls_args(cert_dir=cert_dir))
        m = agent.wait_for(r"listening grpc=(\S+) metrics=(\S+) tls")
        address, metrics_address = m.group(1), m.group(2)
        cli_cert, cli_key = self.certs["cli"]
        self.assertEqual(served_serial(address, cli_cert, cli_key, self.certs["ca"]), "03E9")  # 1001

        # Rotation as a secret update does it: the new files are renamed into place.
        for suffix in ("key", "pem"):
            staged = os.path.join(cert_dir, f"server.{suffix}.new")
            with open(os.path.join(self.tmp.name, "certs", f"server_rotated.{suffix}"), "rb") as src, \
                    open(staged, "wb") as dst:
                dst.write(src.read())
            os.replace(staged, os.path.join(cert_dir, f"server.{suffix}"))
        rotated_at = time.monotonic()
        serial = None
        while time.monotonic() - rotated_at < 5:
            serial = served_serial(address, cli_cert, cli_key, self.certs["ca"])
            if serial == "03EA":  # 1002
                break
            time.sleep(0.2)
        self.assertEqual(serial, "03EA")
        self.assertLess(time.monotonic() - rotated_at, 3.0, "served later than tls_refresh_s (1 s) + margin")
        code, out = self.capture(address, *self.cli_tls_args("cli"))
        self.assertEqual(code, 0, out)
        deadline = time.monotonic() + 5
        while True:  # the expiry gauge follows the file at the next refresh
            expiry = metric_value(scrape(metrics_address), r'podscope_tls_cert_expiry_seconds\{host="tlshost"\}')
            if expiry is not None and expiry < 11 * 86400 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        self.assertAlmostEqual(expiry, 10 * 86400, delta=600)

    def test_plaintext_on_a_reachable_address_warns_and_is_exported(self):
        agent = self.start_agent("--listen", "0.0.0.0:0")
        m = agent.wait_for(r"listening grpc=(\S+) metrics=(\S+)")
        port = m.group(1).rsplit(":", 1)[1]
        agent.wait_for(r"gRPC listens in plaintext on 0\.0\.0\.0:" + port)
        metrics = scrape(m.group(2))
        self.assertIn(f'podscope_plaintext_listen{{address="0.0.0.0:{port}",host="tlshost"}} 1', metrics)
        self.assertNotIn("podscope_tls_cert_expiry_seconds", metrics)

    def test_config_errors_exit_2_naming_the_key(self):
        for args, message in (
                (["--tls_cert", self.certs["server"][0], "--tls_key", self.certs["server"][1],
                  "--plaintext_listen", "0.0.0.0:0"], "plaintext_listen"),
                (["--allowed_clients", "cli.podscope.test"], "allowed_clients is set without TLS"),
                (["--tls_cert", self.certs["server"][0]], "is set without tls_key"),
                (["--tls_cert", "/nonexistent/server.pem", "--tls_key", self.certs["server"][1]],
                 'tls_cert "/nonexistent/server.pem": cannot be read')):
            agent = self.start_agent("--listen", "127.0.0.1:0", *args)
            self.assertEqual(agent.proc.wait(20), 2, args)
            agent.reader.join(2)
            self.assertIn(message, "".join(agent.lines), args)

    def test_pod_capture_through_the_coordinator_over_mutual_tls(self):
        tls = self.daemon_tls_args()
        pod = Pod([0, 2_000_000], coordinator=True, agent_args=tls, coordinator_args=tls)
        try:
            cli = self.cli_tls_args("cli")
            out = pod.wait_until_registered(*cli, timeout=15)
            self.assertEqual(out.count(" up"), 2, out)
            with tempfile.TemporaryDirectory() as logdir:
                code, out = podscope("capture", "--coordinator", pod.coordinator_addr, "--logdir", logdir,
                                     "--duration_ms", "300", *cli)
                self.assertEqual(code, 0, out)
                files = sorted(os.listdir(run_dir_of(logdir)))
                self.assertEqual(len([f for f in files if f.endswith(".xplane.pb")]), 2, files)
                self.assertIn("pod.trace.json.gz", files)
                # The same capture by a caller outside allowed_clients is refused by the coordinator.
                code, out = podscope("capture", "--coordinator", pod.coordinator_addr, "--logdir", logdir,
                                     "--duration_ms", "300", *self.cli_tls_args("intruder"))
                self.assertEqual(code, 1, out)
                self.assertIn('Capture: caller "intruder.podscope.test" is not in allowed_clients', out)
            pod.coordinator.wait_for(r"audit: Capture by cli\.podscope\.test \(ipv4:127\.0\.0\.1:\d+\)")
            for agent, _ in pod.agents:  # the coordinator captured the agents with its own identity
                agent.wait_for(r"audit: Profile by \S*agent\.podscope\.test\S* \(ipv4:127\.0\.0\.1:\d+\)")
            metrics = scrape(pod.coordinator_metrics)
            self.assertIsNotNone(metric_value(metrics, r"podscope_tls_cert_expiry_seconds"), metrics)
            self.assertIn('podscope_grpc_calls_refused_total{method="Capture"} 1', metrics)
        finally:
            pod.close()


if __name__ == "__main__":
    unittest.main()
