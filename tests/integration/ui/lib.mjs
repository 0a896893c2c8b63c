// Shared parts of the dashboard browser tests: Debian's chromium through playwright-core, TAP-like
// "ok N - what" lines, screenshots in the artifacts directory, data-testid lookups.
import { chromium } from 'playwright-core';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));

export function need(name) {
  const v = process.env[name];
  if (!v) {
    console.error(`${name} is not set`);
    process.exit(2);
  }
  return v;
}

export const ARTIFACTS = process.env.CDNCA_ARTIFACTS || path.resolve(here, '../../artifacts');
export const CHROMIUM = process.env.CDNCA_CHROMIUM || '/usr/bin/chromium';
export const WAIT_MS = parseInt(process.env.CDNCA_UI_WAIT_MS || '60000', 10);

let passed = 0;
export function ok(what) {
  passed++;
  console.log(`ok ${passed} - ${what}`);
}
export function check(cond, what) {
  if (!cond) throw new Error(`check failed: ${what}`);
  ok(what);
}

/* A browser: {context, newPage(), close()}; pages record uncaught errors in .errors. */
export async function browser(width = 1280) {
  const userDir = fs.mkdtempSync(path.join(os.tmpdir(), 'cdnca-ui-chromium-'));
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  const context = await chromium.launchPersistentContext(userDir, {
    executablePath: CHROMIUM,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    viewport: { width, height: 900 },
  });
  const errors = [];
  return {
    context, errors,
    async newPage() {
      const p = await context.newPage();
      p.on('pageerror', (e) => errors.push(String(e)));
      p.setDefaultTimeout(WAIT_MS);
      return p;
    },
    async close() {
      await context.close().catch(() => {});
      fs.rmSync(userDir, { recursive: true, force: true });
    },
  };
}

let shot = 0;
export async function screenshot(page, prefix, name) {
  shot++;
  const file = path.join(ARTIFACTS, `${prefix}-${String(shot).padStart(2, '0')}-${name}.png`);
  await page.screenshot({ path: file, fullPage: true });
  console.log(`# screenshot ${file}`);
}

/* One API call from the test itself: {status, body} (body parsed JSON, null when empty). */
export async function apiCall(base, method, path, body, token) {
  const r = await fetch(base + path, {
    method, headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body), signal: AbortSignal.timeout(15000) });
  const text = await r.text();
  return { status: r.status, body: text ? JSON.parse(text) : null };
}

/* A GET that must answer 200: its body. */
export async function apiGet(base, path, token) {
  const r = await apiCall(base, 'GET', path, undefined, token);
  if (r.status !== 200) throw new Error(`GET ${path}: ${r.status}`);
  return r.body;
}

export const byId = (page, t) => page.locator(`[data-testid="${t}"]`);

/* Wait (bounded) until the element with data-testid t has data-<attr> = want. */
export async function waitAttr(page, t, attr, want, timeout = WAIT_MS) {
  try {
    await page.waitForFunction(([id, a, w]) => {
      const el = document.querySelector(`[data-testid="${id}"]`);
      return !!el && el.getAttribute(`data-${a}`) === w;
    }, [t, attr, String(want)], { timeout, polling: 100 });
  } catch (e) {
    const el = await page.$(`[data-testid="${t}"]`);
    const got = el ? await el.getAttribute(`data-${attr}`) : '(no element)';
    throw new Error(`waiting for ${t} data-${attr}=${want}: still ${got} after ${timeout} ms`);
  }
}

/* Sign in on a fresh page with token; waits for the overview. */
export async function signIn(page, base, token) {
  await page.goto(`${base}/ui/#/login`);
  await byId(page, 'login-token').fill(token);
  await byId(page, 'login-submit').click();
  await byId(page, 'summary').waitFor();
}

/* Run main(); print the summary line and exit 0 or 1 (failure screenshot of page()). */
export async function run(prefix, main, page, cleanup) {
  let failed = 0;
  try {
    await main();
  } catch (e) {
    failed = 1;
    console.error(`not ok - ${e.message}`);
    const p = page();
    if (p) {
      try {
        const file = path.join(ARTIFACTS, `${prefix}-failure.png`);
        await p.screenshot({ path: file, fullPage: true });
        console.error(`# failure screenshot ${file}`);
        console.error('# page text:\n' + (await p.locator('body').innerText()).slice(0, 4000));
      } catch (e2) { /* the page is gone */ }
    }
  } finally {
    if (cleanup) await cleanup();
  }
  console.log(`${passed} passed, ${failed} failed`);
  process.exit(failed ? 1 : 0);
}
