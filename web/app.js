// app.js: the portal's shell: sign-in, the navigation, and a router over hash routes
// (#/queue, #/submit, #/cluster, #/team, #/chargeback, #/tokens). Each page is a module with
// render(root, ctx) that may return a function stopping its timers; the shell calls
// it before showing the next page.
import { api, clearToken, setToken, setUnauthorizedHandler, token } from './api.js';
import { canManageTokens, canSubmit } from './perms.js';
import { h } from './util.js';
import * as queue from './views/queue.js';
import * as submit from './views/submit.js';
import * as cluster from './views/cluster.js';
import * as team from './views/team.js';
import * as chargeback from './views/chargeback.js';
import * as tokens from './views/tokens.js';

const pages = [
  { route: 'queue', title: 'Queue', view: queue, may: () => true },
  { route: 'submit', title: 'Submit', view: submit, may: canSubmit },
  { route: 'cluster', title: 'Cluster', view: cluster, may: () => true },
  { route: 'team', title: 'Team', view: team, may: () => true },
  { route: 'chargeback', title: 'Chargeback', view: chargeback, may: () => true },
  { route: 'tokens', title: 'Tokens', view: tokens, may: canManageTokens },
];

const main = document.getElementById('main');
const nav = document.getElementById('nav');
const who = document.getElementById('who');
let me = null;
let stop = null;
let generation = 0; // a page whose render finishes after the user moved on is dropped

function stopPage() {
  if (stop) stop();
  stop = null;
}

// "the token was revoked" -> "The token was revoked"
function sentence(s) {
  return s ? s[0].toUpperCase() + s.slice(1) : s;
}

function signOut(message) {
  stopPage();
  clearToken();
  me = null;
  showSignIn(message);
}

function showSignIn(message) {
  nav.replaceChildren();
  who.replaceChildren();
  const input = h('input', {
    id: 'token', type: 'password', autocomplete: 'off', spellcheck: 'false', required: true,
    placeholder: 'gpo_…', 'aria-describedby': 'token-help',
  });
  const err = h('p', { class: 'error', role: 'alert', id: 'signin-error' }, message || '');
  const form = h('form', { class: 'card signin', 'aria-labelledby': 'signin-title' },
    h('h1', { id: 'signin-title' }, 'Sign in to gpuorch'),
    h('label', { for: 'token' }, 'API token'),
    input,
    h('p', { id: 'token-help', class: 'muted' },
      'A token from your platform team (gpuorch token create). It is kept in this browser tab only.'),
    err,
    h('button', { type: 'submit', class: 'primary' }, 'Sign in'));
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const t = input.value.trim();
    if (!t) return;
    setToken(t);
    try {
      me = await api('GET', '/whoami');
    } catch (e) {
      clearToken();
      // the server says why: unknown, revoked or expired
      err.textContent = e.status === 401 ? `${sentence(e.message)}.`
        : e.status === 403 ? 'An agent token cannot use the portal.' : e.message;
      input.focus();
      return;
    }
    if (!location.hash || location.hash === '#/' || location.hash === '#/signin') location.hash = '#/queue';
    else route();
  });
  main.replaceChildren(form);
  input.focus();
}

function showShell() {
  const current = currentRoute();
  nav.replaceChildren(...pages.filter((p) => p.may(me)).map((p) =>
    h('a', { href: `#/${p.route}`, 'aria-current': p.route === current ? 'page' : null }, p.title)));
  who.replaceChildren(
    h('span', { class: 'role', title: `token ${me.token_id}` }, me.team ? `${me.role} · ${me.team}` : me.role),
    h('button', { type: 'button', class: 'link', onclick: () => signOut('Signed out.') }, 'Sign out'));
}

function currentRoute() {
  const r = location.hash.replace(/^#\/?/, '').split('?')[0];
  return r || 'queue';
}

async function route() {
  stopPage();
  const gen = ++generation;
  if (!token()) {
    showSignIn();
    return;
  }
  if (!me) {
    try {
      me = await api('GET', '/whoami');
    } catch (e) {
      signOut(e.status === 401 ? 'Your token is no longer valid: sign in again.' : e.message);
      return;
    }
    if (gen !== generation) return;
  }
  let page = pages.find((p) => p.route === currentRoute());
  if (!page || !page.may(me)) page = pages[0];
  showShell();
  document.title = `${page.title} · gpuorch`;
  main.replaceChildren(h('p', { class: 'muted' }, 'Loading…'));
  const section = h('section', { 'aria-labelledby': 'page-title' });
  let stopThis = null;
  try {
    stopThis = (await page.view.render(section, { me })) || null;
  } catch (e) {
    section.replaceChildren(h('p', { class: 'error', role: 'alert' }, e.message));
  }
  if (gen !== generation) {
    if (stopThis) stopThis();
    return;
  }
  stop = stopThis;
  main.replaceChildren(section);
}

// while signing in (me unset) the sign-in form says it itself
setUnauthorizedHandler((msg) => me && signOut(`${sentence(msg || 'the server no longer knows your token')}: sign in again.`));
window.addEventListener('hashchange', route);
route();
