// chart.js: the two charts the portal draws, as plain SVG (no library): a line chart
// over time (utilisation) and horizontal bars (chargeback). Both scale to their
// container through the viewBox and carry a text summary for screen readers.
import { fmtClock, svg } from './util.js';

const PAD = { left: 40, right: 12, top: 10, bottom: 22 };

// series: [{label, values, colour, dash, fill}] over times t (ms); y from 0 to yMax. A
// null value (not measured) is no point: the line joins the points there are.
export function lineChart({ t, series, yMax, width = 560, height = 180, label }) {
  const w = width - PAD.left - PAD.right;
  const hgt = height - PAD.top - PAD.bottom;
  const t0 = t.length ? t[0] : 0;
  const t1 = t.length > 1 ? t[t.length - 1] : t0 + 1;
  const x = (v) => PAD.left + ((v - t0) / (t1 - t0 || 1)) * w;
  const y = (v) => PAD.top + hgt - (Math.min(v, yMax) / (yMax || 1)) * hgt;
  const parts = [];
  for (let i = 0; i <= 4; i++) {
    const v = (yMax * i) / 4;
    parts.push(svg('line', { x1: PAD.left, x2: PAD.left + w, y1: y(v), y2: y(v), class: 'grid' }),
      svg('text', { x: PAD.left - 6, y: y(v) + 4, 'text-anchor': 'end', class: 'tick' }, String(Math.round(v * 10) / 10)));
  }
  if (t.length) {
    parts.push(svg('text', { x: PAD.left, y: height - 6, class: 'tick' }, fmtClock(t0)),
      svg('text', { x: PAD.left + w, y: height - 6, 'text-anchor': 'end', class: 'tick' }, fmtClock(t1)));
  }
  for (const s of series) {
    const pts = s.values.flatMap((v, i) => (v === null ? [] : [`${x(t[i]).toFixed(1)},${y(v).toFixed(1)}`]));
    if (!pts.length) continue;
    if (pts.length === 1) pts.push(`${(PAD.left + w).toFixed(1)},${pts[0].split(',')[1]}`);
    if (s.fill)
      parts.push(svg('polygon', {
        points: `${pts[0].split(',')[0]},${y(0)} ${pts.join(' ')} ${pts[pts.length - 1].split(',')[0]},${y(0)}`,
        fill: s.colour, 'fill-opacity': 0.25, stroke: 'none',
      }));
    parts.push(svg('polyline', {
      points: pts.join(' '), fill: 'none', stroke: s.colour, 'stroke-width': 2,
      'stroke-dasharray': s.dash ? '5 3' : null,
    }));
  }
  const last = series.map((s) => `${s.label} ${s.values.length ? s.values[s.values.length - 1] ?? 'unknown' : 0}`).join(', ');
  return svg('svg', {
    viewBox: `0 0 ${width} ${height}`, class: 'chart', role: 'img',
    'aria-label': `${label}: ${t.length} samples; now ${last} of ${yMax}`,
  }, parts);
}

// rows: [{label, value, text}]: one bar each, longest = the largest value; cls: the
// bars' class ('bar', or 'bar idle' for idle capacity).
export function barChart({ rows, width = 560, label, cls = 'bar' }) {
  const barH = 22;
  const gap = 6;
  const labelW = 170;
  const textW = 120;
  const height = rows.length * (barH + gap) + gap;
  const max = Math.max(...rows.map((r) => r.value), 0) || 1;
  const w = width - labelW - textW;
  const parts = rows.map((r, i) => {
    const y0 = gap + i * (barH + gap);
    const bw = Math.max(r.value > 0 ? 2 : 0, (r.value / max) * w);
    return svg('g', {},
      svg('text', { x: labelW - 8, y: y0 + barH / 2 + 4, 'text-anchor': 'end', class: 'tick' }, r.label),
      svg('rect', { x: labelW, y: y0, width: bw.toFixed(1), height: barH, rx: 3, class: cls }),
      svg('text', { x: labelW + bw + 6, y: y0 + barH / 2 + 4, class: 'tick' }, r.text));
  });
  return svg('svg', {
    viewBox: `0 0 ${width} ${Math.max(height, 30)}`, class: 'chart bars', role: 'img',
    'aria-label': `${label}: ${rows.map((r) => `${r.label} ${r.text}`).join('; ')}`,
  }, parts);
}
