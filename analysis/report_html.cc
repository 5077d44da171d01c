// report.html: every tool's result as inline JSON plus a small script that draws a tab per tool with SVG charts
// and tables. No external scripts, styles, fonts or images, so it opens offline.
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_replace.h"
#include "analysis/json_writer.h"
#include "analysis/renderers.h"

namespace podscope::analysis {
namespace {

constexpr std::string_view kTemplate = R"HTML(<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<link rel="icon" href="data:,">
<title>@TITLE@</title>
<style>
body{font:14px sans-serif;margin:16px;color:#222;background:#fff}
h1{font-size:20px}h2{font-size:16px;margin-top:24px}
.legend span{display:inline-block;margin-right:12px}.legend i{display:inline-block;width:12px;height:12px;margin-right:4px;vertical-align:middle}
table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}td:first-child,th:first-child{text-align:left}
.warn{color:#a00}svg text{font-size:11px}
nav button{font:14px sans-serif;padding:6px 12px;margin-right:4px;border:1px solid #ccc;background:#f4f4f4;cursor:pointer}
nav button.on{background:#fff;border-bottom-color:#fff;font-weight:bold}
section{display:none;border-top:1px solid #ccc;padding-top:8px}section.on{display:block}
table.sortable th{cursor:pointer}th.sorted-asc:after{content:" \\25b2"}th.sorted-desc:after{content:" \\25bc"}
</style></head><body>
<h1>@TITLE@</h1>
<nav id="tabs"></nav>
@SECTIONS@<script id="data" type="application/json">@DATA@</script>
<script>
"use strict";
const all = JSON.parse(document.getElementById("data").textContent);
const data = all.pod || {};
const db = data.podViewer || {};
const steps = ((db.podStatsSequence || {}).podStatsMap) || [];
const events = db.stepBreakdownEvents || [];
const palette = ["#1f77b4","#aec7e8","#ff7f0e","#ffbb78","#2ca02c","#d62728","#9467bd","#c5b0d5","#8c564b","#e377c2","#17becf","#cccccc"];
const colorOf = id => palette[(id - 1) % palette.length];
const SVG = "http://www.w3.org/2000/svg";
function el(tag, attrs, parent, text) {
  const e = document.createElementNS(SVG, tag);
  for (const k in attrs) e.setAttribute(k, attrs[k]);
  if (text !== undefined) e.textContent = text;
  if (parent) parent.appendChild(e);
  return e;
}
function html(tag, text, parent) { const e = document.createElement(tag); if (text !== undefined) e.textContent = text; parent.appendChild(e); return e; }
function fmt(us) { return us >= 1000 ? (us / 1000).toFixed(2) + " ms" : us.toFixed(1) + " us"; }
const coreIds = [...new Set(steps.flatMap(s => Object.keys(s.podStatsPerCore || {})))].sort((a, b) => a - b);

function recordsFor(stepIndex) {
  // Per core: category id -> us, for one step or the average over all steps.
  const out = {};
  const chosen = stepIndex < 0 ? steps : [steps[stepIndex]];
  for (const core of coreIds) {
    const sums = {}; let n = 0; let total = 0;
    for (const s of chosen) {
      const r = (s.podStatsPerCore || {})[core]; if (!r) continue; n++;
      total += r.totalDurationUs || 0;
      for (const ev of events) sums[ev.id] = (sums[ev.id] || 0) + ((r.stepBreakdownUs || {})[ev.id] || 0);
    }
    if (n > 0) { for (const k in sums) sums[k] /= n; out[core] = {sums: sums, total: total / n}; }
  }
  return out;
}

function drawBars(container, rows, segmentsOf, legendNames) {
  container.textContent = "";
  const width = 900, rowH = 18, left = 110;
  const max = Math.max(1e-9, ...rows.map(r => segmentsOf(r).reduce((a, s) => a + s.value, 0)));
  const svg = el("svg", {width: width, height: rows.length * (rowH + 4) + 20}, container);
  rows.forEach((r, i) => {
    const y = i * (rowH + 4);
    el("text", {x: 0, y: y + 13}, svg, r.label);
    let x = left;
    for (const s of segmentsOf(r)) {
      const w = (width - left - 80) * s.value / max;
      const rect = el("rect", {x: x, y: y, width: Math.max(0, w), height: rowH, fill: s.color}, svg);
      el("title", {}, rect, s.name + ": " + fmt(s.value));
      x += w;
    }
    el("text", {x: x + 4, y: y + 13}, svg, fmt(segmentsOf(r).reduce((a, s) => a + s.value, 0)));
  });
  if (rows.length === 0) html("p", "no data", container);
}

function averageChannels() {
  // One bar per channel and direction: durations and send delays averaged over every step's occurrences.
  const byKey = {};
  for (const s of steps) {
    for (const c of s.channelDb || []) {
      const key = c.channelId + " " + (c.srcCoreIds || []).join("/") + ">" + (c.dstCoreIds || []).join("/");
      const n = c.occurrences || 1;
      const acc = byKey[key] || (byKey[key] = {channelId: c.channelId, srcCoreIds: c.srcCoreIds, dstCoreIds: c.dstCoreIds, n: 0, d: 0, delay: 0});
      acc.n += n; acc.d += (c.durationUs || 0) * n; acc.delay += (c.sendDelayUs || 0) * n;
    }
  }
  return Object.values(byKey).map(a => ({channelId: a.channelId, srcCoreIds: a.srcCoreIds, dstCoreIds: a.dstCoreIds,
                                          durationUs: a.d / a.n, sendDelayUs: a.delay / a.n}));
}

function drawBreakdown() {
  const idx = Number(document.getElementById("step").value);
  const recs = recordsFor(idx);
  const rows = coreIds.filter(c => recs[c]).map(c => ({label: "core " + c, rec: recs[c]}));
  drawBars(document.getElementById("breakdown"), rows,
           r => events.map(ev => ({name: ev.name, value: r.rec.sums[ev.id] || 0, color: colorOf(ev.id)})));
  drawBars(document.getElementById("allreduce"), rows, r => [
    {name: "AllReduce sync", value: r.rec.sums[6] || 0, color: colorOf(6)},
    {name: "AllReduce compute", value: r.rec.sums[5] || 0, color: colorOf(5)}]);
  const chans = (idx < 0 ? averageChannels() : (steps[idx].channelDb || []).slice())
      .sort((a, b) => (b.durationUs || 0) - (a.durationUs || 0)).slice(0, 30);
  drawBars(document.getElementById("channels"),
           chans.map(c => ({label: "ch " + c.channelId + " " + (c.srcCoreIds || []).join("/") + "\u2192" + (c.dstCoreIds || []).join("/"), c: c})),
           r => [{name: "send delay", value: r.c.sendDelayUs || 0, color: "#ff7f0e"},
                 {name: "transfer", value: Math.max(0, (r.c.durationUs || 0)), color: "#1f77b4"}]);
}

function drawHeat() {
  const cat = Number(document.getElementById("category").value);
  const container = document.getElementById("heat");
  container.textContent = "";
  const cell = 16, left = 110, top = 20;
  const svg = el("svg", {width: left + steps.length * (cell + 1) + 10, height: top + coreIds.length * (cell + 1) + 10}, container);
  steps.forEach((s, j) => { if (j % 5 === 0) el("text", {x: left + j * (cell + 1), y: 12}, svg, String(s.stepNum)); });
  coreIds.forEach((core, i) => {
    el("text", {x: 0, y: top + i * (cell + 1) + 12}, svg, "core " + core);
    steps.forEach((s, j) => {
      const r = (s.podStatsPerCore || {})[core];
      const share = r && r.totalDurationUs > 0 ? ((r.stepBreakdownUs || {})[cat] || 0) / r.totalDurationUs : 0;
      const light = Math.round(100 - 60 * share);
      const rect = el("rect", {x: left + j * (cell + 1), y: top + i * (cell + 1), width: cell, height: cell,
                               fill: r ? "hsl(0,80%," + light + "%)" : "#eee"}, svg);
      el("title", {}, rect, "core " + core + " step " + s.stepNum + ": " + (100 * share).toFixed(1) + "%");
    });
  });
}

function drawStatic() {
  const ov = document.getElementById("overview");
  html("p", (data.cores || []).length + " cores, " + steps.length + " steps, device " + (db.deviceType || "?") +
       ", all-reduce sync share " + (100 * (data.allReduceSyncShare || 0)).toFixed(1) + "%", ov);
  for (const s of data.stragglers || []) {
    html("p", "Straggler: core " + s.coreId + " (" + s.hostName + "), " + s.reason + " " + fmt(s.meanExcessUs || 0) +
         " above the median in " + s.stragglingSteps + " of " + s.comparedSteps + " steps", ov).className = "warn";
  }
  for (const w of ((db.diagnostics || {}).warnings) || []) html("p", "Warning: " + w, ov).className = "warn";
  const legend = document.getElementById("legend");
  for (const ev of events) {
    const span = html("span", "", legend); const i = html("i", undefined, span); i.style.background = colorOf(ev.id);
    span.appendChild(document.createTextNode(ev.name));
  }
  const stepSel = document.getElementById("step");
  const avg = html("option", "average of all steps", stepSel); avg.value = "-1";
  steps.forEach((s, i) => { const o = html("option", "step " + s.stepNum, stepSel); o.value = String(i); });
  stepSel.addEventListener("change", drawBreakdown);
  const catSel = document.getElementById("category");
  for (const ev of events) { const o = html("option", ev.name, catSel); o.value = String(ev.id); }
  catSel.addEventListener("change", drawHeat);
  const table = html("table", undefined, document.getElementById("topops"));
  const head = html("tr", undefined, table);
  for (const h of ["op", "category", "occurrences", "total", "cores"]) html("th", h, head);
  for (const op of data.topOps || []) {
    const tr = html("tr", undefined, table);
    for (const v of [op.name, op.category, String(op.occurrences), fmt(op.totalUs || 0), String(op.coreCount)]) html("td", v, tr);
  }
}


function table(container, headers, rows) {
  if (rows.length === 0) { html("p", "none", container); return; }
  const t = html("table", undefined, container);
  const head = html("tr", undefined, t);
  for (const h of headers) html("th", h, head);
  for (const r of rows) { const tr = html("tr", undefined, t); for (const v of r) html("td", String(v), tr); }
}
// A table whose rows reorder by the column whose header is clicked (clicked again: the other way; numbers start
// largest first). A cell is a value, or [shown text, sort key] when its text does not sort as its value does.
function sortableTable(container, headers, rows) {
  if (rows.length === 0) { html("p", "none", container); return; }
  const t = html("table", undefined, container);
  t.className = "sortable";
  const head = html("tr", undefined, html("thead", undefined, t));
  const body = html("tbody", undefined, t);
  const keyOf = c => Array.isArray(c) ? c[1] : c;
  const fill = () => {
    body.textContent = "";
    for (const r of rows) { const tr = html("tr", undefined, body); for (const c of r) html("td", String(Array.isArray(c) ? c[0] : c), tr); }
  };
  let sortedBy = -1, descending = false;
  headers.forEach((h, i) => {
    const th = html("th", h, head);
    th.title = "sort by " + h;
    th.addEventListener("click", () => {
      descending = sortedBy === i ? !descending : typeof keyOf(rows[0][i]) === "number";
      sortedBy = i;
      rows.sort((a, b) => {
        const x = keyOf(a[i]), y = keyOf(b[i]);
        const order = typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y));
        return descending ? -order : order;
      });
      for (const other of head.children) other.className = "";
      th.className = descending ? "sorted-desc" : "sorted-asc";
      fill();
    });
  });
  fill();
}
const num = (v, d) => (Number(v) || 0).toFixed(d === undefined ? 1 : d);
const ms = v => num(v, 2) + " ms";
const psToMs = v => ms((Number(v) || 0) / 1e9);

function drawTabs() {
  const nav = document.getElementById("tabs");
  const sections = [...document.querySelectorAll("section")];
  const show = id => {
    for (const s of sections) s.className = s.id === id ? "on" : "";
    for (const b of nav.children) b.className = b.dataset.tab === id ? "on" : "";
  };
  for (const s of sections) {
    const b = html("button", s.dataset.title, nav); b.dataset.tab = s.id; b.id = "button-" + s.id;
    b.addEventListener("click", () => show(s.id));
  }
  if (sections.length > 0) show(sections[0].id);
}

const stepParts = [["hostWaitInputMs", "Input (host wait)", "#d62728"], ["hostToDeviceMs", "Host to device", "#ff9896"],
  ["deviceComputeMs", "Device compute", "#2ca02c"], ["deviceCollectivesMs", "Device collectives", "#9467bd"],
  ["deviceToDeviceMs", "Device to device", "#c5b0d5"], ["hostPrepareMs", "Kernel launch", "#ff7f0e"],
  ["hostComputeMs", "Host compute", "#1f77b4"], ["hostCompileMs", "Compilation", "#8c564b"],
  ["outputMs", "Output", "#e377c2"], ["unknownTimeMs", "All others", "#cccccc"]];

function drawOverview() {
  const ov = all.overview || {};
  const ip = ov.inputAnalysis || all.inputPipeline || {};
  const an = ov.analysis || {};
  const st = ip.stepTimeSummary || {};
  const sum = document.getElementById("ov-summary");
  table(sum, ["average step time", "spread (stddev)", "host idle", "device idle", "16-bit of device compute",
              "32-bit of device compute"],
        [[ms(st.average), ms(st.standardDeviation), num(an.hostIdleTimePercent) + "%", num(an.deviceIdleTimePercent) + "%",
          num(an.deviceCompute16bitPercent) + "%", num(an.deviceCompute32bitPercent) + "%"]]);
  for (const w of ((ov.diagnostics || {}).warnings) || []) html("p", "Warning: " + w, sum).className = "warn";
  for (const e of ((ov.diagnostics || {}).errors) || []) html("p", e, sum).className = "warn";
  const legend = document.getElementById("ov-legend");
  for (const [, name, color] of stepParts) {
    const span = html("span", "", legend); const i = html("i", undefined, span); i.style.background = color;
    span.appendChild(document.createTextNode(name));
  }
  const details = ip.stepDetails || [];
  drawBars(document.getElementById("ov-steps"),
           // A pod's step is its cores' mean breakdown; the spread of their step times is beside it.
           details.map(d => ({label: "step " + (d.stepNumber || 0) + ((d.coreCount || 0) > 1
                                ? " (" + d.coreCount + " cores: " + num(d.minCoreStepTimeMs) + "–" + num(d.maxCoreStepTimeMs) + " ms)"
                                : ""), d: d})),
           r => stepParts.map(([key, name, color]) => ({name: name, value: 1000 * (Number(r.d[key]) || 0), color: color})));
  const rec = ov.recommendation || {};
  const recDiv = document.getElementById("ov-recommendation");
  if (rec.bottleneck) html("p", "Bottleneck: " + rec.bottleneck, recDiv);
  if (rec.statement) html("p", rec.statement, recDiv);
  const generic = rec.recommendation || {};
  for (const k of ["kernelLaunchStatement", "deviceCollectivesStatement", "allOtherStatement", "precisionStatement"]) {
    if (generic[k]) html("p", generic[k], recDiv);
  }
  for (const tip of (rec.hostTips || []).concat(rec.deviceTips || [])) if (tip.link) html("p", "Tip: " + tip.link, recDiv);
  table(document.getElementById("ov-topops"), ["op", "category", "self time", "cumulative", "GFLOP/s"],
        (an.topDeviceOps || []).map(o => [o.name, o.category, num(100 * (o.selfTimeFraction || 0)) + "%",
                                          num(100 * (o.cumulativeTimeFraction || 0)) + "%", num(o.flopRate)]));
  const env = ov.runEnvironment || {};
  table(document.getElementById("ov-environment"), ["hosts", "device type", "device cores", "host names"],
        [[env.hostCount || 0, env.deviceType || "", env.deviceCoreCount || 0, Object.keys(env.hostnames || {}).sort().join(", ")]]);
}

function drawInputPipeline() {
  const ip = all.inputPipeline || {};
  const verdict = document.getElementById("ip-verdict");
  const bottleneck = ((ip.recommendation || {}).bottleneckAnalysis) || {};
  if (bottleneck.inputStatement) html("p", bottleneck.inputStatement, verdict);
  for (const d of ((ip.recommendation || {}).details) || []) html("p", d, verdict);
  const rows = [["step time", ip.stepTimeSummary, " ms"], ["input %", ip.inputPercentSummary, "%"]];
  table(document.getElementById("ip-summary"), ["", "average", "stddev", "min", "max"],
        rows.map(([name, s, unit]) => [name].concat(["average", "standardDeviation", "minimum", "maximum"]
                                                    .map(k => num((s || {})[k], 2) + unit))));
  table(document.getElementById("ip-hosts"), ["host", "input %", "verdict", "slowest stage", "its self time"],
        (ip.hosts || []).map(h => [h.hostName, num(h.inputPercent), h.verdict, h.slowestStage || "",
                                   ms(h.slowestStageSelfTimeMs)]));
  const b = ip.inputTimeBreakdown || {};
  table(document.getElementById("ip-breakdown"), ["enqueue", "demanded file read", "advanced file read", "preprocessing",
                                                  "unclassified"],
        [[b.enqueueUs, b.demandedFileReadUs, b.advancedFileReadUs, b.preprocessingUs, b.unclassifiedNonEnqueueUs]
            .map(v => fmt(Number(v) || 0))]);
  table(document.getElementById("ip-ops"), ["input op", "count", "time", "self time", "self %", "category"],
        (ip.inputOpDetails || []).slice(0, 50).map(o => [o.opName, o.count || 0, ms(o.timeInMs), ms(o.selfTimeInMs),
                                                         num(o.selfTimeInPercent) + "%", o.category || ""]));
}

function drawTfData() {
  const tf = all.tfData || {};
  const summary = document.getElementById("tf-summary");
  html("p", tf.summary || "no tf.data activity captured", summary);
  table(document.getElementById("tf-bottlenecks"), ["host", "pipeline", "max latency", "bottleneck iterator",
                                                    "its latency", "suggestion"],
        (tf.bottleneckAnalysis || []).map(b => [b.host, b.inputPipeline, psToMs(b.maxLatencyPs), b.iteratorLongName || b.iteratorName,
                                                psToMs(b.iteratorLatencyPs), b.suggestion]));
  const rows = [];
  for (const host of Object.keys(tf.tfDataStats || {}).sort()) {
    const pipelines = (tf.tfDataStats[host] || {}).inputPipelines || {};
    for (const id of Object.keys(pipelines)) {
      const p = pipelines[id];
      rows.push([host, (p.metadata || {}).name || id, p.numCalls || 0, psToMs(p.avgLatencyPs), psToMs(p.minLatencyPs),
                 psToMs(p.maxLatencyPs), p.numSlowCalls || 0]);
    }
  }
  table(document.getElementById("tf-pipelines"), ["host", "pipeline", "calls", "avg", "min", "max", "slow calls"], rows);
}

function drawKernels() {
  const reports = (all.kernelStats || {}).reports || [];
  html("p", reports.length + " kernels (the 200 with the most time shown; kernel_stats.json has them all)",
       document.getElementById("ks-summary"));
  const dim = d => (d || []).join(",");
  const us = ns => [fmt(ns / 1000), ns];
  const threads = d => (d || []).reduce((a, b) => a * (Number(b) || 1), 1);
  sortableTable(document.getElementById("ks-table"), ["kernel", "op", "count", "total", "avg", "min", "max", "grid",
                                                      "block", "regs", "shared (static+dynamic)", "occupancy",
                                                      "tensor core"],
        reports.slice(0, 200).map(r => {
          const n = Number(r.occurrences) || 1, total = Number(r.totalDurationNs) || 0;
          const shared = (Number(r.staticShmemBytes) || 0) + (Number(r.dynamicShmemBytes) || 0);
          return [r.name, r.opName || "", n, us(total), us(total / n), us(Number(r.minDurationNs) || 0),
                  us(Number(r.maxDurationNs) || 0), [dim(r.gridDim), threads(r.gridDim)],
                  [dim(r.blockDim), threads(r.blockDim)], Number(r.registersPerThread) || 0,
                  [(r.staticShmemBytes || 0) + "+" + (r.dynamicShmemBytes || 0), shared],
                  [num(r.occupancyPct) + "%", Number(r.occupancyPct) || 0],
                  r.isKernelUsingTensorCore ? "yes" : (r.isOpTensorCoreEligible ? "eligible, not used" : "no")];
        }));
}

function drawOpStats() {
  const db = all.opStats || {};
  const records = (db.withoutIdle || {}).tfStatsRecord || [];
  const idle = ((db.withIdle || {}).tfStatsRecord || []).filter(r => r.opName === "IDLE");
  const summary = document.getElementById("os-summary");
  html("p", "device type " + (db.deviceType || "none") + "; ops with the most self time first (up to 200 per side " +
       "shown; framework_op_stats.json has up to 500). Click a column header to sort by it.", summary);
  const side = (name, container, cut) => {
    const rows = records.filter(r => r.hostOrDevice === name);
    const self = rows.reduce((a, r) => a + (Number(r.totalSelfTimeInUs) || 0), 0);
    const idleUs = idle.filter(r => r.hostOrDevice === name).reduce((a, r) => a + (Number(r.totalSelfTimeInUs) || 0), 0);
    html("p", name.toLowerCase() + " self time " + fmt(self) + " in these rows, idle " + fmt(idleUs) +
         (Number(cut) > 0 ? "; " + cut + " more ops cut" : ""), container);
    const device = name === "Device";
    const pct = v => [num(100 * (Number(v) || 0)) + "%", Number(v) || 0];
    const time = v => [fmt(Number(v) || 0), Number(v) || 0];
    sortableTable(container, ["rank", "type", "op", "count", "total", "avg", "self", "avg self", "self %",
                              "cumulative %", "GFLOP/s", "GiB/s", "FLOP/byte", "bound by"],
                  rows.map(r => [Number(r.rank) || 0, r.opType || "", r.opName || "", Number(r.occurrences) || 0,
                                 time(r.totalTimeInUs), time(r.avgTimeInUs), time(r.totalSelfTimeInUs),
                                 time(r.avgSelfTimeInUs),
                                 pct(device ? r.deviceTotalSelfTimeAsFraction : r.hostTotalSelfTimeAsFraction),
                                 pct(device ? r.deviceCumulativeTotalSelfTimeAsFraction
                                            : r.hostCumulativeTotalSelfTimeAsFraction),
                                 [num(r.measuredFlopRate, 2), Number(r.measuredFlopRate) || 0],
                                 [num(r.measuredMemoryBw, 2), Number(r.measuredMemoryBw) || 0],
                                 [num(r.operationalIntensity, 2), Number(r.operationalIntensity) || 0],
                                 r.boundBy || ""]));
  };
  side("Device", document.getElementById("os-device"), db.deviceRecordsCut);
  side("Host", document.getElementById("os-host"), db.hostRecordsCut);
}

function drawMemory() {
  const mp = all.memoryProfile || {};
  const container = document.getElementById("mem");
  const ids = mp.memoryIds || [];
  if (ids.length === 0) html("p", "no allocator events captured", container);
  const mib = b => ((Number(b) || 0) / 1048576).toFixed(2) + " MiB";
  for (const id of ids) {
    const a = (mp.memoryProfilePerAllocator || {})[id] || {};
    const s = a.profileSummary || {}, peak = s.peakStats || {};
    html("h2", "Allocator " + id, container);
    html("p", "peak in window " + mib(Number(peak.peakBytesInUse) || 0) + " (heap " + mib(peak.heapAllocatedBytes) +
         ", stack " + mib(peak.stackReservedBytes) + ") at " + psToMs(s.peakStatsTimePs) + "; lifetime peak " +
         mib(s.peakBytesUsageLifetime) + "; capacity " + mib(s.memoryCapacity), container);
    const points = a.sampledTimelineSnapshots || [];
    const width = 900, height = 160;
    const maxT = Math.max(1, ...points.map(p => Number(p.timeOffsetPs) || 0));
    const inUse = p => (Number((p.aggregationStats || {}).heapAllocatedBytes) || 0) +
                       (Number((p.aggregationStats || {}).stackReservedBytes) || 0);
    const maxB = Math.max(1, ...points.map(inUse));
    const svg = el("svg", {width: width, height: height + 20}, container);
    el("polyline", {fill: "none", stroke: "#1f77b4", "stroke-width": 1.5,
                    points: points.map(p => (width * (Number(p.timeOffsetPs) || 0) / maxT).toFixed(1) + "," +
                                            (height - height * inUse(p) / maxB).toFixed(1)).join(" ")}, svg);
    el("text", {x: 0, y: height + 14}, svg, "in use, max " + mib(maxB) + " over " + psToMs(maxT));
    const snapshots = a.memoryProfileSnapshots || [], special = a.specialAllocations || [];
    html("p", "live at the peak:", container);
    table(container, ["size", "count", "op", "region", "data type", "shape"],
          (a.activeAllocations || []).slice(0, 30).map(x => {
            const idx = Number(x.snapshotIndex), sp = Number(x.specialIndex);
            const m = idx >= 0 ? ((snapshots[idx] || {}).activityMetadata || {}) : (special[sp] || {});
            return [mib(m.allocationBytes), x.numOccurrences || 1, m.tfOpName || "", m.regionType || "",
                    m.dataType || "", m.tensorShape || ""];
          }));
  }
}

drawTabs();
@DRAW@
</script></body></html>
)HTML";

// What the page draws of the op-level tools: the kernels with the most time and, per allocator, its summary,
// timeline and the allocations live at its peak (with only the snapshots those name).
constexpr int kReportKernels = 200;
constexpr int kReportOpsPerSide = 200;
constexpr int kReportLiveAllocations = 30;

tensorflow::profiler::KernelStatsDb report_kernels(const tensorflow::profiler::KernelStatsDb& db) {
  tensorflow::profiler::KernelStatsDb out;
  for (int i = 0; i < db.reports_size() && i < kReportKernels; ++i) *out.add_reports() = db.reports(i);
  return out;
}

// The rows without idle, the first of each side, and the idle rows of the table with idle.
tensorflow::profiler::TfStatsDatabase report_op_stats(const tensorflow::profiler::TfStatsDatabase& db) {
  tensorflow::profiler::TfStatsDatabase out;
  out.set_device_type(db.device_type());
  out.set_device_records_cut(db.device_records_cut());
  out.set_host_records_cut(db.host_records_cut());
  int device_rows = 0, host_rows = 0;
  for (const auto& r : db.without_idle().tf_stats_record()) {
    int& rows = r.host_or_device() == "Host" ? host_rows : device_rows;
    if (rows++ < kReportOpsPerSide) *out.mutable_without_idle()->add_tf_stats_record() = r;
  }
  for (const auto& r : db.with_idle().tf_stats_record()) {
    if (r.op_name() == "IDLE") *out.mutable_with_idle()->add_tf_stats_record() = r;
  }
  return out;
}

tensorflow::profiler::MemoryProfile report_memory(const tensorflow::profiler::MemoryProfile& profile) {
  tensorflow::profiler::MemoryProfile out;
  *out.mutable_memory_ids() = profile.memory_ids();
  out.set_num_hosts(profile.num_hosts());
  for (const auto& [id, allocator] : profile.memory_profile_per_allocator()) {
    tensorflow::profiler::PerAllocatorMemoryProfile& kept = (*out.mutable_memory_profile_per_allocator())[id];
    *kept.mutable_profile_summary() = allocator.profile_summary();
    *kept.mutable_sampled_timeline_snapshots() = allocator.sampled_timeline_snapshots();
    *kept.mutable_special_allocations() = allocator.special_allocations();
    for (int i = 0; i < allocator.active_allocations_size() && i < kReportLiveAllocations; ++i) {
      tensorflow::profiler::ActiveAllocation live = allocator.active_allocations(i);
      const int64_t index = live.snapshot_index();
      if (index >= 0 && index < allocator.memory_profile_snapshots_size()) {
        live.set_snapshot_index(kept.memory_profile_snapshots_size());
        *kept.add_memory_profile_snapshots() = allocator.memory_profile_snapshots(static_cast<int>(index));
      }
      *kept.add_active_allocations() = std::move(live);
    }
  }
  return out;
}

// What a tab shows of its tool's result: all of it, or what shown() keeps.
template <typename Result, Result (*cut)(const Result&)>
std::unique_ptr<google::protobuf::Message> shown_part(const google::protobuf::Message& result) {
  const auto* typed = dynamic_cast<const Result*>(&result);
  return typed == nullptr ? nullptr : std::make_unique<Result>(cut(*typed));
}

// The page's drawing of each tab: its section's body, the key its data has in the page's data, the script that
// draws it, and what of the result it shows (null: all of it).
struct TabPage {
  std::string_view id;
  std::string_view data_key;
  std::string_view body;
  std::string_view draw;
  std::unique_ptr<google::protobuf::Message> (*shown)(const google::protobuf::Message&);
};
constexpr TabPage kTabPages[] = {
    {"overview", "overview", R"HTML(
<h2>Performance summary</h2><div id="ov-summary"></div>
<h2>Step-time graph</h2><div class="legend" id="ov-legend"></div><div id="ov-steps"></div>
<h2>Recommendation</h2><div id="ov-recommendation"></div>
<h2>Top device ops</h2><div id="ov-topops"></div>
<h2>Run environment</h2><div id="ov-environment"></div>
)HTML",
     "drawOverview();", nullptr},
    {"input", "inputPipeline", R"HTML(
<div id="ip-verdict"></div>
<h2>Device side</h2><div id="ip-summary"></div>
<h2>Hosts</h2><div id="ip-hosts"></div>
<h2>Host side: where input time goes</h2><div id="ip-breakdown"></div><div id="ip-ops"></div>
)HTML",
     "drawInputPipeline();", nullptr},
    {"tfdata", "tfData", R"HTML(
<div id="tf-summary"></div>
<h2>Bottlenecks</h2><div id="tf-bottlenecks"></div>
<h2>Pipelines</h2><div id="tf-pipelines"></div>
)HTML",
     "drawTfData();", nullptr},
    {"pod", "pod", R"HTML(
<div id="overview"></div>
<h2>Step breakdown per core</h2>
<label>Step <select id="step"></select></label>
<div class="legend" id="legend"></div>
<div id="breakdown"></div>
<h2>All-reduce sync vs compute</h2><div id="allreduce"></div>
<h2>Channel latency</h2><div id="channels"></div>
<h2>Heat view</h2><label>Category <select id="category"></select></label><div id="heat"></div>
<h2>Top ops</h2><div id="topops"></div>
)HTML",
     "drawStatic();\ndrawBreakdown();\ndrawHeat();", nullptr},
    {"kernels", "kernelStats", R"HTML(<div id="ks-summary"></div><div id="ks-table"></div>)HTML", "drawKernels();",
     &shown_part<tensorflow::profiler::KernelStatsDb, report_kernels>},
    {"opstats", "opStats", R"HTML(<div id="os-summary"></div>
<h2>Device ops</h2><div id="os-device"></div><h2>Host ops</h2><div id="os-host"></div>)HTML",
     "drawOpStats();", &shown_part<tensorflow::profiler::TfStatsDatabase, report_op_stats>},
    {"memory", "memoryProfile", R"HTML(<div id="mem"></div>)HTML", "drawMemory();",
     &shown_part<tensorflow::profiler::MemoryProfile, report_memory>},
};

const TabPage* page_of(std::string_view id) {
  for (const TabPage& page : kTabPages)
    if (page.id == id) return &page;
  return nullptr;
}

std::string escape_html(const std::string& text) {
  return absl::StrReplaceAll(text, {{"&", "&amp;"}, {"<", "&lt;"}, {">", "&gt;"}, {"\"", "&quot;"}});
}

}  // namespace

absl::StatusOr<std::string> render_report_html(std::span<const ReportTab> tabs, const std::string& title) {
  std::string sections, draw, json = "{";
  for (const ReportTab& tab : tabs) {
    const TabPage* page = page_of(tab.id);
    if (page == nullptr)
      return absl::InvalidArgumentError("report.html has no page for tab '" + std::string(tab.id) + "'");
    sections.append("<section id=\"tab-")
        .append(tab.id)
        .append("\" data-title=\"")
        .append(escape_html(std::string(tab.title)));
    sections.append("\">").append(page->body).append("</section>\n");
    draw.append(page->draw).append("\n");
    std::unique_ptr<google::protobuf::Message> shown = page->shown ? page->shown(*tab.result) : nullptr;
    if (page->shown && !shown)
      return absl::InvalidArgumentError("report.html's tab '" + std::string(tab.id) + "' was handed another result");
    auto part = message_to_json(shown ? *shown : *tab.result, /*indented=*/false);
    if (!part.ok()) return part.status();
    if (json.size() > 1) json += ",";
    json.append("\"").append(page->data_key).append("\":").append(*part);
  }
  json += "}";
  // Inside <script>, "</" could close the element early; JSON allows "<" escaped as \u003c.
  const std::string safe_json = absl::StrReplaceAll(json, {{"<", "\\u003c"}});
  return absl::StrReplaceAll(
      absl::string_view(kTemplate.data(), kTemplate.size()),
      {{"@TITLE@", escape_html(title)}, {"@SECTIONS@", sections}, {"@DRAW@", draw}, {"@DATA@", safe_json}});
}

}  // namespace podscope::analysis
