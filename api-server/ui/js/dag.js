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
  return gridTab(ctx, name, runs, body);
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

async function gridTab(ctx, name, runs, body) {
  const wrap = h('div', { class: 'gridwrap', id: 'grid-wrap' });
  const info = h('span', { class: 'muted', id: 'grid-info' });
  const more = h('select', { id: 'grid-runs' }, [10, 25, 50, 100].map((n) =>
    h('option', { value: n, selected: n === runs }, `${n} runs`)));
  more.addEventListener('change', () => ctx.go(`/dags/${encodeURIComponent(name)}` +
    qs({ tab: 'grid', runs: more.value })));
  body.replaceChildren(h('div', { class: 'toolbar' }, more, info), legend(), wrap);
  const load = async () => {
    const t0 = performance.now();
    const g = await api(`/dags/${encodeURIComponent(name)}/grid` + qs({ runs }),
      { signal: ctx.signal });
    const t1 = performance.now();
    wrap.replaceChildren(gridTable(g));
    const t2 = performance.now();
    info.textContent = `${g.runs.length} runs × ${g.tasks.length} tasks`;
    wrap.dataset.fetchMs = String(Math.round(t1 - t0));
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

// Rows are tasks, columns runs (oldest left). One listener on the table
// opens a cell's instance or a header's run.
export function gridTable(g) {
  const nr = g.runs.length;
  const byTask = g.tasks.map(() => new Array(nr));
  for (const c of g.cells) {
    const cur = byTask[c[1]][c[0]];
    // shards: show the least advanced state of the task in that run
    if (!cur || rank(c[3]) < rank(cur[3])) byTask[c[1]][c[0]] = c;
  }
  const head = document.createElement('tr');
  head.append(document.createElement('th'));
  for (const r of g.runs) {
    const td = document.createElement('td');
    const bar = document.createElement('span');
    bar.className = `s-${r.state}`;
    bar.style.height = '24px';
    td.append(bar);
    td.dataset.run = r.id;
    td.dataset.state = r.state;
    td.title = `${r.run_type} ${when(r.logical_date)}: ${r.state}`;
    head.append(td);
  }
  const tbody = document.createElement('tbody');
  g.tasks.forEach((t, ti) => {
    const tr = document.createElement('tr');
    const th = document.createElement('th');
    th.className = 'task';
    th.textContent = t;
    tr.append(th);
    const row = byTask[ti];
    for (let ri = 0; ri < nr; ri++) {
      const td = document.createElement('td');
      const c = row[ri];
      if (c) {
        td.className = `s-${c[3]}`;
        td.dataset.id = c[2];
        td.dataset.state = c[3];
        td.dataset.task = t;
        td.title = `${t} @ ${when(g.runs[ri].logical_date)}: ${c[3]}` +
          (c[4] > 1 ? ` (try ${c[4]})` : '');
      } else td.className = 'none';
      tr.append(td);
    }
    tbody.append(tr);
  });
  const thead = document.createElement('thead');
  thead.append(head);
  const tab = h('table', { class: 'grid', id: 'grid' }, thead, tbody);
  tab.addEventListener('click', (e) => {
    const td = e.target.closest('td');
    if (!td) return;
    const path = td.dataset.id ? `/instances/${td.dataset.id}`
      : td.dataset.run ? `/runs/${td.dataset.run}` : null;
    if (path) { history.pushState(null, '', path); dispatchEvent(new PopStateEvent('popstate')); }
  });
  return tab;
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
