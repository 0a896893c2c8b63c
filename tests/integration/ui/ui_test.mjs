// Browser test of the cdnca dashboard: drives Debian's chromium with playwright-core through
// login, site creation, a failover seen on the status card and a manual failback.
//
// Env: CDNCA_URL (controld base URL), CDNCA_ADMIN_TOKEN, CDNCA_ORIGIN1 / CDNCA_ORIGIN2
// ("127.0.0.1:PORT" of two test origins), optional CDNCA_ORIGIN1_CTL (default
// http://CDNCA_ORIGIN1/__ctl), CDNCA_ARTIFACTS (screenshots; default tests/artifacts),
// CDNCA_CHROMIUM (default /usr/bin/chromium), CDNCA_UI_WAIT_MS (default 60000).
import { chromium } from 'playwright-core';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
function need(name) {
  const v = process.env[name];
  if (!v) {
    console.error(`ui_test: ${name} is not set`);
    process.exit(2);
  }
  return v;
}
const BASE = need('CDNCA_URL').replace(/\/+$/, '');
const TOKEN = need('CDNCA_ADMIN_TOKEN');
const ORIGIN1 = need('CDNCA_ORIGIN1');
const ORIGIN2 = need('CDNCA_ORIGIN2');
const CTL1 = process.env.CDNCA_ORIGIN1_CTL || `http://${ORIGIN1}/__ctl`;
const ARTIFACTS = process.env.CDNCA_ARTIFACTS || path.resolve(here, '../../artifacts');
const CHROMIUM = process.env.CDNCA_CHROMIUM || '/usr/bin/chromium';
const WAIT_MS = parseInt(process.env.CDNCA_UI_WAIT_MS || '60000', 10);

const hostPort = (s) => {
  const m = /^(.*):(\d+)$/.exec(s);
  if (!m) throw new Error(`bad origin address "${s}" (want host:port)`);
  return { host: m[1], port: m[2] };
};

let passed = 0;
function ok(what) {
  passed++;
  console.log(`ok ${passed} - ${what}`);
}
function check(cond, what) {
  if (!cond) throw new Error(`check failed: ${what}`);
  ok(what);
}

async function setOrigin1(status) {
  const r = await fetch(CTL1, { method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ status }), signal: AbortSignal.timeout(10000) });
  if (!r.ok) throw new Error(`origin control answered ${r.status}`);
}

const userDir = fs.mkdtempSync(path.join(os.tmpdir(), 'cdnca-ui-chromium-'));
fs.mkdirSync(ARTIFACTS, { recursive: true });
let context = null;
let page = null;
let shot = 0;
const pageErrors = [];

async function screenshot(name) {
  shot++;
  const file = path.join(ARTIFACTS, `ui-${String(shot).padStart(2, '0')}-${name}.png`);
  await page.screenshot({ path: file, fullPage: true });
  console.log(`# screenshot ${file}`);
}
const byId = (t) => page.locator(`[data-testid="${t}"]`);

/* Wait (bounded) until the element with data-testid t has data-<attr> = want. */
async function waitAttr(t, attr, want, timeout = WAIT_MS) {
  try {
    await page.waitForFunction(([id, a, w]) => {
      const el = document.querySelector(`[data-testid="${id}"]`);
      return !!el && el.getAttribute(`data-${a}`) === w;
    }, [t, attr, String(want)], { timeout, polling: 250 });
  } catch (e) {
    const el = await page.$(`[data-testid="${t}"]`);
    const got = el ? await el.getAttribute(`data-${attr}`) : '(no element)';
    throw new Error(`waiting for ${t} data-${attr}=${want}: still ${got} after ${timeout} ms`);
  }
}

async function main() {
  context = await chromium.launchPersistentContext(userDir, {
    executablePath: CHROMIUM,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    viewport: { width: 1280, height: 900 },
  });
  page = context.pages()[0] || await context.newPage();
  page.on('pageerror', (e) => pageErrors.push(String(e)));
  page.setDefaultTimeout(WAIT_MS);

  // Login: a wrong token is refused with a banner, the right one gets in.
  await page.goto(`${BASE}/ui/`);
  await byId('login-token').waitFor();
  ok('login page shown');
  await byId('login-token').fill('not-a-valid-token');
  await byId('login-submit').click();
  await byId('error-banner').waitFor({ state: 'visible' });
  check(/rejected/i.test(await byId('error-banner').innerText()), 'wrong token refused with a banner');
  check(await byId('login-token').isVisible(), 'still on the login page after a wrong token');
  await screenshot('login-refused');

  await byId('login-token').fill(TOKEN);
  await byId('login-submit').click();
  await byId('summary').waitFor();
  ok('signed in, overview shown');
  check((await byId('role').getAttribute('data-role')) === 'admin', 'the bootstrap token is shown as admin');
  await byId('nav-sites').click();
  await byId('create-site-submit').waitFor();
  ok('sites page shown');
  const storage = await page.evaluate(() => ({ session: sessionStorage.length, local: localStorage.length,
    url: location.href }));
  check(storage.session === 1 && storage.local === 0, 'token kept in sessionStorage only');
  check(!storage.url.includes(TOKEN), 'token not in the URL');

  // Create a site with two levels, manual failback, through the form.
  const o1 = hostPort(ORIGIN1), o2 = hostPort(ORIGIN2);
  const name = `ui-test-${Date.now()}`;
  await byId('site-name').fill(name);
  await byId('site-hostnames').fill(`${name}.example.com`);
  await byId('site-failback').selectOption('manual');
  await byId('site-hc-path').fill('/');
  const rows = byId('new-origin-row');
  for (const [i, o, level] of [[0, o1, '1'], [1, o2, '2']]) {
    const row = rows.nth(i);
    await row.locator('[name=level]').fill(level);
    await row.locator('[name=address]').fill(o.host);
    await row.locator('[name=port]').fill(o.port);
  }
  await screenshot('create-site-form');
  await byId('create-site-submit').click();
  await page.waitForURL(/#\/sites\/\d+$/);
  const siteId = /#\/sites\/(\d+)$/.exec(page.url())[1];
  ok(`site ${name} created (id ${siteId})`);

  // The status card shows both levels healthy, level 1 current.
  await byId('status-card').waitFor();
  await waitAttr('level-1-health', 'state', 'healthy');
  await waitAttr('level-2-health', 'state', 'healthy');
  await waitAttr('current-level', 'level', '1');
  ok('status card: both levels healthy, current level 1');
  check((await byId('decision').innerText()).trim().length > 'Decision:'.length, 'decision line shown');
  check((await byId('hc-state').getAttribute('data-state')) === 'active', 'health checks active');
  const oids = await page.evaluate(() => [...document.querySelectorAll('[data-testid^="level-"] tr[data-testid^="origin-"]')]
    .map((r) => r.getAttribute('data-testid').slice('origin-'.length)));
  check(oids.length === 2, `two origins listed (${oids.join(', ')})`);
  await page.waitForFunction((ids) => ids.every((i) => document.querySelectorAll(`[data-testid="tl-mark-${i}"]`).length >= 2),
    oids, { timeout: WAIT_MS, polling: 250 });
  ok('health timeline: both origins have verdict marks');
  check(await byId(`sparkline-${oids[0]}`).count() === 1, 'latency sparkline drawn for origin 1');
  check(/No nodes enrolled/.test(await byId('propagation-nodes').innerText()), 'propagation: no nodes yet');
  await screenshot('site-healthy');

  // A shadow health policy: no panel without one; with one, its agreement with the real checks.
  check(await byId('shadow-panel').isHidden(), 'no shadow panel without a shadow policy');
  const shadowSet = await page.evaluate(async ([base, tok, id]) => {
    const r = await fetch(`${base}/v1/sites/${id}`, { method: 'PATCH',
      headers: { Authorization: `Bearer ${tok}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ health_check_shadow: { path: '/', expected_codes: ['200-299'] } }) });
    return r.status;
  }, [BASE, TOKEN, siteId]);
  check(shadowSet === 200, 'a shadow policy is set');
  await byId('shadow-panel').waitFor({ state: 'visible', timeout: WAIT_MS });
  await waitAttr('shadow-agreement', 'agreement', '1');
  check(/100% of \d+ verdicts \(0 disagreements\)/.test(await byId('shadow-agreement').innerText()),
    'shadow panel: full agreement with the real checks');
  check(await byId('shadow-no-switch').isVisible(), 'shadow panel: no would-have switch');
  check(/level 1/.test(await byId('shadow-level').innerText()), 'shadow panel: it would stay on level 1');
  await screenshot('site-shadow');

  // A refused edit names the field and marks its input; nothing changes until it is corrected.
  const timeout = page.locator('#site-settings [name=timeout_ms]');
  await timeout.fill('50');  // the form allows it (min 1); controld wants 100..60000
  await byId('settings-submit').click();
  await byId('error-field').waitFor();
  const blamed = (await byId('error-field').innerText()).trim();
  check(blamed === 'health_check.timeout_ms', `a bad timeout is refused, field ${blamed}`);
  check((await timeout.getAttribute('aria-invalid')) === 'true', 'the blamed input is marked');
  await timeout.fill('5000');
  await byId('settings-submit').click();
  await byId('notice-banner').filter({ hasText: 'Settings saved' }).waitFor();
  ok('corrected settings are saved');

  // An origin's description is edited in the origin form and shown under its address.
  // (the saved settings re-render the page when their answer arrives, which under a slow
  // controld can come after this click and close the form it opened: click until it stays open)
  const description = page.locator('#origin-form [name=description]');
  for (let i = 0; ; i++) {
    await byId(`origin-${oids[0]}-edit`).click();
    try {
      await description.waitFor({ state: 'visible', timeout: 5000 });
      break;
    } catch (e) {
      if (i === 5) throw e;
    }
  }
  await description.fill('rack 3 \u2014 primary');
  await byId('origin-form-submit').click();
  await byId('notice-banner').filter({ hasText: `Origin #${oids[0]} saved` }).waitFor();
  await byId(`origin-${oids[0]}-description`).filter({ hasText: 'rack 3 \u2014 primary' }).waitFor();
  ok('origin description saved and shown');

  // Primary down: level 1 unhealthy, the site moves to level 2.
  await setOrigin1(503);
  await waitAttr('level-1-health', 'state', 'unhealthy');
  await waitAttr('current-level', 'level', '2');
  ok('after origin 1 fails: level 1 unhealthy, current level 2');
  const oid1 = await page.evaluate(() => {
    const row = document.querySelector('[data-testid="level-1"] tr[data-testid^="origin-"]');
    return row ? row.getAttribute('data-testid').slice('origin-'.length) : null;
  });
  check(oid1 !== null, 'level 1 lists its origin');
  await waitAttr(`origin-${oid1}-health`, 'state', 'unhealthy');
  ok('origin 1 shown unhealthy');
  await page.locator(`[data-testid="tl-mark-${oid1}"][data-verdict="failure"]`).first().waitFor();
  ok('timeline shows failure marks for origin 1');
  await page.locator(`[data-testid="tl-change-${oid1}"][data-state="unhealthy"]`).first().waitFor({ state: 'attached' });
  ok('timeline marks the state change to unhealthy');
  await page.locator(`[data-testid^="tl-switch-${oid1}-"]`).first().waitFor({ state: 'attached' });
  ok('timeline marks the level switch');
  // the timeline is redrawn on every refresh, which can replace the hovered mark (and empty the
  // tip) between the hover and the read on a slow machine: hover again until the tip is read
  const tipOk = (t) => /failure via control/.test(t) && /HTTP 503/.test(t) && /\d+ ms/.test(t);
  let tip = '';
  for (let i = 0; i < 20 && !tipOk(tip); i++) {
    if (i > 0) await page.waitForTimeout(250);
    await page.locator(`[data-testid="tl-mark-${oid1}"][data-verdict="failure"]`).last().hover();
    await byId('timeline-tip').waitFor({ state: 'visible' });
    tip = await byId('timeline-tip').innerText();
  }
  check(tipOk(tip),
    `hover shows source, votes, status and latency: ${JSON.stringify(tip.slice(0, 160))}`);
  await screenshot('site-failed-over');

  // Primary back: manual failback offers "Switch back to level 1".
  await setOrigin1(200);
  await waitAttr('level-1-health', 'state', 'healthy');
  await byId('switch-back').waitFor({ state: 'visible' });
  const label = (await byId('switch-back').innerText()).trim();
  check(label === 'Switch back to level 1', `failback button reads "${label}"`);
  check((await byId('current-level').getAttribute('data-level')) === '2', 'still on level 2 before the operator acts');
  await screenshot('site-failback-available');

  await byId('switch-back').click();
  await waitAttr('current-level', 'level', '1');
  await byId('switch-back').waitFor({ state: 'detached' });
  ok('switched back: current level 1, button gone');

  // Node retry settings: backup levels off and a failure ratio are saved; a bad ratio names its field.
  const nodeRetry = () => page.evaluate(async ([base, tok, id]) => {
    const r = await fetch(`${base}/v1/sites/${id}`, { headers: { Authorization: `Bearer ${tok}` } });
    return (await r.json()).node_retry;
  }, [BASE, TOKEN, siteId]);
  check((await nodeRetry()).backup_levels === true, 'backup levels on by default');
  check(await byId('settings-backup-levels').isChecked(), 'the settings show backup levels on');
  await byId('settings-backup-levels').uncheck();
  await byId('settings-failure-ratio').fill('0.5');
  await byId('settings-submit').click();
  for (let i = 0; i < WAIT_MS / 100; i++) {
    const nr = await nodeRetry();
    if (nr.backup_levels === false && nr.failure_ratio === 0.5) break;
    await page.waitForTimeout(100);
  }
  const saved = await nodeRetry();
  check(saved.backup_levels === false && saved.failure_ratio === 0.5 && saved.failure_min_volume === 20,
    `node_retry saved from the settings: ${JSON.stringify(saved)}`);
  await byId('settings-failure-ratio').fill('0'); /* passes the input's min, not the API's (0, 1] */
  await byId('settings-submit').click();
  await byId('error-banner').waitFor({ state: 'visible' });
  check(/failure_ratio/.test(await byId('error-banner').innerText()), 'a ratio of 0 is refused, naming node_retry.failure_ratio');
  check((await nodeRetry()).failure_ratio === 0.5, 'the refused ratio changed nothing');
  await screenshot('site-node-retry-settings');

  // The switch is in the site messages.
  await page.locator('[data-testid="messages-list"] [data-type="level.switched"]').first().waitFor();
  ok('site messages list a level switch');
  await screenshot('site-switched-back');

  // The health-check options through the settings form: saved, shown in words on the card;
  // a bad value is refused with the field marked; blank fields put the defaults back.
  const settings = byId('site-settings');
  await byId('settings-failure-ratio').fill('0.5'); /* the refused 0 above is still in the form */
  await byId('settings-hc-method').selectOption('HEAD');
  await byId('settings-hc-codes').fill('200-299, 301');
  await byId('settings-hc-interval').fill('1000');
  await byId('settings-hc-headers').fill('X-UI: 1');
  await settings.locator('[data-testid=settings-submit]').click();
  await page.waitForFunction(() => {
    const el = document.querySelector('[data-testid="hc-rule"]');
    return el && /HEAD \/ answers 200-299, 301/.test(el.textContent) && /every 1000 ms/.test(el.textContent);
  }, null, { timeout: WAIT_MS });
  ok('settings form: method, expected codes, interval and a header saved; the card says what healthy means');
  await screenshot('settings-hc-options');
  await byId('settings-hc-codes').fill('2xx');
  await settings.locator('[data-testid=settings-submit]').click();
  await byId('error-banner').waitFor({ state: 'visible' });
  check(/expected_codes\[0\]/.test(await byId('error-banner').innerText()), 'a bad code is refused naming the field');
  check((await byId('settings-hc-codes').getAttribute('aria-invalid')) === 'true', 'the expected-codes input is marked');
  await byId('settings-hc-codes').fill('');
  await byId('settings-hc-interval').fill('');
  await byId('settings-hc-headers').fill('');
  await byId('settings-hc-method').selectOption('GET');
  await settings.locator('[data-testid=settings-submit]').click();
  await page.waitForFunction(() => {
    const el = document.querySelector('[data-testid="hc-rule"]');
    return el && /GET \/ answers any status below 500 every global interval/.test(el.textContent);
  }, null, { timeout: WAIT_MS });
  ok('settings form: blank options put the defaults back');

  // Sites list and notification center reflect it.
  await page.goto(`${BASE}/ui/#/sites`);
  await waitAttr(`site-${siteId}-hc`, 'state', 'active');
  check((await byId(`site-${siteId}-level`).innerText()).trim() === '1', 'sites list shows level 1');
  await screenshot('sites-list');
  await page.goto(`${BASE}/ui/#/notifications`);
  await page.locator('[data-testid="notifications-list"] [data-type="level.switched"]').first().waitFor();
  ok('notification center lists the level switch');
  await screenshot('notifications');

  check(pageErrors.length === 0, `no uncaught page errors${pageErrors.length ? ': ' + pageErrors.join('; ') : ''}`);
}

let failed = 0;
try {
  await main();
} catch (e) {
  failed = 1;
  console.error(`not ok - ${e.message}`);
  if (page) {
    try {
      await page.screenshot({ path: path.join(ARTIFACTS, 'ui-failure.png'), fullPage: true });
      console.error(`# failure screenshot ${path.join(ARTIFACTS, 'ui-failure.png')}`);
      console.error('# page text:\n' + (await page.locator('body').innerText()).slice(0, 4000));
    } catch (e2) { /* the page is gone */ }
  }
  if (pageErrors.length) console.error('# page errors: ' + pageErrors.join('; '));
} finally {
  try { await setOrigin1(200); } catch (e) { /* origin already stopped */ }
  if (context) await context.close().catch(() => {});
  fs.rmSync(userDir, { recursive: true, force: true });
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
