// graph.js - a DAG's tasks and their dependencies laid out in layers as
// SVG (a task's layer is its longest path from a root; inside a layer,
// tasks are ordered by the mean position of their upstreams, one sweep,
// which removes most crossings of warehouse-shaped DAGs), with the
// upstream DAGs (depends_on_dags) as a column on the left and the DAGs
// that depend on this one on the right. Cost: O(tasks + edges).

import { s } from './dom.js';

const W = 150, H = 26, GX = 60, GY = 12, PAD = 16;

// gr: {tasks: [{name, depends_on}], upstream_dags: [{dag, mode}],
// downstream_dags: [{dag, mode}]}; states: task name -> state.
export function drawGraph(gr, states) {
  const tasks = gr.tasks || [];
  const idx = new Map(tasks.map((t, i) => [t.name, i]));
  const layer = new Array(tasks.length).fill(-1);
  const visiting = new Array(tasks.length).fill(false);
  const depth = (i) => {
    if (layer[i] >= 0) return layer[i];
    if (visiting[i]) return 0; // a cycle cannot be loaded; stay finite
    visiting[i] = true;
    let d = 0;
    for (const u of tasks[i].depends_on || [])
      if (idx.has(u)) d = Math.max(d, depth(idx.get(u)) + 1);
    visiting[i] = false;
    return (layer[i] = d);
  };
  tasks.forEach((_, i) => depth(i));
  const up = gr.upstream_dags || [], down = gr.downstream_dags || [];
  const off = up.length ? 1 : 0;
  const cols = [];
  tasks.forEach((t, i) => { (cols[layer[i]] = cols[layer[i]] || []).push(i); });
  const pos = new Array(tasks.length);
  cols.forEach((col, L) => {
    if (L > 0) {
      const key = (i) => {
        const us = (tasks[i].depends_on || []).filter((u) => idx.has(u));
        return us.length ? us.reduce((a, u) => a + pos[idx.get(u)].y, 0) / us.length : 0;
      };
      const keys = new Map(col.map((i) => [i, key(i)]));
      col.sort((a, b) => keys.get(a) - keys.get(b));
    }
    col.forEach((i, k) => { pos[i] = { x: PAD + (L + off) * (W + GX), y: PAD + k * (H + GY) }; });
  });
  const ncols = cols.length + off + (down.length ? 1 : 0);
  const rows = Math.max(1, up.length, down.length, ...cols.map((c) => c.length));
  const width = PAD * 2 + ncols * W + (ncols - 1) * GX;
  const height = PAD * 2 + rows * H + (rows - 1) * GY;
  const svg = s('svg', { class: 'graph', id: 'graph', width, height,
    viewBox: `0 0 ${width} ${height}`, role: 'img' });
  const edges = s('g', null), nodes = s('g', null);
  const edge = (a, b) => edges.append(s('path', { d:
    `M${a.x + W},${a.y + H / 2} C${a.x + W + GX / 2},${a.y + H / 2} ` +
    `${b.x - GX / 2},${b.y + H / 2} ${b.x},${b.y + H / 2}` }));
  tasks.forEach((t, i) => {
    for (const u of t.depends_on || []) if (idx.has(u)) edge(pos[idx.get(u)], pos[i]);
  });
  const roots = tasks.map((t, i) => i).filter((i) => layer[i] === 0);
  const leaves = tasks.map((t, i) => i).filter((i) =>
    !tasks.some((o) => (o.depends_on || []).includes(tasks[i].name)));
  const node = (p, label, cls, href, data) => {
    const g = s('g', Object.assign({ class: 'node' }, data));
    g.append(s('title', null, label));
    g.append(s('rect', { x: p.x, y: p.y, width: W, height: H, class: cls }));
    const tx = s('text', { x: p.x + 8, y: p.y + H / 2 }, clip(label));
    if (href) {
      const a = s('a', { href });
      a.append(tx);
      g.append(a);
    } else g.append(tx);
    nodes.append(g);
  };
  up.forEach((d, k) => {
    const p = { x: PAD, y: PAD + k * (H + GY) };
    node(p, d.dag, 'dag', `/dags/${encodeURIComponent(d.dag)}?tab=graph`, { 'data-dag': d.dag });
    for (const r of roots) edge(p, pos[r]);
  });
  down.forEach((d, k) => {
    const p = { x: PAD + (ncols - 1) * (W + GX), y: PAD + k * (H + GY) };
    node(p, d.dag, 'dag', `/dags/${encodeURIComponent(d.dag)}?tab=graph`, { 'data-dag': d.dag });
    for (const l of leaves) edge(pos[l], p);
  });
  tasks.forEach((t, i) => node(pos[i], t.name, states[t.name] ? `s-${states[t.name]}` : 'none',
    null, { 'data-task': t.name, 'data-state': states[t.name] || '' }));
  svg.append(edges, nodes);
  return svg;
}

function clip(t) { return t.length > 20 ? t.slice(0, 19) + '…' : t; }
