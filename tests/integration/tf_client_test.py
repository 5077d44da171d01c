"""TensorFlow's own profiler client drives podscope agents: `tf.profiler.experimental.client.trace` of one agent,
its worker-list form (TensorBoard's capture dialog) over two, and `client.monitor`, each leaving under logdir what
TensorFlow's own server would (`plugins/profile/<run>/<host>.xplane.pb`).

Runs under the tf framework environment (tests/python_env.sh); PODSCOPE_BIN names the built binaries."""
import os
import tempfile
import unittest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402
from tensorflow.tsl.profiler.protobuf import xplane_pb2  # noqa: E402

from framework_pod import start_agent  # noqa: E402


def runs_under(logdir):
    root = os.path.join(logdir, "plugins", "profile")
    return {run: sorted(os.listdir(os.path.join(root, run))) for run in os.listdir(root)} if os.path.isdir(root) else {}


def host_plane_lines(path):
    space = xplane_pb2.XSpace()
    with open(path, "rb") as f:
        space.ParseFromString(f.read())
    plane = next(p for p in space.planes if p.name == "/host:CPU")
    return {line.name for line in plane.lines}


class TensorFlowClientAgainstAgents(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="podscope_tf_client_")
        cls.agents = []
        try:
            for i in range(2):
                # Agents on loopback listen on ports of their own: the worker list names the other agent's.
                cls.agents.append(start_agent(cls.tmp.name, f"host{i}", extra=[
                    "--repository_root", cls.tmp.name, "--allowed_fanout_targets", "127.0.0.1:*"]))
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        for agent, _ in cls.agents:
            agent.stop()
        cls.tmp.cleanup()

    def logdir(self, name):
        return os.path.join(self.tmp.name, name)

    def test_trace_of_one_agent_writes_tensorflows_layout(self):
        address = self.agents[0][1]
        logdir = self.logdir("single")
        tf.profiler.experimental.client.trace(f"grpc://{address}", logdir, 2000)
        runs = runs_under(logdir)
        self.assertEqual(len(runs), 1, runs)
        [(run, files)] = runs.items()
        # TensorFlow's server names the file after the host its client dialled, ':' written as '_'.
        self.assertEqual(files, [address.replace(":", "_") + ".xplane.pb"])
        lines = host_plane_lines(os.path.join(logdir, "plugins", "profile", run, files[0]))
        self.assertIn("_counters_", lines)

    def test_worker_list_trace_captures_every_listed_agent_into_one_run(self):
        addresses = [address for _, address in self.agents]
        logdir = self.logdir("workers")
        tf.profiler.experimental.client.trace(f"grpc://{addresses[0]}", logdir, 2000, worker_list=",".join(addresses))
        runs = runs_under(logdir)
        self.assertEqual(len(runs), 1, runs)
        [(run, files)] = runs.items()
        xplanes = [f for f in files if f.endswith(".xplane.pb")]
        self.assertEqual(len(xplanes), 2, files)
        for name in xplanes:
            self.assertIn("_counters_", host_plane_lines(os.path.join(logdir, "plugins", "profile", run, name)))

    def test_monitor_answers_with_the_agents_figures(self):
        text = tf.profiler.experimental.client.monitor(f"grpc://{self.agents[1][1]}", 1000, 2)
        self.assertIn("Device type: CPU", text)
        self.assertIn("utilization", text.lower())


if __name__ == "__main__":
    unittest.main()
