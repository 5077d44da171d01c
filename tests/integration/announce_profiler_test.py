"""No static upstream list needed: a framework process announces its profiler server to the local agent with one
call (`podscope.announce_profiler(port)`), the agent lists it in `podscope status` and proxies it in captures while
the process lives, and forgets it once the process has ended.

Runs under the tf framework environment (tests/python_env.sh); PODSCOPE_BIN names the built binaries."""
import os
import tempfile
import time
import unittest

from framework_pod import Trainer, free_port, host_files, python_library_env, start_agent
from coord_pod import podscope, run_dir_of


def host_plane_names(path):
    from tensorflow.tsl.profiler.protobuf import xplane_pb2
    space = xplane_pb2.XSpace()
    with open(path, "rb") as f:
        space.ParseFromString(f.read())
    plane = next(p for p in space.planes if p.name == "/host:CPU")
    return {md.name for md in plane.event_metadata.values()}, list(space.warnings)


def status_of(address):
    code, out = podscope("status", "--service_addr", address)
    return out


def wait_until(predicate, timeout_s=60.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.2)
    return predicate()


class AnnouncedProfilerServers(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="podscope_announce_")
        self.agent, self.address = start_agent(self.tmp.name, "host0")
        self.socket = os.path.join(self.tmp.name, "host0.sock")

    def tearDown(self):
        self.agent.stop()
        self.tmp.cleanup()

    def capture(self, name):
        logdir = os.path.join(self.tmp.name, name)
        code, out = podscope("capture", "--service_addr", self.address, "--logdir", logdir, "--duration_ms", "1000",
                             timeout=120)
        self.assertEqual(code, 0, out)
        return host_plane_names(host_files(run_dir_of(logdir))["host0"])

    def test_an_announced_server_is_listed_proxied_and_forgotten_when_its_process_ends(self):
        port = free_port()
        env = python_library_env()
        env["PODSCOPE_AGENT_SOCKET"] = self.socket
        trainer = Trainer("jax", 600, port, ["--announce"], env=env)
        try:
            trainer.wait_training()
            listed = f"profiler server 127.0.0.1:{port} proxied"
            self.assertTrue(wait_until(lambda: listed in status_of(self.address)), status_of(self.address))
            names, warnings = self.capture("while_alive")
            self.assertIn("train", names, "the JAX trainer's step markers, from its own profiler")
            self.assertFalse([w for w in warnings if "upstream" in w], warnings)
        finally:
            trainer.stop()
        self.assertTrue(wait_until(lambda: "local clients: 0" in status_of(self.address)), status_of(self.address))
        names, warnings = self.capture("after_it_ended")
        self.assertNotIn("train", names)
        self.assertFalse([w for w in warnings if "upstream" in w], "an ended process's server is not asked")


if __name__ == "__main__":
    unittest.main()
