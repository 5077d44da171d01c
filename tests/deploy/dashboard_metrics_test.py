"""The Grafana dashboard and the alert rules against a real scrape: a podscope-agent serving TLS (with the stand-in
NVML library of tests/agent/devices, so that its GPU series are exported by the real collector) and two annotated
ring_trainer ranks; every metric the dashboard and the rules name must be in the agent's /metrics. TPU series
need libtpu's metric service, which this machine lacks: their names are checked against the agent's source.

Environment: PODSCOPE_BIN (built binaries), PODSCOPE_FAKE_NVML_DIR (the stand-in libnvidia-ml.so.1's folder).
"""
import glob
import json
import os
import re
import sys
import tempfile
import time
import unittest
import urllib.request

import yaml

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../integration"))
from coord_pod import BIN, Daemon, free_port_block  # noqa: E402
from test_certs import make_test_certs  # noqa: E402

SOURCE = os.path.join(os.path.dirname(__file__), "../..")
DASHBOARD = os.path.join(SOURCE, "deploy/grafana/podscope.json")
RULES = os.path.join(SOURCE, "deploy/prometheus/podscope-alerts.yml")
METRIC = re.compile(r"\b(podscope_[a-z0-9_]+|up)\b(?!\s*\()")  # not a function call


def dashboard_exprs():
    with open(DASHBOARD) as f:
        dashboard = json.load(f)
    exprs = []
    for panel in dashboard["panels"]:
        exprs += [t["expr"] for t in panel.get("targets", [])]
    exprs += [v["definition"] for v in dashboard["templating"]["list"] if "definition" in v]
    return dashboard, exprs


def rule_exprs():
    with open(RULES) as f:
        rules = yaml.safe_load(f)
    return [r["expr"] for g in rules["groups"] for r in g["rules"]]


def metric_names(exprs):
    return {m.group(1) for e in exprs for m in METRIC.finditer(e)}


def scrape(address):
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=5) as response:
        return response.read().decode()


class DashboardAndRulesAgainstARealScrapeTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="podscope_dashboard_")
        socket = os.path.join(cls.tmp.name, "agent.sock")
        env = dict(os.environ, LD_LIBRARY_PATH=os.environ["PODSCOPE_FAKE_NVML_DIR"])
        # With TLS on, as the expiry alert needs: its certificate's expiry is exported.
        certs = make_test_certs(os.path.join(cls.tmp.name, "certs"))
        cls.agent = Daemon([f"{BIN}/podscope-agent", "--listen", "127.0.0.1:0", "--metrics_listen", "127.0.0.1:0",
                            "--host_name", "node-0", "--socket", socket, "--sample_interval_ms", "100",
                            "--tls_cert", certs["server"][0], "--tls_key", certs["server"][1]], env=env)
        cls.trainer = None
        try:
            cls.metrics_address = cls.agent.wait_for(r"listening grpc=(\S+) metrics=(\S+)").group(2)
            cls.trainer = Daemon([f"{BIN}/ring_trainer", "--spawn", "--world", "2", "--base_port",
                                  str(free_port_block(2)), "--steps", "0", "--matrix", "64", "--job", "dash",
                                  "--agent_sockets", f"{socket},{socket}"])
            cls.text = cls.wait_for_steps_of_both_ranks()
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def wait_for_steps_of_both_ranks(cls):
        deadline = time.monotonic() + 30
        text = ""
        while time.monotonic() < deadline:
            text = scrape(cls.metrics_address)
            if all(f'podscope_step_time_seconds_count{{host="node-0",core="{c}",training_job="dash"}}' in text
                   for c in (0, 1)):
                return text
            time.sleep(0.2)
        raise TimeoutError("no step metrics of both ranks with training_job=\"dash\" in 30 s:\n" + text[-3000:])

    @classmethod
    def tearDownClass(cls):
        for daemon in (cls.trainer, cls.agent):
            if daemon is not None:
                daemon.stop()
        cls.tmp.cleanup()

    def exported(self):
        return {line.split("{")[0].split(" ")[0] for line in self.text.splitlines() if line and line[0] != "#"}

    def check_names(self, names, what):
        tpu = {n for n in names if n.startswith("podscope_tpu_")}
        missing = sorted(names - tpu - {"up"} - self.exported())
        self.assertEqual(missing, [], f"{what} names metrics the agent does not export")
        sources = ""
        for path in glob.glob(os.path.join(SOURCE, "agent/devices/tpu*.cc")):
            with open(path) as f:
                sources += f.read()
        for name in tpu:
            self.assertIn(f'"{name}"', sources, f"{what} names {name}, which the TPU collector does not declare")

    def test_dashboard_loads_and_every_metric_it_names_is_exported(self):
        dashboard, exprs = dashboard_exprs()
        self.assertEqual(dashboard["uid"], "podscope")
        self.assertGreaterEqual(len(exprs), 20)
        titles = {p["title"] for p in dashboard["panels"]}
        for title in ("CPU utilization", "Memory used", "Network", "Device utilization", "Device memory used",
                      "Step time per rank", "Time per step outside all-reduce", "Rank vs its job's median",
                      "Input (infeed) share of step time", "Collectors not ok", "Events dropped", "Captures",
                      "Clock synchronized"):
            self.assertIn(title, titles)
        ids = [p["id"] for p in dashboard["panels"]]
        self.assertEqual(len(ids), len(set(ids)), "panel ids repeat")
        self.check_names(metric_names(exprs), "the dashboard")

    def test_every_metric_the_alert_rules_name_is_exported(self):
        self.check_names(metric_names(rule_exprs()), "the alert rules")

    def test_step_series_are_grouped_by_training_job_and_rank(self):
        for name in ("podscope_step_time_seconds_sum", "podscope_step_all_reduce_seconds_total",
                     "podscope_step_infeed_seconds_total"):
            for core in (0, 1):
                self.assertIn(f'{name}{{host="node-0",core="{core}",training_job="dash"}}', self.text)

    def test_the_stand_in_gpus_are_exported_by_the_real_collector(self):
        self.assertRegex(self.text, r'podscope_gpu_utilization_ratio\{host="node-0",gpu="0",')
        self.assertIn('podscope_collector_status{host="node-0",collector="nvml",state="ok"} 1', self.text)


if __name__ == "__main__":
    unittest.main()
