"""Integration: real podscope-agent processes with injected clock offsets, real ring_trainer ranks, the
podscope CLI and podscope-coordinator, all on loopback."""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
from coord_pod import (BIN, Daemon, Pod, load_trace, offset_errors_ns, on_true_clocks, percentile, podscope,  # noqa: E402
                       run_dir_of, smallest_per_link, trace_channels)

OFFSETS = [0, 5_000_000, -3_000_000, 20_000_000]


class CapturePodTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.pod = Pod(OFFSETS, trainer=True)
        time.sleep(1.0)  # let the ranks form the ring and run some steps

    @classmethod
    def tearDownClass(cls):
        cls.pod.close()

    def pod_reports_steps(self):
        code, out = podscope("status", "--service_addr", ",".join(self.pod.addresses))
        return code == 0 and "local clients: 0" not in out

    def test_offsets_are_measured_and_transfers_merge_onto_one_clock(self):
        errors, negative, smallest = [], [], {}
        for _ in range(3):
            with tempfile.TemporaryDirectory() as logdir:
                code, out = podscope("capture", "--service_addr", ",".join(self.pod.addresses), "--logdir", logdir,
                                     "--duration_ms", "800")
                self.assertEqual(code, 0, out)
                run_dir = run_dir_of(logdir)
                files = sorted(f for f in os.listdir(run_dir) if f.endswith(".xplane.pb"))
                self.assertEqual(files, sorted(a.replace(":", "_") + ".xplane.pb" for a in self.pod.addresses))
                with open(os.path.join(run_dir, "capture.json")) as f:
                    capture = json.load(f)
                for host, injected in zip(capture["hosts"], OFFSETS):
                    self.assertTrue(host["ok"], host)
                    errors.append(max(0, abs(host["clock_offset_ns"] - injected) - host["clock_rtt_ns"] // 2))
                    errors.append(abs(host["clock_offset_ns"] - injected))
                # The merged trace's ring transfers, moved from the measured offsets onto the true (injected)
                # ones, are never negative (coord_pod.on_true_clocks). Left unmerged, link 3→0 would be 20 ms
                # shorter, far below zero: its shortest transfers take well under 1 ms.
                channels = on_true_clocks(trace_channels(load_trace(run_dir)),
                                          offset_errors_ns(capture["hosts"], OFFSETS))
                self.assertTrue(channels, "the merged trace has no send paired with a recv-done")
                negative += [(key, d) for key, (_, durations) in channels.items() for d in durations if d < 0]
                for link, d in smallest_per_link(channels).items():
                    smallest[link] = min(smallest.get(link, d), d)
        # p90 of the offset error within 100 µs (or RTT_min/2 where that is larger).
        self.assertLessEqual(percentile(errors, 90), 100_000, errors)
        print("\nsmallest transfer per link on the true clocks, µs: "
              + ", ".join(f"{a}->{b} {d:.1f}" for (a, b), d in sorted(smallest.items())), file=sys.stderr)
        self.assertEqual(negative, [], "(step, channel) and duration (µs) of negative transfers on the true clocks")

    def test_monitoring_level_2_aggregates_the_pod(self):
        code, out = podscope("capture", "--service_addr", ",".join(self.pod.addresses), "--monitoring_level", "2",
                             "--num_queries", "2", "--duration_ms", "300")
        self.assertEqual(code, 0, out)
        self.assertIn("Monitoring Results (Sample 2):", out)
        if self.pod_reports_steps():
            self.assertRegex(out, r"Pod \(4 worker\(s\)\): step time avg .* slowest worker")
        else:
            self.assertIn("Pod: no worker reported step times", out)

    def test_status_lists_collectors_and_clock(self):
        code, out = podscope("status", "--service_addr", self.pod.addresses[3])
        self.assertEqual(code, 0, out)
        self.assertIn("host3", out)
        m = re.search(r"offset (-?[\d.]+) ms", out)
        self.assertIsNotNone(m, out)
        self.assertAlmostEqual(float(m.group(1)), 20.0, delta=0.2)

    def test_analyze_names_bad_files_and_exits_3_when_some_were_good_1_when_none(self):
        with tempfile.TemporaryDirectory() as logdir:
            code, out = podscope("capture", "--service_addr", ",".join(self.pod.addresses), "--logdir", logdir,
                                 "--duration_ms", "300")
            self.assertEqual(code, 0, out)
            run_dir = run_dir_of(logdir)
            with open(os.path.join(run_dir, "broken.xplane.pb"), "wb") as f:
                f.write(b"\x0a\xff\xff\x0f garbage")
            open(os.path.join(run_dir, "empty.xplane.pb"), "wb").close()
            code, out = podscope("analyze", run_dir)
            self.assertEqual(code, 3, out)
            self.assertIn("empty.xplane.pb is empty", out)
            self.assertIn("broken.xplane.pb", out)
            self.assertIn("pod analysis:", out)
            for name in os.listdir(run_dir):
                if name.endswith(".xplane.pb") and name not in ("broken.xplane.pb", "empty.xplane.pb"):
                    os.remove(os.path.join(run_dir, name))
            code, out = podscope("analyze", run_dir)
            self.assertEqual(code, 1, out)
            self.assertIn("no file of", out)


class FailuresTest(unittest.TestCase):
    def test_agent_killed_mid_capture_gives_exit_3_and_names_it(self):
        pod = Pod([0, 0, 0])
        try:
            import threading
            killer = threading.Timer(1.0, lambda: pod.agents[1][0].stop(sig=9))
            with tempfile.TemporaryDirectory() as logdir:
                killer.start()
                code, out = podscope("capture", "--service_addr", ",".join(pod.addresses), "--logdir", logdir,
                                     "--duration_ms", "2500", "--num_tracing_attempts", "1")
                killer.join()
                self.assertEqual(code, 3, out)
                dead = pod.addresses[1].replace(":", "_")
                self.assertRegex(out, re.escape(dead) + r" .*FAILED")
                run_dir = run_dir_of(logdir)
                files = sorted(f for f in os.listdir(run_dir) if f.endswith(".xplane.pb"))
                self.assertEqual(len(files), 2, files)
                self.assertNotIn(dead + ".xplane.pb", files)
        finally:
            pod.close()

    def test_ctrl_c_ends_the_capture_early_and_keeps_what_was_collected(self):
        import signal
        import subprocess
        from coord_pod import BIN
        pod = Pod([0, 0])
        try:
            with tempfile.TemporaryDirectory() as logdir:
                cli = subprocess.Popen([f"{BIN}/podscope", "capture", "--service_addr", ",".join(pod.addresses),
                                        "--logdir", logdir, "--duration_ms", "20000"],
                                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
                time.sleep(1.5)
                started = time.monotonic()
                cli.send_signal(signal.SIGINT)
                out, _ = cli.communicate(timeout=15)
                out = out.decode(errors="replace")
                self.assertLess(time.monotonic() - started, 10, out)
                self.assertEqual(cli.returncode, 0, out)
                self.assertIn("Interrupted", out)
                files = [f for f in os.listdir(run_dir_of(logdir)) if f.endswith(".xplane.pb")]
                self.assertEqual(len(files), 2, out)
        finally:
            pod.close()

    def test_nothing_listening_is_retried_then_a_clear_error(self):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        with tempfile.TemporaryDirectory() as logdir:
            code, out = podscope("capture", "--service_addr", f"127.0.0.1:{port}", "--logdir", logdir,
                                 "--duration_ms", "100")
        self.assertEqual(code, 1, out)
        self.assertEqual(out.count("Starting to trace for 100 ms. Remaining attempt(s)"), 3, out)
        self.assertIn("--num_tracing_attempts", out)
        self.assertIn(f"127.0.0.1_{port}", out)

    def test_usage_errors_exit_2_with_the_reason(self):
        code, out = podscope("capture", "--logdir", "/tmp/x")
        self.assertEqual(code, 2)
        self.assertIn("--service_addr", out)
        code, out = podscope("capture", "--service_addr", "hostonly", "--logdir", "/tmp/x")
        self.assertEqual(code, 2)
        self.assertIn("\"hostonly\" has no port", out)
        code, out = podscope("capture", "--service_addr", "a:1", "--monitoring_level", "7")
        self.assertEqual(code, 2)
        code, out = podscope("capture", "--service_addr", "a:1")
        self.assertEqual(code, 2)
        self.assertIn("--logdir is required", out)


class CoordinatorTest(unittest.TestCase):
    def test_register_capture_through_coordinator_and_mark_down(self):
        pod = Pod([0, 5_000_000, -3_000_000], coordinator=True)
        try:
            out = pod.wait_until_registered()
            self.assertEqual(out.count(" up"), 3, out)
            with tempfile.TemporaryDirectory() as logdir:
                code, out = podscope("capture", "--coordinator", pod.coordinator_addr, "--logdir", logdir,
                                     "--duration_ms", "500")
                self.assertEqual(code, 0, out)
                run_dir = run_dir_of(logdir)
                files = sorted(os.listdir(run_dir))
                self.assertEqual(len([f for f in files if f.endswith(".xplane.pb")]), 3, files)
                self.assertIn("capture.json", files)
                self.assertIn("pod.trace.json.gz", files)
                with open(os.path.join(run_dir, "capture.json")) as f:
                    hosts = json.load(f)["hosts"]
                self.assertEqual(sorted(h["host_name"] for h in hosts), ["host0", "host1", "host2"])
                # A named subset.
                code, out = podscope("capture", "--coordinator", pod.coordinator_addr, "--logdir", logdir,
                                     "--duration_ms", "200", "--workers_list", "host1")
                self.assertEqual(code, 0, out)
                code, out = podscope("capture", "--coordinator", pod.coordinator_addr, "--logdir", logdir,
                                     "--workers_list", "nosuchhost")
                self.assertEqual(code, 1, out)
                self.assertIn("unknown worker(s): nosuchhost", out)
            # Monitoring through the coordinator goes to the workers it lists.
            code, out = podscope("capture", "--coordinator", pod.coordinator_addr, "--monitoring_level", "2",
                                 "--num_queries", "1", "--duration_ms", "200")
            self.assertEqual(code, 0, out)
            self.assertIn("Monitoring Results (Sample 1):", out)
            self.assertEqual(len(re.findall(r"Worker host\d \(127\.0\.0\.1:\d+\):", out)), 3, out)
            # An agent that stops heartbeating is marked down, not forgotten.
            pod.agents[2][0].stop()
            deadline = time.monotonic() + 10
            while True:
                code, out = podscope("status", "--coordinator", pod.coordinator_addr)
                if "DOWN" in out or time.monotonic() > deadline:
                    break
                time.sleep(0.3)
            self.assertRegex(out, r"host2 \S+ DOWN", out)
            deadline = time.monotonic() + 10
            while True:  # the metrics follow at the next clock-sync round
                metrics = urllib.request.urlopen(f"http://{pod.coordinator_metrics}/metrics", timeout=5).read().decode()
                if 'podscope_coordinator_workers{state="down"} 1' in metrics or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            self.assertRegex(metrics, r'podscope_coordinator_workers\{state="down"\} 1')
            self.assertRegex(metrics, r'podscope_coordinator_captures_total\{outcome="complete"\} 2')
            self.assertIn("podscope_coordinator_clock_offset_seconds", metrics)
            # The down worker, named or among all, is tried with the rest and named: the others are captured.
            with tempfile.TemporaryDirectory() as logdir:
                for selection in (["--workers_list", "host0,host2"], []):
                    code, out = podscope("capture", "--coordinator", pod.coordinator_addr, "--logdir", logdir,
                                         "--duration_ms", "200", "--num_tracing_attempts", "1", *selection)
                    self.assertEqual(code, 3, out)
                    self.assertRegex(out, r"\(host2\): FAILED: not asked to capture: unreachable", out)
                    self.assertRegex(out, r"\(host0\): ok", out)
        finally:
            pod.close()

    def test_a_worker_that_never_answers_holds_a_capture_no_longer_than_its_own_deadline(self):
        pod = Pod([0, 0, 0], coordinator=True)
        try:
            out = pod.wait_until_registered()
            self.assertEqual(out.count(" up"), 3, out)
            hung = pod.agents[2][0].proc.pid
            os.killpg(hung, signal.SIGSTOP)  # its sockets stay open and it answers nothing: it is still "up"
            try:
                with tempfile.TemporaryDirectory() as logdir:
                    start = time.monotonic()
                    code, out = podscope("capture", "--coordinator", pod.coordinator_addr, "--logdir", logdir,
                                         "--duration_ms", "1000", "--num_tracing_attempts", "1")
                    took = time.monotonic() - start
                    self.assertEqual(code, 3, out)
                    self.assertRegex(out, r"\(host2\): FAILED: ", out)
                    self.assertEqual(len([f for f in os.listdir(run_dir_of(logdir)) if f.endswith(".xplane.pb")]),
                                     2)
                    # 1 s of capture, a 1 s ping timeout, the transfer and the analysis, with room for a loaded
                    # box; the Profile call's old fixed 60 s deadline made this 61 s.
                    self.assertLess(took, 20.0, out)
            finally:
                os.killpg(hung, signal.SIGCONT)
        finally:
            pod.close()

    def test_metrics_port_serves_healthz_and_scrapes_with_idle_connections_held(self):
        coordinator = Daemon([f"{BIN}/podscope-coordinator", "--listen", "127.0.0.1:0", "--metrics_listen",
                              "127.0.0.1:0"])
        idle = []
        try:
            metrics_addr = coordinator.wait_for(r"listening grpc=\S+ metrics=(\S+)").group(1)
            host, port = metrics_addr.rsplit(":", 1)
            with urllib.request.urlopen(f"http://{metrics_addr}/healthz", timeout=5) as answer:
                self.assertEqual((answer.status, answer.read()), (200, b"ok\n"))
            # Connected, never send a byte: twice the server's connection limit.
            idle = [socket.create_connection((host, int(port))) for _ in range(128)]
            start = time.monotonic()
            metrics = urllib.request.urlopen(f"http://{metrics_addr}/metrics", timeout=5).read().decode()
            took = time.monotonic() - start
            self.assertLess(took, 1.0, f"scrape took {took:.2f} s with 128 idle connections held")
            self.assertRegex(metrics, r'podscope_metrics_connections_closed_total\{reason="evicted_at_limit"\} '
                                      r'(6[4-9]|[7-9]\d|1\d\d)\b')
            self.assertIn("podscope_grpc_self_check_passing 1", metrics)
            self.assertIn("podscope_coordinator_workers", metrics)
            if shutil.which("promtool"):
                check = subprocess.run(["promtool", "check", "metrics"], input=metrics, capture_output=True, text=True)
                self.assertEqual(check.returncode, 0, check.stdout + check.stderr)
        finally:
            for connection in idle:
                connection.close()
            coordinator.stop()


if __name__ == "__main__":
    unittest.main()
