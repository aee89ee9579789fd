// cluster.js: the Cluster page: utilisation over the last hour per GPU model (GET
// /utilization, sampled by the server every 10 s: allocated, busy, and what the GPUs
// measured where their agents report it), totals by model and by team, and
// per node its GPUs: a whole GPU as one box, a MIG GPU as its slices drawn at their
// places among the GPU's eight memory slices, an MPS-shared GPU as its shares, each
// labelled with the job that holds it; a node whose agent reports other GPUs than the
// cluster file declares says how they differ. Refreshes by itself.
import { api } from '../api.js';
import { barChart, lineChart } from '../chart.js';
import { fmtGpus, h, jobColour } from '../util.js';
import { poll, redraw } from './refresh.js';

const REFRESH_MS = 5000;
const MIG_SLOTS = 8;

// Memory slices a profile spans ("3g.40gb" -> 4 of 8): its compute slices rounded up to
// the placements NVIDIA allows (1, 2, 4 or 8).
function migSpan(profile) {
  const g = parseInt(profile, 10) || 1;
  return g >= 7 ? 8 : g >= 3 ? 4 : g;
}

function jobLabel(id) {
  return h('a', { href: '#/queue', class: 'job', title: `job ${id}` }, `#${id}`);
}

function gpuView(gpu) {
  const head = h('div', { class: 'gpu-head' }, h('span', { class: 'idx' }, `GPU ${gpu.index}`),
    h('span', { class: 'mode' }, gpu.mode + (gpu.draining ? ' · draining' : '')));
  let bar;
  if (gpu.mode === 'mig') {
    bar = h('div', { class: 'slices', role: 'list', 'aria-label': `GPU ${gpu.index} MIG slices` },
      gpu.mig.map((m) => h('div', {
        class: `slice${m.job ? ' held' : ''}`, role: 'listitem',
        style: `grid-column: ${m.start + 1} / span ${migSpan(m.profile)};${m.job ? ` background: ${jobColour(m.job)}` : ''}`,
        title: `${m.profile} at ${m.start}${m.job ? `: job ${m.job} rank ${m.rank}` : ': free'}`,
      }, h('span', { class: 'prof' }, m.profile), m.job ? jobLabel(m.job) : h('span', { class: 'free' }, 'free'))));
    if (!gpu.mig.length) bar = h('div', { class: 'slices' }, h('div', { class: 'slice', style: 'grid-column: 1 / span 8' }, 'no instances yet'));
  } else if (gpu.jobs.length) {
    bar = h('div', { class: 'shares' }, gpu.jobs.map((j) => h('div', {
      class: 'share held', style: `flex: ${j.fraction}; background: ${jobColour(j.job)}`,
      title: `job ${j.job} rank ${j.rank}${j.fraction < 1 ? ` (${j.fraction})` : ''}`,
    }, jobLabel(j.job), j.fraction < 1 ? ` ${j.fraction}` : '')),
    gpu.used < 1 ? h('div', { class: 'share', style: `flex: ${1 - gpu.used}` }, 'free') : null);
  } else {
    bar = h('div', { class: 'shares' }, h('div', { class: 'share', style: 'flex: 1' }, 'free'));
  }
  return h('div', { class: 'gpu' }, head, bar);
}

function nodeView(n) {
  const used = n.gpus.reduce((a, g) => a + g.used, 0);
  return h('article', { class: `node card node-${n.state}`, 'data-node': n.name, 'aria-label': `node ${n.name}` },
    h('header', {},
      h('h3', {}, n.name),
      h('span', { class: `state state-${n.state}` }, n.state),
      h('span', { class: 'muted' }, `${n.model} × ${n.gpus.length} · ${n.pool} (${n.tier}) · ${fmtGpus(used)} in use`),
      h('span', { class: 'muted' }, `cpu ${Math.round(n.cpu_used_milli / 1000)}/${Math.round(n.cpu_milli / 1000)} · mem ${Math.round(n.memory_used_mib / 1024)}/${Math.round(n.memory_mib / 1024)} GiB`)),
    // its agent reports other GPUs than the cluster file declares: it takes no work
    n.mismatch ? h('p', { class: 'mismatch', role: 'alert' }, h('strong', {}, 'Takes no work: '), n.mismatch) : null,
    h('div', { class: 'gpus' }, n.gpus.map(gpuView)));
}

// "now 12 allocated, 11 busy, 7.4 measured busy (16 GPUs reporting)": the measured part
// only when the last sample has it (null: no agent reported, unknown rather than idle).
function utilCaption(m) {
  const at = m.allocated.length - 1;
  const measured = m.measured ? m.measured[at] : null;
  return ` · ${m.gpus} GPUs · now ${fmtGpus(m.allocated[at])} allocated, ${fmtGpus(m.busy[at])} busy` +
    (measured === null || measured === undefined ? '' : `, ${fmtGpus(measured)} measured busy (${m.measured_gpus[at]} GPUs reporting)`);
}

function utilView(u) {
  if (!u.t_ms.length) return h('p', { class: 'muted' }, 'No samples yet: the server samples every 10 s.');
  return h('div', { class: 'charts' }, u.models.map((m) => h('figure', { class: 'card' },
    h('figcaption', {}, h('strong', {}, m.model), utilCaption(m)),
    lineChart({
      t: u.t_ms, yMax: m.gpus, label: `${m.model} GPUs over the last hour`,
      series: [
        { label: 'allocated', values: m.allocated, colour: '#3b6ea8', fill: true },
        { label: 'busy', values: m.busy, colour: '#d9822b', dash: true },
        { label: 'measured', values: m.measured || [], colour: '#2f8f4e' },
      ],
    }))),
  h('p', { class: 'legend muted' }, h('span', { class: 'key alloc' }), 'allocated ', h('span', { class: 'key busy' }), 'busy (running on ready nodes) ',
    h('span', { class: 'key measured' }), 'measured busy (what the GPUs report)'));
}

function totalsView(nodes, teams) {
  const models = new Map();
  for (const n of nodes) {
    const m = models.get(n.model) || { gpus: 0, used: 0, ready: 0, free: 0 };
    const used = n.gpus.reduce((a, g) => a + g.used, 0);
    m.gpus += n.gpus.length;
    m.used += used;
    // only a ready node takes work: what a lost or mismatched one holds frees nothing
    if (n.state === 'ready') {
      m.ready += n.gpus.length;
      m.free += n.gpus.length - used;
    }
    models.set(n.model, m);
  }
  const byModel = h('table', { class: 'totals', 'aria-label': 'GPUs by model' },
    h('thead', {}, h('tr', {}, ['Model', 'GPUs', 'Ready', 'In use', 'Free'].map((c) => h('th', { scope: 'col' }, c)))),
    h('tbody', {}, [...models].map(([name, m]) => h('tr', {},
      h('td', {}, name), h('td', { class: 'num' }, m.gpus), h('td', { class: 'num' }, m.ready),
      h('td', { class: 'num' }, fmtGpus(m.used)), h('td', { class: 'num' }, fmtGpus(m.free))))));
  const byTeam = barChart({
    label: 'GPUs held by team',
    rows: teams.map((t) => ({ label: t.name, value: t.held_gpus, text: `${fmtGpus(t.held_gpus)} of ${fmtGpus(t.guaranteed_gpus)} guaranteed` })),
  });
  return h('div', { class: 'two' },
    h('div', { class: 'card' }, h('h2', {}, 'By GPU model'), h('div', { class: 'table-wrap' }, byModel)),
    h('div', { class: 'card' }, h('h2', {}, 'By team'), byTeam));
}

export async function render(root) {
  const util = h('div');
  const totals = h('div');
  const nodesBox = h('div', { class: 'nodes' });
  const status = h('p', { class: 'muted status', 'aria-live': 'polite' });
  root.append(h('div', { class: 'page-head' }, h('h1', { id: 'page-title' }, 'Cluster')),
    h('h2', {}, 'Utilisation, last hour'), util, h('h2', {}, 'Totals'), totals,
    h('h2', {}, 'Nodes'), nodesBox, status);

  async function load() {
    try {
      const [u, n, t] = await Promise.all([api('GET', '/utilization?minutes=60'), api('GET', '/nodes'), api('GET', '/teams')]);
      redraw(util, utilView(u));
      redraw(totals, totalsView(n.nodes, t.teams));
      redraw(nodesBox, ...n.nodes.map(nodeView));
      status.textContent = `Updated ${new Date().toLocaleTimeString()}; refreshes every ${REFRESH_MS / 1000} s.`;
    } catch (e) {
      status.textContent = `Could not refresh: ${e.message}`;
    }
  }
  await load();
  return poll(load, REFRESH_MS);
}
