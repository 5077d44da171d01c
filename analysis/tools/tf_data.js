// The tf.data tab: the summary, each pipeline's bottleneck iterator with a suggestion, every pipeline's latencies.
drawers.tfdata = () => {
  const tf = all.tfData || {};
  html('p', tf.summary || 'no tf.data activity captured', document.getElementById('tf-summary'));
  table(
      document.getElementById('tf-bottlenecks'),
      ['host', 'pipeline', 'max latency', 'bottleneck iterator', 'its latency', 'suggestion'],
      (tf.bottleneckAnalysis || [])
          .map(
              b =>
                  [b.host, b.inputPipeline, psToMs(b.maxLatencyPs), b.iteratorLongName || b.iteratorName,
                   psToMs(b.iteratorLatencyPs), b.suggestion]));
  const rows = [];
  for (const host of Object.keys(tf.tfDataStats || {}).sort()) {
    const pipelines = (tf.tfDataStats[host] || {}).inputPipelines || {};
    for (const id of Object.keys(pipelines)) {
      const p = pipelines[id];
      rows.push([
        host, (p.metadata || {}).name || id, p.numCalls || 0, psToMs(p.avgLatencyPs), psToMs(p.minLatencyPs),
        psToMs(p.maxLatencyPs), p.numSlowCalls || 0
      ]);
    }
  }
  table(
      document.getElementById('tf-pipelines'), ['host', 'pipeline', 'calls', 'avg', 'min', 'max', 'slow calls'], rows);
};
