// Browser test of the enrolment keys page (see test_ui_enrolkeys.py, which starts the noded in
// between). Phase "create": an admin makes a key, the secret is shown once with the noded env
// line and command line, and is gone after Done and a reload; the key's id and secret are written
// back to CDNCA_ENROLKEYS for the harness. Phase "after" (the noded has enrolled): the list shows
// one use, a dismissed confirmation revokes nothing, an accepted one revokes; read and operator
// tokens have no nav entry and no create form.
//
// Env: CDNCA_URL, CDNCA_ADMIN_TOKEN, CDNCA_ENROLKEYS (JSON file: {operator, read} tokens, and
// {key_id, key} after "create"), CDNCA_ENROLKEYS_PHASE (create | after), optional
// CDNCA_ARTIFACTS, CDNCA_CHROMIUM, CDNCA_UI_WAIT_MS.
import fs from 'node:fs';
import { need, ok, check, browser, screenshot, byId, waitAttr, signIn, run, apiGet } from './lib.mjs';

const BASE = need('CDNCA_URL').replace(/\/+$/, '');
const TOKEN = need('CDNCA_ADMIN_TOKEN');
const INFO_FILE = need('CDNCA_ENROLKEYS');
const INFO = JSON.parse(fs.readFileSync(INFO_FILE, 'utf8'));
const PHASE = need('CDNCA_ENROLKEYS_PHASE');
const PREFIX = `enrolkeys-${PHASE}`;
const NAME = 'fra-rollout';

let b = null;
let page = null;
const shot = (p, name) => screenshot(p, PREFIX, name);

const listed = async () => (await apiGet(BASE, '/v1/enrolment-keys', TOKEN)).enrolment_keys;

/* A datetime-local value a week ahead (local time, minutes). */
function nextWeek() {
  const d = new Date(Date.now() + 7 * 86400e3);
  const p = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}T${p(d.getHours())}:${p(d.getMinutes())}`;
}

async function create() {
  await signIn(page, BASE, TOKEN);
  await waitAttr(page, 'role', 'role', 'admin');
  check(await byId(page, 'nav-enrolment-keys').isVisible(), 'admin: Enrolment keys in the nav');
  await byId(page, 'nav-enrolment-keys').click();
  await byId(page, 'enrolkeys-none').waitFor();
  check((await byId(page, 'nav-enrolment-keys').getAttribute('aria-current')) === 'page', 'nav entry marked');
  await byId(page, 'enrolkey-name').fill(NAME);
  await byId(page, 'enrolkey-expires').fill(nextWeek());
  await byId(page, 'enrolkey-max-uses').fill('5');
  await byId(page, 'create-enrolkey-submit').click();
  await byId(page, 'enrolkey-secret').waitFor();
  const key = await byId(page, 'enrolkey-secret').inputValue();
  check(/^[0-9a-f]{64}$/.test(key), 'the secret is shown (64 hex digits)');
  check(await byId(page, 'enrolkey-secret-copy').isVisible(), 'a copy button next to the secret');
  const boxText = await byId(page, 'enrolkey-box').innerText();
  check(boxText.includes('shown only this once') && boxText.includes('Ctrl+C'), 'the box says it is shown once and how to copy');
  const env = await byId(page, 'enrolkey-env').inputValue();
  check(env === `CDNCA_ENROL_KEY=${key}`, 'the noded env line carries the key');
  const cmd = await byId(page, 'enrolkey-cmd').inputValue();
  check(cmd.startsWith(`CDNCA_ENROL_KEY=${key} noded --controld ${BASE} `), `the noded command line names this controld (${BASE})`);
  await shot(page, 'created');

  const row = page.locator(`[data-testid="enrolkeys-table"] tr[data-name="${NAME}"]`);
  await row.waitFor();
  const tid = await row.getAttribute('data-testid');
  const id = parseInt(tid.slice('enrolkey-'.length), 10);
  const api = (await listed()).find((k) => k.id === id);
  check(!!api && api.name === NAME && api.max_uses === 5 && api.uses === 0, 'the API lists the key with max_uses 5');
  check(typeof api.expires_at === 'string' && Math.abs(Date.parse(api.expires_at) - Date.parse(new Date(nextWeek()))) < 120e3,
    `expires_at is the time entered (${api.expires_at})`);
  await waitAttr(page, `enrolkey-${id}-state`, 'state', 'active');
  check((await byId(page, `enrolkey-${id}-uses`).innerText()) === '0 / 5', 'uses 0 / 5');

  await byId(page, 'enrolkey-done').click();
  check((await byId(page, 'enrolkey-secret').count()) === 0, 'Done hides the secret');
  await page.reload();
  await byId(page, 'enrolkeys-table').waitFor();
  check((await byId(page, 'enrolkey-secret').count()) === 0, 'after a reload no secret is shown');
  check(!(await page.locator('body').innerText()).includes(key), 'the page shows the secret nowhere');
  fs.writeFileSync(INFO_FILE, JSON.stringify({ ...INFO, key_id: id, key }));
}

async function after() {
  const id = INFO.key_id;
  await signIn(page, BASE, TOKEN);
  await page.goto(`${BASE}/ui/#/enrolment-keys`);
  await waitAttr(page, `enrolkey-${id}`, 'uses', '1');
  check((await byId(page, `enrolkey-${id}-uses`).innerText()) === '1 / 5', 'the enrolled node counts: uses 1 / 5');
  await waitAttr(page, `enrolkey-${id}-state`, 'state', 'active');
  check(!(await page.locator('body').innerText()).includes(INFO.key), 'the list shows no secret');
  await shot(page, 'used');

  let asked = '';
  page.once('dialog', (d) => { asked = d.message(); d.dismiss(); });
  await byId(page, `enrolkey-${id}-revoke`).click();
  await page.waitForTimeout(500);
  check(asked.includes(NAME), 'Revoke asks for a confirmation naming the key');
  check((await listed()).find((k) => k.id === id).state === 'active', 'a dismissed confirmation revokes nothing');
  page.once('dialog', (d) => d.accept());
  await byId(page, `enrolkey-${id}-revoke`).click();
  await waitAttr(page, `enrolkey-${id}-state`, 'state', 'revoked');
  check((await byId(page, `enrolkey-${id}-state`).innerText()).includes('revoked'), 'listed as revoked');
  check((await byId(page, `enrolkey-${id}-revoke`).count()) === 0, 'a revoked key has no Revoke button');
  check((await byId(page, `enrolkey-${id}-uses`).innerText()) === '1 / 5', 'its uses stay');
  await shot(page, 'revoked');

  for (const role of ['read', 'operator']) {
    const p = await b.newPage();
    await signIn(p, BASE, INFO[role]);
    await waitAttr(p, 'role', 'role', role);
    check(await byId(p, 'nav-enrolment-keys').isHidden(), `${role}: no Enrolment keys in the nav`);
    await p.goto(`${BASE}/ui/#/enrolment-keys`);
    await byId(p, 'enrolkeys-denied').waitFor();
    check((await byId(p, 'create-enrolkey-form').count()) === 0, `${role}: no create form`);
    check((await byId(p, 'enrolkeys-table').count()) === 0, `${role}: no list`);
    if (role === 'read') await shot(p, 'read');
    await p.close();
  }
}

async function main() {
  b = await browser();
  page = await b.newPage();
  if (PHASE === 'create') await create();
  else if (PHASE === 'after') await after();
  else throw new Error(`unknown phase ${PHASE}`);
  check(b.errors.length === 0, `no page errors (${b.errors.join('; ')})`);
}

run(PREFIX, main, () => page, async () => { if (b) await b.close(); });
