#!/usr/bin/env python3
"""report.html opens offline in headless Chromium, for a synthetic pod and for a TensorFlow-written file: every
tool's tab renders (its screenshot is not blank, the charts have bars, the tables rows), the kernel and op stats
tables sort by a clicked column header, no console errors or exceptions are logged, and no network request is made
(checked through the DevTools protocol)."""
import argparse
import base64
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import zlib

import websocket


def png_pixels_vary(png: bytes) -> int:
    """Number of distinct byte values in the decompressed image data (a blank page has very few)."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n", "screenshot is not a PNG"
    pos, idat = 8, b""
    while pos < len(png):
        length = int.from_bytes(png[pos:pos + 4], "big")
        kind = png[pos + 4:pos + 8]
        if kind == b"IDAT":
            idat += png[pos + 8:pos + 8 + length]
        pos += 12 + length
    return len(set(zlib.decompress(idat)))


class DevTools:
    # How long one call may wait for its answer: seconds for a Chromium starved of CPU by parallel builds.
    CALL_TIMEOUT_S = 30

    def __init__(self, url):
        self.ws = websocket.create_connection(url, timeout=self.CALL_TIMEOUT_S)
        self.next_id = 0
        self.events = []

    def call(self, method, params=None, session=None):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        self.ws.send(json.dumps(message))
        self.ws.settimeout(self.CALL_TIMEOUT_S)  # wait_for and drain leave shorter ones behind
        while True:
            reply = json.loads(self.ws.recv())
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, method, timeout_s):
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            for e in self.events:
                if e.get("method") == method:
                    return e
            self.ws.settimeout(max(0.1, deadline - time.time()))
            try:
                self.events.append(json.loads(self.ws.recv()))
            except websocket.WebSocketTimeoutException:
                break
        raise TimeoutError(f"no {method} within {timeout_s} s")

    def drain(self, seconds):
        deadline = time.time() + seconds
        self.ws.settimeout(0.2)
        while time.time() < deadline:
            try:
                self.events.append(json.loads(self.ws.recv()))
            except websocket.WebSocketTimeoutException:
                pass


def stop_browser(browser, dt):
    """Closes Chromium through DevTools (it then ends its helper processes itself); kills its process
    group if it does not go within a few seconds."""
    try:
        if dt is not None:
            dt.call("Browser.close")
        browser.wait(timeout=10)
    except Exception:  # the connection or the browser already gone, or it did not exit in time
        pass
    if browser.poll() is None:
        os.killpg(browser.pid, signal.SIGKILL)
        browser.wait()
    else:
        try:
            os.killpg(browser.pid, signal.SIGKILL)  # helpers that outlived the browser
        except ProcessLookupError:
            pass


def evaluate(dt, session, expression):
    return dt.call("Runtime.evaluate", {"expression": expression, "returnByValue": True},
                   session=session)["result"].get("value")


def page_problems(events):
    """Console errors, exceptions and non-local requests among the DevTools events of one page."""
    problems = []
    for e in events:
        method, params = e.get("method"), e.get("params", {})
        if method == "Runtime.exceptionThrown":
            problems.append("exception: " + params["exceptionDetails"].get("text", "") + " " +
                            json.dumps(params["exceptionDetails"].get("exception", {}).get("description", "")))
        elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            problems.append("console error: " + json.dumps(params.get("args")))
        elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
            problems.append("log error: " + params["entry"].get("text", ""))
        elif method == "Network.requestWillBeSent":
            url = params["request"]["url"]
            if not (url.startswith("file://") or url.startswith("data:")):
                problems.append("network request: " + url)
    return problems


TABS = ["tab-overview", "tab-input", "tab-tfdata", "tab-pod", "tab-kernels", "tab-opstats", "tab-memory"]


def open_report(dt, report):
    """Opens `report` in a new tab; returns (session, {tab id: (its visible text, distinct bytes of its screenshot)})
    after showing every tool's tab in turn."""
    target = dt.call("Target.createTarget", {"url": "about:blank"})["targetId"]
    session = dt.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
    for domain in ("Page", "Runtime", "Log", "Network"):
        dt.call(f"{domain}.enable", session=session)
    dt.events.clear()
    dt.call("Page.navigate", {"url": "file://" + report}, session=session)
    dt.wait_for("Page.loadEventFired", 30)
    dt.drain(1.0)
    tabs = {}
    for tab in TABS:
        evaluate(dt, session, f"document.getElementById('button-{tab}').click()")
        dt.drain(0.2)
        text = evaluate(dt, session, f"document.getElementById('{tab}').innerText") or ""
        shot = base64.b64decode(dt.call("Page.captureScreenshot", {"format": "png"}, session=session)["data"])
        tabs[tab] = (text, png_pixels_vary(shot))
    return session, tabs


def count(dt, session, selector):
    return evaluate(dt, session, f"[...document.querySelectorAll('{selector}')]"
                                 ".filter(r => +(r.getAttribute('width') || 1) > 0).length")


def sort_by_column(dt, session, table, column):
    """Clicks the header of `column` (whole numbers) in the first table under `table`, twice; returns the problems:
    the rows' order did not change, or the numbers are not largest first after one click and smallest first after
    two."""
    result = evaluate(dt, session, f"""(() => {{
        const t = document.querySelector('{table} table');
        if (!t) return null;
        const cells = i => [...t.querySelectorAll('tbody tr')].map(r => r.children[i].textContent);
        const before = cells(0);
        t.querySelectorAll('th')[{column}].click();
        const afterOne = cells(0), countsOne = cells({column}).map(Number);
        t.querySelectorAll('th')[{column}].click();
        return {{before: before, afterOne: afterOne, countsOne: countsOne, countsTwo: cells({column}).map(Number)}};
    }})()""")
    if result is None:
        return [f"{table}: no table to sort"]
    problems = []
    if result["before"] == result["afterOne"]:
        problems.append(f"{table}: clicking header {column} did not change the rows' order")
    if result["countsOne"] != sorted(result["countsOne"], reverse=True):
        problems.append(f"{table}: after one click the counts are not largest first")
    if result["countsTwo"] != sorted(result["countsTwo"]):
        problems.append(f"{table}: after two clicks the counts are not smallest first")
    return problems


def check_synthetic_pod(dt, report):
    session, tabs = open_report(dt, report)
    # The step and category selectors of the pod viewer redraw without errors too.
    evaluate(dt, session, """
        const s = document.getElementById('step'); s.value = '2'; s.dispatchEvent(new Event('change'));
        const c = document.getElementById('category'); c.value = '6'; c.dispatchEvent(new Event('change'));
    """)
    dt.drain(0.5)
    failures = page_problems(dt.events)
    bars, heat = count(dt, session, "#breakdown rect"), count(dt, session, "#heat rect")
    step_bars = count(dt, session, "#ov-steps rect")
    if bars < 8:
        failures.append(f"only {bars} breakdown bars drawn")
    if heat < 4 * 8:
        failures.append(f"only {heat} heat cells drawn")
    if step_bars < 8:
        failures.append(f"only {step_bars} bars in the overview's step-time graph")
    if "Straggler: core 2" not in tabs["tab-pod"][0]:
        failures.append("the straggler is not named on the pod viewer's tab")
    if "average step time" not in tabs["tab-overview"][0]:
        failures.append("the overview has no performance summary")
    for tab, (text, distinct) in tabs.items():
        if distinct < 16:
            failures.append(f"{tab}: screenshot looks blank ({distinct} distinct byte values)")
        if not text.strip():
            failures.append(f"{tab}: empty")
    return failures, f"synthetic pod: {bars} breakdown bars, {heat} heat cells, {step_bars} step-graph bars"


def check_tensorflow_file(dt, report):
    session, tabs = open_report(dt, report)
    failures = []  # the page's problems are read once the tables have been sorted too
    step_bars = count(dt, session, "#ov-steps rect")
    kernel_rows = count(dt, session, "#ks-table tr") - 1
    device_op_rows = count(dt, session, "#os-device tbody tr")
    host_op_rows = count(dt, session, "#os-host tbody tr")
    if step_bars < 1:
        failures.append("the overview's step-time graph is empty")
    if "Iterator::Prefetch" not in tabs["tab-tfdata"][0]:
        failures.append("the tf.data tab does not name the Iterator::Prefetch pipeline")
    if kernel_rows < 10:
        failures.append(f"only {kernel_rows} kernel rows")
    if "Allocator" not in tabs["tab-memory"][0]:
        failures.append("the memory tab shows no allocator")
    if device_op_rows < 10 or host_op_rows < 10:
        failures.append(f"only {device_op_rows} device and {host_op_rows} host op rows")
    evaluate(dt, session, "document.getElementById('button-tab-kernels').click()")
    failures += sort_by_column(dt, session, "#ks-table", 9)  # registers per thread
    evaluate(dt, session, "document.getElementById('button-tab-opstats').click()")
    failures += sort_by_column(dt, session, "#os-device", 3)  # count
    failures += sort_by_column(dt, session, "#os-host", 3)
    dt.drain(0.2)
    failures += page_problems(dt.events)
    for tab, (text, distinct) in tabs.items():
        if distinct < 16:
            failures.append(f"{tab}: screenshot looks blank ({distinct} distinct byte values)")
        for word in ("NaN", "undefined", "Infinity"):
            if word in text:
                failures.append(f"{tab}: shows {word}")
    return failures, (f"TensorFlow file: {step_bars} step-graph bars, {kernel_rows} kernel rows, {device_op_rows} "
                      f"device and {host_op_rows} host op rows, sorted by a column")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--fixture", required=True, help="analysis_report_fixture binary")
    parser.add_argument("--chromium", required=True)
    parser.add_argument("--tensorflow_file", help="a TensorFlow-written XSpace (../shared/testdata)")
    args = parser.parse_args()

    work = tempfile.mkdtemp(prefix="podscope_report_test_")
    browser = None
    dt = None
    try:
        reports = []
        for name, extra, check in (("synthetic", [], check_synthetic_pod),
                                   ("tensorflow", [args.tensorflow_file], check_tensorflow_file)):
            if None in extra or not all(os.path.exists(f) for f in extra):
                print(f"skipped the {name} report: {extra[0] if extra and extra[0] else 'no file given'} "
                      "is absent (../shared/testdata)")
                continue
            run_dir = os.path.join(work, name)
            subprocess.run([args.fixture, run_dir] + extra, check=True, stdout=subprocess.DEVNULL, timeout=120)
            report = os.path.join(run_dir, "report.html")
            assert os.path.exists(report), f"{report} was not written"
            reports.append((report, check))

        browser = subprocess.Popen(
            [args.chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--no-first-run", "--disable-dev-shm-usage",
             "--remote-debugging-port=0", f"--user-data-dir={os.path.join(work, 'profile')}",
             "--window-size=1200,900", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            start_new_session=True)  # its own process group, so its helper processes end with it
        ws_url = None
        deadline = time.time() + 60
        while time.time() < deadline and ws_url is None:
            line = browser.stderr.readline()
            if not line and browser.poll() is not None:
                break
            m = re.search(r"DevTools listening on (ws://\S+)", line)
            if m:
                ws_url = m.group(1)
        assert ws_url, "chromium did not report its DevTools address"
        dt = DevTools(ws_url)

        all_failures = []
        for report, check in reports:
            failures, figures = check(dt, report)
            all_failures += failures
            print(f"{figures}; {len(failures)} problems")
        if all_failures:
            print("\n".join(all_failures))
            return 1
        print("ok: every tab of every report drawn, no errors, no requests")
        return 0
    finally:
        if browser is not None:
            stop_browser(browser, dt)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
