"""Coordinator registration without TLS, between real hosts: agents in their own network namespaces (veth pairs,
own addresses) register with a coordinator in the root namespace. A name belongs to the address that first
registered it: once that agent is down, an agent on another address that registers the same name is refused
(PERMISSION_DENIED, logged, counted as address_taken) and the coordinator keeps listing the name at the first
address; the first agent, back on the same address (a new port, a new instance), has its name again.
Skips with a message where namespaces are refused (not root, no CAP_NET_ADMIN)."""
import os
import re
import sys
import tempfile
import time
import unittest
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
from coord_pod import BIN, Daemon, podscope  # noqa: E402
from netns_clock_test import Namespace  # noqa: E402

NAME = "trainer-0"


def coordinator_status(address):
    code, out = podscope("status", "--coordinator", address, timeout=60)
    return out


def wait_until(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.2)


class NetnsRegistrationTest(unittest.TestCase):
    def setUp(self):
        self.namespaces, self.daemons = [], []
        try:
            self.first = Namespace(5)
            self.namespaces.append(self.first)
            self.second = Namespace(6)
            self.namespaces.append(self.second)
        except PermissionError as e:
            self.tearDown()
            raise unittest.SkipTest(f"network namespaces refused here ({e}); netns registration test not run")
        self.tmp = tempfile.TemporaryDirectory(prefix="podscope_netns_registration_")
        self.coordinator = self.start(
            [f"{BIN}/podscope-coordinator", "--listen", "0.0.0.0:0", "--metrics_listen", "127.0.0.1:0",
             "--repository_root", os.path.join(self.tmp.name, "repo"), "--heartbeat_interval_ms", "200",
             "--clock_sync_interval_ms", "500"])
        m = self.coordinator.wait_for(r"listening grpc=\S+:(\d+) metrics=(\S+)")
        self.port, self.metrics = m.group(1), m.group(2)
        self.local_address = f"127.0.0.1:{self.port}"

    def tearDown(self):
        for d in reversed(self.daemons):
            d.stop()
        for ns in self.namespaces:
            ns.close()
        if hasattr(self, "tmp"):
            self.tmp.cleanup()

    def start(self, argv):
        d = Daemon(argv)
        self.daemons.append(d)
        return d

    def start_agent(self, ns):
        """An agent inside `ns` named NAME, registering through the root namespace's end of its veth pair."""
        gateway = ns.inside_ip.rsplit(".", 1)[0] + ".1"
        return self.start(
            ["ip", "netns", "exec", ns.name, f"{BIN}/podscope-agent", "--listen", f"{ns.inside_ip}:0",
             "--metrics_listen", f"{ns.inside_ip}:0", "--host_name", NAME, "--socket",
             os.path.join(self.tmp.name, f"{ns.name}.sock"), "--coordinator", f"{gateway}:{self.port}"])

    def listed(self, pattern):
        return wait_until(lambda: re.search(pattern, coordinator_status(self.local_address)), 20, pattern)

    def test_a_name_stays_with_the_address_that_registered_it(self):
        first = self.start_agent(self.first)
        up_first = rf"{NAME} {re.escape(self.first.inside_ip)}:\d+ up"
        self.assertTrue(self.listed(up_first), coordinator_status(self.local_address))
        self.coordinator.wait_for(rf"worker {NAME} registered at {re.escape(self.first.inside_ip)}:\d+ by address "
                                  rf"{re.escape(self.first.inside_ip)}")

        # The first agent dies; the coordinator marks it down (3 heartbeat periods).
        first.stop()
        down_first = rf"{NAME} {re.escape(self.first.inside_ip)}:\d+ DOWN"
        self.assertTrue(self.listed(down_first), coordinator_status(self.local_address))

        # Another host takes the name while it is down: refused, again and again as it retries.
        self.start_agent(self.second)
        self.coordinator.wait_for(r"registration refused: .*" + re.escape(NAME), timeout=20)
        self.coordinator.wait_for(r"registration refused: .*" + re.escape(NAME), timeout=20, count=2)
        status = coordinator_status(self.local_address)
        self.assertRegex(status, down_first)
        self.assertNotIn(self.second.inside_ip, status)
        metrics = urllib.request.urlopen(f"http://{self.metrics}/metrics", timeout=5).read().decode()
        self.assertRegex(metrics, r'podscope_coordinator_registrations_refused_total\{reason="address_taken"\} [1-9]')
        # A capture of the name gets nothing of the second host: the worker is down and named so.
        code, out = podscope("capture", "--coordinator", self.local_address, "--logdir",
                             os.path.join(self.tmp.name, "logdir"), "--duration_ms", "300", "--workers_list", NAME)
        self.assertNotEqual(code, 0, out)
        self.assertNotIn(self.second.inside_ip, out)

        # The owner comes back on its address (another port, another instance) and has its name again.
        self.start_agent(self.first)
        self.assertTrue(self.listed(up_first), coordinator_status(self.local_address))
        self.assertNotIn(self.second.inside_ip, coordinator_status(self.local_address))


if __name__ == "__main__":
    unittest.main()
