// chargeback.js: the Chargeback page: GPU-hours and cost by team and project (or any
// grouping GET /api/v1/usage takes) over a period of whole UTC days, as a table and a
// chart, and the same report as the server's CSV (format=csv of the same request, so
// the file holds exactly what `gpuorch usage -o csv` prints). A period that reaches
// into the future ends now, fixed when the table is drawn: the download then holds
// the very numbers on the screen, though running jobs (and idle capacity) go on
// counting. Idle capacity (rows of kind "idle") is kept apart from use everywhere: its
// own rows in the table, with use and idle subtotals, and its own chart, so a large
// idle figure never shrinks the teams' bars.
import { api } from '../api.js';
import { barChart } from '../chart.js';
import { dayMs, fmtHours, fmtMoney, h, utcDay } from '../util.js';

const KEYS = ['team', 'project', 'pool', 'model', 'tier'];
const fmtUtc = (ms) => new Date(ms).toISOString().slice(0, 16).replace('T', ' ');
const DAY_MS = 86400000;

export async function render(root) {
  const today = utcDay(Date.now());
  const from = h('input', { type: 'date', id: 'cb-from', value: utcDay(Date.now() - 29 * DAY_MS), required: true });
  const to = h('input', { type: 'date', id: 'cb-to', value: today, required: true });
  const keys = KEYS.map((k) => h('input', { type: 'checkbox', id: `cb-by-${k}`, value: k, checked: k === 'team' || k === 'project' }));
  const error = h('p', { class: 'error', role: 'alert', id: 'cb-error' });
  const out = h('div', { 'aria-live': 'polite' });
  const download = h('button', { type: 'button', id: 'cb-csv' }, 'Download CSV');

  let shown = null; // the request of the table on the screen, which the CSV repeats

  // The request for the period and grouping in the form, its end fixed at now.
  function request() {
    const f = dayMs(from.value);
    const t = dayMs(to.value);
    if (Number.isNaN(f) || Number.isNaN(t)) throw new Error('pick both days');
    if (t < f) throw new Error('the period ends before it starts');
    return new URLSearchParams({
      from: String(f), to: String(Math.min(t + DAY_MS, Date.now())),
      group_by: keys.filter((k) => k.checked).map((k) => k.value).join(','),
    });
  }

  let latest = 0; // only the newest request's reply is drawn
  async function show() {
    const mine = ++latest;
    error.textContent = '';
    let u;
    let q;
    try {
      q = request();
      u = await api('GET', `/usage?${q}`);
    } catch (e) {
      if (mine === latest) error.textContent = e.message;
      return;
    }
    if (mine !== latest) return;
    shown = q;
    out.dataset.fromMs = q.get('from');
    out.dataset.toMs = q.get('to');
    out.dataset.groupBy = q.get('group_by');
    const used = u.rows.filter((r) => r.kind !== 'idle');
    const idle = u.rows.filter((r) => r.kind === 'idle');
    const label = (r) => u.group_by.map((k) => r[k] ?? '—').join(' / ') || 'all';
    // an idle row's team and project are "(idle)": its label is where it sat
    const idleLabel = (r) => u.group_by.filter((k) => k !== 'team' && k !== 'project').map((k) => r[k] ?? '—').join(' / ') || 'all pools';
    const anyCost = u.rows.some((r) => r.cost_usd > 0);
    const cells = (r, jobs) => [h('td', { class: 'num' }, fmtHours(r.gpu_hours)),
      h('td', { class: 'num' }, fmtMoney(r.cost_usd)), h('td', { class: 'num' }, jobs)];
    // without a grouping the rows are use and idle: a first column says which
    const keyCols = u.group_by.length ? u.group_by : ['all'];
    const value = (r, k) => (u.group_by.length ? r[k] ?? '—' : r.kind === 'idle' ? 'idle' : 'use');
    const row = (r) => h('tr', {}, keyCols.map((k) => h('td', {}, value(r, k))), cells(r, r.kind === 'idle' ? '—' : r.jobs));
    const sum = (name, o, jobs) => h('tr', { class: `sum-${name.toLowerCase()}` },
      h('th', { scope: 'row', colspan: keyCols.length }, name), cells(o, jobs));
    const width = keyCols.length + 3;
    const table = h('table', { class: 'usage', 'aria-label': 'Usage by group' },
      h('thead', {}, h('tr', {}, [...keyCols, 'GPU-hours', 'Cost', 'Jobs'].map((c) => h('th', { scope: 'col' }, c)))),
      h('tbody', { class: 'use' }, used.map(row)),
      idle.length ? h('tbody', { class: 'idle' },
        h('tr', {}, h('th', { scope: 'rowgroup', colspan: width, class: 'group' }, 'Idle capacity: counted, held by no job')),
        idle.map(row)) : null,
      h('tfoot', {}, idle.length ? [sum('Use', u.use, u.use.jobs), sum('Idle', u.idle, '—')] : null,
        sum('Total', u.total, u.total.jobs)));
    const bars = (rows, name, cls, lab) => barChart({
      label: `${name}, ${anyCost ? 'cost' : 'GPU-hours'}`, cls,
      rows: rows.map((r) => ({
        label: lab(r), value: anyCost ? r.cost_usd : r.gpu_hours,
        text: anyCost ? `${fmtMoney(r.cost_usd)} · ${fmtHours(r.gpu_hours)} h` : `${fmtHours(r.gpu_hours)} GPU-h`,
      })),
    });
    const measure = anyCost ? 'Cost' : 'GPU-hours (every pool in this period is free)';
    const figure = h('figure', { class: 'card' },
      h('figcaption', {}, `${measure}: use by group`),
      used.length ? bars(used, 'Use by group', 'bar', label) : h('p', { class: 'empty', id: 'cb-no-use' }, 'No job ran in this period.'),
      idle.length ? h('div', { id: 'cb-idle' },
        h('p', { class: 'chart-title' }, `Idle capacity (${fmtMoney(u.idle.cost_usd)} · ${fmtHours(u.idle.gpu_hours)} GPU-h of ${fmtMoney(u.total.cost_usd)} · ${fmtHours(u.total.gpu_hours)} in all)`),
        bars(idle, 'Idle capacity', 'bar idle', idleLabel)) : null);
    out.replaceChildren(
      h('p', { class: 'muted', id: 'cb-period' }, `From ${fmtUtc(u.from_ms)} to ${fmtUtc(u.to_ms)} UTC.`),
      u.rows.length ? h('div', { class: 'two' }, h('div', { class: 'card table-wrap' }, table), figure)
        : h('p', { class: 'empty' }, 'No GPU was used or counted in this period.'));
  }

  download.addEventListener('click', async () => {
    error.textContent = '';
    if (!shown) await show();
    if (!shown) return;
    try {
      const q = new URLSearchParams(shown);
      q.set('format', 'csv');
      const csv = await api('GET', `/usage?${q}`, undefined, { text: true });
      const url = URL.createObjectURL(new Blob([csv], { type: 'text/csv' }));
      const a = h('a', { href: url, download: `gpuorch-usage-${from.value}-to-${to.value}.csv` });
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 1000);
    } catch (e) {
      error.textContent = e.message;
    }
  });

  const form = h('form', { class: 'card filters' },
    h('div', { class: 'field' }, h('label', { for: 'cb-from' }, 'From (UTC day)'), from),
    h('div', { class: 'field' }, h('label', { for: 'cb-to' }, 'To (UTC day, included)'), to),
    h('fieldset', { class: 'field' }, h('legend', {}, 'Group by'),
      keys.map((k) => h('label', { class: 'check', for: k.id }, k, ` ${k.value}`))),
    h('div', { class: 'buttons' }, h('button', { type: 'submit', class: 'primary' }, 'Show'), download));
  form.addEventListener('submit', (ev) => { ev.preventDefault(); show(); });
  // what is on the screen always matches the form, so the CSV is what one sees
  for (const el of [from, to, ...keys]) el.addEventListener('change', () => show());
  root.append(h('div', { class: 'page-head' }, h('h1', { id: 'page-title' }, 'Chargeback')), form, error, out);
  await show();
}
