// The overview tab: performance summary, the step-time graph (each step the pod's combined step, the spread of its
// cores' step times beside it), the recommendation, top device ops, run environment.
const stepParts = [
  ['hostWaitInputMs', 'Input (host wait)', '#d62728'], ['hostToDeviceMs', 'Host to device', '#ff9896'],
  ['deviceComputeMs', 'Device compute', '#2ca02c'], ['deviceCollectivesMs', 'Collectives (AllReduce)', '#9467bd'],
  ['deviceToDeviceMs', 'Device to device', '#c5b0d5'], ['hostPrepareMs', 'Kernel launch', '#ff7f0e'],
  ['hostComputeMs', 'Host compute', '#1f77b4'], ['hostCompileMs', 'Compilation', '#8c564b'],
  ['outputMs', 'Output', '#e377c2'], ['unknownTimeMs', 'All others', '#cccccc']
];

drawers.overview = () => {
  const ov = all.overview || {};
  const ip = ov.inputAnalysis || all.inputPipeline || {};
  const an = ov.analysis || {};
  const st = ip.stepTimeSummary || {};
  const sum = document.getElementById('ov-summary');
  // A program without devices (its host is its core) has no device time to show.
  const deviceless = (ov.runEnvironment || {}).deviceType === 'CPU';
  table(
      sum,
      ['average step time', 'spread (stddev)', 'host idle'].concat(
          deviceless ? [] : ['device idle', '16-bit of device compute', '32-bit of device compute']),
      [[ms(st.average), ms(st.standardDeviation), num(an.hostIdleTimePercent) + '%'].concat(deviceless ? [] : [
        num(an.deviceIdleTimePercent) + '%', num(an.deviceCompute16bitPercent) + '%',
        num(an.deviceCompute32bitPercent) + '%'
      ])]);
  for (const w of ((ov.diagnostics || {}).warnings) || []) html('p', 'Warning: ' + w, sum).className = 'warn';
  for (const e of ((ov.diagnostics || {}).errors) || []) html('p', e, sum).className = 'warn';
  legend(document.getElementById('ov-legend'), stepParts.map(([, name, color]) => [name, color]));
  const details = ip.stepDetails || [];
  const label = d => 'step ' + (d.stepNumber || 0) +
      ((d.coreCount || 0) > 1 ?
           ' (' + d.coreCount + ' cores: ' + num(d.minCoreStepTimeMs) + '–' + num(d.maxCoreStepTimeMs) + ' ms)' :
           '');
  drawBars(
      document.getElementById('ov-steps'), details.map(d => ({label: label(d), d: d})),
      r => stepParts.map(([key, name, color]) => ({name: name, value: 1000 * (Number(r.d[key]) || 0), color: color})));
  // Every tool's advice, what costs the most first (the terminal prints the same list after a capture).
  const rec = ov.recommendation || {};
  const recDiv = document.getElementById('ov-recommendation');
  const ranked = rec.rankedAdvice || [];
  if (ranked.length === 0 || ranked[0].level === 'potential') html('p', rec.statement || '', recDiv);
  const list = html('ol', '', recDiv);
  for (const a of ranked) {
    const cost = a.level === 'potential' ? 'potential' : a.level + ', ' + num(a.stepPercent) + '% of the step time';
    const item = html('li', '', list);
    html('b', a.kind + ' (' + cost + '): ', item);
    item.appendChild(document.createTextNode(a.statement + ' Try: ' + a.action + '.'));
  }
  table(
      document.getElementById('ov-topops'), ['op', 'category', 'self time', 'cumulative', 'GFLOP/s'],
      (an.topDeviceOps || [])
          .map(
              o =>
                  [o.name, o.category, num(100 * (o.selfTimeFraction || 0)) + '%',
                   num(100 * (o.cumulativeTimeFraction || 0)) + '%', num(o.flopRate)]));
  const env = ov.runEnvironment || {};
  table(document.getElementById('ov-environment'), ['hosts', 'device type', 'device cores', 'host names'], [[
          env.hostCount || 0, env.deviceType || '', env.deviceCoreCount || 0,
          Object.keys(env.hostnames || {}).sort().join(', ')
        ]]);
};
