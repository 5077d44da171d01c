#!/usr/bin/env python3
"""report.html opens offline in headless Chromium: it renders (the screenshot is not blank and the charts
have bars), logs no console errors or exceptions, and makes no network request (checked through the
DevTools protocol)."""
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


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--fixture", required=True, help="analysis_report_fixture binary")
    parser.add_argument("--chromium", required=True)
    args = parser.parse_args()

    work = tempfile.mkdtemp(prefix="podscope_report_test_")
    browser = None
    dt = None
    try:
        run_dir = os.path.join(work, "run")
        subprocess.run([args.fixture, run_dir], check=True, stdout=subprocess.DEVNULL, timeout=60)
        report = os.path.join(run_dir, "report.html")
        assert os.path.exists(report), f"{report} was not written"

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
        target = dt.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = dt.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            dt.call(f"{domain}.enable", session=session)
        dt.events.clear()
        dt.call("Page.navigate", {"url": "file://" + report}, session=session)
        dt.wait_for("Page.loadEventFired", 30)
        dt.drain(1.0)

        # The step selector and category selector redraw without errors too.
        dt.call("Runtime.evaluate", {"expression": """
            const s = document.getElementById('step'); s.value = '2'; s.dispatchEvent(new Event('change'));
            const c = document.getElementById('category'); c.value = '6'; c.dispatchEvent(new Event('change'));
        """}, session=session)
        dt.drain(0.5)
        bars = dt.call("Runtime.evaluate", {
            "expression": "[...document.querySelectorAll('#breakdown rect')].filter(r => +r.getAttribute('width') > 0).length",
            "returnByValue": True}, session=session)["result"]["value"]
        heat = dt.call("Runtime.evaluate", {
            "expression": "document.querySelectorAll('#heat rect').length", "returnByValue": True},
            session=session)["result"]["value"]
        text = dt.call("Runtime.evaluate", {"expression": "document.body.innerText", "returnByValue": True},
                       session=session)["result"]["value"]
        shot = base64.b64decode(dt.call("Page.captureScreenshot", {"format": "png"}, session=session)["data"])

        errors = []
        requests = []
        for e in dt.events:
            method, params = e.get("method"), e.get("params", {})
            if method == "Runtime.exceptionThrown":
                errors.append(params["exceptionDetails"].get("text", "") + " " +
                              json.dumps(params["exceptionDetails"].get("exception", {}).get("description", "")))
            elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                errors.append(json.dumps(params.get("args")))
            elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
                errors.append(params["entry"].get("text", ""))
            elif method == "Network.requestWillBeSent":
                url = params["request"]["url"]
                if not (url.startswith("file://") or url.startswith("data:")):
                    requests.append(url)

        failures = []
        if errors:
            failures.append(f"console errors: {errors}")
        if requests:
            failures.append(f"network requests: {requests}")
        if bars < 8:
            failures.append(f"only {bars} breakdown bars drawn")
        if heat < 4 * 8:
            failures.append(f"only {heat} heat cells drawn")
        if "Straggler: core 2" not in text:
            failures.append("the straggler is not named on the page")
        distinct = png_pixels_vary(shot)
        if distinct < 16:
            failures.append(f"screenshot looks blank ({distinct} distinct byte values)")
        if failures:
            print("\n".join(failures))
            return 1
        print(f"ok: {bars} bars, {heat} heat cells, {distinct} distinct byte values, no errors, no requests")
        return 0
    finally:
        if browser is not None:
            stop_browser(browser, dt)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
