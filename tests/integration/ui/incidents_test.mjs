// Browser test of the incidents' pages (see test_ui_incidents.py, which opens the incident): the
// site page's banner, the list with its filters, the incident page against the API's record, an
// operator's note, the Markdown report, a read token's page, resolving by hand.
//
// Env: CDNCA_URL, CDNCA_ADMIN_TOKEN, CDNCA_INCIDENT (JSON: {site_id, other_site_id, incident_id,
// operator, read} — the two last are tokens), optional CDNCA_ARTIFACTS, CDNCA_CHROMIUM,
// CDNCA_UI_WAIT_MS.
import fs from 'node:fs';
import { need, ok, check, browser, screenshot, byId, waitAttr, signIn, run, WAIT_MS, apiGet } from './lib.mjs';

const BASE = need('CDNCA_URL').replace(/\/+$/, '');
const TOKEN = need('CDNCA_ADMIN_TOKEN');
const INFO = JSON.parse(fs.readFileSync(need('CDNCA_INCIDENT'), 'utf8'));
const SID = INFO.site_id;
const IID = INFO.incident_id;
const PREFIX = 'incidents';
const NOTE = '<b>disk</b> full on origin a\nreplaced by ops';

const api = (path, token = TOKEN) => apiGet(BASE, path, token);

let b = null, b2 = null;
let page = null;
const shot = (p, name) => screenshot(p, PREFIX, name);
const count = (p, sel) => p.locator(sel).count();

/* Open a dashboard address and wait for a test id to be drawn. */
async function open(p, hash, testid) {
  await p.goto(`${BASE}/ui/${hash}`);
  await byId(p, testid).first().waitFor({ state: 'attached' });
}

/* The incident page drawn from a record at least as new as `rec` (entries and deliveries only grow). */
async function openIncident(p, rec) {
  await open(p, `#/incidents/${IID}`, 'incident-timeline');
  await p.waitForFunction((n) => {
    const el = document.querySelector('[data-testid="incident-timeline"]');
    return el && parseInt(el.getAttribute('data-entries'), 10) >= n;
  }, rec.timeline.length, { timeout: WAIT_MS, polling: 100 });
}

async function main() {
  b = await browser();
  page = await b.newPage();
  await signIn(page, BASE, INFO.operator);
  ok('operator signed in');

  // The site page: a banner while the incident is active, linking to it.
  await open(page, `#/sites/${SID}`, 'status-card');
  await waitAttr(page, 'incident-banner', 'incident', String(IID));
  const banner = await byId(page, 'incident-banner').innerText();
  check(/Incident #\d+ is mitigated/.test(banner), `banner says the incident is mitigated ("${banner.split('\n')[0]}")`);
  await shot(page, 'site-banner');
  await byId(page, 'incident-banner-link').click();
  await page.waitForURL(new RegExp(`#/incidents/${IID}$`));
  await byId(page, 'incident-timeline').waitFor();
  ok('the banner links to the incident page');

  // The incident page shows the API's record.
  let rec = await api(`/v1/incidents/${IID}`);
  await openIncident(page, rec);
  await waitAttr(page, 'incident-state', 'state', rec.state);
  check(rec.state === 'mitigated', 'incident mitigated (the site is served from level 2)');
  for (const k of ['detect', 'switch', 'mitigate']) {
    const want = rec.figures[`${k}_ms`];
    check(typeof want === 'number', `API has time to ${k}`);
    await waitAttr(page, `figure-${k}`, 'ms', String(want));
  }
  ok('figures: time to detect, switch and mitigate as the API gives them');
  check((await byId(page, 'figure-resolve').getAttribute('data-ms')) === '', 'time to resolve not known yet');
  check((await byId(page, 'figure-detect').innerText()).includes('time to detect'), 'figure labelled');
  check((await byId(page, 'incident-levels').getAttribute('data-levels')) === rec.levels_served.join(','),
    `levels served ${rec.levels_served.join(' \u2192 ')}`);
  const shownIds = await page.evaluate(() => [...document.querySelectorAll('[data-testid^="tl-entry-"]')]
    .map((e) => parseInt(e.getAttribute('data-testid').slice('tl-entry-'.length), 10)));
  const apiIds = rec.timeline.map((e) => e.id);
  check(apiIds.every((id) => shownIds.includes(id)), `every timeline entry of the API shown (${apiIds.length})`);
  const order = shownIds.filter((id) => apiIds.includes(id));
  const byAt = rec.timeline.slice().sort((x, y) => x.at - y.at || x.id - y.id).map((e) => e.id);
  check(JSON.stringify(order) === JSON.stringify(byAt), 'timeline entries in time order');
  for (const t of ['level.switched', 'incident.opened', 'incident.mitigated', 'origin.health_changed']) {
    check(await count(page, `[data-testid^="tl-entry-"][data-type="${t}"]`) >= 1, `timeline has ${t}`);
  }
  const sw = page.locator('[data-testid^="tl-entry-"][data-type="level.switched"]').first();
  check(/level 1 \u2192 2 \(auto_failover\)/.test(await sw.innerText()), 'the switch entry says level 1 \u2192 2 (auto_failover)');
  check(await count(page, '[data-testid="incident-strip"] .tl-switch') >= 1, 'the strip marks the level switch');
  const prop = rec.propagation.find((x) => x.reason === 'auto_failover');
  check(!!prop && prop.applied === 102 && prop.nodes.length === 100 && prop.nodes_omitted === 2,
    'API: 102 nodes applied the switch, the 100 slowest listed');
  await waitAttr(page, `incident-prop-${prop.seq}`, 'reason', 'auto_failover');
  check((await byId(page, `incident-prop-${prop.seq}`).getAttribute('data-applied')) === String(prop.applied),
    `propagation of publication ${prop.seq}: applied by ${prop.applied}`);
  const prow = byId(page, `incident-prop-${prop.seq}-node-${prop.nodes[0].node_id}`);
  check((await prow.innerText()).includes(prop.nodes[0].node), `per-node row for ${prop.nodes[0].node}`);
  check((await byId(page, `incident-prop-${prop.seq}-summary`).innerText()).includes(`Applied by ${prop.applied} of`),
    'propagation summary: applied / online');
  check(await count(page, `[data-testid^="incident-prop-${prop.seq}-node-"]`) === 100, 'a row for each listed node');
  check((await byId(page, `incident-prop-${prop.seq}-omitted`).innerText()).includes('2 faster ones'),
    'the page says how many faster nodes are not listed');
  check((await byId(page, 'impact-requests').getAttribute('data-count')) === String(rec.impact.total.requests),
    `visitor impact total: ${rec.impact.total.requests} requests`);
  for (const m of rec.impact.by_node) check(await byId(page, `incident-impact-${m.node_id}-${m.origin_id}`).count() === 1, `impact row node ${m.node_id} origin ${m.origin_id}`);
  check(rec.deliveries.length >= 1, 'API: the incident\u2019s events have webhook deliveries');
  for (const d of rec.deliveries) {
    check(await byId(page, `incident-delivery-${d.event_id}-${d.webhook_id}`).count() === 1, `delivery of ${d.event_type} listed`);
  }
  check(await byId(page, 'incident-notes-none').count() === 1, 'no notes yet');
  await shot(page, 'incident');

  // An operator's note is added and shown as text (markup in it stays text).
  await byId(page, 'note-text').fill(NOTE);
  await byId(page, 'note-submit').click();
  const note = page.locator('[data-testid^="incident-note-"]').first();
  await note.waitFor();
  const noteText = await note.innerText();
  check(noteText.includes('<b>disk</b> full on origin a') && noteText.includes('replaced by ops'), 'the note appears with its text');
  check(noteText.includes('oncall'), 'the note names its author');
  check(await count(page, '[data-testid="incident-notes"] b') === 0, 'markup in a note is not rendered');
  await page.locator('[data-testid^="tl-entry-"][data-kind="note"]').first().waitFor();
  ok('the note is on the timeline');

  // The Markdown report.
  const [dl] = await Promise.all([page.waitForEvent('download'), byId(page, 'incident-report').click()]);
  const md = fs.readFileSync(await dl.path(), 'utf8');
  check(dl.suggestedFilename() === `incident-${IID}.md`, `report saved as ${dl.suggestedFilename()}`);
  check(md.includes(`# Incident ${IID}`) && md.includes('time to detect') && md.includes('disk'),
    'the report is the incident\u2019s Markdown with the note');

  // The list: active first, filters by state and site.
  await page.goto(`${BASE}/ui/#/incidents`);
  await byId(page, `incident-row-${IID}`).waitFor();
  check(await byId(page, 'incidents-active').locator(`[data-testid="incident-row-${IID}"]`).count() === 1, 'listed under active');
  check((await byId(page, `incident-row-${IID}`).getAttribute('data-state')) === 'mitigated', 'row state mitigated');
  const row = await byId(page, `incident-row-${IID}`).innerText();
  check(row.includes('inc-shop') && row.includes('an origin turned unhealthy') && /mitigated for /.test(row),
    'row: site, trigger, how long it has lasted');
  check(await byId(page, 'incidents-resolved-empty').count() === 1, 'no resolved incident yet');
  check((await byId(page, 'nav-incidents').getAttribute('aria-current')) === 'page', 'nav entry marked');
  const listBox = await byId(page, 'incidents-active').boundingBox();
  const resolvedBox = await byId(page, 'incidents-resolved').boundingBox();
  check(listBox.y < resolvedBox.y, 'active incidents above resolved ones');
  await shot(page, 'list');
  await byId(page, 'incidents-site').fill(String(INFO.other_site_id));
  await byId(page, 'incidents-filter').locator('button[type=submit]').click();
  await byId(page, 'incidents-active-empty').waitFor();
  check(page.url().endsWith(`#/incidents?site_id=${INFO.other_site_id}`), 'site filter kept in the address');
  ok('another site\u2019s filter lists no incident');
  await page.goto(`${BASE}/ui/#/incidents?state=open`);
  await byId(page, 'incidents-open-empty').waitFor();
  ok('state filter: no open incident (it is mitigated)');
  await page.goto(`${BASE}/ui/#/incidents?state=mitigated&site_id=${SID}`);
  await byId(page, `incident-row-${IID}`).waitFor();
  ok('state and site filter: the mitigated incident');

  // A read token reads it all but gets no note form and no Resolve button.
  b2 = await browser();
  const rp = await b2.newPage();
  await signIn(rp, BASE, INFO.read);
  rec = await api(`/v1/incidents/${IID}`);
  await openIncident(rp, rec);
  await rp.locator('[data-testid^="incident-note-"]').first().waitFor();
  await byId(rp, 'incident-report').waitFor();
  check(await byId(rp, 'note-form').count() === 0, 'read token: no note form');
  check(await byId(rp, 'resolve-form').count() === 0 && await byId(rp, 'resolve-submit').count() === 0, 'read token: no Resolve button');
  await shot(rp, 'incident-read');

  // The operator resolves it by hand: the page, the list and the site page follow.
  await openIncident(page, rec);
  check(await byId(page, 'note-form').count() === 1 && await byId(page, 'resolve-submit').count() === 1,
    'operator: note form and Resolve button');
  page.once('dialog', (d) => d.accept());
  await byId(page, 'resolve-note').fill('primary replaced');
  await byId(page, 'resolve-submit').click();
  await waitAttr(page, 'incident-state', 'state', 'resolved');
  await page.waitForFunction(() => {
    const el = document.querySelector('[data-testid="figure-resolve"]');
    return el && el.getAttribute('data-ms') !== '';
  }, null, { timeout: WAIT_MS, polling: 100 });
  check(await byId(page, 'resolve-submit').count() === 0, 'resolved: no Resolve button');
  check((await byId(page, 'incident-resolved').innerText()).includes('by oncall'), 'resolved by the operator\u2019s token');
  await page.locator('[data-testid^="incident-note-"][data-type="resolve"]').first().waitFor();
  ok('the resolve note is listed');
  await shot(page, 'incident-resolved');
  await page.goto(`${BASE}/ui/#/incidents`);
  await byId(page, 'incidents-resolved').locator(`[data-testid="incident-row-${IID}"]`).waitFor();
  check(/resolved in /.test(await byId(page, `incident-${IID}-duration`).innerText()), 'listed as resolved, with its time to resolve');
  await open(page, `#/sites/${SID}`, 'status-card');
  await waitAttr(page, 'current-level', 'level', '2');
  check(await byId(page, 'incident-banner').count() === 0, 'no banner on the site page once resolved');

  check(b.errors.length === 0 && b2.errors.length === 0, `no page errors (${b.errors.concat(b2.errors).join('; ')})`);
}

run(PREFIX, main, () => page, async () => {
  if (b) await b.close();
  if (b2) await b2.close();
});
