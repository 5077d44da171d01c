// The memory tab: per allocator, its peak in the window and over its lifetime, its timeline, what was live at the
// peak.
drawers.memory = () => {
  const mp = all.memoryProfile || {};
  const container = document.getElementById('mem');
  const ids = mp.memoryIds || [];
  if (ids.length === 0) html('p', 'no allocator events captured', container);
  const mib = b => ((Number(b) || 0) / 1048576).toFixed(2) + ' MiB';
  for (const id of ids) {
    const a = (mp.memoryProfilePerAllocator || {})[id] || {};
    const s = a.profileSummary || {}, peak = s.peakStats || {};
    html('h2', 'Allocator ' + id, container);
    html(
        'p',
        'peak in window ' + mib(Number(peak.peakBytesInUse) || 0) + ' (heap ' + mib(peak.heapAllocatedBytes) +
            ', stack ' + mib(peak.stackReservedBytes) + ') at ' + psToMs(s.peakStatsTimePs) + '; lifetime peak ' +
            mib(s.peakBytesUsageLifetime) + '; capacity ' + mib(s.memoryCapacity),
        container);
    const points = a.sampledTimelineSnapshots || [];
    const width = 900, height = 160;
    const maxT = Math.max(1, ...points.map(p => Number(p.timeOffsetPs) || 0));
    const inUse = p => (Number((p.aggregationStats || {}).heapAllocatedBytes) || 0) +
        (Number((p.aggregationStats || {}).stackReservedBytes) || 0);
    const maxB = Math.max(1, ...points.map(inUse));
    const svg = el('svg', {width: width, height: height + 20}, container);
    const at = p => (width * (Number(p.timeOffsetPs) || 0) / maxT).toFixed(1) + ',' +
        (height - height * inUse(p) / maxB).toFixed(1);
    el('polyline', {fill: 'none', stroke: '#1f77b4', 'stroke-width': 1.5, points: points.map(at).join(' ')}, svg);
    el('text', {x: 0, y: height + 14}, svg, 'in use, max ' + mib(maxB) + ' over ' + psToMs(maxT));
    const snapshots = a.memoryProfileSnapshots || [], special = a.specialAllocations || [];
    html('p', 'live at the peak:', container);
    table(
        container, ['size', 'count', 'op', 'region', 'data type', 'shape'],
        (a.activeAllocations || []).slice(0, 30).map(x => {
          const idx = Number(x.snapshotIndex), sp = Number(x.specialIndex);
          const m = idx >= 0 ? ((snapshots[idx] || {}).activityMetadata || {}) : (special[sp] || {});
          return [
            mib(m.allocationBytes), x.numOccurrences || 1, m.tfOpName || '', m.regionType || '', m.dataType || '',
            m.tensorShape || ''
          ];
        }));
  }
};
