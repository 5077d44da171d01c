"""Integration: podscope-coordinator under a systemd WatchdogSec pings the watchdog while its gRPC port serves, as
podscope-agent does (the fake systemd end is the unix datagram socket NOTIFY_SOCKET names)."""
import os
import socket
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from coord_pod import BIN, Daemon  # noqa: E402


class CoordinatorWatchdogTest(unittest.TestCase):
    def count_within(self, sock, text, seconds):
        count, deadline = 0, time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            sock.settimeout(left)
            try:
                message = sock.recv(512).decode(errors="replace")
            except socket.timeout:
                break
            count += text in message
        return count

    def test_pings_the_watchdog_while_its_port_serves(self):
        with tempfile.TemporaryDirectory() as tmp, socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as notify:
            notify.bind(os.path.join(tmp, "notify"))
            env = dict(os.environ, NOTIFY_SOCKET=os.path.join(tmp, "notify"), WATCHDOG_USEC="1000000")
            coordinator = Daemon([f"{BIN}/podscope-coordinator", "--listen", "127.0.0.1:0", "--metrics_listen",
                                  "127.0.0.1:0", "--repository_root", os.path.join(tmp, "repo")], env=env)
            try:
                coordinator.wait_for(r"listening grpc=")
                # WatchdogSec=1s: a ping every 500 ms; 3 s hold 6, and a loaded box may lose a few.
                self.assertGreaterEqual(self.count_within(notify, "WATCHDOG=1", 3.0), 3)
            finally:
                self.assertEqual(coordinator.stop(), 0)


if __name__ == "__main__":
    unittest.main()
