// report.html's script: what every tab draws with (SVG bars, tables that sort), the tabs themselves, and the drawer
// each tool's tab registers in `drawers` under its section's id (analysis/tools/<tool>.js). The page's data is one
// JSON object, a key per tab.
'use strict';
const all = JSON.parse(document.getElementById('data').textContent);
const drawers = {};
const SVG = 'http://www.w3.org/2000/svg';

function el(tag, attrs, parent, text) {
  const e = document.createElementNS(SVG, tag);
  for (const k in attrs) e.setAttribute(k, attrs[k]);
  if (text !== undefined) e.textContent = text;
  if (parent) parent.appendChild(e);
  return e;
}
function html(tag, text, parent) {
  const e = document.createElement(tag);
  if (text !== undefined) e.textContent = text;
  parent.appendChild(e);
  return e;
}
function fmt(us) { return us >= 1000 ? (us / 1000).toFixed(2) + ' ms' : us.toFixed(1) + ' us'; }
const num = (v, d) => (Number(v) || 0).toFixed(d === undefined ? 1 : d);
const ms = v => num(v, 2) + ' ms';
const psToMs = v => ms((Number(v) || 0) / 1e9);

// One bar per row, its segments side by side, the total after it.
function drawBars(container, rows, segmentsOf) {
  container.textContent = '';
  const width = 900, rowH = 18, left = 110;
  const max = Math.max(1e-9, ...rows.map(r => segmentsOf(r).reduce((a, s) => a + s.value, 0)));
  const svg = el('svg', {width: width, height: rows.length * (rowH + 4) + 20}, container);
  rows.forEach((r, i) => {
    const y = i * (rowH + 4);
    el('text', {x: 0, y: y + 13}, svg, r.label);
    let x = left;
    for (const s of segmentsOf(r)) {
      const w = (width - left - 80) * s.value / max;
      const rect = el('rect', {x: x, y: y, width: Math.max(0, w), height: rowH, fill: s.color}, svg);
      el('title', {}, rect, s.name + ': ' + fmt(s.value));
      x += w;
    }
    el('text', {x: x + 4, y: y + 13}, svg, fmt(segmentsOf(r).reduce((a, s) => a + s.value, 0)));
  });
  if (rows.length === 0) html('p', 'no data', container);
}

// A legend of [name, color] pairs.
function legend(container, entries) {
  for (const [name, color] of entries) {
    const span = html('span', '', container);
    const i = html('i', undefined, span);
    i.style.background = color;
    span.appendChild(document.createTextNode(name));
  }
}

function table(container, headers, rows) {
  if (rows.length === 0) {
    html('p', 'none', container);
    return;
  }
  const t = html('table', undefined, container);
  const head = html('tr', undefined, t);
  for (const h of headers) html('th', h, head);
  for (const r of rows) {
    const tr = html('tr', undefined, t);
    for (const v of r) html('td', String(v), tr);
  }
}

// A table whose rows reorder by the column whose header is clicked (clicked again: the other way; numbers start
// largest first). A cell is a value, or [shown text, sort key] when its text does not sort as its value does.
function sortableTable(container, headers, rows) {
  if (rows.length === 0) {
    html('p', 'none', container);
    return;
  }
  const t = html('table', undefined, container);
  t.className = 'sortable';
  const head = html('tr', undefined, html('thead', undefined, t));
  const body = html('tbody', undefined, t);
  const keyOf = c => Array.isArray(c) ? c[1] : c;
  const fill = () => {
    body.textContent = '';
    for (const r of rows) {
      const tr = html('tr', undefined, body);
      for (const c of r) html('td', String(Array.isArray(c) ? c[0] : c), tr);
    }
  };
  let sortedBy = -1, descending = false;
  headers.forEach((h, i) => {
    const th = html('th', h, head);
    th.title = 'sort by ' + h;
    th.addEventListener('click', () => {
      descending = sortedBy === i ? !descending : typeof keyOf(rows[0][i]) === 'number';
      sortedBy = i;
      rows.sort((a, b) => {
        const x = keyOf(a[i]), y = keyOf(b[i]);
        const order = typeof x === 'number' && typeof y === 'number' ? x - y : String(x).localeCompare(String(y));
        return descending ? -order : order;
      });
      for (const other of head.children) other.className = '';
      th.className = descending ? 'sorted-desc' : 'sorted-asc';
      fill();
    });
  });
  fill();
}

// A button per section, the first shown; then each section drawn by its tool's drawer.
function drawReport() {
  const nav = document.getElementById('tabs');
  const sections = [...document.querySelectorAll('section')];
  const show = id => {
    for (const s of sections) s.className = s.id === id ? 'on' : '';
    for (const b of nav.children) b.className = b.dataset.tab === id ? 'on' : '';
  };
  for (const s of sections) {
    const b = html('button', s.dataset.title, nav);
    b.dataset.tab = s.id;
    b.id = 'button-' + s.id;
    b.addEventListener('click', () => show(s.id));
  }
  if (sections.length > 0) show(sections[0].id);
  for (const s of sections) drawers[s.id.substring('tab-'.length)]();
}
