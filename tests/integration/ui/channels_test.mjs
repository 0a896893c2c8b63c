// Browser test of the channels page (see test_ui_channels.py, which runs the fake Slack receiver
// and checks what it received). An admin finds Channels in the nav, creates a Slack channel (the
// URL, which holds Slack's token, is never shown afterwards), sends a test and sees its delivery
// turn delivered in the deliveries table; a PagerDuty channel with a short routing key is refused
// with the field marked and nothing created; a confirmation (dismissed, then accepted) deletes a
// channel; a read token has no nav entry and no form.
//
// Env: CDNCA_URL, CDNCA_ADMIN_TOKEN, CDNCA_CHANNELS (JSON file: {slack_url, read}; the test adds
// {channel_id}), optional CDNCA_ARTIFACTS, CDNCA_CHROMIUM, CDNCA_UI_WAIT_MS.
import fs from 'node:fs';
import { need, check, browser, screenshot, byId, waitAttr, signIn, run, apiGet } from './lib.mjs';

const BASE = need('CDNCA_URL').replace(/\/+$/, '');
const TOKEN = need('CDNCA_ADMIN_TOKEN');
const INFO_FILE = need('CDNCA_CHANNELS');
const INFO = JSON.parse(fs.readFileSync(INFO_FILE, 'utf8'));
const PREFIX = 'channels';

let b = null;
let page = null;
const shot = (p, name) => screenshot(p, PREFIX, name);

const listed = async () => (await apiGet(BASE, '/v1/channels', TOKEN)).channels;

async function main() {
  b = await browser();
  page = await b.newPage();
  await signIn(page, BASE, TOKEN);
  await waitAttr(page, 'role', 'role', 'admin');
  check(await byId(page, 'nav-channels').isVisible(), 'admin: Channels in the nav');
  await byId(page, 'nav-channels').click();
  await byId(page, 'channels-none').waitFor();

  // a Slack channel: the URL goes in once
  await byId(page, 'channel-kind').selectOption('slack');
  await byId(page, 'channel-name').fill('#cdn-alerts');
  await byId(page, 'channel-url').fill(INFO.slack_url);
  await byId(page, 'create-channel-submit').click();
  const row = page.locator('[data-testid="channels-table"] tr[data-kind="slack"]');
  await row.waitFor();
  const id = parseInt((await row.getAttribute('data-testid')).slice('channel-'.length), 10);
  check((await byId(page, `channel-${id}-target`).innerText()).includes('(set)'), 'the target says the URL is set');
  check(!(await page.locator('body').innerText()).includes(INFO.slack_url), 'the page shows the Slack URL nowhere');
  const api = (await listed()).find((c) => c.id === id);
  check(!!api && api.name === '#cdn-alerts' && api.url_set === true && !('url' in api), 'the API lists it without its URL');
  await shot(page, 'created');

  // a test message and its delivery
  await byId(page, `channel-${id}-test`).click();
  await byId(page, 'channel-deliveries-table').waitFor();
  const drow = page.locator('[data-testid="channel-deliveries-table"] tr[data-event="webhook.test"]');
  await drow.waitFor();
  await page.waitForFunction(() => {
    const r = document.querySelector('[data-testid="channel-deliveries-table"] tr[data-event="webhook.test"]');
    return r && r.getAttribute('data-state') === 'delivered';
  }, null, { timeout: 60000 });
  check(true, 'the test delivery turned delivered');
  await shot(page, 'delivered');

  // bad input: the field is marked, nothing created
  await byId(page, 'channel-kind').selectOption('pagerduty');
  await byId(page, 'channel-routing-key').fill('too-short');
  await byId(page, 'create-channel-submit').click();
  await page.waitForFunction(() => document.querySelector('[data-testid="channel-routing-key"]')?.getAttribute('aria-invalid') === 'true',
    null, { timeout: 30000 }).catch(() => {});
  const body = await page.locator('body').innerText();
  check(body.includes('routing_key'), 'the error names routing_key');
  check((await listed()).length === 1, 'nothing created');

  // delete after a confirmation
  let asked = '';
  page.once('dialog', (d) => { asked = d.message(); d.dismiss(); });
  await byId(page, `channel-${id}-delete`).click();
  await page.waitForTimeout(500);
  check(asked.includes(`#${id}`), 'Delete asks for a confirmation naming the channel');
  check((await listed()).length === 1, 'a dismissed confirmation deletes nothing');
  page.once('dialog', (d) => d.accept());
  await byId(page, `channel-${id}-delete`).click();
  await byId(page, 'channels-none').waitFor();
  check((await listed()).length === 0, 'deleted');

  const p = await b.newPage();
  await signIn(p, BASE, INFO.read);
  await waitAttr(p, 'role', 'role', 'read');
  check(await byId(p, 'nav-channels').isHidden(), 'read: no Channels in the nav');
  await p.goto(`${BASE}/ui/#/channels`);
  await byId(p, 'channels-denied').waitFor();
  check((await byId(p, 'create-channel-form').count()) === 0, 'read: no create form');
  await p.close();
  fs.writeFileSync(INFO_FILE, JSON.stringify({ ...INFO, channel_id: id }));
  check(b.errors.length === 0, `no page errors (${b.errors.join('; ')})`);
}

run(PREFIX, main, () => page, async () => { if (b) await b.close(); });
