"""Acceptance of the pod trace files on the 4-rank demo pod: 4 real podscope-agent processes with clock offsets,
4 real ring_trainer ranks (rank 2 a straggler), a real `podscope capture`, then `podscope analyze --trace-window`.
pod.perfetto-trace is decoded here with this file's own reading of Perfetto's messages (field numbers from
Perfetto's protos/perfetto/trace/), pod.trace.json.gz is read as a viewer reads it (ts as doubles)."""
import collections
import decimal
import gzip
import json
import os
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from analysis_acceptance_test import started_pod  # noqa: E402
from coord_pod import podscope, run_dir_of  # noqa: E402

STRAGGLER_RANK = 2
STRAGGLER_DELAY_MS = 20
OFFSETS_NS = [0, 5_000_000, -3_000_000, 20_000_000]


def fields(data):
    """(field number, wire type, value) of a message: ints for varint/fixed64, bytes for length-delimited."""
    pos = 0

    def varint():
        nonlocal pos
        value, shift = 0, 0
        while True:
            byte = data[pos]
            pos += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                return value

    while pos < len(data):
        key = varint()
        number, wire = key >> 3, key & 7
        if wire == 0:
            yield number, wire, varint()
        elif wire == 1:
            yield number, wire, struct.unpack_from("<Q", data, pos)[0]
            pos += 8
        elif wire == 2:
            size = varint()
            yield number, wire, data[pos:pos + size]
            pos += size
        elif wire == 5:
            pos += 4
        else:
            raise ValueError(f"wire type {wire} at {pos}")


def read_perfetto(path):
    """(tracks {uuid: dict}, events [dict]) with interned names resolved per sequence."""
    with open(path, "rb") as f:
        data = f.read()
    tracks, events, interned = {}, [], collections.defaultdict(lambda: collections.defaultdict(dict))
    for number, _, packet in fields(data):
        assert number == 1, number
        p = {n: v for n, _, v in fields(packet)}
        seq = p.get(10, 0)
        for kind, _, entry in fields(p.get(12, b"")):
            e = {n: v for n, _, v in fields(entry)}
            interned[seq][kind][e[1]] = e[2].decode()
        if 60 in p:
            t = {"parent": 0, "name": "", "counter": False}
            for n, _, v in fields(p[60]):
                if n == 1:
                    t["uuid"] = v
                elif n == 2:
                    t["name"] = v.decode()
                elif n == 5:
                    t["parent"] = v
                elif n == 8:
                    t["counter"] = True
                elif n in (3, 4):
                    for m, _, w in fields(v):
                        if (n, m) in ((3, 6), (4, 5)):
                            t["name"] = w.decode()
            tracks[t["uuid"]] = t
        if 11 in p:
            e = {"ts": p.get(8), "flows": [], "ends": [], "args": {}}
            for n, _, v in fields(p[11]):
                if n == 9:
                    e["type"] = v
                elif n == 11:
                    e["track"] = v
                elif n == 10:
                    e["name"] = interned[seq][2][v]
                elif n == 47:
                    e["flows"].append(v)
                elif n == 48:
                    e["ends"].append(v)
                elif n == 4:
                    a = {m: w for m, _, w in fields(v)}
                    e["args"][interned[seq][3][a[1]]] = a.get(4, a.get(3, a.get(6)))
            events.append(e)
    return tracks, events


class PodTraceTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.logdir = tempfile.mkdtemp(prefix="podscope_pod_trace_")
        pod = started_pod(OFFSETS_NS, straggler_rank=STRAGGLER_RANK, straggler_delay_ms=STRAGGLER_DELAY_MS)
        try:
            code, out = podscope("capture", "--service_addr", ",".join(pod.addresses), "--logdir", cls.logdir,
                                 "--duration_ms", "1500")
        finally:
            pod.close()
        assert code == 0, out
        cls.run_dir = run_dir_of(cls.logdir)
        cls.tracks, cls.events = read_perfetto(os.path.join(cls.run_dir, "pod.perfetto-trace"))

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.logdir, ignore_errors=True)

    def process_of(self, event):
        return self.tracks[self.tracks[event["track"]]["parent"]]["name"]

    def rank_of(self, event):
        return int(self.process_of(event).rsplit(":", 1)[1])

    def test_every_event_is_on_a_described_track_and_slices_balance(self):
        depth = collections.Counter()
        for e in sorted((e for e in self.events if e["type"] in (1, 2)), key=lambda e: e["ts"]):
            self.assertIn(e["track"], self.tracks)
            depth[e["track"]] += 1 if e["type"] == 1 else -1
            self.assertGreaterEqual(depth[e["track"]], 0, self.tracks[e["track"]]["name"])
        self.assertFalse([t for t, d in depth.items() if d != 0])
        with gzip.open(os.path.join(self.run_dir, "pod.trace.json.gz"), "rt") as f:
            trace = json.load(f)
        json_slices = sum(1 for e in trace["traceEvents"] if e["ph"] == "X")
        json_counters = sum(1 for e in trace["traceEvents"] if e["ph"] == "C")
        self.assertEqual(sum(1 for e in self.events if e["type"] == 1), json_slices)
        self.assertEqual(sum(1 for e in self.events if e["type"] == 4), json_counters)
        self.assertGreater(json_counters, 0, "the agents' counter series")
        if shutil.which("protoc"):
            with open(os.path.join(self.run_dir, "pod.perfetto-trace"), "rb") as f:
                decoded = subprocess.run(["protoc", "--decode_raw"], stdin=f, stdout=subprocess.DEVNULL)
            self.assertEqual(decoded.returncode, 0, "protoc --decode_raw rejects pod.perfetto-trace")

    def test_ring_transfers_are_arrows_between_ranks(self):
        starts = {f: e for e in self.events for f in e["flows"]}
        ends = collections.defaultdict(list)
        for e in self.events:
            for f in e["ends"]:
                ends[f].append(e)
        self.assertGreater(len(starts), 20, "ring transfers in 1.5 s of training")
        # Hosts' capture windows differ by the start skew and the ranks' first and last steps are cut, so a
        # transfer there may have only one end in the capture; everywhere else both ends are there.
        first = min(e["ts"] for e in self.events if e["type"] == 1)
        last = max(e["ts"] for e in self.events if e["type"] == 1)
        edge_ns = 150_000_000
        matched = 0
        for flow, send in starts.items():
            self.assertEqual(send["name"], "send")
            if flow not in ends:
                self.assertTrue(send["ts"] < first + edge_ns or send["ts"] > last - edge_ns,
                                f"a send {(send['ts'] - first) / 1e6:.1f} ms into the capture has no recv-done")
                continue
            self.assertEqual(len(ends[flow]), 1)
            recv = ends[flow][0]
            self.assertEqual(recv["name"], "recv-done")
            self.assertEqual(self.rank_of(recv), (self.rank_of(send) + 1) % 4)
            matched += 1
        self.assertGreater(matched, 0.9 * len(starts))

    def test_straggler_compute_and_the_others_waits_share_one_timeline(self):
        # Per step: when each rank enters the all-reduce (merged clock) and how long it spends there.
        enter = collections.defaultdict(dict)
        ends = {}
        open_slices = collections.defaultdict(list)
        for e in sorted((e for e in self.events if e["type"] in (1, 2)), key=lambda e: e["ts"]):
            if e["type"] == 1:
                open_slices[e["track"]].append(e)
            else:
                begin = open_slices[e["track"]].pop()
                ends[id(begin)] = e["ts"]
        waits = collections.defaultdict(list)
        for e in self.events:
            if e["type"] == 1 and e["name"] == "all-reduce" and "step_num" in e["args"]:
                enter[e["args"]["step_num"]][self.rank_of(e)] = e["ts"]
                waits[self.rank_of(e)].append(ends[id(e)] - e["ts"])
        lags = [ranks[STRAGGLER_RANK] - statistics.median(t for r, t in ranks.items() if r != STRAGGLER_RANK)
                for ranks in enter.values() if len(ranks) == 4]
        self.assertGreater(len(lags), 3)
        # The others enter ~20 ms before the straggler (unmerged, offsets of -3..+20 ms would scramble this).
        self.assertGreater(statistics.median(lags), 0.5 * STRAGGLER_DELAY_MS * 1e6, lags)
        self.assertLess(statistics.median(lags), 1.5 * STRAGGLER_DELAY_MS * 1e6, lags)
        others = statistics.median(w for r, ws in waits.items() if r != STRAGGLER_RANK for w in ws)
        self.assertGreater(others - statistics.median(waits[STRAGGLER_RANK]), 0.5 * STRAGGLER_DELAY_MS * 1e6)

    def test_json_slices_that_nest_exactly_nest_as_a_viewer_reads_them(self):
        with gzip.open(os.path.join(self.run_dir, "pod.trace.json.gz"), "rt") as f:
            text = f.read()
        exact = json.loads(text, parse_float=decimal.Decimal)
        viewer = json.loads(text)
        self.assertIn("time_base_ns", exact["otherData"])
        by_thread = collections.defaultdict(list)
        for e, v in zip(exact["traceEvents"], viewer["traceEvents"]):
            if e["ph"] == "X":
                by_thread[(e["pid"], e["tid"])].append((e["ts"], e["ts"] + e["dur"], v["ts"], v["ts"] + v["dur"]))
        pairs = broken = 0
        for slices in by_thread.values():
            slices.sort(key=lambda s: (s[0], -s[1]))
            stack = []
            for s in slices:
                while stack and stack[-1][1] <= s[0]:
                    stack.pop()
                if stack and stack[-1][1] >= s[1]:
                    parent = stack[-1]
                    pairs += 1
                    broken += not (parent[2] <= s[2] and s[3] <= parent[3])
                stack.append(s)
        self.assertGreater(pairs, 0)
        self.assertEqual(broken, 0, f"{broken} of {pairs} nested slices do not nest as doubles")

    def test_analyze_writes_a_small_trace_of_one_step(self):
        steps = sorted({e["args"]["step_num"] for e in self.events
                        if e.get("name") == "all-reduce" and "step_num" in e["args"]})
        step = steps[len(steps) // 2]
        code, out = podscope("analyze", self.run_dir, "--trace-window", f"step:{step}")
        self.assertEqual(code, 0, out)
        tracks, events = read_perfetto(os.path.join(self.run_dir, f"pod.step{step}.perfetto-trace"))
        self.assertTrue(os.path.exists(os.path.join(self.run_dir, f"pod.step{step}.trace.json.gz")))
        self.assertLess(len(events), len(self.events) / 3)
        self.assertIn(step, {e["args"].get("step_num") for e in events if e.get("name") == "all-reduce"})
        code, out = podscope("analyze", self.run_dir, "--trace-window", "nonsense")
        self.assertEqual(code, 2, out)

    def test_a_run_past_the_trace_bound_gets_no_pod_trace_and_named_hosts_get_theirs(self):
        run = os.path.join(tempfile.mkdtemp(prefix="podscope_trace_bound_"), "run")
        try:
            shutil.copytree(self.run_dir, run, ignore=shutil.ignore_patterns("pod.*"))
            code, out = podscope("analyze", run, "--trace-max-hosts", "3")
            self.assertEqual(code, 0, out)
            self.assertIn("no pod trace written: 4 hosts, past --trace-max-hosts 3", out)
            self.assertFalse([f for f in os.listdir(run) if f.startswith("pod.")], os.listdir(run))
            hosts = sorted(f for f in os.listdir(run) if f.endswith(".xplane.pb"))[:2]
            out_dir = os.path.join(os.path.dirname(run), "two_hosts")
            os.makedirs(out_dir)
            code, out = podscope("analyze", *[os.path.join(run, h) for h in hosts], "--out", out_dir,
                                 "--trace-max-hosts", "1")
            self.assertEqual(code, 0, out)
            tracks, _ = read_perfetto(os.path.join(out_dir, "pod.perfetto-trace"))
            processes = {t["name"] for t in tracks.values() if t["parent"] == 0 and "CUSTOM" in t["name"]}
            self.assertEqual(len(processes), 2, processes)
        finally:
            shutil.rmtree(os.path.dirname(run), ignore_errors=True)


if __name__ == "__main__":
    unittest.main()
