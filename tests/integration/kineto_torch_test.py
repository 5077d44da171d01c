"""Real PyTorch (torch 2.13, CPU) polling the real agent through Kineto's daemon protocol: the process is listed by
`podscope status`, and `podscope capture` starts far enough ahead for its next poll (saying so first), gets its
trace merged into the capture and analysed, and leaves no trace file behind."""
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import unittest

from coord_pod import BIN, Daemon, podscope, run_dir_of


class KinetoTorchTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="podscope_kineto_torch_")
        self.sockets = os.path.join(self.tmp.name, "sockets")
        os.mkdir(self.sockets)
        self.agent = Daemon([f"{BIN}/podscope-agent", "--listen", "127.0.0.1:0", "--metrics_listen", "127.0.0.1:0",
                             "--host_name", "torch-host", "--socket", os.path.join(self.sockets, "agent.sock"),
                             "--kineto_endpoint", os.path.join(self.sockets, "dynolog")])
        self.address = self.agent.wait_for(r"listening grpc=(\S+)").group(1)
        self.agent.wait_for(r"kineto_endpoint: serving")
        # Kineto reads its own settings from KINETO_CONFIG: poll every second instead of every 5 s.
        config = os.path.join(self.tmp.name, "kineto.conf")
        with open(config, "w") as f:
            f.write("ON_DEMAND_CONFIG_UPDATE_INTERVAL_SECS=1\n")
        env = dict(os.environ, KINETO_USE_DAEMON="1", KINETO_IPC_SOCKET_DIR=self.sockets, KINETO_CONFIG=config)
        self.worker = subprocess.Popen([sys.executable, os.path.join(os.path.dirname(__file__), "kineto_torch_worker.py"),
                                        "120"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        # Kineto logs on the same stream before the loop starts.
        lines = []
        while not lines or not lines[-1].startswith("ready"):
            line = self.worker.stdout.readline().decode()
            self.assertTrue(line, "the worker exited:\n" + "".join(lines))
            lines.append(line)
        self.pid = int(lines[-1].split()[1])
        # Whatever it logs later is read, so that a full pipe never blocks it.
        self.drain = threading.Thread(target=lambda: self.worker.stdout.read(), daemon=True)
        self.drain.start()

    def tearDown(self):
        self.worker.kill()
        self.worker.wait()
        self.drain.join(5)
        self.agent.stop()
        self.tmp.cleanup()

    def status(self):
        code, out = podscope("status", "--service_addr", self.address)
        self.assertEqual(code, 0, out)
        return out

    def test_a_capture_merges_the_trace_of_a_polling_pytorch_process(self):
        deadline = time.monotonic() + 60
        while f"pid {self.pid} " not in self.status():
            self.assertLess(time.monotonic(), deadline, self.status())
            time.sleep(0.5)
        # It has polled twice: the agent knows its interval.
        while not re.search(rf"pid {self.pid} .*every \d+ ms", self.status()):
            self.assertLess(time.monotonic(), deadline, self.status())
            time.sleep(0.5)
        status = self.status()
        self.assertRegex(status, r"PyTorch \(Kineto\): serving socket file .*dynolog, 1 process\(es\) polling")
        self.assertRegex(status, rf"pid {self.pid} job 0 \(ancestors {os.getpid()},")

        logdir = os.path.join(self.tmp.name, "logdir")
        code, out = podscope("capture", "--service_addr", self.address, "--duration_ms", "2000", "--logdir", logdir,
                             "--num_tracing_attempts", "1")
        self.assertEqual(code, 0, out)
        first = out.splitlines()[0]
        self.assertRegex(first, r"^Starting to trace for 2000 ms in \d+ ms \(.*PyTorch \(Kineto\) processes .*every 1\.0 s")
        summary = open(os.path.join(run_dir_of(logdir), "pod_summary.txt")).read()
        # The optimizer's steps of the PyTorch process, found in its merged trace.
        steps = int(re.search(r"pod analysis: \d+ cores, (\d+) steps", summary).group(1))
        self.assertGreater(steps, 5, summary)
        self.assertIn("/device:CUSTOM:0", summary)
        # The trace file was taken: nothing is left in the agent's directory.
        leftovers = [f for d in os.listdir("/tmp") if d.startswith("podscope-kineto-")
                     for f in self.agent_files(os.path.join("/tmp", d))]
        self.assertFalse([f for f in leftovers if f"_{self.pid}.json" in f], leftovers)

    @staticmethod
    def agent_files(directory):
        try:
            return os.listdir(directory)
        except OSError:
            return []


if __name__ == "__main__":
    unittest.main()
