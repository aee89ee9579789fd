// tokens.js: the Tokens page, for admins: every API token (GET /api/v1/tokens) with
// its role, team, node, user, state and times, never a secret; a form that makes one
// (POST /api/v1/tokens) and shows it once; and Revoke on each active token (DELETE
// /api/v1/tokens/{id}, after a second click), which stops it at once.
import { api } from '../api.js';
import { h } from '../util.js';

const ROLES = ['member', 'lead', 'viewer', 'agent', 'admin'];

// "2026-12-02 03:51 UTC": tokens outlive a day, so the date matters
const when = (ms) => (ms === null || ms === undefined ? '—'
  : `${new Date(ms).toISOString().slice(0, 16).replace('T', ' ')} UTC`);

export async function render(root) {
  const teams = (await api('GET', '/teams')).teams.map((t) => t.name);
  const notice = h('p', { class: 'notice', role: 'status', id: 'tokens-notice' });
  const body = h('div', { class: 'table-wrap' });
  let confirming = null; // the token whose revocation waits for a second click

  const field = (key, label, input, help) => {
    input.id = `t-${key}`;
    return h('div', { class: 'field' }, h('label', { for: `t-${key}` }, label), input,
      help ? h('p', { class: 'help' }, help) : null);
  };
  const role = h('select', {}, ROLES.map((r) => h('option', { value: r }, r)));
  const team = h('select', {}, h('option', { value: '' }, '(none)'), teams.map((t) => h('option', { value: t }, t)));
  const user = h('input', { type: 'text', autocomplete: 'off', placeholder: 'alice' });
  const name = h('input', { type: 'text', autocomplete: 'off', placeholder: 'laptop' });
  const node = h('input', { type: 'text', autocomplete: 'off', placeholder: 'h100-0' });
  const days = h('input', { type: 'number', min: 1, max: 36500, step: 1, inputmode: 'numeric', placeholder: 'never' });
  const error = h('p', { class: 'error', role: 'alert', id: 'token-error' });
  const made = h('div', { id: 'token-made' });
  const form = h('form', { class: 'card', 'aria-labelledby': 'token-new' },
    h('h2', { id: 'token-new' }, 'New token'),
    h('div', { class: 'grid' },
      field('role', 'Role', role),
      field('team', 'Team', team, 'a lead or member belongs to one'),
      field('user', 'User', user, 'who it acts for: jobs and the audit log name them'),
      field('name', 'Name', name, 'a label to know it by'),
      field('node', 'Node', node, 'an agent token for this node only'),
      field('days', 'Expires in days', days, 'empty: never')),
    error,
    h('button', { type: 'submit', class: 'primary' }, 'Create token'),
    made);

  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    error.textContent = '';
    made.replaceChildren();
    const req = { role: role.value };
    if (team.value) req.team = team.value;
    for (const [k, el] of [['user', user], ['name', name], ['node', node]]) {
      if (el.value.trim()) req[k] = el.value.trim();
    }
    if (days.value) req.expires_in = Number(days.value) * 86400;
    let t;
    try {
      t = await api('POST', '/tokens', req);
    } catch (e) {
      error.textContent = e.message;
      return;
    }
    made.replaceChildren(h('p', {}, `Token ${t.id} made. Copy it now: it is not shown again.`),
      h('code', { class: 'secret', id: 'token-secret' }, t.token));
    await load();
  });

  root.append(h('div', { class: 'page-head' }, h('h1', { id: 'page-title' }, 'Tokens')),
    notice, h('div', { class: 'card' }, body), form);

  async function revoke(t) {
    confirming = null;
    try {
      await api('DELETE', `/tokens/${t.id}`);
      notice.className = 'notice ok';
      notice.textContent = `Token ${t.id}${t.name ? ` (${t.name})` : ''} revoked.`;
    } catch (e) {
      notice.className = 'notice error';
      notice.textContent = e.message;
    }
    await load();
  }

  function row(t) {
    let action = null;
    if (t.state === 'active') {
      const sure = confirming === t.id;
      action = h('button', {
        type: 'button', class: sure ? 'danger' : '', 'aria-label': sure ? `Confirm revoking token ${t.id}` : `Revoke token ${t.id}`,
        onclick: () => {
          if (sure) revoke(t);
          else { confirming = t.id; draw(last); }
        },
      }, sure ? 'Confirm' : 'Revoke');
    }
    return h('tr', { 'data-token': String(t.id), class: t.state === 'active' ? '' : 'muted' },
      h('td', { class: 'num' }, String(t.id)), h('td', {}, t.name || '—'), h('td', {}, t.role),
      h('td', {}, t.team || '—'), h('td', {}, t.node || '—'), h('td', {}, t.user || '—'),
      h('td', { class: 'token-state' },
        h('span', { class: `state ${t.state === 'active' ? 'state-running' : 'state-lost'}` }, t.state)), h('td', {}, when(t.created_ms)),
      h('td', {}, when(t.expires_ms)), h('td', {}, when(t.last_used_ms)), h('td', {}, action));
  }

  let last = [];
  function draw(tokens) {
    last = tokens;
    const th = (s) => h('th', { scope: 'col' }, s);
    body.replaceChildren(h('table', { class: 'tokens', 'aria-label': 'API tokens' },
      h('thead', {}, h('tr', {}, th('ID'), th('Name'), th('Role'), th('Team'), th('Node'), th('User'),
        th('State'), th('Created'), th('Expires'), th('Last used'), th(''))),
      h('tbody', {}, tokens.map(row))));
  }

  async function load() {
    try {
      draw((await api('GET', '/tokens')).tokens);
    } catch (e) {
      body.replaceChildren(h('p', { class: 'error', role: 'alert' }, e.message));
    }
  }
  await load();
}
