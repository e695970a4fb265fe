// ops.js - the operator's pages: events with filters (DAG, type, run,
// instance, since; paged by the event id cursor) and workers with the
// queue's depth per channel and worker group (GET /api/v1/queue).

import { api, qs } from './api.js';
import { badge, h, table, when } from './dom.js';
import { eventsTable } from './run.js';

// The live water level a worker reported in its last heartbeat (empty
// for a worker that reports none).
function cpuText(x) {
  if (x.tasks_cpu_milli == null) return '';
  return `${(x.tasks_cpu_milli / 1000).toFixed(2)} of ${x.cpus ?? '?'} cores`;
}

function memText(x) {
  if (x.tasks_rss_kb == null) return '';
  const mib = (kb) => `${Math.round(kb / 1024)} MiB`;
  return `${mib(x.tasks_rss_kb)} by tasks, ${mib(x.mem_available_kb ?? 0)} free of ${mib(x.mem_total_kb ?? 0)}`;
}

const FILTERS = [['dag', 'DAG'], ['type', 'type (e.g. instance.state)'],
  ['run', 'run id'], ['instance', 'instance id'], ['since', 'since (RFC 3339)']];

export async function eventsPage(ctx, view) {
  const f = {};
  for (const [k] of FILTERS) f[k] = ctx.query.get(k) || '';
  const cursor = ctx.query.get('cursor') || '';
  const ans = await api('/events' + qs(Object.assign({ limit: 200, cursor }, f)),
    { signal: ctx.signal });
  const inputs = FILTERS.map(([k, ph]) => h('input', { type: 'text', name: k,
    id: `ev-${k}`, value: f[k], placeholder: ph, size: k === 'type' ? 24 : 14 }));
  const form = h('form', { class: 'toolbar', id: 'event-filters' }, inputs,
    h('button', { class: 'primary', type: 'submit' }, 'Filter'));
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    const o = {};
    for (const el of inputs) o[el.name] = el.value.trim();
    ctx.go('/events' + qs(o));
  });
  view.replaceChildren(h('h1', null, 'Events'), form,
    ans.events.length ? eventsTable(ans.events) : h('p', { class: 'muted' }, 'No events match.'),
    h('div', { class: 'pager' }, ans.next_cursor
      ? h('a', { id: 'events-next', href: '/events' + qs(Object.assign({}, f, { cursor: ans.next_cursor })) }, 'Later events')
      : null));
}

export async function workersPage(ctx, view) {
  const [w, q] = await Promise.all([
    api('/workers', { signal: ctx.signal }),
    api('/queue', { signal: ctx.signal }),
  ]);
  view.replaceChildren(
    h('h1', null, 'Workers'),
    table(['Id', 'Group', 'State', 'Slots used', 'Tasks CPU', 'Memory', 'Host', 'PID',
      'Last heartbeat', 'Lease until'],
      w.workers.map((x) => [String(x.id), x.worker_group, badge(x.state),
        `${x.used_slots} / ${x.slots}`, cpuText(x), memText(x),
        x.hostname || x.address || '', x.pid ?? '',
        when(x.last_heartbeat_at), when(x.lease_expires_at)]), { id: 'workers' }),
    h('h2', null, 'Queue depth'),
    q.depth.length
      ? table(['Channel', 'Worker group', 'Pending', 'Ready', 'Running'],
        q.depth.map((d) => [d.channel, d.worker_group, String(d.pending),
          String(d.ready), String(d.running)]), { id: 'queue-depth' })
      : h('p', { class: 'muted', id: 'queue-depth' }, 'Nothing is waiting or running.'));
}
