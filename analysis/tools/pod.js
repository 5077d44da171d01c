// The pod viewer tab: per core, the stacked step breakdown of a step or of the average, all-reduce sync vs compute,
// channel latency, a core × step heat view of one category, top ops.
drawers.pod = () => {
  const data = all.pod || {};
  const db = data.podViewer || {};
  const steps = ((db.podStatsSequence || {}).podStatsMap) || [];
  const events = db.stepBreakdownEvents || [];
  const palette = [
    '#1f77b4', '#aec7e8', '#ff7f0e', '#ffbb78', '#2ca02c', '#d62728', '#9467bd', '#c5b0d5', '#8c564b', '#e377c2',
    '#17becf', '#cccccc'
  ];
  const colorOf = id => palette[(id - 1) % palette.length];
  const coreIds = [...new Set(steps.flatMap(s => Object.keys(s.podStatsPerCore || {})))].sort((a, b) => a - b);

  // Per core: category id -> us, for one step or the average over all steps.
  const recordsFor = stepIndex => {
    const out = {};
    const chosen = stepIndex < 0 ? steps : [steps[stepIndex]];
    for (const core of coreIds) {
      const sums = {};
      let n = 0, total = 0;
      for (const s of chosen) {
        const r = (s.podStatsPerCore || {})[core];
        if (!r) continue;
        n++;
        total += r.totalDurationUs || 0;
        for (const ev of events) sums[ev.id] = (sums[ev.id] || 0) + ((r.stepBreakdownUs || {})[ev.id] || 0);
      }
      if (n > 0) {
        for (const k in sums) sums[k] /= n;
        out[core] = {sums: sums, total: total / n};
      }
    }
    return out;
  };

  // One bar per channel and direction: durations and send delays averaged over every step's occurrences.
  const averageChannels = () => {
    const byKey = {};
    for (const s of steps) {
      for (const c of s.channelDb || []) {
        const key = c.channelId + ' ' + (c.srcCoreIds || []).join('/') + '>' + (c.dstCoreIds || []).join('/');
        const n = c.occurrences || 1;
        const acc = byKey[key] ||
            (byKey[key] =
                 {channelId: c.channelId, srcCoreIds: c.srcCoreIds, dstCoreIds: c.dstCoreIds, n: 0, d: 0, delay: 0});
        acc.n += n;
        acc.d += (c.durationUs || 0) * n;
        acc.delay += (c.sendDelayUs || 0) * n;
      }
    }
    return Object.values(byKey).map(a => ({
                                      channelId: a.channelId,
                                      srcCoreIds: a.srcCoreIds,
                                      dstCoreIds: a.dstCoreIds,
                                      durationUs: a.d / a.n,
                                      sendDelayUs: a.delay / a.n
                                    }));
  };

  const drawBreakdown = () => {
    const idx = Number(document.getElementById('step').value);
    const recs = recordsFor(idx);
    const rows = coreIds.filter(c => recs[c]).map(c => ({label: 'core ' + c, rec: recs[c]}));
    drawBars(
        document.getElementById('breakdown'), rows,
        r => events.map(ev => ({name: ev.name, value: r.rec.sums[ev.id] || 0, color: colorOf(ev.id)})));
    drawBars(
        document.getElementById('allreduce'), rows,
        r =>
            [{name: 'AllReduce sync', value: r.rec.sums[6] || 0, color: colorOf(6)},
             {name: 'AllReduce compute', value: r.rec.sums[5] || 0, color: colorOf(5)}]);
    const chans = (idx < 0 ? averageChannels() : (steps[idx].channelDb || []).slice())
                      .sort((a, b) => (b.durationUs || 0) - (a.durationUs || 0))
                      .slice(0, 30);
    const channelLabel = c =>
        'ch ' + c.channelId + ' ' + (c.srcCoreIds || []).join('/') + '\u2192' + (c.dstCoreIds || []).join('/');
    drawBars(
        document.getElementById('channels'), chans.map(c => ({label: channelLabel(c), c: c})),
        r =>
            [{name: 'send delay', value: r.c.sendDelayUs || 0, color: '#ff7f0e'},
             {name: 'transfer', value: Math.max(0, (r.c.durationUs || 0)), color: '#1f77b4'}]);
  };

  const drawHeat = () => {
    const cat = Number(document.getElementById('category').value);
    const container = document.getElementById('heat');
    container.textContent = '';
    const cell = 16, left = 110, top = 20;
    const svg =
        el('svg', {width: left + steps.length * (cell + 1) + 10, height: top + coreIds.length * (cell + 1) + 10},
           container);
    steps.forEach((s, j) => {
      if (j % 5 === 0) el('text', {x: left + j * (cell + 1), y: 12}, svg, String(s.stepNum));
    });
    coreIds.forEach((core, i) => {
      el('text', {x: 0, y: top + i * (cell + 1) + 12}, svg, 'core ' + core);
      steps.forEach((s, j) => {
        const r = (s.podStatsPerCore || {})[core];
        const share = r && r.totalDurationUs > 0 ? ((r.stepBreakdownUs || {})[cat] || 0) / r.totalDurationUs : 0;
        const light = Math.round(100 - 60 * share);
        const rect =
            el('rect', {
              x: left + j * (cell + 1),
              y: top + i * (cell + 1),
              width: cell,
              height: cell,
              fill: r ? 'hsl(0,80%,' + light + '%)' : '#eee'
            },
               svg);
        el('title', {}, rect, 'core ' + core + ' step ' + s.stepNum + ': ' + (100 * share).toFixed(1) + '%');
      });
    });
  };

  const ov = document.getElementById('overview');
  html(
      'p',
      (data.cores || []).length + ' cores, ' + steps.length + ' steps, device ' + (db.deviceType || '?') +
          ', all-reduce sync share ' + (100 * (data.allReduceSyncShare || 0)).toFixed(1) + '%',
      ov);
  for (const s of data.stragglers || []) {
    html(
        'p',
        'Straggler: core ' + s.coreId + ' (' + s.hostName + '), ' + s.reason + ' ' + fmt(s.meanExcessUs || 0) +
            ' above the median in ' + s.stragglingSteps + ' of ' + s.comparedSteps + ' steps',
        ov)
        .className = 'warn';
  }
  for (const w of ((db.diagnostics || {}).warnings) || []) html('p', 'Warning: ' + w, ov).className = 'warn';
  legend(document.getElementById('legend'), events.map(ev => [ev.name, colorOf(ev.id)]));
  const stepSel = document.getElementById('step');
  html('option', 'average of all steps', stepSel).value = '-1';
  steps.forEach((s, i) => {
    html('option', 'step ' + s.stepNum, stepSel).value = String(i);
  });
  stepSel.addEventListener('change', drawBreakdown);
  const catSel = document.getElementById('category');
  for (const ev of events) html('option', ev.name, catSel).value = String(ev.id);
  catSel.addEventListener('change', drawHeat);
  table(
      document.getElementById('topops'), ['op', 'category', 'occurrences', 'total', 'cores'],
      (data.topOps ||
       []).map(op => [op.name, op.category, String(op.occurrences), fmt(op.totalUs || 0), String(op.coreCount)]));
  drawBreakdown();
  drawHeat();
};
