// dags.js - the DAG list: search by name or owner (?q=), paused filter,
// the states of each DAG's recent runs, its next run; server-side paging
// (GET /api/v1/dags?q=&paused=&cursor=&limit=), so 10,000 DAGs cost one
// page of rows.

import { api, qs } from './api.js';
import { h, when } from './dom.js';

const PAGE = 50;

export async function dagsPage(ctx, view) {
  const q = ctx.query.get('q') || '';
  const paused = ctx.query.get('paused') || '';
  const cursor = ctx.query.get('cursor') || '';
  const t0 = performance.now();
  const ans = await api('/dags' + qs({ q, paused, cursor, limit: PAGE }),
    { signal: ctx.signal });

  const search = h('input', { type: 'search', id: 'dag-search', value: q,
    placeholder: 'Search DAGs by name or owner', size: 40 });
  const filter = h('select', { id: 'dag-paused' },
    [['', 'all'], ['false', 'active'], ['true', 'paused']].map(([v, t]) =>
      h('option', { value: v, selected: v === paused }, t)));
  const apply = () => ctx.go('/dags' + qs({ q: search.value.trim(),
    paused: filter.value }));
  let timer = 0;
  search.addEventListener('input', () => {
    clearTimeout(timer);
    timer = setTimeout(apply, 300);
  });
  search.addEventListener('keydown', (e) => {
    if (e.key === 'Enter') { clearTimeout(timer); apply(); }
  });
  filter.addEventListener('change', apply);

  const rows = ans.dags.map((d) => h('tr', { 'data-dag': d.name },
    h('td', null, h('a', { href: `/dags/${encodeURIComponent(d.name)}`,
      class: 'dag-link' }, d.name),
    d.paused ? [' ', h('span', { class: 'badge paused' }, 'paused')] : null),
    h('td', null, d.owner || ''),
    h('td', null, h('code', null, schedText(d.schedule))),
    h('td', null, recent(d.recent_runs || [])),
    h('td', null, when(d.next_fire_at)),
    h('td', null, d.version ?? '')));
  view.replaceChildren(
    h('h1', null, 'DAGs'),
    h('div', { class: 'toolbar' }, search, filter,
      h('span', { class: 'muted', id: 'dag-total' },
        ans.total !== undefined ? `${ans.total} DAGs` : '')),
    h('table', { class: 'list', id: 'dag-table' },
      h('thead', null, h('tr', null, ['DAG', 'Owner', 'Schedule',
        'Recent runs', 'Next run', 'Version'].map((c) => h('th', null, c)))),
      h('tbody', null, rows.length ? rows
        : h('tr', null, h('td', { colspan: 6, class: 'muted' },
          q ? `No DAG matches "${q}".` : 'No DAGs yet.')))),
    h('div', { class: 'pager' },
      cursor ? h('a', { href: '/dags' + qs({ q, paused }) }, 'First page') : null,
      ans.next_cursor ? h('a', { id: 'next-page', href: '/dags' +
        qs({ q, paused, cursor: ans.next_cursor }) }, 'Next page') : null));
  view.dataset.renderMs = String(Math.round(performance.now() - t0));
}

function schedText(s) {
  if (!s) return '';
  if (s.cron) return s.cron + (s.timezone ? ` ${s.timezone}` : '');
  if (s.every) return `every ${typeof s.every === 'object' ? JSON.stringify(s.every) : s.every}`;
  if (s.at) return `at ${s.at}`;
  return '';
}

// Newest run last, as on the grid.
function recent(runs) {
  return h('span', { class: 'dots' }, runs.slice().reverse().map((r) =>
    h('a', { href: `/runs/${r.id}`, class: `s-${r.state}`, 'data-state': r.state,
      title: `${when(r.logical_date)}: ${r.state}` })));
}
