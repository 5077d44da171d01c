// The kernel stats tab: the kernels with the most time, a table that sorts by any column.
drawers.kernels = () => {
  const reports = (all.kernelStats || {}).reports || [];
  html(
      'p', reports.length + ' kernels (the 200 with the most time shown; kernel_stats.json has them all)',
      document.getElementById('ks-summary'));
  const dim = d => (d || []).join(',');
  const us = ns => [fmt(ns / 1000), ns];
  const threads = d => (d || []).reduce((a, b) => a * (Number(b) || 1), 1);
  sortableTable(
      document.getElementById('ks-table'),
      [
        'kernel', 'op', 'count', 'total', 'avg', 'min', 'max', 'grid', 'block', 'regs', 'shared (static+dynamic)',
        'occupancy', 'tensor core'
      ],
      reports.slice(0, 200).map(r => {
        const n = Number(r.occurrences) || 1, total = Number(r.totalDurationNs) || 0;
        const shared = (Number(r.staticShmemBytes) || 0) + (Number(r.dynamicShmemBytes) || 0);
        return [
          r.name, r.opName || '', n, us(total), us(total / n), us(Number(r.minDurationNs) || 0),
          us(Number(r.maxDurationNs) || 0), [dim(r.gridDim), threads(r.gridDim)],
          [dim(r.blockDim), threads(r.blockDim)], Number(r.registersPerThread) || 0,
          [(r.staticShmemBytes || 0) + '+' + (r.dynamicShmemBytes || 0), shared],
          [num(r.occupancyPct) + '%', Number(r.occupancyPct) || 0],
          r.isKernelUsingTensorCore ? 'yes' : (r.isOpTensorCoreEligible ? 'eligible, not used' : 'no')
        ];
      }));
};
