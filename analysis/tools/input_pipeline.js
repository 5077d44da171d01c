// The input pipeline tab: the verdict, the device side's summaries, hosts by input share, where the host's input
// time goes.
drawers.input = () => {
  const ip = all.inputPipeline || {};
  const verdict = document.getElementById('ip-verdict');
  const bottleneck = ((ip.recommendation || {}).bottleneckAnalysis) || {};
  if (bottleneck.inputStatement) html('p', bottleneck.inputStatement, verdict);
  for (const d of ((ip.recommendation || {}).details) || []) html('p', d, verdict);
  const rows = [['step time', ip.stepTimeSummary, ' ms'], ['input %', ip.inputPercentSummary, '%']];
  table(
      document.getElementById('ip-summary'), ['', 'average', 'stddev', 'min', 'max'],
      rows.map(
          ([name, s, unit]) => [name].concat(
              ['average', 'standardDeviation', 'minimum', 'maximum'].map(k => num((s || {})[k], 2) + unit))));
  table(
      document.getElementById('ip-hosts'), ['host', 'input %', 'verdict', 'slowest stage', 'its self time'],
      (ip.hosts ||
       []).map(h => [h.hostName, num(h.inputPercent), h.verdict, h.slowestStage || '', ms(h.slowestStageSelfTimeMs)]));
  const b = ip.inputTimeBreakdown || {};
  table(
      document.getElementById('ip-breakdown'),
      ['enqueue', 'demanded file read', 'advanced file read', 'preprocessing', 'unclassified'],
      [[b.enqueueUs, b.demandedFileReadUs, b.advancedFileReadUs, b.preprocessingUs, b.unclassifiedNonEnqueueUs].map(
          v => fmt(Number(v) || 0))]);
  table(
      document.getElementById('ip-ops'), ['input op', 'count', 'time', 'self time', 'self %', 'category'],
      (ip.inputOpDetails || [])
          .slice(0, 50)
          .map(
              o =>
                  [o.opName, o.count || 0, ms(o.timeInMs), ms(o.selfTimeInMs), num(o.selfTimeInPercent) + '%',
                   o.category || '']));
};
