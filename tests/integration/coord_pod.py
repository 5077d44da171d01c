"""Helpers for the coordinator integration tests: start podscope-agent / podscope-coordinator / ring_trainer
on free loopback ports (each reports its bound ports on stderr), run the podscope CLI, always clean up."""
import gzip
import json
import os
import re
import signal
import subprocess
import tempfile
import threading
import time

BIN = os.environ.get("PODSCOPE_BIN", os.path.join(os.path.dirname(__file__), "../../build/bin"))


class Daemon:
    """A child process whose stderr is collected (with its stdout, when `with_stdout`); `wait_for` matches a
    regex against it."""

    def __init__(self, argv, env=None, with_stdout=False):
        self.argv = argv
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE if with_stdout else subprocess.DEVNULL,
                                     stderr=subprocess.STDOUT if with_stdout else subprocess.PIPE, env=env,
                                     start_new_session=True)
        self.stream = self.proc.stdout if with_stdout else self.proc.stderr
        self.lines = []
        self.cond = threading.Condition()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for raw in self.stream:
            with self.cond:
                self.lines.append(raw.decode(errors="replace"))
                self.cond.notify_all()
        with self.cond:
            self.cond.notify_all()

    def wait_for(self, pattern, timeout=20.0, count=1):
        """The `count`-th line matching `pattern` (its match)."""
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                matches = [m for m in map(regex.search, self.lines) if m]
                if len(matches) >= count:
                    return matches[count - 1]
                if self.proc.poll() is not None and not self.reader.is_alive():
                    raise RuntimeError(f"{self.argv[0]} exited ({self.proc.returncode}) before /{pattern}/:\n"
                                       + "".join(self.lines[-30:]))
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no /{pattern}/ from {self.argv[0]}:\n" + "".join(self.lines[-30:]))
                self.cond.wait(min(left, 0.2))

    def stop(self, sig=signal.SIGTERM, timeout=5.0):
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.reader.join(2.0)
        self.stream.close()
        return self.proc.returncode


class Pod:
    """N agents (host0..), optionally a coordinator they register with, optionally ring_trainer ranks."""

    def __init__(self, offsets_ns, coordinator=False, trainer=False, straggler_rank=-1, straggler_delay_ms=0,
                 input_delay_ms=0, agent_args=(), trainer_args=(), matrix=64, coordinator_args=()):
        self.tmp = tempfile.TemporaryDirectory(prefix="podscope_coord_")
        self.daemons = []
        self.coordinator = None
        try:
            if coordinator:
                self.coordinator = self._start(
                    [f"{BIN}/podscope-coordinator", "--listen", "127.0.0.1:0", "--metrics_listen", "127.0.0.1:0",
                     "--repository_root", os.path.join(self.tmp.name, "coordinator_repo"),
                     "--heartbeat_interval_ms", "200", "--clock_sync_interval_ms", "500", *coordinator_args])
                m = self.coordinator.wait_for(r"listening grpc=(\S+) metrics=(\S+)")
                self.coordinator_addr, self.coordinator_metrics = m.group(1), m.group(2)
            self.agents, self.sockets = [], []
            for i, offset in enumerate(offsets_ns):
                sock = os.path.join(self.tmp.name, f"agent{i}.sock")
                argv = [f"{BIN}/podscope-agent", "--listen", "127.0.0.1:0", "--metrics_listen", "127.0.0.1:0",
                        "--host_name", f"host{i}", "--clock_offset_ns", str(offset), "--socket", sock,
                        "--sample_interval_ms", "100"]
                if coordinator:
                    argv += ["--coordinator", self.coordinator_addr]
                agent = self._start(argv + list(agent_args))
                m = agent.wait_for(r"listening grpc=(\S+) metrics=(\S+)")
                self.agents.append((agent, m.group(1)))
                self.sockets.append(sock)
            if trainer:
                base_port = free_port_block(len(offsets_ns))
                self.trainer = self._start(
                    [f"{BIN}/ring_trainer", "--spawn", "--world", str(len(offsets_ns)), "--base_port",
                     str(base_port), "--steps", "0", "--matrix", str(matrix), "--straggler_rank", str(straggler_rank),
                     "--straggler_delay_ms", str(straggler_delay_ms), "--input_delay_ms", str(input_delay_ms),
                     "--agent_sockets", ",".join(self.sockets)] + list(trainer_args))
        except BaseException:
            self.close()
            raise

    def _start(self, argv):
        d = Daemon(argv)
        self.daemons.append(d)
        return d

    @property
    def addresses(self):
        return [a for _, a in self.agents]

    def wait_until_registered(self, *cli_args, timeout=10.0):
        """Polls `podscope status --coordinator` until it lists every agent up, or `timeout` passed; its last output."""
        deadline = time.monotonic() + timeout
        while True:
            _, out = podscope("status", "--coordinator", self.coordinator_addr, *cli_args)
            if out.count(" up") == len(self.agents) or time.monotonic() > deadline:
                return out
            time.sleep(0.2)

    def close(self):
        for d in reversed(self.daemons):
            d.stop()
        self.tmp.cleanup()


def free_port_block(n):
    """A base port with n free consecutive ports after it (checked by binding each)."""
    import socket
    for _ in range(50):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        base = s.getsockname()[1]
        s.close()
        if base + n >= 65535:
            continue
        ok = True
        for p in range(base, base + n):
            t = socket.socket()
            try:
                t.bind(("127.0.0.1", p))
            except OSError:
                ok = False
            finally:
                t.close()
        if ok:
            return base
    raise RuntimeError("no block of free ports")


def podscope(*args, timeout=120):
    """Runs the CLI; returns (exit code, stdout + stderr)."""
    p = subprocess.run([f"{BIN}/podscope", *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=timeout)
    return p.returncode, p.stdout.decode(errors="replace")


def run_dir_of(logdir):
    root = os.path.join(logdir, "plugins", "profile")
    runs = sorted(os.listdir(root))
    return os.path.join(root, runs[-1])


def load_trace(run_dir):
    with gzip.open(os.path.join(run_dir, "pod.trace.json.gz"), "rt") as f:
        return json.load(f)


def trace_channels(trace):
    """{(step, channel id): ((source core, destination core), [recv-done end − send begin, µs])} from the merged
    trace's send and recv-done events, each send paired in time order with a recv-done of its step and channel
    (a transfer cut by the capture window has one side only and is left out)."""
    sides = {}
    for e in trace["traceEvents"]:
        if e.get("ph") != "X" or e.get("name") not in ("send", "recv-done"):
            continue
        args = e["args"]
        sends, recv_dones = sides.setdefault((args["step_num"], args["channel_id"]), ([], []))
        (sends if e["name"] == "send" else recv_dones).append(e)
    out = {}
    for key, (sends, recv_dones) in sides.items():
        pairs = list(zip(sorted(sends, key=lambda e: e["ts"]), sorted(recv_dones, key=lambda e: e["ts"])))
        if pairs:
            link = (sends[0]["args"]["src_core"], sends[0]["args"]["dst_core"])
            out[key] = (link, [float(r["ts"]) + float(r["dur"]) - float(s["ts"]) for s, r in pairs])
    return out


def offset_error_bound_ns(rtt_ns):
    """How far a measured clock offset can be from the true one, from the smallest round trip `rtt_ns` of its
    pings. Each ping's offset is within half its own round trip of the truth whatever the path asymmetry; the
    estimate is the median over pings whose round trip is at most rtt + max(rtt / 10, 20 µs) (clock_sync.h),
    and the division rounds by up to 1 ns."""
    return (rtt_ns + max(rtt_ns // 10, 20_000)) // 2 + 1


def offset_errors_ns(hosts, injected_ns):
    """{core: (measured − injected clock offset, its bound)}, both in ns, from capture.json's hosts of a Pod
    (host i runs rank i, whose core is i)."""
    out = {}
    for host in hosts:
        core = int(host["host_name"].removeprefix("host"))
        out[core] = (host["clock_offset_ns"] - injected_ns[core], offset_error_bound_ns(host["clock_rtt_ns"]))
    return out


def on_true_clocks(channels, errors):
    """Channel durations ({key: (link, [µs])}, times merged with the measured offsets) moved onto the true
    clocks: a merged time is the true time − the host's offset error, so a duration from a send on `src` to
    a recv-done on `dst` gains error(dst) − error(src). With the true offsets every duration is a time on one
    clock, from a send to the end of the recv-done it feeds, and cannot be negative."""
    return {key: (link, [d + (errors[link[1]][0] - errors[link[0]][0]) / 1e3 for d in durations])
            for key, (link, durations) in channels.items()}


def smallest_per_link(channels):
    """{link: the smallest duration over its channels}, for messages."""
    out = {}
    for link, durations in channels.values():
        out[link] = min(out.get(link, float("inf")), *durations)
    return dict(sorted(out.items()))


def percentile(values, p):
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100.0 * (len(s) - 1))))]
