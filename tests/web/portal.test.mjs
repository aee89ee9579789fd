// portal.test.mjs: the portal (web/) in a real browser against the running system:
// a `gpuorch server` serving web/, with agents of simulated GPUs, on loopback.
// Playwright (playwright-core from npm) drives the system's Chromium, headless. As the
// admin it signs in, submits through the form (first with a bad field, whose error
// must show next to it, and a gang the cluster could never run, whose 422 shows under
// the form), finds the job in the queue with its position and cancels it;
// the research team's lead moves a pending job before its neighbour and changes a
// priority, and the API shows the new order; a member and a viewer get no such
// controls; the chargeback CSV the page downloads equals GET /api/v1/usage?format=csv
// for the same period, and its chart draws idle capacity apart from the teams' bars;
// the Team page shows the GPU memory a class learned from a job that ran out of it; the
// Cluster page shows a node whose agent reports other GPUs than the cluster file
// declares as mismatched, with the difference; the Tokens page (the admin's only)
// makes a token that works, shows it once, and revokes it so that it stops at once. Every page is photographed at 1280x800
// and at a phone's size; any console error fails the test (but for the refusals a step
// expects).
//
// Usage: node tests/web/portal.test.mjs PATH/TO/gpuorch   (from the repository root)
// Screenshots go to $GPUORCH_WEB_OUT, else web-screenshots/ beside the binary; with
// GPUORCH_DOCS_IMG=1 the queue and cluster shots are also written to docs/img/.
// Exit 77 (skipped) when no Chromium is installed.
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, copyFileSync, appendFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';

const SKIP = 77;
const gpuorch = process.argv[2] && resolve(process.argv[2]);
if (!gpuorch || !existsSync(gpuorch)) {
  console.error('usage: node tests/web/portal.test.mjs PATH/TO/gpuorch (from the repository root)');
  process.exit(2);
}

function findChromium() {
  const candidates = [process.env.GPUORCH_CHROMIUM, '/usr/lib/chromium/chromium', '/usr/bin/chromium',
    '/usr/bin/chromium-browser'];
  return candidates.find((p) => p && existsSync(p));
}
const chromiumPath = findChromium();
if (!chromiumPath) {
  console.log('SKIP: no Chromium (install the Debian package chromium: make deps)');
  process.exit(SKIP);
}
let chromium;
try {
  ({ chromium } = await import('playwright-core'));
} catch (e) {
  console.error('FAIL: playwright-core is not installed: run `npm ci` in the repository root (make test does)');
  process.exit(1);
}

const T = mkdtempSync(join(tmpdir(), 'gpuorch-web-'));
const OUT = resolve(process.env.GPUORCH_WEB_OUT || join(dirname(gpuorch), 'web-screenshots'));
mkdirSync(OUT, { recursive: true });
const DOCS_IMG = process.env.GPUORCH_DOCS_IMG === '1' ? resolve('docs/img') : null;
const children = [];
const t0 = Date.now();
let browser = null;
let step = 'setup';

function log(msg) {
  console.log(`[${((Date.now() - t0) / 1000).toFixed(1)}s] ${msg}`);
}

class Failure extends Error {}
function check(cond, msg) {
  if (!cond) throw new Failure(msg);
}

async function freePort() {
  return new Promise((res, rej) => {
    const s = createServer();
    s.on('error', rej);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => res(port));
    });
  });
}

function start(name, args, env = {}) {
  const logFile = join(T, `${name}.log`);
  const p = spawn(gpuorch, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  p.stdout.on('data', (d) => appendFileSync(logFile, d));
  p.stderr.on('data', (d) => appendFileSync(logFile, d));
  p.name = name;
  children.push(p);
  return p;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function until(what, fn, ms = 15000) {
  const end = Date.now() + ms;
  for (;;) {
    let last;
    try {
      const v = await fn();
      if (v) return v;
    } catch (e) {
      last = e;
    }
    if (Date.now() > end) throw new Failure(`${what} did not happen in ${ms / 1000} s${last ? `: ${last.message}` : ''}`);
    await sleep(100);
  }
}

let URL_ = '';
let ADMIN = '';
async function call(method, path, body, tok = ADMIN, raw = false) {
  const r = await fetch(`${URL_}/api/v1${path}`, {
    method,
    headers: { Authorization: `Bearer ${tok}`, ...(body ? { 'Content-Type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await r.text();
  if (!r.ok) throw new Failure(`${method} ${path}: ${r.status} ${text}`);
  return raw ? text : JSON.parse(text);
}

async function cleanup() {
  if (browser) await browser.close().catch(() => {});
  for (const p of children.reverse()) if (p.exitCode === null) p.kill('SIGTERM');
  await sleep(300);
  for (const p of children) if (p.exitCode === null) p.kill('SIGKILL');
  if (process.env.KEEP_LOGS) console.log(`logs kept in ${T}`);
  else rmSync(T, { recursive: true, force: true });
}

// ---- the browser side ----

const consoleErrors = [];
let allowed = null; // while a step expects a refusal: the statuses it may log
function watch(page) {
  page.on('console', (m) => {
    if (m.type() !== 'error') return;
    const text = m.text();
    if (allowed && allowed.some((s) => text.includes(`status of ${s}`))) return;
    consoleErrors.push(`[${step}] ${text}`);
  });
  page.on('pageerror', (e) => consoleErrors.push(`[${step}] page error: ${e.message}`));
}

async function expectingRefusal(statuses, fn) {
  allowed = statuses;
  try {
    return await fn();
  } finally {
    allowed = null;
  }
}

const SIZES = { desktop: { width: 1280, height: 800 }, phone: { width: 390, height: 844 } };
async function shoot(page, name, docsName) {
  for (const [size, vp] of Object.entries(SIZES)) {
    await page.setViewportSize(vp);
    await sleep(150); // the layout settles
    const file = join(OUT, `${name}-${size}.png`);
    await page.screenshot({ path: file, fullPage: size === 'phone' });
    if (DOCS_IMG && docsName && size === 'desktop') {
      mkdirSync(DOCS_IMG, { recursive: true });
      copyFileSync(file, join(DOCS_IMG, docsName));
    }
  }
  await page.setViewportSize(SIZES.desktop);
}

// By keyboard alone: the token field has the focus, Enter signs in.
async function signIn(page, tok) {
  await page.goto(`${URL_}/`);
  await page.locator('#token:focus').waitFor();
  await page.keyboard.type(tok);
  await page.keyboard.press('Enter');
  await page.locator('#nav a').first().waitFor();
}

async function signOut(page) {
  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.locator('#token').waitFor();
}

// The ids of a team's pending jobs in queue order, as the API gives them.
async function pendingOrder(team) {
  const r = await call('GET', `/jobs?state=pending&team=${team}`);
  return r.jobs.map((j) => j.id);
}

async function main() {
  const port = await freePort();
  URL_ = `http://127.0.0.1:${port}`;
  mkdirSync(join(T, 'var'));
  start('server', ['server', '--config', 'examples/cluster-demo.yaml', '--db', `sqlite:${T}/var/gpuorch.db`,
    '--listen', `127.0.0.1:${port}`, '--heartbeat-ms', '200', '--min-runtime-s', '0', '--web', 'web']);
  await until('the server answering', async () => (await fetch(`${URL_}/healthz`)).ok);
  ADMIN = readFileSync(join(T, 'var/admin.token'), 'utf8').trim();

  const agentTok = (await call('POST', '/tokens', { role: 'agent', name: 'web-test' })).token;
  const leadTok = (await call('POST', '/tokens', { role: 'lead', team: 'research', name: 'research-lead' })).token;
  const memberTok = (await call('POST', '/tokens', { role: 'member', team: 'research', name: 'research-member' })).token;
  const viewerTok = (await call('POST', '/tokens', { role: 'viewer', name: 'finance' })).token;
  const agent = (node, gpus, dir = `agent-${node}`) => start(dir, ['agent', '--server', URL_, '--token', agentTok,
    '--node', node, '--gpus', gpus, '--address', '127.0.0.1', '--state-dir', join(T, dir), '--checkpoint-root', join(T, 'ckpt')],
  { GPUORCH_SIM_MIG_DELAY_MS: '0' });
  const agents = {};
  for (const [node, gpus] of [['h100-0', 'sim:H100-80GB-SXM5:8'], ['h100-1', 'sim:H100-80GB-SXM5:8'],
    ['a100-0', 'sim:A100-80GB:8'], ['l4-0', 'sim:L4:4']]) agents[node] = agent(node, gpus);
  await until('four ready nodes', async () =>
    (await call('GET', '/nodes')).nodes.filter((n) => n.state === 'ready').length === 4);

  // Work that holds the cluster: both H100 nodes, MIG slices, an MPS share; then
  // research jobs that must wait for the H100s.
  const sleepy = ['sh', '-c', 'sleep 120'];
  const H100 = ['H100-80GB-SXM5'];
  const submit = (job) => call('POST', '/jobs', { command: sleepy, ...job });
  const pretrain = await submit({ name: 'llm-pretrain-7b', team: 'research', project: 'llm-pretrain', kind: 'training', workers: 2, gpus: 8, gpu_models: H100 });
  await submit({ name: 'ranker-serve', team: 'search', project: 'ranking', kind: 'inference', priority: 'production', mig: '3g.40gb' });
  await submit({ name: 'retrieval-serve', team: 'search', project: 'retrieval', kind: 'inference', mig: '2g.20gb' });
  await submit({ name: 'notebook-ana', team: 'platform', project: 'notebooks', kind: 'interactive', mig: '1g.10gb' });
  await submit({ name: 'ci-smoke', team: 'platform', project: 'ci', kind: 'batch', gpu_fraction: 0.5, gpu_models: ['L4'] });
  await submit({ name: 'vision-eval', team: 'research', project: 'vision', kind: 'batch', gpus: 2, gpu_models: ['L4'] });
  await until('the first jobs running', async () => (await call('GET', `/jobs/${pretrain.id}`)).state === 'running');
  // A research server that runs out of memory in a 1g.10gb slice (9,728 MiB): it runs
  // again in 1g.20gb and its class learns 11,674 MiB, which the Team page shows.
  const oom = await call('POST', '/jobs', {
    name: 'embed-serve-1', team: 'research', project: 'vision', kind: 'inference', gpu_memory: '9GiB',
    gpu_models: ['A100-80GB'],
    command: ['sh', '-c', 'if [ "$GPUORCH_GPU_MEMORY_MIB" -lt 11000 ]; then echo "torch.OutOfMemoryError: CUDA out of memory" >&2; exit 1; fi'],
  });
  await until('the server to run again one size up', async () => (await call('GET', `/jobs/${oom.id}`)).state === 'succeeded');
  const waiting = [];
  for (const n of ['llm-sft-a', 'llm-sft-b', 'llm-sft-c'])
    waiting.push((await submit({ name: n, team: 'research', project: 'llm-pretrain', kind: 'training', gpus: 8, gpu_models: H100 })).id);
  log('the cluster is busy');

  browser = await chromium.launch({ executablePath: chromiumPath, headless: true, args: ['--disable-gpu', '--disable-dev-shm-usage'] });
  const context = await browser.newContext({ viewport: SIZES.desktop, acceptDownloads: true });
  const page = await context.newPage();
  page.setDefaultTimeout(10000);
  watch(page);

  // Sign-in: a wrong token is refused on the page, the admin's is taken.
  step = 'sign-in';
  await page.goto(`${URL_}/`);
  await page.locator('#token').waitFor();
  await shoot(page, '1-signin');
  await page.locator('#token').fill('gpo_not-a-token');
  await expectingRefusal([401], async () => {
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.locator('#signin-error', { hasText: 'not known' }).waitFor();
  });
  await page.locator('#token').fill(ADMIN);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.locator('h1', { hasText: 'Queue' }).waitFor();
  check(await page.evaluate(() => sessionStorage.getItem('gpuorch.token')) === ADMIN, 'the token is not in sessionStorage');
  check(await page.evaluate(() => localStorage.length) === 0, 'something was written to localStorage');
  check(await page.locator('#nav a', { hasText: 'Submit' }).count() === 1, 'the admin has no Submit page');
  log('signed in as admin');

  // Submit: a bad field's error shows next to it; then a good job is accepted.
  step = 'submit';
  await page.locator('#nav a', { hasText: 'Submit' }).click();
  await page.locator('#f-name').fill('portal-sft');
  await page.locator('#f-team').selectOption('research');
  await page.locator('#f-project').selectOption('llm-pretrain');
  await page.locator('#f-workers').fill('0');
  await page.locator('#f-request').fill('8');
  await page.locator('#f-command').fill('sleep 120');
  await page.locator('#f-yaml').fill('gpu_models: [H100-80GB-SXM5]\npreemptible: true');
  await expectingRefusal([400], async () => {
    await page.getByRole('button', { name: 'Submit job' }).click();
    await page.locator('#e-workers', { hasText: 'must be a whole number' }).waitFor();
  });
  check(await page.locator('#submit-error').textContent() === '', 'a field error also went to the general slot');
  await shoot(page, '2-submit-error');
  await page.locator('#f-workers').fill('1');
  await page.locator('#f-yaml').fill('gpu_models: [H100-80GB-SXM5]\npreemptably: true');
  await expectingRefusal([400], async () => {
    await page.getByRole('button', { name: 'Submit job' }).click();
    await page.locator('#e-yaml', { hasText: /line 2: .*preemptably/ }).waitFor();
  });
  check(await page.locator('#e-workers').textContent() === '', 'the old error stayed');
  // a job the cluster could never run: the server's sentence under the form (422)
  await page.locator('#f-yaml').fill('gpu_models: [H100-80GB-SXM5]\npreemptible: true');
  await page.locator('#f-workers').fill('10000');
  await expectingRefusal([422], async () => {
    await page.getByRole('button', { name: 'Submit job' }).click();
    await page.locator('#submit-error', { hasText: 'job portal-sft cannot run on cluster demo: its 10000 workers could never all run at once' }).waitFor();
  });
  await page.locator('#f-workers').fill('1');
  await page.getByRole('button', { name: 'Submit job' }).click();
  const done = await page.locator('#submitted').textContent();
  const m = /Submitted job (\d+) \(portal-sft\): pending, position (\d+)/.exec(done);
  check(m, `no submission notice: '${done}'`);
  const portalId = Number(m[1]);
  const spec = (await call('GET', `/jobs/${portalId}`)).spec;
  check(spec.workers === 1 && spec.team === 'research' && spec.project === 'llm-pretrain' && spec.preemptible === true,
    `the job was not submitted as filled in: ${JSON.stringify(spec)}`);
  await shoot(page, '2-submit');
  log(`submitted job ${portalId} through the form`);

  // Queue: the job with its position and why it waits; cancel it.
  step = 'queue';
  await page.getByRole('link', { name: 'See the queue' }).click();
  const row = page.locator(`tr[data-job="${portalId}"]`);
  await row.waitFor();
  const apiPos = (await call('GET', `/jobs/${portalId}`)).position;
  check(apiPos > 0, 'the API gives the job no position');
  check((await row.locator('td.pos').textContent()) === String(apiPos), `the queue shows position '${await row.locator('td.pos').textContent()}', the API ${apiPos}`);
  check((await row.locator('td.reason').textContent()).length > 0, 'the queue shows no reason for a waiting job');
  check((await page.locator(`tr[data-job="${pretrain.id}"] td.held`).textContent()).includes('h100-'), 'a running job shows no GPUs held');
  await shoot(page, '3-queue', 'portal-queue.png');
  await row.getByRole('button', { name: /^Cancel job/ }).click();
  await row.getByRole('button', { name: 'Yes, cancel' }).click();
  await page.locator('.notice.ok', { hasText: `Job ${portalId} (portal-sft) cancelled` }).waitFor();
  await row.waitFor({ state: 'detached' });
  check((await call('GET', `/jobs/${portalId}`)).state === 'cancelled', 'the job is not cancelled');
  // the queue refreshes by itself: a job submitted elsewhere shows up without a reload
  const late = await submit({ name: 'late-arrival', team: 'search', project: 'ranking', gpus: 8, gpu_models: H100 });
  await page.locator(`tr[data-job="${late.id}"]`).waitFor({ timeout: 8000 });
  await call('DELETE', `/jobs/${late.id}`);
  log('cancelled it from the queue; the queue refreshes by itself');

  // The lead of research reorders the team's pending jobs and changes a priority.
  step = 'lead';
  await signOut(page);
  await signIn(page, leadTok);
  await page.locator('#nav a', { hasText: 'Team' }).click();
  const [a, b, c] = waiting;
  check(JSON.stringify(await pendingOrder('research')) === JSON.stringify([a, b, c]), 'the waiting jobs are not in submission order');
  const up = page.getByRole('button', { name: `Move job ${c} llm-sft-c up` });
  check(await page.getByRole('button', { name: `Move job ${a} llm-sft-a up` }).isDisabled(), 'the first job can move up');
  await up.focus(); // by keyboard; the focus stays on the button through the redraw
  await page.keyboard.press('Enter');
  await page.locator('.notice.ok', { hasText: `Job ${c} (llm-sft-c): moved before job ${b}` }).waitFor();
  check(await page.evaluate(() => document.activeElement && document.activeElement.getAttribute('data-focus')) === `up-${c}`,
    'the focus left the button after the move');
  check(JSON.stringify(await pendingOrder('research')) === JSON.stringify([a, c, b]), `the order is ${await pendingOrder('research')}, not ${[a, c, b]}`);
  await until('the page showing the new order', async () => {
    const ids = await page.locator('table.team-jobs tbody tr.row-pending').evaluateAll((rs) => rs.map((r) => Number(r.dataset.job)));
    return JSON.stringify(ids) === JSON.stringify([a, c, b]);
  }, 5000);
  await page.getByRole('button', { name: `Move job ${a} llm-sft-a down` }).click();
  await page.locator('.notice.ok', { hasText: `Job ${a} (llm-sft-a): moved after job ${c}` }).waitFor();
  check(JSON.stringify(await pendingOrder('research')) === JSON.stringify([c, a, b]), `the order is ${await pendingOrder('research')}, not ${[c, a, b]}`);
  await page.getByLabel(`Priority of job ${b} llm-sft-b`).selectOption('high');
  await page.locator('.notice.ok', { hasText: `Job ${b} (llm-sft-b): priority high` }).waitFor();
  check((await call('GET', `/jobs/${b}`)).priority === 'high', 'the priority did not change');
  check(await page.getByLabel(`Priority of job ${b} llm-sft-b`).locator('option[value="production"]').count() === 0,
    'a lead is offered production');
  const learnedRow = page.locator('table.learned tbody tr', { hasText: 'embed-serve' });
  await learnedRow.waitFor();
  check((await learnedRow.innerText()).replace(/\s+/g, ' ').trim() === 'embed-serve 11.4 GiB 1',
    `the learned row says ${await learnedRow.innerText()}`);
  await shoot(page, '4-team-lead');
  log('the lead reordered the team and raised a priority');

  // A member of research sees the list but no means to change it.
  step = 'member';
  await signOut(page);
  await signIn(page, memberTok);
  await page.locator('#nav a', { hasText: 'Team' }).click();
  await page.locator('#readonly-note').waitFor();
  await page.locator(`table.team-jobs tr[data-job="${a}"]`).waitFor();
  check(await page.locator('table.team-jobs button').count() === 0, 'a member gets reorder buttons');
  check(await page.locator('table.team-jobs select').count() === 0, 'a member gets a priority control');
  const before = await pendingOrder('research');
  const r = await fetch(`${URL_}/api/v1/jobs/${a}`, {
    method: 'PATCH', headers: { Authorization: `Bearer ${memberTok}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ before: c }),
  });
  check(r.status === 403, `a member's reorder was answered ${r.status}, not 403`);
  check(JSON.stringify(await pendingOrder('research')) === JSON.stringify(before), 'a member changed the order');
  await shoot(page, '5-team-member');
  // the Submit form offers a member the classes it may submit at, and the server
  // refuses the others (403) whatever sends them
  await page.locator('#nav a', { hasText: 'Submit' }).click();
  await page.locator('#f-priority').waitFor();
  const offered = await page.locator('#f-priority option').allTextContents();
  check(JSON.stringify(offered) === JSON.stringify(['normal', 'low']), `a member is offered ${offered}`);
  const high = await fetch(`${URL_}/api/v1/jobs`, {
    method: 'POST', headers: { Authorization: `Bearer ${memberTok}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ name: 'member-high', priority: 'high', gpus: 1, command: ['x'] }),
  });
  check(high.status === 403, `a member's high-priority job was answered ${high.status}, not 403`);
  log('a member cannot reorder, nor submit above normal');

  // A viewer: no Submit, no cancel.
  step = 'viewer';
  await signOut(page);
  await signIn(page, viewerTok);
  check(await page.locator('#nav a', { hasText: 'Submit' }).count() === 0, 'a viewer is offered Submit');
  await page.locator(`tr[data-job="${a}"]`).waitFor();
  check(await page.locator('table.jobs button').count() === 0, 'a viewer is offered cancel');
  check(await page.locator('#nav a', { hasText: 'Tokens' }).count() === 0, 'a viewer is offered Tokens');
  log('a viewer only reads');

  // Tokens: the admin makes one in the page, sees it once, revokes it; it stops at once.
  step = 'tokens';
  await signOut(page);
  await signIn(page, ADMIN);
  await page.locator('#nav a', { hasText: 'Tokens' }).click();
  await page.locator('tr[data-token="1"]').waitFor();
  await page.locator('#t-role').selectOption('member');
  await expectingRefusal([400], async () => {
    await page.getByRole('button', { name: 'Create token' }).click();
    await page.locator('#token-error', { hasText: "field 'team' is required for a member" }).waitFor();
  });
  await page.locator('#t-role').selectOption('viewer');
  await page.locator('#t-user').fill('pat');
  await page.locator('#t-name').fill('portal-made');
  await page.locator('#t-days').fill('30');
  await page.getByRole('button', { name: 'Create token' }).click();
  const secret = (await page.locator('#token-secret').textContent()).trim();
  check(secret.startsWith('gpo_'), `the page shows no token: ${secret}`);
  const pat = await call('GET', '/whoami', undefined, secret);
  check(pat.role === 'viewer' && pat.user === 'pat', `the new token is ${JSON.stringify(pat)}`);
  const patRow = page.locator(`tr[data-token="${pat.token_id}"]`);
  await patRow.waitFor();
  check((await patRow.textContent()).includes('portal-made') && (await patRow.textContent()).includes('active'),
    `the new token's row: ${await patRow.textContent()}`);
  const listed = (await call('GET', '/tokens')).tokens.find((t) => t.id === pat.token_id);
  check(listed.expires_ms - listed.created_ms === 30 * 86400 * 1000, `the token expires at ${listed.expires_ms}`);
  await shoot(page, '8-tokens');
  await page.getByRole('button', { name: `Revoke token ${pat.token_id}` }).click();
  await page.getByRole('button', { name: `Confirm revoking token ${pat.token_id}` }).click();
  await page.locator('#tokens-notice', { hasText: `Token ${pat.token_id} (portal-made) revoked` }).waitFor();
  await page.locator(`tr[data-token="${pat.token_id}"] td.token-state`, { hasText: 'revoked' }).waitFor();
  const after = await fetch(`${URL_}/api/v1/whoami`, { headers: { Authorization: `Bearer ${secret}` } });
  check(after.status === 401, `a revoked token was answered ${after.status}`);
  check(await page.getByRole('button', { name: 'Revoke token 1' }).count() === 1, 'the admin token has no Revoke');
  await signOut(page);
  await page.locator('#token').fill(secret);
  await expectingRefusal([401], async () => {
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.locator('#signin-error', { hasText: 'The token was revoked.' }).waitFor();
  });
  await signIn(page, ADMIN);
  log('a token made in the page works, and revoked there it stops at once');

  // The cluster, late enough for a few utilisation samples.
  step = 'cluster';
  await signOut(page);
  await signIn(page, ADMIN);
  await page.locator('#nav a', { hasText: 'Cluster' }).click();
  await page.locator('article[data-node="a100-0"] .slice.held').first().waitFor();
  check(await page.locator('article.node').count() === 4, 'the cluster page does not show 4 nodes');
  check((await page.locator('article[data-node="a100-0"]').textContent()).includes('3g.40gb'), 'the MIG slice is not drawn');
  await until('two utilisation samples', async () => (await call('GET', '/utilization?minutes=60')).t_ms.length >= 2, 15000);
  await page.reload();
  await page.locator('svg.chart polyline').first().waitFor();
  const u = await call('GET', '/utilization?minutes=60');
  const h100 = u.models.find((x) => x.model === 'H100-80GB-SXM5');
  check(h100.gpus === 16 && h100.allocated[h100.allocated.length - 1] === 16, `the H100s are not sampled as allocated: ${JSON.stringify(h100)}`);
  // the simulated GPUs report readings: a measured line beside allocated and busy
  await until('a measured sample', async () => {
    const v = (await call('GET', '/utilization?minutes=60')).models.find((x) => x.model === 'H100-80GB-SXM5').measured;
    return typeof v[v.length - 1] === 'number';
  }, 15000);
  await page.reload();
  const measuredFig = page.locator('figure', { has: page.locator('figcaption', { hasText: 'measured busy' }) }).first();
  await measuredFig.waitFor();
  check(await measuredFig.locator('svg.chart polyline').count() === 3, 'the chart does not draw allocated, busy and measured');
  await shoot(page, '6-cluster', 'portal-cluster.png');
  log('the cluster page draws nodes, slices and utilisation');

  // An agent reporting eight H100s for l4-0, declared as four L4s: the node shows as
  // mismatched with the difference, as the API has it; the right agent, back on its
  // state directory, makes it ready again.
  step = 'mismatch';
  const stopped = (p) => new Promise((r) => (p.exitCode !== null || p.signalCode ? r() : p.once('exit', r)));
  agents['l4-0'].kill('SIGKILL'); // its workers run on: the right agent takes them back
  await stopped(agents['l4-0']);
  const wrong = agent('l4-0', 'sim:H100-80GB-SXM5:8', 'agent-l4-0-wrong');
  const card = page.locator('article[data-node="l4-0"]');
  await card.locator('.state-mismatched').waitFor({ timeout: 20000 });
  const said = (await card.locator('.mismatch').textContent()).replace(/^Takes no work: /, '');
  const l4 = (await call('GET', '/nodes')).nodes.find((n) => n.name === 'l4-0');
  check(l4.state === 'mismatched' && l4.mismatch === said, `the page says '${said}', the API ${JSON.stringify(l4)}`);
  check(said.includes('8 GPUs, not 4') && said.includes('GPUs 0-7 are H100-80GB-SXM5, not L4'), `the difference reads '${said}'`);
  await card.scrollIntoViewIfNeeded();
  await shoot(page, '7-mismatched');
  wrong.kill('SIGKILL');
  await stopped(wrong);
  agents['l4-0'] = agent('l4-0', 'sim:L4:4');
  await card.locator('.state-ready').waitFor({ timeout: 20000 });
  check(await card.locator('.mismatch').count() === 0, 'the mismatch is still shown after the right agent came back');
  log('a mismatched node shows the difference, and is ready again once its agent is right');

  // Chargeback: everything stops first, so the numbers hold still; the page's CSV is
  // the API's for the same days.
  step = 'chargeback';
  for (const j of (await call('GET', '/jobs?state=active')).jobs) await call('DELETE', `/jobs/${j.id}`);
  await until('every job ended', async () => (await call('GET', '/jobs?state=active')).jobs.length === 0, 20000);
  await page.locator('#nav a', { hasText: 'Chargeback' }).click();
  const day = (ms) => new Date(ms).toISOString().slice(0, 10);
  const from = day(Date.now() - 86400000);
  const to = day(Date.now());
  await page.locator('#cb-from').fill(from);
  await page.locator('#cb-to').fill(to);
  await page.getByRole('button', { name: 'Show' }).click();
  await page.locator('table.usage tbody tr').first().waitFor();
  const [download] = await Promise.all([page.waitForEvent('download'), page.locator('#cb-csv').click()]);
  const csv = readFileSync(await download.path(), 'utf8');
  // the period the page shows: the days chosen, ending now (fixed when it was drawn)
  const shown = await page.locator('#cb-period').evaluate((p) => ({ ...p.parentElement.dataset }));
  const fromMs = Number(shown.fromMs);
  const toMs = Number(shown.toMs);
  check(fromMs === Date.parse(`${from}T00:00:00Z`) && toMs <= Date.now() && toMs > Date.now() - 60000 &&
    shown.groupBy === 'team,project', `the page's period is not the one chosen: ${JSON.stringify(shown)}`);
  const apiCsv = await call('GET', `/usage?from=${fromMs}&to=${toMs}&group_by=team,project&format=csv`, undefined, ADMIN, true);
  check(csv === apiCsv, `the downloaded CSV differs from the API's:\n${csv}\n---\n${apiCsv}`);
  check(csv.split('\n')[0] === 'team,project,gpu_hours,cost_usd,jobs,kind' && csv.includes('research,llm-pretrain,'),
    `the CSV lacks the header or research's row:\n${csv}`);
  const usage = await call('GET', `/usage?from=${fromMs}&to=${toMs}&group_by=team,project`);
  const research = usage.rows.find((x) => x.team === 'research' && x.project === 'llm-pretrain');
  const cell = await page.locator('table.usage tbody tr', { hasText: 'llm-pretrain' }).locator('td.num').first().textContent();
  check(Math.abs(Number(cell) - research.gpu_hours) < 0.0005, `the table shows ${cell} GPU-hours, the API ${research.gpu_hours}`);
  // Idle capacity stays apart from the teams: its own rows in the table with use and
  // idle subtotals, and its own chart, so the teams' bars are scaled to the teams (the
  // longest spans the chart) whatever idle comes to.
  const useRows = usage.rows.filter((r) => r.kind === 'use');
  const idleRows = usage.rows.filter((r) => r.kind === 'idle');
  check(useRows.length >= 5 && idleRows.length === 1 && idleRows[0].team === '(idle)',
    `the API's rows are not use and one idle row: ${JSON.stringify(usage.rows)}`);
  const charts = await page.locator('figure svg.chart.bars').evaluateAll((svgs) => svgs.map((svg) => ({
    label: svg.getAttribute('aria-label'),
    bars: [...svg.querySelectorAll('rect')].map((r) => ({ cls: r.getAttribute('class'), w: Number(r.getAttribute('width')) })),
  })));
  check(charts.length === 2, `the chargeback draws ${charts.length} charts, not use and idle apart`);
  const [useChart, idleChart] = charts;
  check(useChart.bars.length === useRows.length && useChart.bars.every((b) => b.cls === 'bar') &&
    !useChart.label.includes('(idle)'), `the use chart is not the teams' rows alone: ${JSON.stringify(useChart)}`);
  check(idleChart.bars.length === 1 && idleChart.bars[0].cls === 'bar idle' && idleChart.label.startsWith('Idle capacity'),
    `the idle chart: ${JSON.stringify(idleChart)}`);
  check(Math.max(...useChart.bars.map((b) => b.w)) === 270 && idleChart.bars[0].w === 270,
    `each chart's longest bar does not span it: ${JSON.stringify(charts)}`);
  check(await page.locator('table.usage tbody.idle tr').count() === 2 &&
    (await page.locator('table.usage tbody.use tr', { hasText: '(idle)' }).count()) === 0,
  'the table does not keep the idle row apart');
  const foot = await page.locator('table.usage tfoot tr').evaluateAll((trs) => trs.map((tr) =>
    [...tr.children].map((c) => c.textContent)));
  check(foot.length === 3 && foot.map((r) => r[0]).join() === 'Use,Idle,Total' &&
    Math.abs(Number(foot[1][1]) - usage.idle.gpu_hours) < 0.006 &&
    Math.abs(Number(foot[0][1]) + Number(foot[1][1]) - Number(foot[2][1])) < 0.02,
  `the table's subtotals: ${JSON.stringify(foot)}`);
  await shoot(page, '7-chargeback');
  log('the chargeback CSV is the API\'s; idle is apart from the teams\' bars');

  check(consoleErrors.length === 0, `console errors:\n${consoleErrors.join('\n')}`);
}

let rc = 0;
try {
  await main();
  console.log(`screenshots in ${OUT}`);
  console.log('1 passed, 0 failed');
} catch (e) {
  rc = 1;
  console.error(`FAIL [${step}]: ${e instanceof Failure ? e.message : e.stack}`);
  for (const name of ['server', 'agent-a100-0']) {
    const f = join(T, `${name}.log`);
    if (existsSync(f)) console.error(`--- ${name}.log (end)\n${readFileSync(f, 'utf8').split('\n').slice(-15).join('\n')}`);
  }
  console.log('0 passed, 1 failed');
} finally {
  await cleanup();
}
process.exit(rc);
