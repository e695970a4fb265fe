// dag.js - one DAG: its actions (trigger, backfill, pause; shown to roles
// that may use them), the grid (runs by tasks, coloured by state, newest
// run on the right, like Airflow's grid; GET /dags/{name}/grid in one
// answer, redrawn every 2 s while a run is active), the graph
// (graph.js) and the definition.

import { api, qs } from './api.js';
import { badge, flash, h, kv, STATES, when } from './dom.js';
import { drawGraph } from './graph.js';

const POLL_MS = 2000; // while a run is queued or running
const IDLE_MS = 10000; // else (a trigger from elsewhere shows up)

export async function dagPage(ctx, view) {
  const name = ctx.params[0];
  const tab = ctx.query.get('tab') || 'grid';
  const runs = Math.min(Math.max(parseInt(ctx.query.get('runs') || '25', 10) || 25, 1), 100);
  const t0 = performance.now();
  // the grid's first answer is asked for with the DAG's, not after it
  const first = tab === 'grid' ? gridFetch(ctx, name, runs) : null;
  if (first) first.catch(() => {}); // awaited (and thrown) by gridTab
  const dag = await api(`/dags/${encodeURIComponent(name)}`, { signal: ctx.signal });
  const base = `/dags/${encodeURIComponent(name)}`;
  const body = h('div', { id: 'dag-body' });
  view.replaceChildren(
    h('h1', null, name, ' ', dag.paused
      ? h('span', { class: 'badge paused', id: 'paused-badge' }, 'paused') : null),
    kv([['Owner', dag.definition?.owner], ['Version', dag.version],
      ['Next run', when(dag.next_fire_at)], ['Last fired', when(dag.last_fire_at)]]),
    ctx.can ? actions(ctx, name, dag) : null,
    h('div', { class: 'tabs' }, [['grid', 'Grid'], ['graph', 'Graph'],
      ['definition', 'Definition']].map(([t, label]) =>
      h('a', { href: base + qs({ tab: t }), class: t === tab ? 'active' : null,
        id: `tab-${t}` }, label))),
    body);
  if (tab === 'graph') return graphTab(ctx, name, body);
  if (tab === 'definition')
    return body.replaceChildren(h('pre', { class: 'card', id: 'dag-yaml' },
      dag.yaml || JSON.stringify(dag.definition, null, 2)));
  return gridTab(ctx, name, runs, body, first, t0);
}

function gridFetch(ctx, name, runs) {
  return api(`/dags/${encodeURIComponent(name)}/grid` + qs({ runs }), { signal: ctx.signal });
}

function actions(ctx, name, dag) {
  const path = `/dags/${encodeURIComponent(name)}`;
  const act = async (what, sub, bodyObj) => {
    try {
      const a = await api(path + sub, { method: 'POST', body: bodyObj });
      flash(`${what}: command ${a.command_id ?? a.id ?? ''} ${a.status ?? 'accepted'}`);
      return a;
    } catch (x) { flash(`${what} refused: ${x.message}`, true); }
  };
  const start = h('input', { type: 'text', id: 'backfill-start', placeholder: 'start (2026-01-01T00:00:00Z)', size: 24 });
  const end = h('input', { type: 'text', id: 'backfill-end', placeholder: 'end', size: 24 });
  const bf = h('span', { hidden: true, id: 'backfill-form' }, start, ' ', end, ' ',
    h('button', { class: 'primary', id: 'backfill-go', onclick: () =>
      act('Backfill', '/backfill', { start: start.value.trim(), end: end.value.trim() }) }, 'Create runs'));
  return h('div', { class: 'toolbar', id: 'dag-actions' },
    h('button', { class: 'primary', id: 'btn-trigger', onclick: async () => {
      if (await act('Trigger', '/trigger', {})) ctx.go(location.pathname + location.search, true);
    } }, 'Trigger'),
    h('button', { id: 'btn-backfill', onclick: () => { bf.hidden = !bf.hidden; } }, 'Backfill…'),
    bf,
    dag.paused
      ? h('button', { id: 'btn-unpause', onclick: async () => {
        if (await act('Unpause', '/unpause')) setTimeout(() => ctx.go(location.pathname + location.search, true), 800);
      } }, 'Unpause')
      : h('button', { id: 'btn-pause', onclick: async () => {
        if (await act('Pause', '/pause')) setTimeout(() => ctx.go(location.pathname + location.search, true), 800);
      } }, 'Pause'));
}

async function gridTab(ctx, name, runs, body, first, t0) {
  const wrap = h('div', { class: 'gridwrap', id: 'grid-wrap' });
  const info = h('span', { class: 'muted', id: 'grid-info' });
  const more = h('select', { id: 'grid-runs' }, [10, 25, 50, 100].map((n) =>
    h('option', { value: n, selected: n === runs }, `${n} runs`)));
  more.addEventListener('change', () => ctx.go(`/dags/${encodeURIComponent(name)}` +
    qs({ tab: 'grid', runs: more.value })));
  body.replaceChildren(h('div', { class: 'toolbar' }, more, info), legend(), wrap);
  const load = async () => {
    if (!first) t0 = performance.now();
    const g = await (first || gridFetch(ctx, name, runs));
    first = null;
    const t1 = performance.now();
    wrap.replaceChildren(gridTable(g));
    const t2 = performance.now();
    await new Promise((res) => requestAnimationFrame(() => setTimeout(res, 0)));
    wrap.dataset.paintMs = String(Math.round(performance.now() - t2));
    info.textContent = `${g.runs.length} runs × ${g.tasks.length} tasks`;
    wrap.dataset.fetchMs = String(Math.round(t1 - t0)); // page start to answer
    wrap.dataset.renderMs = String(Math.round(t2 - t1));
    wrap.dataset.cells = String(g.cells.length);
    return g.runs.some((r) => r.state === 'QUEUED' || r.state === 'RUNNING');
  };
  poll(ctx, load, await load());
}

// Reloads until the page is left (load answers whether a run is active);
// an error stops quietly (a 401 has already gone to sign-in).
function poll(ctx, load, active) {
  const tick = async () => {
    if (ctx.signal.aborted) return;
    try { active = await load(); } catch (x) { return; }
    if (!ctx.signal.aborted) setTimeout(tick, active ? POLL_MS : IDLE_MS);
  };
  setTimeout(tick, active ? POLL_MS : IDLE_MS);
}

function legend() {
  return h('div', { class: 'legend' }, STATES.map((st) =>
    h('span', null, h('i', { class: `s-${st}` }), st)));
}

// Rows are tasks, columns runs (oldest left). Built as one HTML string
// (task names escaped, states and ids checked) and parsed once: 20,000
// cells cost one parse instead of 20,000 element calls. Rows are blocks
// with content-visibility: auto, so the browser lays out and paints only
// the rows in view (a table would lay out all 200 x 100 cells). One
// listener opens a cell's instance or a header's run; a cell's title is
// made when the pointer first reaches it.
export function gridTable(g) {
  const nr = g.runs.length;
  const cell = new Array(g.tasks.length * nr);
  for (const c of g.cells) {
    const k = c[1] * nr + c[0];
    // shards: show the least advanced state of the task in that run
    if (!cell[k] || rank(c[3]) < rank(cell[k][3])) cell[k] = c;
  }
  const parts = ['<div class="grow head"><span class="task"></span>'];
  for (const r of g.runs)
    parts.push(`<i class="s-${st(r.state)}${r.deadline_missed ? ' missed' : ''}" data-run="${+r.id}" data-state="${st(r.state)}"${r.deadline_missed ? ' data-deadline="missed"' : ''}></i>`);
  parts.push('</div>');
  let width = 4;
  g.tasks.forEach((t, ti) => {
    const name = esc(t);
    width = Math.max(width, String(t).length);
    parts.push(`<div class="grow" data-ti="${ti}" data-task="${name}"><span class="task">${name}</span>`);
    for (let ri = 0, k = ti * nr; ri < nr; ri++, k++) {
      const c = cell[k];
      parts.push(c ? `<i class="s-${st(c[3])}" data-id="${+c[2]}" data-state="${st(c[3])}"></i>`
        : '<i class="none"></i>');
    }
    parts.push('</div>');
  });
  const grid = h('div', { class: 'grid', id: 'grid' });
  grid.style.setProperty('--taskw', `${Math.min(width, 40) + 1}ch`);
  grid.innerHTML = parts.join('');
  const pos = (i) => Array.prototype.indexOf.call(i.parentElement.children, i) - 1;
  grid.addEventListener('mouseover', (e) => {
    const i = e.target.closest('i');
    if (!i || i.title) return;
    const run = g.runs[pos(i)];
    if (!run) return;
    if (i.dataset.run) i.title = `${run.run_type} ${when(run.logical_date)}: ${run.state}` +
      (run.deadline_missed ? ' (deadline missed)' : '');
    else if (i.dataset.id) {
      const ti = +i.parentElement.dataset.ti, c = cell[ti * nr + pos(i)];
      i.title = `${g.tasks[ti]} @ ${when(run.logical_date)}: ${c[3]}` +
        (c[4] > 1 ? ` (try ${c[4]})` : '');
    }
  });
  grid.addEventListener('click', (e) => {
    const i = e.target.closest('i');
    if (!i) return;
    const path = i.dataset.id ? `/instances/${i.dataset.id}`
      : i.dataset.run ? `/runs/${i.dataset.run}` : null;
    if (path) { history.pushState(null, '', path); dispatchEvent(new PopStateEvent('popstate')); }
  });
  return grid;
}

// A state as the server sends it (upper-case letters), else UNKNOWN.
function st(s) { return /^[A-Z_]+$/.test(s) ? s : 'UNKNOWN'; }

function esc(t) {
  return String(t).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

const ORDER = ['FAILED', 'TIMEOUT', 'UNKNOWN', 'RUNNING', 'READY', 'PENDING',
  'CANCELED', 'SKIPPED', 'SUCCESS'];
function rank(st) { const i = ORDER.indexOf(st); return i < 0 ? 0 : i; }

async function graphTab(ctx, name, body) {
  const [gr, grid] = await Promise.all([
    api(`/dags/${encodeURIComponent(name)}/graph`, { signal: ctx.signal }),
    api(`/dags/${encodeURIComponent(name)}/grid` + qs({ runs: 1 }), { signal: ctx.signal }),
  ]);
  const states = {};
  for (const c of grid.cells) states[grid.tasks[c[1]]] = c[3];
  const run = grid.runs[grid.runs.length - 1];
  body.replaceChildren(
    h('p', { class: 'muted' }, run
      ? ['Colours: the latest run, ', h('a', { href: `/runs/${run.id}` }, when(run.logical_date)), ' ', badge(run.state)]
      : 'No run yet.'),
    drawGraph(gr, states));
}
