// The framework op stats tab: per side (device, host), its self and idle time and its ops, a table that sorts by any
// column.
drawers.opstats = () => {
  const db = all.opStats || {};
  const records = (db.withoutIdle || {}).tfStatsRecord || [];
  const idle = ((db.withIdle || {}).tfStatsRecord || []).filter(r => r.opName === 'IDLE');
  html(
      'p',
      'device type ' + (db.deviceType || 'none') + '; ops with the most self time first (up to 200 per side ' +
          'shown; framework_op_stats.json has up to 500). Click a column header to sort by it.',
      document.getElementById('os-summary'));
  const side = (name, container, cut) => {
    const rows = records.filter(r => r.hostOrDevice === name);
    const self = rows.reduce((a, r) => a + (Number(r.totalSelfTimeInUs) || 0), 0);
    const idleUs =
        idle.filter(r => r.hostOrDevice === name).reduce((a, r) => a + (Number(r.totalSelfTimeInUs) || 0), 0);
    html(
        'p',
        name.toLowerCase() + ' self time ' + fmt(self) + ' in these rows, idle ' + fmt(idleUs) +
            (Number(cut) > 0 ? '; ' + cut + ' more ops cut' : ''),
        container);
    const device = name === 'Device';
    const pct = v => [num(100 * (Number(v) || 0)) + '%', Number(v) || 0];
    const time = v => [fmt(Number(v) || 0), Number(v) || 0];
    sortableTable(
        container,
        [
          'rank', 'type', 'op', 'count', 'total', 'avg', 'self', 'avg self', 'self %', 'cumulative %', 'GFLOP/s',
          'GiB/s', 'FLOP/byte', 'bound by'
        ],
        rows.map(
            r =>
                [Number(r.rank) || 0, r.opType || '', r.opName || '', Number(r.occurrences) || 0, time(r.totalTimeInUs),
                 time(r.avgTimeInUs), time(r.totalSelfTimeInUs), time(r.avgSelfTimeInUs),
                 pct(device ? r.deviceTotalSelfTimeAsFraction : r.hostTotalSelfTimeAsFraction),
                 pct(device ? r.deviceCumulativeTotalSelfTimeAsFraction : r.hostCumulativeTotalSelfTimeAsFraction),
                 [num(r.measuredFlopRate, 2), Number(r.measuredFlopRate) || 0],
                 [num(r.measuredMemoryBw, 2), Number(r.measuredMemoryBw) || 0],
                 [num(r.operationalIntensity, 2), Number(r.operationalIntensity) || 0], r.boundBy || '']));
  };
  side('Device', document.getElementById('os-device'), db.deviceRecordsCut);
  side('Host', document.getElementById('os-host'), db.hostRecordsCut);
};
