"""Real TensorFlow and JAX trainers profiled by podscope agents, for the framework tests and for anyone who wants
such run directories: trainers (examples/tf_keras, examples/jax_train) with their profiler servers, one agent
beside each with that server as its `upstream`, `podscope capture` of them all, `podscope analyze`.

Run under a framework environment's python (build/venv/tf), with PODSCOPE_BIN naming the built binaries:

    build/venv/tf/bin/python tests/integration/framework_pod.py --logdir /tmp/tb \\
        --trainer fit --trainer custom:slow_map_ms=2 --trainer jax

writes one pod run (host0, host1, ... one per trainer) under /tmp/tb/plugins/profile/ and prints its path and
each trainer's own step figures as JSON.
"""
import argparse
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from coord_pod import BIN, Daemon, podscope, run_dir_of  # noqa: E402

SOURCE_DIR = os.environ.get("PODSCOPE_SOURCE_DIR",
                            os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
EXAMPLES = {"fit": "examples/tf_keras/train.py", "custom": "examples/tf_keras/train.py",
            "jax": "examples/jax_train/train.py"}
# A trainer on a loaded 2-core box: importing TensorFlow and tracing the first step can take most of a minute.
TRAINER_START_S = 180


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def python_library_env():
    """The environment for a trainer that imports our Python module (client/python/podscope.py)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(SOURCE_DIR, "client", "python") + os.pathsep + env.get("PYTHONPATH", "")
    lib = os.path.join(os.path.dirname(BIN), "lib", "libpodscope.so")
    if os.path.exists(lib):
        env.setdefault("PODSCOPE_LIBRARY", lib)
    return env


class Trainer(Daemon):
    """One example trainer: `kind` fit / custom (TensorFlow) or jax; stdout carries its step lines and summary."""

    def __init__(self, kind, seconds, profiler_port=0, extra=(), env=None):
        self.kind = kind
        self.port = profiler_port
        argv = [sys.executable, os.path.join(SOURCE_DIR, EXAMPLES[kind]), "--seconds", str(seconds), "--step_lines"]
        if kind != "jax":
            argv += ["--mode", kind]
        if profiler_port:
            argv += ["--profiler_port", str(profiler_port)]
        argv += list(extra)
        env = dict(env or os.environ)
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        super().__init__(argv, env=env, with_stdout=True)  # the step lines are on stdout

    def wait_training(self, steps=5):
        """Until the trainer has finished its first `steps` steps (the first ones trace and compile)."""
        self.wait_for(rf"^step {steps} ", timeout=TRAINER_START_S)

    def steps(self):
        """[(step, start_ns, end_ns)] the trainer printed so far (wall clock)."""
        with self.cond:
            lines = list(self.lines)
        out = []
        for line in lines:
            m = re.match(r"step (\d+) (\d+) (\d+)$", line.strip())
            if m:
                out.append((int(m.group(1)), int(m.group(2)), int(m.group(3))))
        return out

    def summary(self, timeout=TRAINER_START_S):
        """The trainer's final `trainer {...}` line, once it has exited."""
        m = self.wait_for(r"^trainer (\{.*\})", timeout=timeout)
        return json.loads(m.group(1))


def start_agent(tmp, name, upstreams=(), extra=()):
    """A podscope-agent on loopback named `name`; returns (daemon, grpc address)."""
    argv = [f"{BIN}/podscope-agent", "--listen", "127.0.0.1:0", "--metrics_listen", "127.0.0.1:0", "--host_name",
            name, "--socket", os.path.join(tmp, f"{name}.sock"), "--sample_interval_ms", "100"]
    if upstreams:
        argv += ["--upstream", ",".join(upstreams)]
    agent = Daemon(argv + list(extra))
    m = agent.wait_for(r"listening grpc=(\S+) metrics=(\S+)")
    return agent, m.group(1)


def parse_trainer_spec(spec):
    """"custom:slow_map_ms=2" → ("custom", ["--slow_map_ms", "2"])."""
    kind, _, rest = spec.partition(":")
    extra = []
    for item in filter(None, rest.split(",")):
        key, _, value = item.partition("=")
        extra += [f"--{key}", value] if value else [f"--{key}"]
    return kind, extra


class FrameworkPod:
    """Trainers with their profiler servers, one agent beside each (host0, host1, ...) proxying it."""

    def __init__(self, trainers, seconds=60, agent_args=()):
        """`trainers`: [(kind, extra args)]; they train for `seconds` after their first step."""
        self.tmp = tempfile.TemporaryDirectory(prefix="podscope_framework_")
        self.trainers, self.agents = [], []
        try:
            for kind, extra in trainers:
                self.trainers.append(Trainer(kind, seconds, free_port(), extra))
            for i, trainer in enumerate(self.trainers):
                self.agents.append(start_agent(self.tmp.name, f"host{i}", [f"127.0.0.1:{trainer.port}"], agent_args))
            for trainer in self.trainers:
                trainer.wait_training()
        except BaseException:
            self.close()
            raise

    @property
    def addresses(self):
        return [address for _, address in self.agents]

    def capture(self, logdir, duration_ms=2000):
        """`podscope capture` of every agent into logdir; returns (exit code, output, run directory or None)."""
        code, out = podscope("capture", "--service_addr", ",".join(self.addresses),
                             "--logdir", logdir, "--duration_ms", str(duration_ms), timeout=300)
        root = os.path.join(logdir, "plugins", "profile")
        return code, out, run_dir_of(logdir) if os.path.isdir(root) and os.listdir(root) else None

    def close(self):
        for trainer in self.trainers:
            trainer.stop()
        for agent, _ in self.agents:
            agent.stop()
        self.tmp.cleanup()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def host_files(run_dir):
    """{host name: its .xplane.pb path} from the run's capture.json (files are named by the address asked)."""
    with open(os.path.join(run_dir, "capture.json")) as f:
        hosts = json.load(f)["hosts"]
    return {h["host_name"]: os.path.join(run_dir, h["file"]) for h in hosts if h["ok"]}


def steps_in(trainer_steps, start_ns, end_ns):
    """The trainer's own steps that lie wholly inside [start_ns, end_ns]."""
    return [(n, s, e) for n, s, e in trainer_steps if s >= start_ns and e <= end_ns]


def analyze(run_dir, *args, timeout=300):
    """`podscope analyze RUN ARGS...`: (exit code, output)."""
    return podscope("analyze", run_dir, *args, timeout=timeout)


def check_cpu_program_pod(test, out, pipeline):
    """A program without devices (TensorFlow or JAX on CPU): its host is one core of the pod view, with the steps the
    overview found, and no advice that needs an accelerator (kernel launches, CUDA graphs, 16-bit compute)."""
    found = re.search(r"pod analysis: (\d+) cores, (\d+) steps", out)
    test.assertIsNotNone(found, out)
    test.assertEqual(int(found.group(1)), 1, out)
    test.assertEqual(int(found.group(2)), pipeline["stepCount"], out)
    test.assertRegex(out, r"core \d+ \([^,]+, /host:CPU\): \d+ steps")
    recommendation = out[out.index("recommendation"):]
    for advice in ("launches kernels", "CUDA graph", "mixed precision", "16-bit"):
        test.assertNotIn(advice, recommendation)
    print(f"CPU program: {found.group(0)}; overview {pipeline['stepCount']} steps", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--logdir", required=True)
    parser.add_argument("--trainer", action="append", required=True,
                        help="fit | custom | jax, with example flags after ':' (custom:slow_map_ms=2)")
    parser.add_argument("--duration_ms", type=int, default=2000)
    parser.add_argument("--warmup_s", type=float, default=3.0, help="training time before the capture")
    args = parser.parse_args()
    specs = [parse_trainer_spec(spec) for spec in args.trainer]
    with FrameworkPod(specs, seconds=args.warmup_s + args.duration_ms / 1000 + 30) as pod:
        time.sleep(args.warmup_s)
        code, out, run_dir = pod.capture(args.logdir, args.duration_ms)
        print(out, file=sys.stderr)
        figures = {f"host{i}": {"kind": t.kind, "steps": t.steps()} for i, t in enumerate(pod.trainers)}
    print(json.dumps({"capture_exit": code, "run_dir": run_dir, "trainers": figures}))
    return 0 if code == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
