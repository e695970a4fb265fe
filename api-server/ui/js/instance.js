// instance.js - one task instance: facts, the actions a role may use
// (clear with or without downstream, mark success/failed, kill), its
// explanation (what it waits for and the timeline: run.js), its attempts
// and the log of one attempt: its tail, then followed as it grows (a
// streamed GET .../logs?follow=true from the end of the tail, stopped
// when the user leaves the page or presses Stop).

import { api, ApiError, qs } from './api.js';
import { badge, flash, h, kv, span, table, when } from './dom.js';
import { explainInto } from './run.js';

const TAIL = 200; // lines

export async function instancePage(ctx, view) {
  const id = ctx.params[0];
  const i = await api(`/instances/${id}`, { signal: ctx.signal });
  const attempts = i.attempts || [];
  const expl = h('div', { id: 'explain' });
  const logBox = h('pre', { class: 'log', id: 'log' });
  const logInfo = h('span', { class: 'muted', id: 'log-info' });
  const pick = h('select', { id: 'log-attempt' }, attempts.slice().reverse().map((a) =>
    h('option', { value: a.number }, `attempt ${a.number} (${a.state})`)));
  const follow = h('button', { id: 'log-follow' }, 'Follow');
  let stream = null;
  const stop = () => { if (stream) { stream.abort(); stream = null; follow.textContent = 'Follow'; } };
  ctx.signal.addEventListener('abort', stop);
  const tail = async () => {
    stop();
    if (!attempts.length) { logInfo.textContent = 'no attempt yet'; return null; }
    try {
      const res = await api(`/instances/${id}/logs` + qs({ attempt: pick.value, tail: TAIL }),
        { raw: true, signal: ctx.signal });
      logBox.textContent = await res.text();
      logInfo.textContent = `${res.headers.get('X-AX-Log-Size') || 0} bytes`;
      return res.headers.get('X-AX-Next-Offset');
    } catch (x) {
      logBox.textContent = '';
      logInfo.textContent = x instanceof ApiError ? x.message : String(x);
      return null;
    }
  };
  pick.addEventListener('change', tail);
  follow.addEventListener('click', async () => {
    if (stream) return stop();
    const from = await tail();
    stream = new AbortController();
    follow.textContent = 'Stop';
    const sig = stream;
    try {
      const res = await api(`/instances/${id}/logs` +
        qs({ attempt: pick.value, follow: 'true', offset: from ?? 0 }),
      { raw: true, signal: sig.signal });
      const rd = res.body.getReader();
      const dec = new TextDecoder();
      logBox.dataset.following = '1';
      for (;;) {
        const { value, done } = await rd.read();
        if (done) break;
        const atEnd = logBox.scrollTop + logBox.clientHeight >= logBox.scrollHeight - 4;
        logBox.append(dec.decode(value, { stream: true }));
        if (atEnd) logBox.scrollTop = logBox.scrollHeight;
      }
    } catch (x) {
      if (x.name !== 'AbortError') flash(`log follow: ${x.message}`, true);
    } finally {
      delete logBox.dataset.following;
      if (stream === sig) stop();
    }
  });

  view.replaceChildren(
    h('h1', null, h('a', { href: `/dags/${encodeURIComponent(i.dag)}` }, i.dag), ' / ',
      h('a', { href: `/runs/${i.dag_run_id}` }, `run ${i.dag_run_id}`), ' / ',
      i.task + (i.shard_total > 1 ? ` [${i.shard}/${i.shard_total}]` : ''), ' ',
      h('span', { id: 'instance-state' }, badge(i.state))),
    h('div', { class: 'card' }, kv([
      ['Reason', i.reason], ['Logical time', when(i.logical_time)],
      ['Try', `${i.try_number} of ${i.max_tries}`], ['Channel', i.channel],
      ['Worker group', i.worker_group], ['Pool', i.pool], ['Priority', i.priority],
      ['Ready', when(i.ready_at)], ['Started', when(i.started_at)],
      ['Ended', when(i.ended_at)], ['Took', span(i.started_at, i.ended_at)],
    ])),
    ctx.can ? actions(ctx, i) : null,
    h('h2', null, 'Why'), expl,
    h('h2', null, 'Attempts'),
    table(['#', 'State', 'Worker', 'Due', 'Dispatched', 'Started', 'Ended', 'Exit', 'Reason'],
      attempts.map((a) => [String(a.number), badge(a.state), a.worker_id ?? '',
        when(a.due_at), when(a.dispatched_at), when(a.started_at), when(a.ended_at),
        a.exit_status ?? '', a.reason || '']), { id: 'attempts' }),
    h('h2', null, 'Log'),
    h('div', { class: 'toolbar' }, pick, h('button', { id: 'log-tail', onclick: tail }, `Last ${TAIL} lines`),
      follow, logInfo),
    logBox);
  await Promise.all([
    explainInto(expl, `/instances/${id}/explain`, { instance: id }, ctx.signal, i,
      { run: i.dag_run_id }),
    tail(),
  ]);
}

const FINISHED = ['SUCCESS', 'FAILED', 'TIMEOUT', 'CANCELED', 'SKIPPED', 'UNKNOWN'];

function actions(ctx, i) {
  const path = `/instances/${i.id}`;
  const send = async (what, sub, body) => {
    if (!confirm(`${what} ${i.dag}.${i.task}?`)) return;
    try {
      const a = await api(path + sub, { method: 'POST', body });
      flash(`${what}: command ${a.command_id ?? a.id ?? ''} ${a.status ?? 'accepted'}`);
      setTimeout(() => ctx.go(location.pathname, true), 1000);
    } catch (x) { flash(`${what} refused: ${x.message}`, true); }
  };
  const down = h('input', { type: 'checkbox', id: 'clear-downstream', checked: true });
  const done = FINISHED.includes(i.state);
  return h('div', { class: 'toolbar', id: 'instance-actions' },
    h('button', { id: 'btn-clear', disabled: !done, onclick: () =>
      send(down.checked ? 'Clear with downstream' : 'Clear', '/clear', { downstream: down.checked }) }, 'Clear'),
    h('label', null, down, ' with downstream'),
    h('button', { id: 'btn-mark-success', onclick: () => send('Mark success', '/mark', { state: 'success' }) }, 'Mark success'),
    h('button', { id: 'btn-mark-failed', onclick: () => send('Mark failed', '/mark', { state: 'failed' }) }, 'Mark failed'),
    h('button', { class: 'danger', id: 'btn-kill', disabled: done, onclick: () => send('Kill', '/kill') }, 'Kill'));
}
