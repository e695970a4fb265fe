// dom.js - small helpers the pages share: building elements (text goes in
// as text nodes, never as HTML, so names from DAG YAML cannot inject
// markup), formatting instants and durations, flash messages.

// h('a', {href: '/x', class: 'c'}, 'text', child...) -> element. Attributes
// whose value is null, undefined or false are left out; on* keys with a
// function value become event listeners.
export function h(tag, attrs, ...kids) {
  const el = document.createElement(tag);
  if (attrs) {
    for (const [k, v] of Object.entries(attrs)) {
      if (v === null || v === undefined || v === false) continue;
      if (k.startsWith('on') && typeof v === 'function')
        el.addEventListener(k.slice(2), v);
      else if (k === 'dataset') Object.assign(el.dataset, v);
      else el.setAttribute(k, v === true ? '' : String(v));
    }
  }
  append(el, kids);
  return el;
}

function append(el, kids) {
  for (const k of kids) {
    if (k === null || k === undefined || k === false) continue;
    if (Array.isArray(k)) append(el, k);
    else el.append(k instanceof Node ? k : document.createTextNode(String(k)));
  }
}

const SVGNS = 'http://www.w3.org/2000/svg';

// The same for SVG elements (no listeners; attributes as given).
export function s(tag, attrs, ...kids) {
  const el = document.createElementNS(SVGNS, tag);
  for (const [k, v] of Object.entries(attrs || {}))
    if (v !== null && v !== undefined) el.setAttribute(k, String(v));
  append(el, kids);
  return el;
}

// "2026-05-01 02:30:00" in the browser's time zone, or "-".
export function when(iso) {
  if (!iso) return '-';
  const d = new Date(iso);
  if (isNaN(d)) return String(iso);
  const p = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ` +
    `${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

// Duration between two instants (ISO text or ms) as "1h 2m", "3.2 s".
export function span(a, b) {
  if (!a || !b) return '';
  const ms = new Date(b) - new Date(a);
  if (!(ms >= 0)) return '';
  if (ms < 10000) return (ms / 1000).toFixed(1) + ' s';
  const sec = Math.round(ms / 1000);
  if (sec < 3600) return `${Math.floor(sec / 60)}m ${sec % 60}s`;
  return `${Math.floor(sec / 3600)}h ${Math.floor((sec % 3600) / 60)}m`;
}

export function badge(state) {
  return h('span', { class: `badge s-${state}`, 'data-state': state }, state);
}

export const STATES = ['SUCCESS', 'RUNNING', 'READY', 'PENDING', 'FAILED',
  'TIMEOUT', 'UNKNOWN', 'CANCELED', 'SKIPPED'];

// A message at the top right for a few seconds (error: red, and longer).
export function flash(text, error) {
  const box = document.getElementById('flash');
  const el = h('div', { class: error ? 'error' : null }, text);
  box.append(el);
  setTimeout(() => el.remove(), error ? 8000 : 4000);
}

// A key/value list from [label, value] pairs (values may be nodes).
export function kv(pairs) {
  return h('dl', { class: 'kv' },
    pairs.filter((p) => p).map(([k, v]) => [h('dt', null, k),
      h('dd', null, v === null || v === undefined || v === '' ? '-' : v)]));
}

// A table from column headers and rows of cells (cells may be nodes).
export function table(cols, rows, attrs) {
  return h('table', Object.assign({ class: 'list' }, attrs || {}),
    h('thead', null, h('tr', null, cols.map((c) => h('th', null, c)))),
    h('tbody', null, rows.map((r) => h('tr', null,
      r.map((c) => h('td', null, c))))));
}
