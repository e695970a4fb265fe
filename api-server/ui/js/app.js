// app.js - the UI's entry: sign-in, the router (client routes on
// location.pathname, the History API; ax-api serves index.html for every
// path outside /api/ and /assets/), the page frame and the caller's role.
//
// A page is an async function (ctx, view) that fills view. ctx has the
// route's params, the URL's query, the caller (me: {name, role}), can
// (true when the role may change things), go(path) and an AbortSignal
// that fires when the user leaves the page (pages stop polls and log
// follows on it). When a page is done rendering, view gets data-ready,
// which the browser tests wait for.

import { api, ApiError, setToken, signOut, token, whenSignedOut } from './api.js';
import { flash, h } from './dom.js';
import { dagsPage } from './dags.js';
import { dagPage } from './dag.js';
import { runPage } from './run.js';
import { instancePage } from './instance.js';
import { eventsPage, workersPage } from './ops.js';

const routes = [
  [/^\/dags$/, dagsPage],
  [/^\/dags\/([^/]+)$/, dagPage],
  [/^\/runs\/(\d+)$/, runPage],
  [/^\/instances\/(\d+)$/, instancePage],
  [/^\/events$/, eventsPage],
  [/^\/workers$/, workersPage],
];

let me = null;
let leave = null; // aborts the current page
const view = document.getElementById('view');

export function go(path, replace) {
  if (replace) history.replaceState(null, '', path);
  else history.pushState(null, '', path);
  render();
}

function frame() {
  document.getElementById('nav').hidden = !me;
  const who = document.getElementById('who');
  who.replaceChildren();
  if (me)
    who.append(h('span', { id: 'role', 'data-role': me.role },
      `${me.name} (${me.role})`),
    h('button', { id: 'signout', onclick: () => { signOut(); } }, 'Sign out'));
  for (const a of document.querySelectorAll('#nav a'))
    a.classList.toggle('active', location.pathname.startsWith(a.getAttribute('href')));
}

function signinPage() {
  const input = h('input', { type: 'password', id: 'token', autocomplete: 'off',
    placeholder: 'API token', 'aria-label': 'API token' });
  const err = h('p', { class: 'muted', id: 'signin-error' });
  const form = h('form', { class: 'card signin', id: 'signin' },
    h('h1', null, 'Sign in to AX'),
    h('p', { class: 'muted' }, 'Paste an API token (',
      h('code', null, 'axctl token create'), '). It stays in this browser tab only.'),
    input, h('button', { class: 'primary', type: 'submit' }, 'Sign in'), err);
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    setToken(input.value.trim());
    try {
      me = await api('/me', { probe: true });
      const next = sessionStorage.getItem('ax.next') || '/dags';
      sessionStorage.removeItem('ax.next');
      go(next, true);
    } catch (x) {
      sessionStorage.removeItem('ax.token');
      err.textContent = x instanceof ApiError && x.status === 401
        ? 'That token is unknown, revoked or expired.' : String(x.message);
    }
  });
  view.replaceChildren(form);
  view.dataset.page = 'signin';
  view.dataset.ready = '1';
  input.focus();
}

async function render() {
  if (leave) leave.abort();
  leave = new AbortController();
  const signal = leave.signal;
  delete view.dataset.ready;
  const path = location.pathname.replace(/\/+$/, '') || '/';
  if (!token()) {
    me = null;
    frame();
    if (path !== '/' && path !== '/signin')
      sessionStorage.setItem('ax.next', path + location.search);
    return signinPage();
  }
  if (!me) {
    try { me = await api('/me'); } catch (x) { return; /* 401: signed out */ }
  }
  if (path === '/' || path === '/signin') return go('/dags', true);
  frame();
  for (const [re, page] of routes) {
    const m = re.exec(path);
    if (!m) continue;
    const ctx = {
      params: m.slice(1).map(decodeURIComponent),
      query: new URLSearchParams(location.search),
      me, can: me.role === 'operator' || me.role === 'admin', go, signal,
    };
    view.dataset.page = page.name.replace(/Page$/, '');
    view.replaceChildren(h('p', { class: 'muted' }, 'Loading…'));
    try {
      await page(ctx, view);
      if (!signal.aborted) view.dataset.ready = '1';
    } catch (x) {
      if (signal.aborted || x.name === 'AbortError') return;
      view.replaceChildren(h('div', { class: 'card', id: 'page-error' },
        h('h1', null, 'Could not load this page'), h('p', null, String(x.message))));
      view.dataset.ready = '1';
    }
    return;
  }
  view.dataset.page = 'notfound';
  view.replaceChildren(h('div', { class: 'card' }, h('h1', null, 'No such page'),
    h('p', null, h('a', { href: '/dags' }, 'Back to the DAGs'))));
  view.dataset.ready = '1';
}

// Same-origin links navigate in place; new tabs and downloads as usual.
document.addEventListener('click', (e) => {
  const a = e.target.closest && e.target.closest('a[href]');
  if (!a || e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey ||
      e.shiftKey || a.target || a.origin !== location.origin ||
      a.pathname.startsWith('/api/')) return;
  e.preventDefault();
  go(a.pathname + a.search);
});
window.addEventListener('popstate', render);
whenSignedOut(() => {
  me = null;
  if (location.pathname !== '/signin')
    sessionStorage.setItem('ax.next', location.pathname + location.search);
  flash('Signed out: sign in again.', true);
  history.replaceState(null, '', '/signin');
  render();
});
render();
