// Browser test of the failover drills on the site page (see test_ui_drills.py, which runs one
// drill to the end first): the history with the finished drill's result and figures as the API
// gives them, a refused start (its field marked), an operator starting a drill and watching it
// run (the site's level follows), cancelling it, and a read token's page without controls.
//
// Env: CDNCA_URL, CDNCA_ADMIN_TOKEN, CDNCA_DRILLS (JSON: {site_id, passed_id, operator, read} —
// the two last are tokens), optional CDNCA_ARTIFACTS, CDNCA_CHROMIUM, CDNCA_UI_WAIT_MS.
import fs from 'node:fs';
import { need, ok, check, browser, screenshot, byId, waitAttr, signIn, run, apiGet } from './lib.mjs';

const BASE = need('CDNCA_URL').replace(/\/+$/, '');
const TOKEN = need('CDNCA_ADMIN_TOKEN');
const INFO = JSON.parse(fs.readFileSync(need('CDNCA_DRILLS'), 'utf8'));
const SID = INFO.site_id;
const PASSED = INFO.passed_id;
const PREFIX = 'drills';

const api = (path, token = TOKEN) => apiGet(BASE, path, token);

let b = null, b2 = null;
let page = null;
const shot = (p, name) => screenshot(p, PREFIX, name);

async function openSite(p) {
  await p.goto(`${BASE}/ui/#/sites/${SID}`);
  await byId(p, 'drills-panel').first().waitFor({ state: 'attached' });
  await byId(p, 'drill-history-slot').locator('*').first().waitFor({ state: 'attached' });
}

async function main() {
  b = await browser();
  page = await b.newPage();
  await signIn(page, BASE, INFO.operator);
  await openSite(page);
  ok('operator signed in, site page with the drills panel');

  // The finished drill: its row and its figures, as the API gives them.
  const rec = await api(`/v1/drills/${PASSED}`);
  check(rec.state === 'finished' && rec.result === 'passed', `the drill run before passed (${rec.result})`);
  await waitAttr(page, `drill-${PASSED}`, 'result', 'passed');
  check((await byId(page, `drill-${PASSED}-result`).getAttribute('data-state')) === 'passed', 'history: passed badge');
  await byId(page, `drill-${PASSED}-open`).click();
  await byId(page, `drill-${PASSED}-detail`).first().waitFor({ state: 'attached' });
  ok('the figures of the drill open');
  for (const o of rec.origins) {
    const row = byId(page, `drill-${PASSED}-origin-${o.origin_id}`);
    await row.first().waitFor({ state: 'attached' });
    const text = await row.innerText();
    check(text.includes(String(o.requests)), `origin #${o.origin_id}: ${o.requests} requests shown`);
  }
  check(rec.origins.length > 0, `figures per origin of the target level (${rec.origins.length})`);
  check((await byId(page, `drill-${PASSED}-applied-switch`).count()) === (rec.switch_applied.length ? 1 : 0),
    `apply times of the switch (${rec.switch_applied.length} nodes)`);
  await shot(page, 'history');
  await byId(page, 'drill-detail-close').click();

  // A start the server refuses: the field it names is marked, nothing runs.
  await byId(page, 'drill-duration').fill('1');
  page.once('dialog', (d) => d.accept());
  await byId(page, 'drill-start').click();
  await byId(page, 'error-field').first().waitFor({ state: 'attached' });
  check((await byId(page, 'error-field').innerText()) === 'duration_ms', 'a 1 s drill is refused naming duration_ms');
  check((await byId(page, 'drill-duration').getAttribute('aria-invalid')) === 'true', 'the duration input is marked');
  check((await byId(page, 'drill-none').count()) === 1, 'no drill running after the refusal');

  // The operator starts a drill: it runs, the site is on level 2, then cancelled: back on level 1.
  await byId(page, 'drill-duration').fill('600');
  await byId(page, 'drill-level').selectOption('2');
  page.once('dialog', (d) => d.accept());
  await byId(page, 'drill-start').click();
  await waitAttr(page, 'drill-running', 'state', 'running');
  await waitAttr(page, 'current-level', 'level', '2');
  const did = parseInt(await byId(page, 'drill-running').getAttribute('data-drill'), 10);
  const live = await api(`/v1/drills/${did}`);
  check(live.state === 'running' && live.to_level === 2 && live.created_by === 'oncall',
    `the API has drill #${did} running to level 2, by the operator's token`);
  check((await byId(page, 'drill-running-share').count()) === 1, 'the live failure share is shown');
  await shot(page, 'running');
  page.once('dialog', (d) => d.accept());
  await byId(page, 'drill-cancel').click();
  await waitAttr(page, `drill-${did}`, 'result', 'cancelled');
  await waitAttr(page, 'current-level', 'level', '1');
  check((await byId(page, 'drill-none').count()) === 1, 'nothing running after the cancel');
  ok('cancelled: listed, the site back on level 1');

  // A read token sees the history but no form and no cancel.
  b2 = await browser();
  const rp = await b2.newPage();
  await signIn(rp, BASE, INFO.read);
  await openSite(rp);
  await byId(rp, `drill-${PASSED}`).first().waitFor({ state: 'attached' });
  check((await byId(rp, 'drill-form').count()) === 0 && (await byId(rp, 'drill-start').count()) === 0, 'read token: no start form');
  check((await byId(rp, 'drill-cancel').count()) === 0, 'read token: no cancel');
  await shot(rp, 'read');

  check(b.errors.length === 0 && b2.errors.length === 0, `no page errors (${b.errors.concat(b2.errors).join('; ')})`);
}

run(PREFIX, main, () => page, async () => {
  for (const e of (b ? b.errors : []).concat(b2 ? b2.errors : [])) console.error(`# page error: ${e}`);
  if (b) await b.close();
  if (b2) await b2.close();
});
