// report.html: the PodAnalysis as inline JSON plus a small script that draws SVG charts from it. No
// external scripts, styles, fonts or images, so it opens offline.
#include <string>

#include "absl/strings/str_replace.h"
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
</style></head><body>
<h1>@TITLE@</h1>
<div id="overview"></div>
<h2>Step breakdown per core</h2>
<label>Step <select id="step"></select></label>
<div class="legend" id="legend"></div>
<div id="breakdown"></div>
<h2>All-reduce sync vs compute</h2><div id="allreduce"></div>
<h2>Channel latency</h2><div id="channels"></div>
<h2>Heat view</h2><label>Category <select id="category"></select></label><div id="heat"></div>
<h2>Top ops</h2><div id="topops"></div>
<script id="data" type="application/json">@DATA@</script>
<script>
"use strict";
const data = JSON.parse(document.getElementById("data").textContent);
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

drawStatic();
drawBreakdown();
drawHeat();
</script></body></html>
)HTML";

}  // namespace

absl::StatusOr<std::string> render_report_html(const podscope::v1::PodAnalysis& analysis, const std::string& title) {
  auto json = to_deterministic_json(analysis, /*add_whitespace=*/false, /*always_print_primitive_fields=*/true);
  if (!json.ok()) return json.status();
  // Inside <script>, "</" could close the element early; JSON allows "<" escaped as \u003c.
  const std::string safe_json = absl::StrReplaceAll(*json, {{"<", "\\u003c"}});
  const std::string safe_title =
      absl::StrReplaceAll(title, {{"&", "&amp;"}, {"<", "&lt;"}, {">", "&gt;"}, {"\"", "&quot;"}});
  return absl::StrReplaceAll(absl::string_view(kTemplate.data(), kTemplate.size()),
                             {{"@TITLE@", safe_title}, {"@DATA@", safe_json}});
}

}  // namespace podscope::analysis
