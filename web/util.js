// util.js: small helpers every page shares: building DOM nodes without innerHTML (so
// no value from the server is ever parsed as markup), and formatting numbers, times
// and GPU grants the way the CLI writes them.

// h('tr', {class: 'x', onclick: f, 'data-job': 3}, child, [children], 'text')
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else if (k === 'text') el.textContent = v;
    else if (k === 'value') el.value = v;
    else if (k === 'checked' || k === 'disabled' || k === 'selected') el[k] = Boolean(v);
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

const SVG_NS = 'http://www.w3.org/2000/svg';

export function svg(tag, attrs, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {}))
    if (v !== undefined && v !== null) el.setAttribute(k, String(v));
  for (const c of children.flat())
    if (c !== undefined && c !== null) el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return el;
}

// GPU-equivalents: 2, 0.14, 0.5 (two decimals at most, no trailing zeros)
export function fmtGpus(x) {
  if (x === null || x === undefined) return '';
  return String(Math.round(x * 100) / 100);
}

// Dollars to the cent; below a dollar to the hundredth of a cent the API gives, so a
// few minutes of a slice do not read as nothing.
export function fmtMoney(x) {
  return '$' + (x !== 0 && Math.abs(x) < 1 ? x.toFixed(4) : x.toFixed(2));
}

export function fmtHours(x) {
  return x !== 0 && Math.abs(x) < 10 ? x.toFixed(3) : x.toFixed(2);
}

// A span of time: 45s, 12m, 1h05m, 20h, 3d (as the CLI's AGE column).
export function fmtSpan(ms) {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m`;
  const hr = Math.floor(m / 60);
  if (hr < 10) return `${hr}h${String(m % 60).padStart(2, '0')}m`;
  if (hr < 48) return `${hr}h`;
  return `${Math.floor(hr / 24)}d`;
}

export function fmtClock(ms) {
  const d = new Date(ms);
  return d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
}

// A worker's grants, as GET /jobs shows them: "h100-0: 0-7", "a100-0: 0 [1g.10gb]",
// "l4-0: 3 (0.25)".
export function fmtPlacement(placement) {
  if (!placement || !placement.length) return '';
  return placement.map((w) => `${w.node}: ${fmtGrants(w.gpus || [])}`).join(', ');
}

function fmtGrants(grants) {
  const whole = grants.filter((g) => !g.mig && g.fraction === undefined).map((g) => g.index);
  const parts = [];
  if (whole.length) parts.push(runs(whole));
  for (const g of grants) {
    if (g.mig) parts.push(`${g.index} [${g.mig.profile}]`);
    else if (g.fraction !== undefined) parts.push(`${g.index} (${g.fraction})`);
  }
  return parts.join(' ') || 'no GPU';
}

// [0,1,2,3,5] -> "0-3,5"
function runs(xs) {
  const s = [...xs].sort((a, b) => a - b);
  const out = [];
  for (let i = 0; i < s.length; ) {
    let j = i;
    while (j + 1 < s.length && s[j + 1] === s[j] + 1) j++;
    out.push(j > i ? `${s[i]}-${s[j]}` : `${s[i]}`);
    i = j + 1;
  }
  return out.join(',');
}

// A stable colour per job id, for drawing who holds what.
export function jobColour(id) {
  const hue = (Number(id) * 137.508) % 360;
  return `hsl(${hue.toFixed(0)} 55% 62%)`;
}

// 'YYYY-MM-DD' of a time, in UTC (the chargeback's days are UTC days, as the CLI's).
export function utcDay(ms) {
  return new Date(ms).toISOString().slice(0, 10);
}

// Milliseconds of midnight UTC starting 'YYYY-MM-DD', or NaN.
export function dayMs(day) {
  const m = /^(\d{4})-(\d{2})-(\d{2})$/.exec(day || '');
  return m ? Date.UTC(+m[1], +m[2] - 1, +m[3]) : NaN;
}
