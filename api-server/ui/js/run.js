// run.js - one DAG run: its facts, its instances by state, and the
// explanation (GET /runs/{id}/explain: what the run waits for and the
// decision timeline); where the server has no explain route, the run's
// events. The explanation renderer is shared with instance.js.

import { api, ApiError, qs } from './api.js';
import { badge, h, kv, span, table, when } from './dom.js';

export async function runPage(ctx, view) {
  const id = ctx.params[0];
  const [run, inst] = await Promise.all([
    api(`/runs/${id}`, { signal: ctx.signal }),
    api('/instances' + qs({ run: id, limit: 1000 }), { signal: ctx.signal }),
  ]);
  const expl = h('div', { id: 'explain' });
  view.replaceChildren(
    h('h1', null, h('a', { href: `/dags/${encodeURIComponent(run.dag)}` }, run.dag),
      ` run ${run.id} `, badge(run.state),
      run.deadline_missed || (run.task_deadlines_missed || []).length
        ? h('span', { class: 'badge missed', id: 'run-deadline-missed' }, 'DEADLINE MISSED') : null),
    h('div', { class: 'card' }, kv([
      ['Type', run.run_type], ['Logical date', when(run.logical_date)],
      ['Interval', `${when(run.interval_start)} – ${when(run.interval_end)}`],
      ['Started', when(run.started_at)], ['Ended', when(run.ended_at)],
      ['Took', span(run.started_at, run.ended_at)],
      ['Deadline', deadlineText(run)],
      ['Instances', Object.entries(run.instances_by_state || {})
        .map(([st, n]) => `${st} ${n}`).join(', ')],
      ['Params', Object.keys(run.conf || {}).length ? JSON.stringify(run.conf) : ''],
    ])),
    h('h2', null, 'Instances'),
    table(['Task', 'State', 'Reason', 'Try', 'Started', 'Took'],
      inst.instances.slice().sort((a, b) => a.id - b.id).map((i) => [
        h('a', { href: `/instances/${i.id}` }, i.task + (i.shard_total > 1 ? ` [${i.shard}]` : '')),
        badge(i.state), i.reason || '', `${i.try_number}/${i.max_tries}`,
        when(i.started_at), span(i.started_at, i.ended_at)]), { id: 'run-instances' }),
    h('h2', null, 'Why'), expl);
  await explainInto(expl, `/runs/${id}/explain`, { run: id }, ctx.signal, run);
}

// The run's deadline (docs/dag-format.md#deadlines): the instant, the
// rule as written, and what was missed ('' when none is declared).
function deadlineText(run) {
  const tasks = run.task_deadlines_missed || [];
  if (!run.deadline && !tasks.length) return '';
  const parts = [];
  if (run.deadline) parts.push(`${when(run.deadline)} (${run.deadline_rule})` +
    (run.deadline_missed ? ': missed' : ''));
  if (tasks.length) parts.push(`missed by task${tasks.length > 1 ? 's' : ''} ${tasks.join(', ')}`);
  return parts.join('; ');
}

// Fills el with the explanation at path, or (no explain route on this
// server) with what the row's reason says (a rule it names is looked
// up) and the events that filter selects, else those of fallback.
export async function explainInto(el, path, filter, signal, row, fallback) {
  let ans;
  try {
    ans = await api(path, { signal });
  } catch (x) {
    if (!(x instanceof ApiError) || x.status !== 404) throw x;
    let ev = await api('/events' + qs(Object.assign({ limit: 200 }, filter)), { signal });
    if (!ev.events.length && fallback)
      ev = await api('/events' + qs(Object.assign({ limit: 200 }, fallback)), { signal });
    el.replaceChildren(await reasonView(row, signal),
      h('p', { class: 'muted' }, 'Events (this server has no explanation):'),
      eventsTable(ev.events));
    return;
  }
  el.replaceChildren(explainView(ans));
}

// "PENDING: RULE_BLOCKED rule=3" and, when a rule is named, the rule.
async function reasonView(row, signal) {
  if (!row || !row.reason) return h('p', { id: 'explain-summary' }, row ? row.state : '');
  const out = h('div', { class: 'card', id: 'explain-summary' },
    h('strong', null, `${row.state}: ${row.reason}`));
  const m = /rule=(\d+)/.exec(row.reason);
  if (m) {
    const rules = await api('/rules', { signal }).catch(() => null);
    const r = rules && (rules.rules || []).find((x) => String(x.id) === m[1]);
    if (r) out.append(h('p', null, `held by ${r.action} rule ${r.id}`,
      r.note ? ` (“${r.note}”)` : '', ': ', h('code', null, JSON.stringify(r))));
  }
  return out;
}

// An explanation document (docs/explain.md): state and summary, what it
// waits on, the attempts and the timeline with the time between steps;
// any other member still shows (scalars under "facts", lists as tables),
// so a richer document from a newer server is never hidden.
export function explainView(e) {
  const out = h('div', { class: 'card explain', 'data-explain': '1' });
  out.append(h('p', { id: 'explain-summary' }, e.state ? badge(e.state) : null, ' ',
    e.reason ? h('code', null, e.reason) : null, ' ',
    typeof e.summary === 'string' ? h('strong', null, e.summary) : null));
  const known = new Set(['state', 'reason', 'summary', 'waiting_for', 'timeline']);
  const wf = Array.isArray(e.waiting_for) ? e.waiting_for : null;
  if (wf) {
    out.append(h('h2', null, 'Waits on'), wf.length
      ? h('ul', { class: 'waits', id: 'waiting-for' }, wf.map((w) =>
        h('li', null, w.kind ? h('span', { class: 'badge' }, w.kind) : null, ' ',
          w.text || JSON.stringify(w))))
      : h('p', { class: 'muted', id: 'waiting-for' }, 'nothing: it is running or has ended'));
  }
  const facts = [];
  const lists = [];
  for (const [k, v] of Object.entries(e)) {
    if (known.has(k)) continue;
    if (Array.isArray(v)) lists.push([k, v]);
    else if (v && typeof v === 'object') facts.push([k, h('code', null, JSON.stringify(v))]);
    else facts.push([k, String(v ?? '')]);
  }
  for (const [k, v] of lists) out.append(listView(k, v));
  if (Array.isArray(e.timeline)) {
    out.append(h('h2', null, 'Timeline'), table(['Time', '+', 'Type', 'Reason', 'What'],
      e.timeline.map((t) => [when(t.time), gap(t.since_previous_us), t.type || '',
        t.reason || '', t.text || '']), { id: 'timeline' }));
  }
  if (facts.length) out.append(h('details', null, h('summary', null, 'facts'), kv(facts)));
  return out;
}

function listView(k, v) {
  const box = h('div', null, h('h2', null, k.replace(/_/g, ' ')));
  if (!v.length) box.append(h('p', { class: 'muted' }, 'none'));
  else if (v.every((x) => typeof x !== 'object' || x === null))
    box.append(h('ul', { class: 'waits' }, v.map((x) => h('li', null, String(x)))));
  else {
    const cols = [...new Set(v.flatMap((x) => Object.keys(x || {})))];
    box.append(table(cols, v.map((x) => cols.map((c) => cell(x[c]))), { 'data-list': k }));
  }
  return box;
}

// Microseconds between steps as "7us", "48ms", "2.4s".
function gap(us) {
  if (typeof us !== 'number' || !us) return '';
  if (us < 1000) return `${us}us`;
  if (us < 1e6) return `${Math.round(us / 1000)}ms`;
  return `${(us / 1e6).toFixed(1)}s`;
}

function cell(v) {
  if (v === null || v === undefined) return '';
  if (typeof v === 'object') return h('code', null, JSON.stringify(v));
  return String(v);
}

export function eventsTable(events) {
  return table(['#', 'Time', 'Type', 'Reason', 'DAG', 'Run', 'Instance', 'Payload'],
    events.map((e) => [String(e.id), when(e.time), e.type, e.reason || '', e.dag || '',
      e.dag_run_id ? h('a', { href: `/runs/${e.dag_run_id}` }, String(e.dag_run_id)) : '',
      e.instance_id ? h('a', { href: `/instances/${e.instance_id}` }, String(e.instance_id)) : '',
      e.payload && Object.keys(e.payload).length ? h('code', null, JSON.stringify(e.payload)) : '']),
    { class: 'list events' });
}
