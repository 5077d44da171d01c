"""XProf and Perfetto's trace format judge what podscope writes. Three runs: the annotated demo pod
(scripts/demo_pod.sh: a coordinator, 4 agents, 4 ring_trainer ranks, a capture through the coordinator), the
TensorFlow file of ../shared/testdata and a live TensorFlow profile (tests/analysis/tf_profiled_loop.py, TensorFlow's
own profiler), both analysed by `podscope analyze`. XProf is the PyPI package's own code: its
converters (xprof.convert.raw_to_tool_data) and its server (`xprof --logdir`). pod.perfetto-trace is decoded by
protobuf with perfetto_trace.proto, written from the field numbers of Perfetto's published protos, and the host
files with our xplane.proto, both compiled here by protoc. Runs in the `tf` framework environment."""
import collections
import gzip
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.environ.get("PODSCOPE_SOURCE_DIR", os.path.join(HERE, "../.."))
BIN = os.environ.get("PODSCOPE_BIN", os.path.join(SOURCE_DIR, "build/bin"))
TESTDATA = os.environ.get("PODSCOPE_SHARED_TESTDATA", os.path.join(SOURCE_DIR, "../shared/testdata"))
TF_FILE = "tf_bert_8gpu_host0.xplane.pb"
TF_RUN = "tf_bert"
LIVE_TF_RUN = "tf_live"
TOOLS = ("overview_page", "input_pipeline_analyzer", "framework_op_stats", "kernel_stats", "memory_profile",
         "trace_viewer", "pod_viewer")

LOGDIR = None
PROTOS = None  # the compiled modules: (perfetto_trace_pb2, xplane_pb2)


def compile_protos(out_dir):
    """perfetto_trace.proto and proto/tensorflow/xplane.proto compiled by protoc into importable modules (xplane
    from a copy outside its `tensorflow/` folder, whose Python name would be TensorFlow's own package)."""
    xplane_dir = os.path.join(out_dir, "xplane_src")
    os.makedirs(xplane_dir)
    shutil.copy(os.path.join(SOURCE_DIR, "proto/tensorflow/xplane.proto"), xplane_dir)
    for include, proto in ((HERE, "perfetto_trace.proto"), (xplane_dir, "xplane.proto")):
        subprocess.run(["protoc", f"-I{include}", f"--python_out={out_dir}", os.path.join(include, proto)],
                       check=True)
    sys.path.insert(0, out_dir)
    import perfetto_trace_pb2  # noqa: E402
    import xplane_pb2  # noqa: E402
    return perfetto_trace_pb2, xplane_pb2


def podscope(*args):
    done = subprocess.run([os.path.join(BIN, "podscope"), *args], capture_output=True, text=True, timeout=300)
    return done.returncode, done.stdout + done.stderr


def setUpModule():
    global LOGDIR, PROTOS
    LOGDIR = tempfile.mkdtemp(prefix="podscope_xprof_")
    PROTOS = compile_protos(os.path.join(LOGDIR, "protos"))
    env = dict(os.environ, PODSCOPE_DEMO_LOGDIR=os.path.join(LOGDIR, "logdir"))
    demo = subprocess.run(["bash", os.path.join(SOURCE_DIR, "scripts/demo_pod.sh"), os.path.dirname(BIN)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert demo.returncode == 0, demo.stdout + demo.stderr
    live_logdir = os.path.join(LOGDIR, "live_tf")
    live = subprocess.run(["python", os.path.join(SOURCE_DIR, "tests/analysis/tf_profiled_loop.py"), live_logdir],
                          capture_output=True, text=True, timeout=240)
    assert live.returncode == 0, live.stdout + live.stderr
    (live_run,) = os.listdir(os.path.join(live_logdir, "plugins/profile"))
    live_run_dir = os.path.join(LOGDIR, "logdir/plugins/profile", LIVE_TF_RUN)
    shutil.move(os.path.join(live_logdir, "plugins/profile", live_run), live_run_dir)
    code, out = podscope("analyze", live_run_dir)
    assert code == 0, out
    if os.path.exists(os.path.join(TESTDATA, TF_FILE)):
        tf_run = os.path.join(LOGDIR, "logdir/plugins/profile", TF_RUN)
        os.makedirs(tf_run)
        shutil.copy(os.path.join(TESTDATA, TF_FILE), tf_run)
        code, out = podscope("analyze", tf_run)
        assert code == 0, out


def tearDownModule():
    if LOGDIR:
        shutil.rmtree(LOGDIR, ignore_errors=True)


def run_dirs():
    """{run name: run directory} of every run in the logdir."""
    profile = os.path.join(LOGDIR, "logdir/plugins/profile")
    return {name: os.path.join(profile, name) for name in sorted(os.listdir(profile))}


def demo_run_dir():
    return next(d for name, d in run_dirs().items() if name not in (TF_RUN, LIVE_TF_RUN))


def live_tf_run_dir():
    return run_dirs()[LIVE_TF_RUN]


def tf_run_dir(test):
    path = os.path.join(LOGDIR, "logdir/plugins/profile", TF_RUN)
    if not os.path.isdir(path):
        if os.environ.get("PODSCOPE_REQUIRE_TESTDATA"):
            test.fail(f"{TESTDATA}/{TF_FILE} is missing and PODSCOPE_REQUIRE_TESTDATA is set")
        test.skipTest(f"{TESTDATA}/{TF_FILE} is absent")
    return path


def host_files(run_dir):
    return sorted(os.path.join(run_dir, f) for f in os.listdir(run_dir) if f.endswith(".xplane.pb"))


def xprof_tool(files, tool):
    """XProf's converter for `tool` on copies of `files` (it writes its caches beside the files it reads)."""
    from xprof.convert import raw_to_tool_data
    with tempfile.TemporaryDirectory(dir=LOGDIR) as scratch:
        copies = [shutil.copy(f, scratch) for f in files]
        data, _ = raw_to_tool_data.xspace_to_tool_data(copies, tool, {"use_saved_result": False})
    return data


def data_table_rows(table):
    return [[cell.get("v") for cell in row["c"]] for row in table.get("rows", [])]


def xprof_step_table(tool_json):
    """The step-time table of XProf's overview page or input pipeline analyzer: (rows, properties)."""
    table = next(t for t in json.loads(tool_json) if any(c["id"] == "stepTimeMs" for c in t.get("cols", [])))
    return data_table_rows(table), table["p"]


def read_space(path):
    space = PROTOS[1].XSpace()
    with open(path, "rb") as f:
        space.ParseFromString(f.read())
    return space


class XProfConvertersTest(unittest.TestCase):
    def check_every_tool(self, run_dir):
        files = host_files(run_dir)
        self.assertTrue(files, run_dir)
        for tool in TOOLS:
            # XProf's memory profile and trace viewer read one host at a time.
            for group in ([[f] for f in files] if tool in ("memory_profile", "trace_viewer") else [files]):
                with self.subTest(tool=tool, files=[os.path.basename(f) for f in group]):
                    data = xprof_tool(group, tool)
                    self.assertTrue(data, f"XProf's {tool} returned nothing")
                    json.loads(data)

    def test_every_tool_reads_the_annotated_pod(self):
        self.check_every_tool(demo_run_dir())

    def test_every_tool_reads_the_tensorflow_run(self):
        self.check_every_tool(tf_run_dir(self))

    def test_every_tool_reads_the_live_tensorflow_run(self):
        self.check_every_tool(live_tf_run_dir())

    def test_xprofs_overview_and_input_pipeline_show_the_annotated_steps(self):
        run_dir = demo_run_dir()
        with open(os.path.join(run_dir, "overview_page.json")) as f:
            ours = json.load(f)["inputAnalysis"]
        ours_average = ours["stepTimeSummary"]["average"]
        # Host by host: XProf numbers a host's steps by their order there, so across hosts it would keep only the
        # numbers every host has.
        for path in host_files(run_dir):
            for tool in ("overview_page", "input_pipeline_analyzer"):
                rows, props = xprof_step_table(xprof_tool([path], tool))
                # ~55 steps in 2 s; XProf leaves out the first and the last.
                self.assertGreater(len(rows), 20, f"XProf's {tool} shows no annotated steps of {path}")
                xprof_average = float(props["steptime_ms_average"])
                # Ours is each step's longest core's time (the pod's combined step); XProf's this host's: in a
                # synchronous ring the cores' steps end together, so they agree closely.
                self.assertAlmostEqual(xprof_average, ours_average, delta=0.1 * ours_average, msg=tool)
                self.assertIn("input-bound", props["input_conclusion"])

    def test_our_analysis_counts_each_annotated_step_once(self):
        run_dir = demo_run_dir()
        step_nums = set()
        for path in host_files(run_dir):
            for plane in read_space(path).planes:
                names = {k: v.name for k, v in plane.stat_metadata.items()}
                for line in plane.lines:
                    if plane.name.startswith("/device:CUSTOM:") and line.name == "Steps":
                        for e in line.events:
                            step_nums.update(s.int64_value for s in e.stats if names[s.metadata_id] == "step_num")
        with open(os.path.join(run_dir, "overview_page.json")) as f:
            details = json.load(f)["inputAnalysis"]["stepDetails"]
        numbers = [d.get("stepNumber", 0) for d in details]
        self.assertEqual(len(numbers), len(set(numbers)), "a step shown twice")
        self.assertTrue(set(numbers) <= step_nums)
        # Every step but those cut by the capture's edges (at most the first and last of each core's host).
        self.assertGreaterEqual(len(numbers), len(step_nums) - 2 * len(host_files(run_dir)))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_json(url):
    with urllib.request.urlopen(url, timeout=60) as response:
        body = response.read()
    if body[:2] == b"\x1f\x8b":
        body = gzip.decompress(body)
    return json.loads(body)


class XProfServerTest(unittest.TestCase):
    def test_xprof_lists_our_runs_and_their_hosts(self):
        port = free_port()
        server = subprocess.Popen(["xprof", "--logdir", os.path.join(LOGDIR, "logdir"), "--port", str(port)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        base = f"http://127.0.0.1:{port}/data/plugin/profile"
        try:
            deadline = time.monotonic() + 180
            while True:
                try:
                    runs = http_json(f"{base}/runs")
                    break
                except OSError:
                    self.assertIsNone(server.poll(), "xprof exited")
                    self.assertLess(time.monotonic(), deadline, "xprof did not answer in 180 s")
                    time.sleep(0.5)
            self.assertEqual(sorted(runs), sorted(run_dirs()))
            for run, run_dir in run_dirs().items():
                with self.subTest(run=run):
                    self.assertIn("overview_page", http_json(f"{base}/run_tools?run={run}"))
                    self.assertTrue(http_json(f"{base}/hosts?run={run}&tag=overview_page"))  # all hosts as one
                    hosts = http_json(f"{base}/hosts?run={run}&tag=trace_viewer")
                    names = {h["hostname"] if isinstance(h, dict) else h for h in hosts}
                    expected = {os.path.basename(f)[:-len(".xplane.pb")] for f in host_files(run_dir)}
                    self.assertTrue(expected <= names, f"{sorted(expected)} not all in {sorted(names)}")
        finally:
            server.terminate()
            server.wait(timeout=30)


class PerfettoTraceTest(unittest.TestCase):
    """pod.perfetto-trace as Perfetto's protos define it, against the host files it was written from."""

    def check_trace(self, run_dir):
        trace = PROTOS[0].Trace()
        with open(os.path.join(run_dir, "pod.perfetto-trace"), "rb") as f:
            trace.ParseFromString(f.read())
        event_type = PROTOS[0].TrackEvent
        tracks = {}
        last_ts = {}
        counts = collections.Counter()
        flow_starts, flow_ends = {}, {}
        names, annotation_names = collections.defaultdict(dict), collections.defaultdict(dict)
        for packet in trace.packet:
            seq = packet.trusted_packet_sequence_id
            for n in packet.interned_data.event_names:
                names[seq][n.iid] = n.name
            for n in packet.interned_data.debug_annotation_names:
                annotation_names[seq][n.iid] = n.name
            if packet.HasField("track_descriptor"):
                tracks[packet.track_descriptor.uuid] = packet.track_descriptor
            if not packet.HasField("track_event"):
                continue
            e = packet.track_event
            self.assertIn(e.track_uuid, tracks, "a track event before (or without) its track's descriptor")
            self.assertGreaterEqual(packet.timestamp, last_ts.get(e.track_uuid, 0), tracks[e.track_uuid].name)
            last_ts[e.track_uuid] = packet.timestamp
            counts[e.type] += 1
            if e.type == event_type.TYPE_SLICE_BEGIN:
                args = {annotation_names[seq][a.name_iid]: a for a in e.debug_annotations}
                for flow in e.flow_ids:
                    self.assertNotIn(flow, flow_starts)
                    flow_starts[flow] = (names[seq][e.name_iid], args)
                for flow in e.terminating_flow_ids:
                    self.assertNotIn(flow, flow_ends)
                    flow_ends[flow] = names[seq][e.name_iid]
            if e.type == event_type.TYPE_COUNTER:
                self.assertTrue(tracks[e.track_uuid].HasField("counter"))

        slices, counter_values = 0, 0
        endpoints = collections.defaultdict(lambda: [0, 0])  # (step, channel, source, destination): sends, recvs
        for path in host_files(run_dir):
            for plane in read_space(path).planes:
                stat_names = {k: v.name for k, v in plane.stat_metadata.items()}
                for line in plane.lines:
                    if line.name == "_counters_":
                        counter_values += len(line.events)
                        continue
                    slices += len(line.events)
                    if not plane.name.startswith("/device:CUSTOM:"):
                        continue
                    for ev in line.events:
                        name = plane.event_metadata[ev.metadata_id].name
                        if name not in ("send", "recv-done"):
                            continue
                        stats = {stat_names[s.metadata_id]: s.int64_value for s in ev.stats}
                        if "step_num" not in stats:  # outside every step (the capture's edges): no channel
                            continue
                        key = (stats["step_num"], stats["channel_id"], stats["src_core"], stats["dst_core"])
                        endpoints[key][name == "recv-done"] += 1
        self.assertEqual(counts[event_type.TYPE_SLICE_BEGIN], slices, "one slice per event of the host files")
        self.assertEqual(counts[event_type.TYPE_SLICE_END], slices)
        self.assertEqual(counts[event_type.TYPE_COUNTER], counter_values)

        # Flows: one per send that has its recv-done in the same step (the pairing of our channel analysis), from
        # the send to the recv-done, and on our channels.
        paired = {flow for flow in flow_starts if flow in flow_ends}
        self.assertEqual(len(paired), sum(min(sends, recvs) for sends, recvs in endpoints.values()))
        for flow in paired:
            self.assertEqual((flow_starts[flow][0], flow_ends[flow]), ("send", "recv-done"))
        with open(os.path.join(run_dir, "pod_viewer.json")) as f:
            steps = json.load(f)["podStatsSequence"].get("podStatsMap", [])
        flow_channels = {flow_starts[flow][1]["channel_id"].int_value for flow in paired}
        self.assertEqual(flow_channels, {int(c["channelId"]) for step in steps for c in step["channelDb"]})
        return counts, len(paired)

    def test_the_annotated_pods_trace(self):
        counts, flows = self.check_trace(demo_run_dir())
        self.assertGreater(flows, 100, "ring transfers in 2 s of training")
        self.assertGreater(counts[PROTOS[0].TrackEvent.TYPE_COUNTER], 0, "the agents' counter series")

    def test_the_tensorflow_runs_trace(self):
        counts, _ = self.check_trace(tf_run_dir(self))
        self.assertGreater(counts[PROTOS[0].TrackEvent.TYPE_SLICE_BEGIN], 10000)

    def test_the_live_tensorflow_runs_trace(self):
        counts, _ = self.check_trace(live_tf_run_dir())
        self.assertGreater(counts[PROTOS[0].TrackEvent.TYPE_SLICE_BEGIN], 1000)


if __name__ == "__main__":
    unittest.main()
