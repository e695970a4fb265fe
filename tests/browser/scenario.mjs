// scenario.mjs - the AX web UI in a real headless Chromium, driven by
// puppeteer-core. Started by test_browser.c, which has the stack running
// and passes AX_URL, AX_ADMIN_TOKEN, AX_VIEWER_TOKEN,
// AX_BLOCKED_INSTANCE, AX_CHROMIUM and AX_SHOTS (the screenshot folder).
//
// Steps: sign in; find a DAG by search; trigger it and watch the grid
// turn green; the graph; open a log; clear a task with its downstream
// and see them run again; a blocked instance's explanation names its
// Block rule; a viewer sees no write button and gets 403 when it writes
// anyway; the events and workers pages; page timings at scale (10,000
// DAGs; 100 runs x 200 tasks). Any page error, console error or CSP
// violation fails the run. Exit 0 when every step passed.
//
// Chromium runs with --no-sandbox because the tests run as root, where
// Chromium's sandbox refuses to start; only this test does so.

import fs from 'node:fs';
import path from 'node:path';
import puppeteer from 'puppeteer-core';

const URL0 = process.env.AX_URL;
const ADMIN = process.env.AX_ADMIN_TOKEN;
const VIEWER = process.env.AX_VIEWER_TOKEN;
const BLOCKED = process.env.AX_BLOCKED_INSTANCE;
const SHOTS = process.env.AX_SHOTS || 'browser-shots';
const T = 30000; // ms: the longest any one wait may take

const problems = [];
const timings = {};
let step = '';
const t0 = Date.now();

function log(msg) { console.log(`[${((Date.now() - t0) / 1000).toFixed(1)}s] ${msg}`); }
function fail(msg) { throw new Error(`${step}: ${msg}`); }
function check(ok, msg) { if (!ok) fail(msg); }

// fullPage: false for the big pages: only the viewport, without
// rendering what lies beyond it (the rows the grid skips).
async function shot(page, name, fullPage = true) {
  const f = path.join(SHOTS, name + '.png');
  await page.screenshot({ path: f, fullPage, captureBeyondViewport: fullPage });
  log(`screenshot ${path.resolve(f)}`);
}

function watch(page, who) {
  page.on('pageerror', (e) => problems.push(`${who} page error: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error' && !/status of 40[134]/.test(m.text()))
      problems.push(`${who} console: ${m.text()}`);
  });
  page.on('dialog', (d) => d.accept());
}

// Waits for the page to finish rendering a route (app.js sets data-ready).
async function ready(page, name) {
  await page.waitForSelector(`#view[data-ready][data-page="${name}"]`, { timeout: T });
}

async function go(page, p, name) {
  await page.goto(URL0 + p, { waitUntil: 'domcontentloaded' });
  await ready(page, name);
}

// fetch from inside the page with its own token (what a user could do).
function inPage(page, method, p, body) {
  return page.evaluate(async (method, p, body) => {
    const r = await fetch('/api/v1' + p, { method, headers: {
      Authorization: 'Bearer ' + sessionStorage.getItem('ax.token'),
      'Content-Type': 'application/json' }, body });
    return { status: r.status, json: await r.json().catch(() => null) };
  }, method, p, body);
}

async function signIn(page, token) {
  await page.goto(URL0 + '/', { waitUntil: 'domcontentloaded' });
  await ready(page, 'signin');
  await page.type('#token', token);
  await page.click('#signin button[type=submit]');
  await ready(page, 'dags');
}

async function gridStates(page, task) {
  return page.$$eval(`#grid [data-task="${task}"] [data-id]`, (tds) => tds.map((t) => t.dataset.state));
}

async function main() {
  fs.mkdirSync(SHOTS, { recursive: true });
  const browser = await puppeteer.launch({
    executablePath: process.env.AX_CHROMIUM || '/usr/bin/chromium',
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
  });
  try {
    const page = await browser.newPage();
    await page.setViewport({ width: 1400, height: 900 });
    watch(page, 'operator');

    step = 'sign in';
    await page.goto(URL0 + '/dags/ui.demo', { waitUntil: 'domcontentloaded' });
    await ready(page, 'signin');
    await shot(page, '01-signin');
    await page.type('#token', 'not-a-token');
    await page.click('#signin button[type=submit]');
    await page.waitForFunction(() => document.querySelector('#signin-error').textContent.length > 0, { timeout: T });
    await page.$eval('#token', (i) => { i.value = ''; });
    await page.type('#token', ADMIN);
    await page.click('#signin button[type=submit]');
    await page.waitForSelector('#view[data-ready][data-page="dag"]', { timeout: T });
    check(page.url().endsWith('/dags/ui.demo'), `back to the page asked for, not ${page.url()}`);
    check(!page.url().includes(ADMIN), 'the token is in the URL');
    check(await page.evaluate(() => localStorage.length) === 0, 'something went to localStorage');
    check(await page.$eval('#role', (e) => e.dataset.role) === 'admin', 'role shown');
    log('signed in as admin; the token is in sessionStorage only');

    step = 'find a DAG';
    await go(page, '/dags', 'dags');
    await page.type('#dag-search', 'demo');
    await page.waitForFunction(() => {
      const rows = document.querySelectorAll('#dag-table tbody tr[data-dag]');
      return document.querySelector('#view[data-ready]') && rows.length === 1 &&
        rows[0].dataset.dag === 'ui.demo';
    }, { timeout: T });
    await shot(page, '02-dag-search');
    await page.click('#dag-table a.dag-link');
    await ready(page, 'dag');
    log('found ui.demo by search');

    step = 'trigger and watch the grid turn green';
    await page.click('#btn-trigger');
    await page.waitForFunction(() => {
      const tds = document.querySelectorAll('#grid [data-id]');
      return tds.length === 4 && [...tds].every((t) => t.dataset.state === 'SUCCESS');
    }, { timeout: 60000, polling: 250 });
    await shot(page, '03-grid');
    log('the triggered run went green on the grid');

    step = 'graph';
    await page.click('#tab-graph');
    await ready(page, 'dag');
    await page.waitForSelector('#graph');
    const nodes = await page.$$eval('#graph g[data-task]', (gs) => gs.map((g) => [g.dataset.task, g.dataset.state]));
    check(nodes.length === 4 && nodes.every(([, s]) => s === 'SUCCESS'), JSON.stringify(nodes));
    check(await page.$$eval('#graph path', (p) => p.length) === 4 + 1, 'edges: 4 between tasks, 1 to ui.report');
    check(await page.$$eval('#graph g[data-dag="ui.report"]', (g) => g.length) === 1, 'downstream DAG ui.report');
    await shot(page, '04-graph');

    step = 'open a log';
    await go(page, '/dags/ui.demo', 'dag');
    await page.waitForSelector('#grid [data-task="extract"] [data-id]');
    await page.click('#grid [data-task="extract"] [data-id]');
    await ready(page, 'instance');
    await page.waitForFunction(() => document.querySelector('#log').textContent.includes('hello-from-extract'), { timeout: T });
    const extractUrl = page.url();
    await page.click('#log-follow');
    await page.waitForFunction(() => document.querySelector('#log').textContent.includes('hello-from-extract'), { timeout: T });
    await page.click('#log-follow'); // stop (or already ended)
    await shot(page, '05-instance-log');
    log('the log shows the task output');

    step = 'clear with downstream';
    const before = await inPage(page, 'GET', '/instances?dag=ui.demo&limit=100');
    check(before.status === 200 && before.json.instances.length === 4, JSON.stringify(before));
    await page.$eval('#clear-downstream', (c) => { c.checked = true; });
    await page.click('#btn-clear');
    await page.waitForFunction(async () => {
      const r = await fetch('/api/v1/instances?dag=ui.demo&limit=100', { headers: {
        Authorization: 'Bearer ' + sessionStorage.getItem('ax.token') } });
      const j = await r.json();
      return j.instances.length === 4 && j.instances.every((i) => i.try_number >= 2 && i.state === 'SUCCESS');
    }, { timeout: 60000, polling: 500 });
    await go(page, '/dags/ui.demo', 'dag');
    check((await gridStates(page, 'publish')).every((s) => s === 'SUCCESS'), 'publish green again');
    log('extract and its downstream ran again (try 2 each)');
    await page.goto(extractUrl, { waitUntil: 'domcontentloaded' });
    await ready(page, 'instance');
    check(await page.$$eval('#attempts tbody tr', (r) => r.length) >= 2, 'two attempts listed');

    step = 'a blocked instance explains itself';
    await go(page, `/instances/${BLOCKED}`, 'instance');
    const why = await page.$eval('#explain', (e) => e.textContent);
    check(/RULE_BLOCKED/.test(why), `no RULE_BLOCKED in the explanation: ${why.slice(0, 400)}`);
    check(/rule 1/.test(why) && why.includes('browser test hold'), `the rule is not named: ${why.slice(0, 400)}`);
    await shot(page, '06-blocked-explain');
    log('the blocked instance names its Block rule');

    step = 'events and workers';
    await go(page, '/events?dag=ui.demo&type=instance.state', 'events');
    await go(page, '/events?dag=ui.demo', 'events');
    check(await page.$$eval('table.events tbody tr', (r) => r.length) > 0, 'events listed');
    await shot(page, '07-events');
    await go(page, '/workers', 'workers');
    check(await page.$$eval('#workers tbody tr', (r) => r.length) >= 1, 'a worker listed');
    // the live water level of its last heartbeat: "N of M cores"
    check(/ of \d+ cores/.test(await page.$eval('#workers tbody tr', (r) => r.textContent)),
      'the worker shows its CPU use');
    check(await page.$('#queue-depth') !== null, 'queue depth shown');
    await shot(page, '08-workers');

    step = 'run page';
    const runs = await inPage(page, 'GET', '/runs?dag=ui.demo&limit=1');
    await go(page, `/runs/${runs.json.runs[0].id}`, 'run');
    check(await page.$$eval('#run-instances tbody tr', (r) => r.length) === 4, 'four instances');
    await shot(page, '09-run');

    step = 'scale: 10,000 DAGs';
    for (let i = 0; i < 3; i++) {
      const t = Date.now();
      await go(page, '/dags', 'dags');
      const nav = await page.evaluate(() => Math.round(performance.now()));
      const total = await page.$eval('#dag-total', (e) => e.textContent);
      check(/^100\d\d DAGs/.test(total), `total: ${total}`);
      (timings.dag_list_ms = timings.dag_list_ms || []).push(nav);
      log(`DAG list of ${total}: ready ${nav} ms after navigation (wall ${Date.now() - t} ms)`);
    }
    await page.type('#dag-search', 'scale.0999');
    const ts = Date.now();
    await page.waitForFunction(() => document.querySelector('#view[data-ready]') &&
      document.querySelectorAll('#dag-table tbody tr[data-dag]').length === 10, { timeout: T });
    timings.dag_search_ms = Date.now() - ts - 300; // less the typing debounce
    await shot(page, '10-dags-10000', false);

    step = 'scale: 100 runs x 200 tasks';
    for (let i = 0; i < 3; i++) {
      await go(page, '/dags/ui.big?runs=100', 'dag');
      await page.waitForSelector('#grid-wrap[data-cells]', { timeout: T });
      await page.waitForSelector('#grid-wrap[data-cells="20000"]', { timeout: T });
      const g = await page.evaluate(() => {
        const w = document.querySelector('#grid-wrap');
        const n = performance.getEntriesByType('navigation')[0];
        return { nav: Math.round(performance.now()), dcl: Math.round(n.domContentLoadedEventEnd),
          fetch: +w.dataset.fetchMs,
          render: +w.dataset.renderMs, paint: +w.dataset.paintMs };
      });
      (timings.grid_20000_ms = timings.grid_20000_ms || []).push(g);
      log(`grid 100 x 200: ready ${g.nav} ms after navigation (document ${g.dcl} ms, page start to answer ${g.fetch} ms, ` +
        `build ${g.render} ms, to the next frame ${g.paint} ms)`);
    }
    // counted inside the page: $$eval would hand 20,000 element handles over
    const counts = await page.evaluate(() => [document.querySelectorAll('#grid .grow[data-task]').length,
      document.querySelectorAll('#grid [data-id]').length]);
    check(counts[0] === 200 && counts[1] === 20000, `rows and cells: ${counts}`);
    await shot(page, '11-grid-100x200', false);
    await go(page, '/dags', 'dags'); // stop the big grid's refreshes

    step = 'viewer';
    const ctx = await browser.createBrowserContext();
    const vp = await ctx.newPage();
    await vp.setViewport({ width: 1400, height: 900 });
    watch(vp, 'viewer');
    await signIn(vp, VIEWER);
    check(await vp.$eval('#role', (e) => e.dataset.role) === 'viewer', 'viewer role shown');
    await go(vp, '/dags/ui.demo', 'dag');
    check(await vp.$('#dag-actions') === null && await vp.$('#btn-trigger') === null, 'viewer sees trigger');
    await go(vp, extractUrl.slice(URL0.length), 'instance');
    check(await vp.$('#instance-actions') === null && await vp.$('#btn-clear') === null, 'viewer sees clear');
    const tried = await inPage(vp, 'POST', '/dags/ui.demo/trigger', '{}');
    check(tried.status === 403 && tried.json.error === 'forbidden', JSON.stringify(tried));
    const tried2 = await inPage(vp, 'POST', `/instances/${BLOCKED}/kill`, '{}');
    check(tried2.status === 403, JSON.stringify(tried2));
    await shot(vp, '12-viewer-dag');
    log('the viewer has no write buttons; its writes get 403');

    step = 'sign out on 401';
    await inPage(page, 'GET', '/me');
    await page.evaluate(() => sessionStorage.setItem('ax.token', 'revoked-or-wrong'));
    await page.goto(URL0 + '/dags', { waitUntil: 'domcontentloaded' });
    await ready(page, 'signin');
    log('a bad token returns to sign-in');

    check(problems.length === 0, problems.join('\n'));
  } catch (e) {
    for (const p of await browser.pages()) {
      const f = path.join(SHOTS, 'failure-' + (await browser.pages()).indexOf(p) + '.png');
      await p.screenshot({ path: f, fullPage: true }).catch(() => {});
      console.error(`at ${p.url()}: ${await p.$eval('#view', (v) => v.outerHTML.slice(0, 1500)).catch(() => '?')}`);
      console.error(`screenshot ${path.resolve(f)}`);
    }
    throw e;
  } finally {
    await browser.close();
  }
}

main().then(() => {
  const med = (a) => a.slice().sort((x, y) => x - y)[Math.floor(a.length / 2)];
  const g = timings.grid_20000_ms || [];
  console.log('TIMINGS ' + JSON.stringify({
    dag_list_10000_ready_ms_median: med(timings.dag_list_ms || [0]),
    dag_search_ms: timings.dag_search_ms,
    grid_100x200_ready_ms_median: med(g.map((x) => x.nav)),
    grid_100x200_fetch_ms_median: med(g.map((x) => x.fetch)),
    grid_100x200_render_ms_median: med(g.map((x) => x.render)),
    grid_100x200_paint_ms_median: med(g.map((x) => x.paint)),
    runs: timings,
  }));
  console.log(`browser scenario: 1 passed, 0 failed in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
}, (e) => {
  console.error(`FAILED at ${e.message}`);
  if (problems.length) console.error(problems.join('\n'));
  process.exit(1);
});
