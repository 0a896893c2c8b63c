// Browser test of the dashboard with a fleet (see test_ui_fleet.py, which builds it): overview
// counts, filters, search, pagination, timeline, propagation, tokens, audit, roles, 800 px.
//
// Env: CDNCA_URL, CDNCA_ADMIN_TOKEN, CDNCA_FLEET (JSON: {ids: {group: [site ids]}, nodes: [{id,
// name}]}), optional CDNCA_ARTIFACTS, CDNCA_CHROMIUM, CDNCA_UI_WAIT_MS.
import fs from 'node:fs';
import { need, ok, check, browser, screenshot, byId, waitAttr, signIn, run, WAIT_MS, apiCall } from './lib.mjs';

const BASE = need('CDNCA_URL').replace(/\/+$/, '');
const TOKEN = need('CDNCA_ADMIN_TOKEN');
const FLEET = JSON.parse(fs.readFileSync(need('CDNCA_FLEET'), 'utf8'));
const IDS = FLEET.ids;
const PAGE_SIZE = 50;
const SUMMARY_KEYS = ['sites', 'on_primary', 'on_backup', 'all_levels_unhealthy', 'failback_available', 'paused'];
const PREFIX = 'fleet';

const api = (method, path, body, token = TOKEN) => apiCall(BASE, method, path, body, token);

let b = null;
let page = null;
const shot = (p, name) => screenshot(p, PREFIX, name);

/* The site ids of the rows on the sites page now. */
const rowIds = (p) => p.evaluate(() => [...document.querySelectorAll('[data-testid="sites-table"] tbody tr')]
  .map((r) => parseInt(r.getAttribute('data-testid').slice('site-row-'.length), 10)));

/* Wait until the sites table shows exactly n rows and the list is not loading. */
async function waitRows(p, n) {
  await p.waitForFunction((want) => {
    const t = document.querySelector('[data-testid="sites-table"]');
    const none = document.querySelector('[data-testid="no-sites"]');
    const rows = t ? t.querySelectorAll('tbody tr').length : 0;
    return want === 0 ? !!none : rows === want;
  }, n, { timeout: WAIT_MS, polling: 100 });
}

/* Wait until the sites table shows exactly the sites ids (any order). */
async function waitIds(p, ids) {
  const want = [...ids].sort((x, y) => x - y);
  try {
    await p.waitForFunction((w) => {
      const got = [...document.querySelectorAll('[data-testid="sites-table"] tbody tr')]
        .map((r) => parseInt(r.getAttribute('data-testid').slice('site-row-'.length), 10)).sort((x, y) => x - y);
      return JSON.stringify(got) === JSON.stringify(w);
    }, want, { timeout: WAIT_MS, polling: 100 });
  } catch (e) {
    throw new Error(`sites table: want ids ${JSON.stringify(want)}, have ${JSON.stringify(await rowIds(p))}`);
  }
}

/* Every page of the list as it stands (Next until disabled): all row ids, in order. */
async function allPages(p) {
  let ids = await rowIds(p);
  for (let i = 0; i < 20 && !(await byId(p, 'sites-next').isDisabled()); i++) {
    const before = JSON.stringify(await rowIds(p));
    await byId(p, 'sites-next').click();
    await p.waitForFunction((prev) => {
      const rows = [...document.querySelectorAll('[data-testid="sites-table"] tbody tr')].map((r) => r.getAttribute('data-testid'));
      return rows.length > 0 && JSON.stringify(rows.map((x) => parseInt(x.slice('site-row-'.length), 10))) !== prev;
    }, before, { timeout: WAIT_MS, polling: 100 });
    ids = ids.concat(await rowIds(p));
  }
  return ids;
}


async function main() {
  b = await browser(1280);
  page = await b.newPage();
  page.on('dialog', (d) => d.accept());

  // ---- overview: the counts are /v1/summary's, each a link ----
  await signIn(page, BASE, TOKEN);
  const sum = (await api('GET', '/v1/summary')).body;
  for (const k of SUMMARY_KEYS) await waitAttr(page, `summary-${k}`, 'count', sum[k]);
  await waitAttr(page, 'summary-nodes_online', 'count', sum.nodes_online);
  await waitAttr(page, 'summary-nodes_lagging', 'count', sum.nodes_lagging);
  ok(`overview counts equal /v1/summary ${JSON.stringify(sum)}`);
  check(sum.all_levels_unhealthy === IDS.down.length && sum.failback_available === IDS.fb.length &&
    sum.paused === IDS.paused.length, 'summary matches the fleet built');
  await page.locator('[data-testid="latest-notifications"] li').first().waitFor();
  ok('overview lists the latest notifications');
  await shot(page, 'overview');

  // ---- a count links to the filtered list; pages of 50 ----
  await byId(page, 'summary-on_backup').click();
  await page.waitForURL(/#\/sites\?state=on_backup/);
  await waitRows(page, Math.min(PAGE_SIZE, sum.on_backup));
  const backupIds = await allPages(page);
  check(backupIds.length === sum.on_backup && new Set(backupIds).size === backupIds.length,
    `on_backup filter pages through ${backupIds.length} sites = summary.on_backup`);
  check(IDS.backup.every((id) => backupIds.includes(id)), 'every failed-over site is in the on_backup list');
  check((await page.locator('[data-testid$="-position"][data-state="primary"]').count()) === 0, 'no primary badge in the on_backup list');
  await shot(page, 'sites-on-backup');

  // ---- the state filter ----
  for (const [state, group, flag] of [['all_down', 'down', 'all-down'], ['failback_available', 'fb', 'failback'], ['paused', 'paused', null]]) {
    await byId(page, 'sites-state').selectOption(state);
    await waitIds(page, IDS[group]);
    ok(`filter ${state}: exactly the ${IDS[group].length} ${group} sites`);
    check(page.url().includes(`state=${state}`), 'the filter is kept in the address');
    if (flag) check((await page.locator(`.flag[data-testid$="-${flag}"]`).count()) === IDS[group].length, `each row flagged ${flag}`);
    if (state === 'all_down') await shot(page, 'sites-all-down');
  }

  // ---- search by name and by hostname ----
  await byId(page, 'sites-state').selectOption('');
  await byId(page, 'sites-search').fill('fleet-fb-007');
  await waitIds(page, [IDS.fb[7]]);
  ok('search by name finds fleet-fb-007');
  await byId(page, 'sites-search').fill('down-003.fleet.test');
  await waitIds(page, [IDS.down[3]]);
  ok('search by hostname finds down-003.fleet.test');
  await byId(page, 'sites-state').selectOption('all_down');
  await byId(page, 'sites-search').fill('fleet-down-01');
  await waitIds(page, IDS.down.slice(10, 20));
  ok('search and filter together: fleet-down-01x among all_down');
  await byId(page, 'sites-state').selectOption('');
  await byId(page, 'sites-search').fill('no-such-site-anywhere');
  await waitRows(page, 0);
  ok('a search without match says so');
  await shot(page, 'sites-search');

  // ---- pagination over the whole fleet ----
  await byId(page, 'sites-search').fill('');
  await waitRows(page, PAGE_SIZE);
  check(await byId(page, 'sites-prev').isDisabled(), 'first page: Previous disabled');
  const all = await allPages(page);
  check(all.length === sum.sites && new Set(all).size === all.length, `pages cover all ${sum.sites} sites once`);
  await byId(page, 'sites-prev').click();
  await waitIds(page, all.slice(all.length - 2 * PAGE_SIZE, all.length - PAGE_SIZE));
  ok('Previous goes back a page');

  // ---- a failed-over site: timeline, propagation ----
  await page.goto(`${BASE}/ui/#/sites/${IDS.backup[0]}`);
  await waitAttr(page, 'current-level', 'level', '2');
  const o1 = await page.evaluate(() => {
    const row = document.querySelector('[data-testid="level-1"] tr[data-testid^="origin-"]');
    return row.getAttribute('data-testid').slice('origin-'.length);
  });
  await page.waitForFunction((oid) => document.querySelectorAll(`[data-testid="tl-mark-${oid}"][data-verdict="failure"]`).length >= 3,
    o1, { timeout: WAIT_MS, polling: 200 });
  ok('timeline: failure marks for the failed primary');
  const n0 = FLEET.nodes[0], n1 = FLEET.nodes[1];
  await waitAttr(page, `prop-node-${n0.id}`, 'current', 'yes');
  await waitAttr(page, `prop-node-${n1.id}`, 'current', 'no');
  ok(`propagation: ${n0.name} has the current config, ${n1.name} is behind`);
  await shot(page, 'site-backup');

  // ---- manual failback by the admin: "by bootstrap" ----
  await page.goto(`${BASE}/ui/#/sites/${IDS.fb[0]}`);
  await byId(page, 'switch-back').click();
  await waitAttr(page, 'current-level', 'level', '1');
  await page.waitForFunction(() => {
    const el = document.querySelector('[data-testid="last-manual-by"]');
    return el && el.textContent === 'bootstrap';
  }, null, { timeout: WAIT_MS, polling: 200 });
  ok('manual switch shows "by bootstrap"');
  await page.locator('[data-testid="messages-list"] li[data-type="level.switched"]', { hasText: 'by bootstrap' }).first().waitFor();
  ok('site messages show the switch by bootstrap');
  await page.locator('[data-testid="site-audit-table"] tr[data-token="bootstrap"]', { hasText: '/switch' }).first().waitFor();
  ok('site audit lists the switch with the token name');

  // ---- tokens: create (secret shown once, copy), list ----
  await byId(page, 'nav-tokens').click();
  const secrets = {};
  for (const [name, role] of [['ui-read', 'read'], ['ui-oper', 'operator']]) {
    await byId(page, 'token-name').fill(name);
    await byId(page, 'token-role').selectOption(role);
    await byId(page, 'create-token-submit').click();
    await byId(page, 'token-secret').waitFor();
    secrets[name] = await byId(page, 'token-secret').inputValue();
    check(secrets[name].length >= 16, `token ${name} (${role}) created, secret shown`);
    check(await byId(page, 'token-copy').isVisible(), 'a copy button next to the secret');
    if (name === 'ui-read') await shot(page, 'token-created');
    await byId(page, 'token-done').click();
    await page.locator(`[data-testid="tokens-table"] tr[data-name="${name}"]`).waitFor();
  }
  await page.reload();
  await byId(page, 'tokens-table').waitFor();
  check((await byId(page, 'token-secret').count()) === 0, 'after a reload no secret is shown');
  const listed = await page.locator('[data-testid="tokens-table"]').innerText();
  check(!listed.includes(secrets['ui-read']) && !listed.includes(secrets['ui-oper']), 'the list shows no secret');

  // ---- audit: the test's own writes with the token's name ----
  await byId(page, 'nav-audit').click();
  await page.locator('[data-testid="audit-list-table"] tr[data-token="bootstrap"]', { hasText: 'POST /v1/tokens' }).first().waitFor();
  await page.locator('[data-testid="audit-list-table"] tr[data-token="bootstrap"]', { hasText: `/v1/sites/${IDS.fb[0]}/switch` }).first().waitFor();
  ok('audit lists the token creations and the switch by bootstrap');
  await shot(page, 'audit');

  // ---- a read token: no write controls; a refused request is a banner ----
  const rp = await b.newPage();
  await signIn(rp, BASE, secrets['ui-read']);
  await waitAttr(rp, 'role', 'role', 'read');
  check(await byId(rp, 'nav-tokens').isHidden(), 'read: no Tokens in the nav');
  await rp.goto(`${BASE}/ui/#/sites`);
  await waitRows(rp, PAGE_SIZE);
  check((await byId(rp, 'create-site-form').count()) === 0, 'read: no new-site form');
  await rp.goto(`${BASE}/ui/#/sites/${IDS.fb[1]}`);
  await byId(rp, 'failback-box').waitFor();
  await byId(rp, 'timeline').waitFor();
  for (const t of ['switch-back', 'switch-form', 'site-settings', 'add-origin', 'delete-site']) {
    check((await byId(rp, t).count()) === 0, `read: no ${t}`);
  }
  check((await rp.locator('[data-testid$="-toggle"], [data-testid$="-edit"], [data-testid$="-delete"]').count()) === 0,
    'read: no origin enable/edit/delete buttons');
  await shot(rp, 'read-role-site');
  await rp.goto(`${BASE}/ui/#/nodes`);
  await byId(rp, 'nodes-table').waitFor();
  check((await byId(rp, 'create-node-form').count()) === 0 && (await rp.locator('[data-testid$="-revoke"]').count()) === 0,
    'read: no node enrol or revoke');
  await rp.goto(`${BASE}/ui/#/tokens`);
  await waitAttr(rp, 'error-banner', 'kind', 'forbidden');
  const banner = await byId(rp, 'error-banner').innerText();
  check(/Not allowed/.test(banner) && /403/.test(banner), `a 403 shows a clear banner: ${JSON.stringify(banner.slice(0, 120))}`);
  check(await byId(rp, 'whoami').isVisible(), 'still signed in after the 403');
  await shot(rp, 'read-role-403');

  // ---- an operator token: may switch, may not edit; its switch is "by ui-oper" ----
  const op = await b.newPage();
  op.on('dialog', (d) => d.accept());
  await signIn(op, BASE, secrets['ui-oper']);
  await waitAttr(op, 'role', 'role', 'operator');
  await op.goto(`${BASE}/ui/#/sites/${IDS.fb[2]}`);
  await byId(op, 'switch-back').waitFor();
  check((await op.locator('[data-testid$="-toggle"]').count()) > 0, 'operator: enable/disable buttons shown');
  check((await byId(op, 'site-settings').count()) === 0 && (await op.locator('[data-testid$="-edit"]').count()) === 0,
    'operator: no settings, no origin edit');
  await byId(op, 'switch-back').click();
  await waitAttr(op, 'current-level', 'level', '1');
  await op.waitForFunction(() => {
    const el = document.querySelector('[data-testid="last-manual-by"]');
    return el && el.textContent === 'ui-oper';
  }, null, { timeout: WAIT_MS, polling: 200 });
  ok('operator switch shows "by ui-oper"');

  // ---- sort by last change: the two manual switches, newest first ----
  await page.goto(`${BASE}/ui/#/sites`);
  await waitRows(page, PAGE_SIZE);
  await byId(page, 'sites-sort').selectOption('changed');
  const want = [IDS.fb[2], IDS.fb[0]];
  try {
    await page.waitForFunction((w) => {
      const rows = [...document.querySelectorAll('[data-testid="sites-table"] tbody tr')]
        .map((r) => parseInt(r.getAttribute('data-testid').slice('site-row-'.length), 10));
      return rows.length === 50 && rows[0] === w[0] && rows[1] === w[1];
    }, want, { timeout: WAIT_MS, polling: 100 });
  } catch (e) {
    throw new Error(`sorted by last change: want ${JSON.stringify(want)} first, have ${JSON.stringify((await rowIds(page)).slice(0, 5))}`);
  }
  check(page.url().includes('sort=changed'), 'sorted by last change: the two manual switches first, newest on top');
  const firstPage = await rowIds(page);
  await byId(page, 'sites-next').click();
  await page.waitForFunction((prev) => {
    const rows = [...document.querySelectorAll('[data-testid="sites-table"] tbody tr')]
      .map((r) => parseInt(r.getAttribute('data-testid').slice('site-row-'.length), 10));
    return rows.length === 50 && !rows.some((x) => prev.includes(x));
  }, firstPage, { timeout: WAIT_MS, polling: 100 });
  ok('the next page in that order has other sites');
  await shot(page, 'sites-sorted');

  // ---- revoke the read token in the UI: it stops working at once ----
  await page.goto(`${BASE}/ui/#/tokens`);
  const row = page.locator('[data-testid="tokens-table"] tr[data-name="ui-read"]');
  await row.locator('[data-testid$="-revoke"]').click();
  await row.waitFor({ state: 'detached' });
  ok('token ui-read revoked, gone from the list');
  check((await api('GET', '/v1/sites?limit=1', undefined, secrets['ui-read'])).status === 401, 'the revoked token gets 401');
  await rp.goto(`${BASE}/ui/#/`);
  await byId(rp, 'login-token').waitFor();
  ok('the page with the revoked token is signed out');

  // ---- 800 px ----
  await page.setViewportSize({ width: 800, height: 900 });
  for (const [hash, name, ready] of [['#/', 'overview-800', 'summary'], ['#/sites', 'sites-800', 'sites-table'],
    [`#/sites/${IDS.backup[1]}`, 'site-800', 'timeline']]) {
    await page.goto(`${BASE}/ui/${hash}`);
    await byId(page, ready).waitFor();
    const wide = await page.evaluate(() => document.documentElement.scrollWidth);
    check(wide <= 800, `${name}: no horizontal scroll of the page (width ${wide})`);
    await shot(page, name);
  }

  check(b.errors.length === 0, `no uncaught page errors${b.errors.length ? ': ' + b.errors.join('; ') : ''}`);
}

await run(PREFIX, main, () => page, async () => { if (b) await b.close(); });
