"""Real PyTorch (torch 2.13, CPU) polling the real agent through Kineto's daemon protocol: the process is listed by
`podscope status`, and `podscope capture` starts far enough ahead for its next poll (saying so first), gets its
trace merged into the capture and analysed, and leaves no trace file behind. Once as root beside a root agent, once
as the DaemonSet runs it: the agent root without any capability on a read-only root file system (a mount namespace
of its own), only its hostPath writable, and PyTorch running as another user (nobody) writing into its own directory
there."""
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import unittest

from coord_pod import BIN, Daemon, podscope, run_dir_of


NOBODY = 65534


class KinetoTorchTest(unittest.TestCase):
    worker_uid = 0

    def agent_command(self, argv):
        return argv

    def worker_command(self, argv):
        return argv

    def setUp(self):
        # Cleanups run even when setUp fails half-way (tearDown would not).
        self.tmp = tempfile.TemporaryDirectory(prefix="podscope_kineto_torch_")
        self.addCleanup(self.tmp.cleanup)
        os.chmod(self.tmp.name, 0o755)
        self.sockets = os.path.join(self.tmp.name, "sockets")
        os.mkdir(self.sockets)
        os.chmod(self.sockets, 0o1777)
        # The node's /run/podscope: the hostPath the agent and the training pods share.
        self.host_path = os.path.join(self.tmp.name, "run-podscope")
        os.mkdir(self.host_path)
        self.trace_root = os.path.join(self.host_path, "kineto")
        self.agent = Daemon(self.agent_command([
            f"{BIN}/podscope-agent", "--listen", "127.0.0.1:0", "--metrics_listen", "127.0.0.1:0",
            "--host_name", "torch-host", "--socket", os.path.join(self.host_path, "agent.sock"),
            "--kineto_endpoint", os.path.join(self.sockets, "dynolog"), "--kineto_trace_dir", self.trace_root]))
        self.addCleanup(self.agent.stop)
        self.address = self.agent.wait_for(r"listening grpc=(\S+)").group(1)
        self.agent.wait_for(r"kineto_endpoint: serving")
        # Kineto reads its own settings from KINETO_CONFIG: poll every second instead of every 5 s.
        config = os.path.join(self.tmp.name, "kineto.conf")
        with open(config, "w") as f:
            f.write("ON_DEMAND_CONFIG_UPDATE_INTERVAL_SECS=1\n")
        os.chmod(config, 0o644)
        env = dict(os.environ, KINETO_USE_DAEMON="1", KINETO_IPC_SOCKET_DIR=self.sockets, KINETO_CONFIG=config)
        self.worker = subprocess.Popen(self.worker_command([
            sys.executable, os.path.join(os.path.dirname(__file__), "kineto_torch_worker.py"), "120"]),
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.addCleanup(self.stop_worker)
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

    def stop_worker(self):
        self.worker.kill()
        self.worker.wait()
        if hasattr(self, "drain"):
            self.drain.join(5)
        self.worker.stdout.close()

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
        self.assertRegex(status, rf"pid {self.pid} uid {self.worker_uid} job 0 \(ancestors ")

        logdir = os.path.join(self.tmp.name, "logdir")
        code, out = podscope("capture", "--service_addr", self.address, "--duration_ms", "2000", "--logdir", logdir,
                             "--num_tracing_attempts", "1")
        self.assertEqual(code, 0, out)
        first = out.splitlines()[0]
        # The interval is the one measured between the process's polls: its configured 1 s, stretched on a loaded box.
        self.assertRegex(first, r"^Starting to trace for 2000 ms in \d+ ms \(.*PyTorch \(Kineto\) processes "
                                r".*every [12]\.\d s")
        with open(os.path.join(run_dir_of(logdir), "pod_summary.txt")) as f:
            summary = f.read()
        # The optimizer's steps of the PyTorch process, found in its merged trace (a step took 316 ms on a box
        # loaded 10 deep: a 2 s window promises a few complete steps, no more).
        steps = int(re.search(r"pod analysis: \d+ cores, (\d+) steps", summary).group(1))
        self.assertGreaterEqual(steps, 3, summary)
        self.assertIn("/device:CUSTOM:0", summary)
        self.assertIn("traces merged 1, refused: none", self.status())
        # The trace was written into the worker's own directory and taken: nothing is left there.
        self.assertEqual(os.listdir(self.trace_root), [str(self.worker_uid)])
        self.assertEqual(os.listdir(os.path.join(self.trace_root, str(self.worker_uid))), [])


class KinetoTorchInTheDaemonSetTest(KinetoTorchTest):
    """The agent as the DaemonSet runs it (root, capabilities dropped, read-only root file system, the hostPath
    writable), PyTorch as another user; its socket writable by the agent (umask 000), as a socket-file endpoint
    needs when the agent holds no capability (docs/kubernetes.md)."""
    worker_uid = NOBODY

    def setUp(self):
        if os.geteuid() != 0:
            self.skipTest("the DaemonSet's shape needs root (a mount namespace, dropping to another user)")
        super().setUp()
        with open(f"/proc/{self.agent.proc.pid}/mountinfo") as f:
            mounts = f.read()
        self.assertRegex(mounts, r"(?m)^\S+ \S+ \S+ \S+ / ro[, ]", "the agent's / is not read-only")

    def agent_command(self, argv):
        # The hostPath and the socket directory stay writable (bound onto themselves), / is remounted read-only, and
        # the agent starts without a capability: setpriv empties the bounding set before the exec.
        script = ('mount --bind "$1" "$1" && mount --bind "$2" "$2" && mount -o remount,bind,ro / && shift 2 && '
                  'exec setpriv --bounding-set=-all --inh-caps=-all "$@"')
        return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", self.host_path,
                self.sockets, *argv]

    def worker_command(self, argv):
        return ["sh", "-c", 'umask 000; exec "$@"', "sh", "setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}",
                "--clear-groups", *argv]


if __name__ == "__main__":
    unittest.main()
