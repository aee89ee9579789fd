// queue.js: the Queue page: every active job (pending, starting, running, stopping) of
// the user's team (all teams for an admin or a viewer, who may pick one), pending
// ones in queue order with their position, why they wait and when they should start,
// the others with the GPUs or slices they hold; cancel where the role may. Refreshes
// by itself.
import { api } from '../api.js';
import { canCancel, ownTeam } from '../perms.js';
import { fmtGpus, fmtPlacement, fmtSpan, h } from '../util.js';
import { poll, redraw } from './refresh.js';

const REFRESH_MS = 3000;

export async function render(root, { me }) {
  const fixedTeam = ownTeam(me);
  let team = fixedTeam || '';
  let confirming = null; // the job whose cancel waits for a second click
  let lastJson = '';
  let jobs = [];
  const status = h('p', { class: 'muted status', 'aria-live': 'polite' });
  const notice = h('p', { class: 'notice', role: 'status' });
  const body = h('div', { class: 'table-wrap' });

  const teams = fixedTeam ? [] : (await api('GET', '/teams')).teams.map((t) => t.name);
  const picker = fixedTeam ? h('span', { class: 'pill' }, `team ${fixedTeam}`)
    : h('label', { class: 'inline' }, 'Team ',
      h('select', {
        id: 'queue-team',
        onchange: (ev) => { team = ev.target.value; load(); },
      }, h('option', { value: '' }, 'all teams'), teams.map((t) => h('option', { value: t }, t))));

  root.append(
    h('div', { class: 'page-head' },
      h('h1', { id: 'page-title' }, 'Queue'),
      picker,
      h('button', { type: 'button', onclick: () => load(), 'aria-label': 'Refresh the queue' }, 'Refresh')),
    notice, body, status);

  async function cancel(job) {
    confirming = null;
    try {
      const j = await api('DELETE', `/jobs/${job.id}`);
      notice.textContent = j.state === 'cancelled' ? `Job ${job.id} (${job.name}) cancelled.`
        : `Job ${job.id} (${job.name}) is stopping.`;
      notice.className = 'notice ok';
    } catch (e) {
      notice.textContent = `Job ${job.id}: ${e.message}`;
      notice.className = 'notice error';
    }
    await load(true);
  }

  function actions(job) {
    if (!canCancel(me, job) || job.state === 'stopping') return h('td');
    if (confirming === job.id)
      return h('td', {}, h('div', { class: 'actions' },
        h('button', { type: 'button', class: 'danger', 'data-focus': `yes-${job.id}`, onclick: () => cancel(job) },
          'Yes, cancel'),
        h('button', { type: 'button', 'data-focus': `no-${job.id}`, onclick: () => { confirming = null; draw(); } }, 'No')));
    return h('td', {}, h('div', { class: 'actions' },
      h('button', {
        type: 'button', 'data-focus': `cancel-${job.id}`, 'aria-label': `Cancel job ${job.id} ${job.name}`,
        onclick: () => { confirming = job.id; draw(); const y = body.querySelector(`[data-focus="yes-${job.id}"]`); if (y) y.focus(); },
      }, 'Cancel')));
  }

  function row(job) {
    const now = Date.now();
    let when = '';
    if (job.state === 'pending') {
      when = job.eta_ms ? (job.eta_ms <= now ? 'now' : `in ${fmtSpan(job.eta_ms - now)}`) : '';
    } else if (job.start_ms) {
      when = `running ${fmtSpan(now - job.start_ms)}`;
    }
    return h('tr', { 'data-job': job.id, class: `row-${job.state}` },
      h('td', { class: 'num', 'data-label': 'ID' }, job.id),
      h('td', { class: 'job' }, h('span', { class: 'name' }, job.name),
        h('span', { class: 'sub' }, [job.team, job.project].filter(Boolean).join(' / '))),
      h('td', { 'data-label': 'Priority' }, h('span', { class: `prio prio-${job.priority}` }, job.priority)),
      h('td', { 'data-label': 'State' }, h('span', { class: `state state-${job.state}` }, job.state)),
      h('td', { class: 'num pos', 'data-label': 'Position' }, job.position || ''),
      h('td', { class: 'reason', 'data-label': 'Waiting because' }, job.reason || ''),
      h('td', { 'data-label': 'Starts / ran' }, when),
      h('td', { class: 'num', 'data-label': 'GPUs' }, job.workers > 1 ? `${job.workers} × ${fmtGpus(job.gpu_equivalents / job.workers)}` : fmtGpus(job.gpu_equivalents)),
      h('td', { class: 'held', 'data-label': 'Held' }, fmtPlacement(job.placement)),
      actions(job));
  }

  function draw() {
    if (!jobs.length) {
      redraw(body, h('p', { class: 'empty' }, team ? `No active jobs of team ${team}.` : 'No active jobs.'));
      return;
    }
    redraw(body, h('table', { class: 'jobs', 'aria-label': 'Active jobs' },
      h('thead', {}, h('tr', {},
        ['ID', 'Job', 'Priority', 'State', 'Position', 'Waiting because', 'Starts / ran', 'GPUs', 'Held', '']
          .map((c) => h('th', { scope: 'col' }, c)))),
      h('tbody', {}, jobs.map(row))));
  }

  async function load(force) {
    const q = new URLSearchParams({ state: 'active' });
    if (team) q.set('team', team);
    try {
      const reply = await api('GET', `/jobs?${q}`);
      const json = JSON.stringify(reply.jobs);
      status.textContent = `Updated ${new Date().toLocaleTimeString()}; refreshes every ${REFRESH_MS / 1000} s.`;
      if (json === lastJson && !force) return;
      lastJson = json;
      jobs = reply.jobs;
      draw();
    } catch (e) {
      status.textContent = `Could not refresh: ${e.message}`;
    }
  }

  await load();
  return poll(load, REFRESH_MS);
}
