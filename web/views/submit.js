// submit.js: the Submit page: a form for the common fields of a job and a YAML box
// for the rest (docs/job-files.md), sent as one YAML document to POST /api/v1/jobs.
// The form writes one line per field it sets, so the server's errors, which name the
// line and the field ("request:3: field 'gpus': ..."), are shown next to the input
// that line came from, or under the YAML box for its lines.
import { api } from '../api.js';
import { ownTeam, priorities } from '../perms.js';
import { h } from '../util.js';

const KINDS = ['training', 'inference', 'batch', 'interactive'];
const REQUESTS = [
  { key: 'gpus', label: 'Whole GPUs', placeholder: '1', help: 'whole GPUs per worker, 0 to 16' },
  { key: 'mig', label: 'MIG profile', placeholder: '1g.10gb', help: 'one MIG instance per worker' },
  { key: 'gpu_memory', label: 'GPU memory', placeholder: '18GiB', help: 'the smallest slice or share that holds it' },
  { key: 'gpu_fraction', label: 'GPU fraction', placeholder: '0.25', help: 'an MPS share of one GPU, above 0 and at most 1' },
];

// A YAML scalar for a string: JSON's double-quoted strings are YAML's too.
const q = (s) => JSON.stringify(s);

export async function render(root, { me }) {
  const fixed = ownTeam(me);
  const teams = (await api('GET', '/teams')).teams;
  const projectsOf = (t) => (teams.find((x) => x.name === t) || { projects: [] }).projects;

  const errors = {}; // field key -> <p> next to its input
  const field = (key, label, input, help) => {
    errors[key] = h('p', { class: 'field-error', id: `e-${key}`, role: 'alert' });
    input.id = `f-${key}`;
    input.setAttribute('aria-describedby', `e-${key}${help ? ` h-${key}` : ''}`);
    return h('div', { class: 'field', 'data-field': key },
      h('label', { for: `f-${key}` }, label), input,
      help ? h('p', { class: 'help', id: `h-${key}` }, help) : null, errors[key]);
  };

  const name = h('input', { type: 'text', required: true, autocomplete: 'off', placeholder: 'bert-finetune' });
  const team = h('select', { disabled: Boolean(fixed) },
    (fixed ? [fixed] : teams.map((t) => t.name)).map((t) => h('option', { value: t }, t)));
  const project = h('select', {});
  const fillProjects = () => project.replaceChildren(h('option', { value: '' }, '(none)'),
    ...projectsOf(team.value).map((p) => h('option', { value: p }, p)));
  team.addEventListener('change', fillProjects);
  fillProjects();
  const kind = h('select', {}, KINDS.map((k) => h('option', { value: k, selected: k === 'training' }, k)));
  const priority = h('select', {}, priorities(me).map((p) => h('option', { value: p, selected: p === 'normal' }, p)));
  const workers = h('input', { type: 'number', min: 1, max: 100000, step: 1, value: 1, inputmode: 'numeric' });
  const reqKind = h('select', {}, REQUESTS.map((r) => h('option', { value: r.key }, r.label)));
  const reqValue = h('input', { type: 'text', value: '1', autocomplete: 'off' });
  const reqHelp = h('p', { class: 'help', id: 'h-request' });
  const syncReq = () => {
    const r = REQUESTS.find((x) => x.key === reqKind.value);
    reqValue.placeholder = r.placeholder;
    reqHelp.textContent = r.help;
  };
  reqKind.addEventListener('change', () => { reqValue.value = ''; syncReq(); });
  syncReq();
  const command = h('input', { type: 'text', autocomplete: 'off', placeholder: 'python3 train.py --epochs 3' });
  const checkpoint = h('input', { type: 'text', autocomplete: 'off', placeholder: '30m' });
  const extra = h('textarea', { rows: 7, spellcheck: 'false', placeholder: 'gpu_models: [H100-80GB-SXM5]\npreemptible: true\nenv: {MODEL: llama-3-8b}' });

  // the GPU request: one error slot shared by the four keys
  errors.request = h('p', { class: 'field-error', id: 'e-request', role: 'alert' });
  reqKind.id = 'f-request-kind';
  reqValue.id = 'f-request';
  reqValue.setAttribute('aria-describedby', 'e-request h-request');
  const requestField = h('div', { class: 'field', 'data-field': 'request' },
    h('label', { for: 'f-request' }, 'GPU request, per worker'),
    h('div', { class: 'pair' }, h('label', { for: 'f-request-kind', class: 'sr-only' }, 'Kind of GPU request'), reqKind, reqValue),
    reqHelp, errors.request);

  const result = h('div', { class: 'result', role: 'status', 'aria-live': 'polite' });
  const general = h('p', { class: 'error', role: 'alert', id: 'submit-error' });
  const submitBtn = h('button', { type: 'submit', class: 'primary' }, 'Submit job');
  const form = h('form', { class: 'card submit', novalidate: true },
    h('div', { class: 'grid' },
      field('name', 'Name', name),
      field('team', 'Team', team),
      field('project', 'Project', project),
      field('kind', 'Kind', kind),
      field('priority', 'Priority', priority),
      field('workers', 'Workers', workers, 'gang size: all start together or none'),
      requestField,
      field('checkpoint', 'Checkpoint every', checkpoint, 'a duration like 30m; empty: no periodic checkpoint'),
      h('div', { class: 'wide' }, field('command', 'Command', command, 'run by /bin/sh -c on each worker'))),
    h('div', { class: 'wide' }, field('yaml', 'More fields (YAML)', extra,
      'any other field of docs/job-files.md: gpu_models, topology, preemptible, capacity, env, duration_estimate, cpus, memory…')),
    general, h('div', { class: 'buttons' }, submitBtn));

  // The document and, per line, the error slot its errors go to.
  function build() {
    const lines = [];
    const owner = [];
    const add = (line, key) => { lines.push(line); owner.push(key); };
    add(`name: ${q(name.value.trim())}`, 'name');
    add(`team: ${q(team.value)}`, 'team');
    if (project.value) add(`project: ${q(project.value)}`, 'project');
    add(`kind: ${q(kind.value)}`, 'kind');
    add(`priority: ${q(priority.value)}`, 'priority');
    if (workers.value.trim() !== '') add(`workers: ${q(workers.value.trim())}`, 'workers');
    if (reqValue.value.trim() !== '') add(`${reqKind.value}: ${q(reqValue.value.trim())}`, 'request');
    if (checkpoint.value.trim() !== '') add(`checkpoint: {interval: ${q(checkpoint.value.trim())}}`, 'checkpoint');
    if (command.value.trim() !== '') add(`command: ${q(command.value.trim())}`, 'command');
    const firstExtra = lines.length + 1;
    const more = extra.value.replace(/\s+$/, '');
    if (more) for (const l of more.split('\n')) add(l, 'yaml');
    return { text: lines.join('\n') + '\n', owner, firstExtra };
  }

  const FIELD_SLOTS = { gpus: 'request', mig: 'request', gpu_memory: 'request', gpu_fraction: 'request', interval: 'checkpoint', id: 'name' };

  function showErrors(message, doc) {
    const rest = [];
    for (const line of message.split('\n')) {
      const m = /^request:(\d+): (?:field '([^']+)': )?(.*)$/.exec(line);
      let slot = null;
      let text = line;
      if (m) {
        const n = Number(m[1]);
        slot = doc.owner[n - 1] || null;
        if (!slot && m[2]) slot = FIELD_SLOTS[m[2]] || (errors[m[2]] ? m[2] : null);
        if (slot === 'yaml') text = `line ${n - doc.firstExtra + 1}: ${m[2] ? `field '${m[2]}': ` : ''}${m[3]}`;
        else if (slot) text = m[3];
      }
      if (slot && errors[slot]) {
        errors[slot].textContent += (errors[slot].textContent ? '\n' : '') + text;
        errors[slot].closest('.field').classList.add('invalid');
      } else {
        rest.push(line);
      }
    }
    general.textContent = rest.join('\n');
    const first = form.querySelector('.invalid input, .invalid select, .invalid textarea');
    if (first) first.focus();
  }

  function clearErrors() {
    for (const e of Object.values(errors)) {
      e.textContent = '';
      e.closest('.field').classList.remove('invalid');
    }
    general.textContent = '';
  }

  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    clearErrors();
    result.replaceChildren();
    if (!name.value.trim()) {
      errors.name.textContent = 'a job needs a name';
      errors.name.closest('.field').classList.add('invalid');
      name.focus();
      return;
    }
    const doc = build();
    submitBtn.disabled = true;
    try {
      const j = await api('POST', '/jobs', doc.text, { yaml: true });
      result.replaceChildren(h('p', { class: 'notice ok', id: 'submitted' },
        `Submitted job ${j.id} (${j.name}): ${j.state}`, j.position ? `, position ${j.position} in the queue. ` : '. ',
        h('a', { href: '#/queue' }, 'See the queue')));
    } catch (e) {
      showErrors(e.message, doc);
    } finally {
      submitBtn.disabled = false;
    }
  });

  root.append(h('div', { class: 'page-head' }, h('h1', { id: 'page-title' }, 'Submit a job')), form, result);
  name.focus();
}
