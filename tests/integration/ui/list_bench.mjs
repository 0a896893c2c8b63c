// The sites list's render time with a large fleet (reported, not asserted): from the hash change
// to the first page of rows drawn, for the plain list, a state filter and a search; then the audit
// page shows the newest write first although the log holds more records than it reads.
//
// Env: CDNCA_URL, CDNCA_ADMIN_TOKEN, CDNCA_SITES (how many sites the database holds),
// CDNCA_NEWEST_PATH (the path of the newest audited write).
import { need, ok, check, browser, screenshot, byId, signIn, run } from './lib.mjs';

const BASE = need('CDNCA_URL').replace(/\/+$/, '');
const TOKEN = need('CDNCA_ADMIN_TOKEN');
const SITES = need('CDNCA_SITES');
const RUNS = 5;

let b = null;
let page = null;

/* ms from setting location.hash to `rows` rows (or the no-match line) in the sites table. */
function timeList(p, hash, rows) {
  return p.evaluate(([h, want]) => new Promise((resolve, reject) => {
    const t0 = performance.now();
    const give = setTimeout(() => reject(new Error(`no ${want} rows for ${h} within 30 s`)), 30000);
    const tick = () => {
      const t = document.querySelector('[data-testid="sites-table"]');
      const n = t ? t.querySelectorAll('tbody tr').length : 0;
      if (n === want && location.hash === h) {
        clearTimeout(give);
        resolve(performance.now() - t0);
      } else {
        requestAnimationFrame(tick);
      }
    };
    location.hash = h;
    tick();
  }), [hash, rows]);
}
const median = (a) => a.slice().sort((x, y) => x - y)[a.length >> 1];

async function main() {
  b = await browser(1280);
  page = await b.newPage();
  await signIn(page, BASE, TOKEN);
  const cases = [['#/sites', 50, 'first page'], ['#/sites?limit=200', 200, 'first page, 200 rows'],
    ['#/sites?q=bulk-0969', 10, 'search "bulk-0969"'], ['#/sites?sort=changed', 50, 'sorted by last change']];
  for (const [hash, rows, what] of cases) {
    const times = [];
    for (let i = 0; i < RUNS; i++) {
      await page.evaluate(() => { location.hash = '#/'; });
      await byId(page, 'summary').waitFor();
      times.push(await timeList(page, hash, rows));
    }
    const m = median(times);
    console.log(`# list render with ${SITES} sites, ${what}: median ${m.toFixed(0)} ms ` +
      `(runs: ${times.map((t) => t.toFixed(0)).join(', ')} ms)`);
    ok(`measured ${what}`);
  }
  await screenshot(page, 'bench', 'sites-200');
  // The audit log holds more than 10,000 records: the page starts at the newest.
  const newest = need('CDNCA_NEWEST_PATH');
  await page.evaluate(() => { location.hash = '#/audit'; });
  await page.locator('[data-testid="audit-list-table"] tbody tr').first().filter({ hasText: `PATCH ${newest}` }).waitFor();
  ok(`audit page starts at the newest write (PATCH ${newest}) after ${SITES} site creations`);
  await screenshot(page, 'bench', 'audit-newest');
  check(b.errors.length === 0, `no uncaught page errors${b.errors.length ? ': ' + b.errors.join('; ') : ''}`);
}

await run('bench', main, () => page, async () => { if (b) await b.close(); });
