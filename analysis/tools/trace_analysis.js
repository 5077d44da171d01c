// The trace analysis tab: per rank its idle / compute / non-compute shares (bars) and overlap, each GPU stream's idle
// time by cause, the launch delays.
const temporalParts = [
  ['idleUs', 'Idle', '#cccccc'], ['computeUs', 'Compute', '#2ca02c'],
  ['nonComputeUs', 'Non-compute (collectives, copies)', '#9467bd']
];

drawers.trace = () => {
  const ranks = (all.traceAnalysis || {}).ranks || [];
  legend(document.getElementById('ta-legend'), temporalParts.map(([, name, color]) => [name, color]));
  drawBars(
      document.getElementById('ta-temporal'), ranks.map(r => ({label: 'core ' + (r.coreId || 0), r: r})),
      row => temporalParts.map(([key, name, color]) => ({name: name, value: Number(row.r[key]) || 0, color: color})));
  sortableTable(
      document.getElementById('ta-ranks'),
      ['core', 'host', 'kind', 'span', 'idle', 'compute', 'non-compute', 'communication', 'overlap'],
      ranks.map(
          r =>
              [Number(r.coreId) || 0, r.hostName || '', r.kind || '',
               [fmt(Number(r.spanUs) || 0), Number(r.spanUs) || 0],
               [num(r.idlePercent) + '%', Number(r.idlePercent) || 0],
               [num(r.computePercent) + '%', Number(r.computePercent) || 0],
               [num(r.nonComputePercent) + '%', Number(r.nonComputePercent) || 0],
               [fmt(Number(r.communicationUs) || 0), Number(r.communicationUs) || 0],
               r.overlapPercent === undefined ? ['-', -1] : [num(r.overlapPercent) + '%', Number(r.overlapPercent)]]));
  const streamRows = [];
  for (const r of ranks) {
    for (const s of r.streams || []) {
      const hw = Number(s.hostWaitNs) || 0, kw = Number(s.kernelWaitNs) || 0, other = Number(s.otherNs) || 0;
      const idle = hw + kw + other;
      const share = v => [num(idle > 0 ? 100 * v / idle : 0) + '%', v];
      streamRows.push([
        Number(r.coreId) || 0, s.name || '', Number(s.events) || 0, [fmt(idle / 1000), idle], share(hw), share(kw),
        share(other)
      ]);
    }
  }
  sortableTable(
      document.getElementById('ta-streams'), ['core', 'stream', 'events', 'idle', 'host wait', 'kernel wait', 'other'],
      streamRows);
  const us = ns => [fmt((Number(ns) || 0) / 1000), Number(ns) || 0];
  sortableTable(
      document.getElementById('ta-launches'),
      [
        'core', 'launches', 'delay p50', 'delay p95', 'delay max', 'over 100 us', 'calls over 50 us',
        'shorter than their call'
      ],
      ranks.filter(r => Number((r.launches || {}).launches) > 0).map(r => {
        const l = r.launches;
        return [
          Number(r.coreId) || 0, Number(l.launches), us(l.delayP50Ns), us(l.delayP95Ns), us(l.delayMaxNs),
          Number(l.delayedLaunches) || 0, Number(l.longCalls) || 0, Number(l.shortEvents) || 0
        ];
      }));
};
