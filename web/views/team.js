// team.js: the Team page: a team's guaranteed quota and burst limit, what it holds
// against them, its fair-share standing among the teams, and its active jobs in the
// order the queue takes them. The team's lead (and an admin) change a job's priority
// class and move a pending job before or after its neighbour of the same class
// (PATCH /api/v1/jobs/{id} with priority, before or after); everyone else sees the
// same list without those controls. Below them, the GPU memory the scheduler learned
// for the team's workload classes (GET /api/v1/learned): why a job asks more than it
// was written with.
import { api } from '../api.js';
import { barChart } from '../chart.js';
import { canPrioritize, ownTeam, priorities } from '../perms.js';
import { fmtGpus, h } from '../util.js';
import { poll, redraw } from './refresh.js';

const REFRESH_MS = 5000;

function meter(t) {
  const max = Math.max(t.burst_gpus, t.held_gpus, 1);
  const pct = (v) => `${((100 * v) / max).toFixed(1)}%`;
  return h('div', {
    class: 'meter', role: 'img',
    'aria-label': `${fmtGpus(t.held_gpus)} GPUs held; guarantee ${fmtGpus(t.guaranteed_gpus)}, burst ${fmtGpus(t.burst_gpus)}`,
  },
  h('div', { class: 'fill guaranteed', style: `width: ${pct(t.guaranteed_held_gpus)}` }),
  h('div', { class: 'fill borrowed', style: `left: ${pct(t.guaranteed_held_gpus)}; width: ${pct(t.borrowed_gpus)}` }),
  h('div', { class: 'mark', style: `left: ${pct(t.guaranteed_gpus)}`, title: 'guarantee' }),
  h('div', { class: 'mark burst', style: `left: calc(${pct(t.burst_gpus)} - 2px)`, title: 'burst limit' }));
}

function summary(t) {
  const dl = (k, v) => [h('dt', {}, k), h('dd', {}, v)];
  return h('div', { class: 'card team-summary' },
    h('h2', {}, `Team ${t.name}`),
    meter(t),
    h('p', { class: 'legend muted' }, h('span', { class: 'key alloc' }), 'held within the guarantee ',
      h('span', { class: 'key busy' }), 'borrowed ', h('span', { class: 'key mark-g' }), 'guarantee ',
      h('span', { class: 'key mark-b' }), 'burst limit'),
    h('dl', { class: 'facts' },
      dl('Guaranteed', `${fmtGpus(t.guaranteed_gpus)} GPUs`),
      dl('Burst limit', `${fmtGpus(t.burst_gpus)} GPUs`),
      dl('Held', `${fmtGpus(t.held_gpus)} GPUs`),
      dl('Within guarantee', `${fmtGpus(t.guaranteed_held_gpus)} GPUs`),
      dl('Borrowed', `${fmtGpus(t.borrowed_gpus)} GPUs`),
      dl('Weight', String(t.weight)),
      dl('Fair-share usage', `${(t.fair_share_usage * 100).toFixed(1)}% of all teams' recent use`),
      dl('Jobs', `${t.pending_jobs} pending, ${t.running_jobs} running`),
      dl('Projects', t.projects.join(', ') || '—')));
}

// The team's workload classes (each belongs to one team) and the GPU memory each now
// asks at least.
function learnedCard(classes, teamName) {
  const mine = classes.filter((c) => c.team === teamName);
  return [h('h2', { id: 'team-learned' }, 'GPU memory learned'),
    h('p', { class: 'help' }, 'A job that runs out of GPU memory runs again one size up, and every later job of its class (its class, or its name without a trailing number) asks at least this much.'),
    mine.length
      ? h('table', { class: 'learned', 'aria-labelledby': 'team-learned' },
        h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'Class'), h('th', { scope: 'col', class: 'num' }, 'Asks at least'),
          h('th', { scope: 'col', class: 'num' }, 'Out-of-memory failures'))),
        h('tbody', {}, mine.map((c) => h('tr', {},
          h('td', {}, c.name),
          h('td', { class: 'num' }, `${(c.peak_memory_mib / 1024).toFixed(1)} GiB`),
          h('td', { class: 'num' }, String(c.ooms))))))
      : h('p', { class: 'empty' }, 'Nothing learned yet: no job of this team has run out of GPU memory.')];
}

export async function render(root, { me }) {
  const fixed = ownTeam(me);
  let teamName = fixed || '';
  const head = h('div', { class: 'page-head' }, h('h1', { id: 'page-title' }, 'Team'));
  const top = h('div');
  const standing = h('div', { class: 'card' });
  const learned = h('div', { class: 'card' });
  const jobsBox = h('div', { class: 'table-wrap' });
  const notice = h('p', { class: 'notice', role: 'status' });
  const status = h('p', { class: 'muted status', 'aria-live': 'polite' });
  root.append(head, top, h('div', { class: 'card' }, h('h2', { id: 'team-jobs' }, 'Jobs in priority order'), notice, jobsBox), standing, learned, status);

  let lastJson = '';
  let busy = false;

  async function change(job, body, what) {
    busy = true;
    try {
      await api('PATCH', `/jobs/${job.id}`, body);
      notice.textContent = `Job ${job.id} (${job.name}): ${what}.`;
      notice.className = 'notice ok';
    } catch (e) {
      notice.textContent = `Job ${job.id}: ${e.message}`;
      notice.className = 'notice error';
    } finally {
      busy = false;
    }
    await load(true);
  }

  function jobsTable(jobs, lead) {
    if (!jobs.length) return h('p', { class: 'empty' }, 'No active jobs.');
    const pending = jobs.filter((j) => j.state === 'pending');
    const prioOptions = priorities(me);
    const rows = jobs.map((j) => {
      const i = pending.indexOf(j);
      let prev = null;
      let next = null;
      if (i >= 0) {
        for (let k = i - 1; k >= 0 && !prev; k--) if (pending[k].priority === j.priority) prev = pending[k];
        for (let k = i + 1; k < pending.length && !next; k++) if (pending[k].priority === j.priority) next = pending[k];
      }
      let prio = h('span', { class: `prio prio-${j.priority}` }, j.priority);
      let moves = null;
      if (lead) {
        const options = prioOptions.includes(j.priority) ? prioOptions : [j.priority, ...prioOptions];
        prio = h('select', {
          'aria-label': `Priority of job ${j.id} ${j.name}`, 'data-focus': `prio-${j.id}`,
          disabled: !prioOptions.includes(j.priority),
          onchange: (ev) => change(j, { priority: ev.target.value }, `priority ${ev.target.value}`),
        }, options.map((p) => h('option', { value: p, selected: p === j.priority }, p)));
        moves = h('td', {}, h('div', { class: 'actions' }, i < 0 ? null : [
          h('button', {
            type: 'button', class: 'move', disabled: !prev, 'data-focus': `up-${j.id}`,
            'aria-label': `Move job ${j.id} ${j.name} up`, title: prev ? `before job ${prev.id}` : 'first of its class',
            onclick: () => change(j, { before: prev.id }, `moved before job ${prev.id}`),
          }, '▲'),
          h('button', {
            type: 'button', class: 'move', disabled: !next, 'data-focus': `down-${j.id}`,
            'aria-label': `Move job ${j.id} ${j.name} down`, title: next ? `after job ${next.id}` : 'last of its class',
            onclick: () => change(j, { after: next.id }, `moved after job ${next.id}`),
          }, '▼')]));
      }
      return h('tr', { 'data-job': j.id, class: `row-${j.state}` },
        h('td', { class: 'num pos', 'data-label': 'Position' }, j.position || ''),
        h('td', { class: 'num', 'data-label': 'ID' }, j.id),
        h('td', { class: 'job' }, h('span', { class: 'name' }, j.name), h('span', { class: 'sub' }, j.project || '')),
        h('td', { 'data-label': 'Priority' }, prio),
        h('td', { 'data-label': 'State' }, h('span', { class: `state state-${j.state}` }, j.state)),
        h('td', { class: 'num', 'data-label': 'GPUs' }, fmtGpus(j.gpu_equivalents)),
        h('td', { class: 'reason', 'data-label': 'Waiting because' }, j.reason || ''),
        moves);
    });
    return h('table', { class: 'jobs team-jobs', 'aria-labelledby': 'team-jobs' },
      h('thead', {}, h('tr', {}, ['Position', 'ID', 'Job', 'Priority', 'State', 'GPUs', 'Waiting because', lead ? 'Order' : null]
        .filter((c) => c !== null).map((c) => h('th', { scope: 'col' }, c)))),
      h('tbody', {}, rows));
  }

  async function load(force) {
    if (busy) return;
    try {
      const [t, jobs, mem] = await Promise.all([
        api('GET', '/teams'),
        teamName ? api('GET', `/jobs?${new URLSearchParams({ state: 'active', team: teamName })}`) : { jobs: [] },
        api('GET', '/learned'),
      ]);
      if (!teamName && t.teams.length) {
        teamName = t.teams[0].name;
        return load(true);
      }
      const team = t.teams.find((x) => x.name === teamName);
      if (!head.querySelector('select') && !fixed) {
        head.append(h('label', { class: 'inline' }, 'Team ', h('select', {
          id: 'team-pick', onchange: (ev) => { teamName = ev.target.value; lastJson = ''; load(true); },
        }, t.teams.map((x) => h('option', { value: x.name, selected: x.name === teamName }, x.name)))));
      }
      const lead = canPrioritize(me, teamName);
      const json = JSON.stringify([t, jobs, mem]);
      if (json !== lastJson || force) {
        lastJson = json;
        redraw(top, team ? summary(team) : h('p', { class: 'error' }, `No team ${teamName}.`));
        redraw(jobsBox, jobsTable(jobs.jobs, lead),
          lead ? h('p', { class: 'help' }, 'Pending jobs run in this order within their priority class; ▲ and ▼ move a job past its neighbour of the same class.')
            : h('p', { class: 'help', id: 'readonly-note' }, `Only the lead of team ${teamName} changes priorities and order.`));
        redraw(standing, h('h2', {}, 'Fair-share standing'),
          h('p', { class: 'help' }, 'Each team\'s share of the recent, decayed GPU use of all teams; the queue favours teams below their weight\'s share.'),
          barChart({
            label: 'Fair-share usage by team',
            rows: t.teams.map((x) => ({ label: x.name, value: x.fair_share_usage, text: `${(x.fair_share_usage * 100).toFixed(1)}% (weight ${x.weight})` })),
          }));
        redraw(learned, ...learnedCard(mem.classes, teamName));
      }
      status.textContent = `Updated ${new Date().toLocaleTimeString()}; refreshes every ${REFRESH_MS / 1000} s.`;
    } catch (e) {
      status.textContent = `Could not refresh: ${e.message}`;
    }
  }
  await load(true);
  return poll(load, REFRESH_MS);
}
