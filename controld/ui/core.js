/* core — the dashboard's shared parts: DOM helpers (text only, never innerHTML), formatting,
   banners, the API client, event feeds and the page runner (one page at a time, polls without
   overlap). Every other module imports from here. */
import { lastId } from './model.js';
const TOKEN_KEY = 'cdnca.admin_token';
const POLL_MS = 3000;
const FETCH_TIMEOUT_MS = 15000;
const EDIT_PAUSE_MS = 10000;
const EVENT_KEEP = 1000;
const EVENT_PAGE = 25;
/* the event types a webhook or channel may filter on: controld's event_type_names
   (controld/event.c), in its order; unit.test_ui_model checks that they are the same */
const EVENT_TYPES = ['level.switched', 'origin.failback_available', 'site.all_levels_unhealthy',
  'site.recovered', 'origin.health_changed', 'incident.opened', 'incident.mitigated',
  'incident.resolved', 'failback.ramp_started', 'failback.aborted', 'drill.started', 'drill.finished'];

/* ---------- DOM helpers (text only, never innerHTML) ---------- */

function h(tag, attrs, ...kids) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else if (v === true) el.setAttribute(k, '');
    else el.setAttribute(k, String(v));
  }
  add(el, kids);
  return el;
}
function add(el, ...kids) {
  for (const k of kids.flat(Infinity)) {
    if (k === null || k === undefined || k === false) continue;
    el.appendChild(k instanceof Node ? k : document.createTextNode(String(k)));
  }
  return el;
}
function put(el, ...kids) { el.replaceChildren(); return add(el, kids); }
const $ = (sel, root) => (root || document).querySelector(sel);
const tid = (id) => ({ 'data-testid': id });

function field(label, input, hint) {
  return h('label', { class: 'field' }, h('span', { class: 'flabel' }, label), input,
    hint ? h('small', { class: 'muted' }, hint) : null);
}
function input(name, attrs) { return h('input', Object.assign({ name, id: 'f-' + name }, attrs || {})); }
function select(name, options, value, attrs) {
  return h('select', Object.assign({ name }, attrs || {}),
    options.map((o) => h('option', { value: o, selected: String(o) === String(value) }, o)));
}
function button(text, onclick, attrs) {
  return h('button', Object.assign({ type: 'button', onclick }, attrs || {}), text);
}
function table(cols, rows, attrs) {
  return h('div', { class: 'tablewrap' }, h('table', attrs || {},
    h('thead', null, h('tr', null, cols.map((c) => h('th', { scope: 'col' }, c)))),
    h('tbody', null, rows)));
}

/* Mark the input the API blamed (field like "origins[1].port", "health_check.path", "name"). */
function markField(form, name, rows) {
  for (const el of form.querySelectorAll('[aria-invalid]')) el.removeAttribute('aria-invalid');
  if (!name) return;
  let el = null, m;
  if ((m = /^origins\[(\d+)\]\.(\w+)/.exec(name)) && rows && rows[+m[1]]) el = rows[+m[1]].querySelector(`[name=${m[2]}]`);
  else el = form.querySelector(`[data-field="${CSS.escape(name)}"]`) || form.querySelector(`[name="${CSS.escape(name.split('.').pop())}"]`);
  /* "health_check.headers.X-A", "health_check.expected_codes[1]": the input of the option */
  for (let n = name.replace(/\[\d+\]$/, ''); !el && n.includes('.'); n = n.slice(0, n.lastIndexOf('.')))
    el = form.querySelector(`[data-field="${CSS.escape(n)}"]`);
  if (el) { el.setAttribute('aria-invalid', 'true'); el.focus(); }
}

/* ---------- formatting ---------- */

const pad = (n) => String(n).padStart(2, '0');
function fmtTime(iso) {
  if (!iso) return h('span', { class: 'muted' }, 'never');
  const d = new Date(iso);
  if (isNaN(d.getTime())) return h('span', null, String(iso));
  const s = `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
    `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
  const ago = Math.round((Date.now() - d.getTime()) / 1000);
  let rel = '';
  if (ago >= 0 && ago < 120) rel = ` (${ago} s ago)`;
  else if (ago >= 120 && ago < 7200) rel = ` (${Math.round(ago / 60)} min ago)`;
  return h('time', { datetime: String(iso), title: String(iso) }, s + rel);
}
const HEALTH = {
  healthy: ['\u2713', 'ok'], unhealthy: ['\u2717', 'bad'], unknown: ['?', 'unk'], empty: ['\u2013', 'none'],
  active: ['\u2713', 'ok'], paused: ['\u2016', 'unk'], disabled: ['\u2013', 'none'],
  online: ['\u2713', 'ok'], offline: ['\u2717', 'bad'], success: ['\u2713', 'ok'], failure: ['\u2717', 'bad'],
  open: ['\u26a0', 'bad'], mitigated: ['\u25d0', 'unk'], resolved: ['\u2713', 'ok'],
  delivered: ['\u2713', 'ok'], pending: ['\u231b', 'unk'], failed: ['\u2717', 'bad'],
  scheduled: ['\u231b', 'unk'], running: ['\u25b6', 'unk'], passed: ['\u2713', 'ok'], aborted: ['\u2717', 'bad'],
  cancelled: ['\u2013', 'none'],
};
/* A state badge: an icon and the word, never colour alone. */
function badge(state, testid) {
  const s = state === null || state === undefined || state === '' ? 'unknown' : String(state);
  const [icon, cls] = HEALTH[s] || ['\u2022', 'unk'];
  return h('span', { class: 'badge b-' + cls, 'data-testid': testid, 'data-state': s },
    h('span', { 'aria-hidden': 'true' }, icon), ' ' + s);
}
/* A wall-clock time in ms (as the incidents API gives it) like fmtTime. */
function fmtMs(ms) {
  return typeof ms === 'number' ? fmtTime(new Date(ms).toISOString()) : fmtTime(null);
}
/* A duration in ms in words: "850 ms", "12.3 s", "4 min 5 s", "2 h 10 min"; null = a dash. */
function fmtDur(ms) {
  if (typeof ms !== 'number' || !Number.isFinite(ms)) return '\u2014';
  if (ms < 0) ms = 0;
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(1)} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${Math.round(s % 60)} s`;
  if (s < 172800) return `${Math.floor(s / 3600)} h ${Math.round((s % 3600) / 60)} min`;
  return `${Math.floor(s / 86400)} days ${Math.round((s % 86400) / 3600)} h`;
}
function votesText(v) {
  if (!v || typeof v !== 'object') return '';
  return `${v.success ?? 0} ok / ${v.failure ?? 0} failed`;
}
function short(v, max) {
  if (v === null || v === undefined) return '';
  const s = typeof v === 'object' ? JSON.stringify(v) : String(v);
  return s.length > max ? s.slice(0, max - 1) + '\u2026' : s;
}
/* Integer if the text is one, else the text as typed (the server names the bad field). */
function num(v) {
  const t = String(v).trim();
  return /^-?\d+$/.test(t) ? parseInt(t, 10) : t;
}
function splitList(v) { return String(v).split(/[\s,]+/).filter(Boolean); }
function listOf(resp, key) {
  if (Array.isArray(resp)) return resp;
  if (resp && Array.isArray(resp[key])) return resp[key];
  return [];
}

/* ---------- banners ---------- */

const banners = {
  error(parts, kind) {
    const el = $('#error-banner');
    el.dataset.kind = kind || 'api';
    put(el, h('span', { class: 'msg' }, parts),
      button('\u00d7', () => banners.clear(), { class: 'dismiss', 'aria-label': 'Dismiss' }));
    el.hidden = false;
  },
  clear(kind) {
    const el = $('#error-banner');
    if (kind && el.dataset.kind !== kind) return;
    el.hidden = true;
    el.replaceChildren();
    el.dataset.kind = '';
  },
  notice(text) {
    const el = $('#notice-banner');
    put(el, text);
    el.hidden = false;
    clearTimeout(banners.timer);
    banners.timer = setTimeout(() => { el.hidden = true; }, 6000);
  },
};
function showError(err) {
  if (err && err.auth) return;
  if (err && err.network) {
    banners.error([h('strong', null, 'controld unreachable'), ` \u2014 ${err.message}. Retrying every ${POLL_MS / 1000} s.`], 'network');
    return;
  }
  if (err && err.forbidden) {
    banners.error([h('strong', null, 'Not allowed'), ' \u2014 the role of this token may not do that (403 ',
      h('code', null, err.code), '): ', h('span', tid('error-message'), err.message)], 'forbidden');
    return;
  }
  if (!(err instanceof ApiError)) {
    banners.error(['Unexpected error: ' + (err && err.message ? err.message : String(err))]);
    console.error(err);
    return;
  }
  banners.error([
    h('strong', null, `Error ${err.status}`), err.code ? ` (${err.code})` : '', ': ',
    h('span', tid('error-message'), err.message),
    err.field ? [' \u2014 field ', h('code', tid('error-field'), err.field)] : null,
  ]);
}

/* ---------- API ---------- */

class ApiError extends Error {
  constructor(status, code, message, fieldName) {
    super(message);
    this.status = status;
    this.code = code;
    this.field = fieldName || null;
  }
}
const auth = {
  get: () => sessionStorage.getItem(TOKEN_KEY),
  set: (t) => sessionStorage.setItem(TOKEN_KEY, t),
  clear: () => sessionStorage.removeItem(TOKEN_KEY),
};

/* Call the API; resolves to the parsed JSON answer, or with how.text to the body as text (e.g. a
   Markdown report). Throws ApiError (auth, network, forbidden set for those). */
async function api(method, path, body, how) {
  const token = auth.get();
  if (!token) {
    const e = new ApiError(401, 'no_token', 'not signed in');
    e.auth = true;
    signOut('Sign in with an admin token.');
    throw e;
  }
  const opts = {
    method, cache: 'no-store', credentials: 'omit', redirect: 'error',
    headers: { Authorization: 'Bearer ' + token, Accept: how && how.text ? 'text/*, application/json' : 'application/json' },
  };
  if (body !== undefined) {
    opts.headers['Content-Type'] = 'application/json';
    opts.body = JSON.stringify(body);
  }
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), FETCH_TIMEOUT_MS);
  opts.signal = abort.signal;
  let res, text;
  try {
    res = await fetch(path, opts);
    text = await res.text();
  } catch (e) {
    const err = new ApiError(0, 'unreachable', e.name === 'AbortError' ? 'no answer within 15 s' : 'network error');
    err.network = true;
    throw err;
  } finally {
    clearTimeout(timer);
  }
  banners.clear('network');
  let data = null;
  if (how && how.text && res.ok) return text;
  if (text) {
    try { data = JSON.parse(text); } catch (e) { data = null; }
  }
  const e = (data && data.error) || {};
  if (res.status === 403 && e.code === 'forbidden_role') {
    /* The token is valid but its role may not do this: say so, stay signed in. */
    const err = new ApiError(403, e.code, e.message || 'forbidden');
    err.forbidden = true;
    throw err;
  }
  if (res.status === 401 || res.status === 403) {
    const err = new ApiError(res.status, e.code || 'auth', e.message || res.statusText);
    err.auth = true;
    signOut(`The admin token was rejected (${res.status}${e.message ? ': ' + e.message : ''}). Sign in again.`);
    throw err;
  }
  if (!res.ok) throw new ApiError(res.status, e.code || '', e.message || `HTTP ${res.status} ${res.statusText}`, e.field);
  return data;
}

/* For secondary reads: auth and network errors go up, others are shown and read as null. */
function soft(e) {
  if (e.auth || e.network) throw e;
  showError(e);
  return null;
}

/* Every page of a cursor-paginated list ({key: [...], next}), bounded. */
async function fetchAll(path, key, limit, maxPages) {
  let out = [], after = null;
  for (let i = 0; i < maxPages; i++) {
    const r = await api('GET', `${path}?limit=${limit}` + (after !== null ? `&after=${after}` : ''));
    const got = listOf(r, key);
    out = out.concat(got);
    if (!r || r.next === null || r.next === undefined || got.length === 0) break;
    after = r.next;
  }
  return out;
}

/* Where to start reading an oldest-first, cursor-paginated list ({key: [...], next}) of dense,
   growing ids so that about `keep` of its newest records follow; null = from the start (it is
   short). The API has no newest-first order: model.js lastId finds the end with limit=1 reads. */
async function tailAfter(path, key, keep) {
  const sep = path.includes('?') ? '&' : '?';
  const first = await api('GET', `${path}${sep}limit=100`);
  if (!first || first.next === null || first.next === undefined) return null;
  const last = await lastId(async (after) => {
    const got = listOf(await api('GET', `${path}${sep}limit=1&after=${after}`), key);
    return got.length && typeof got[0].id === 'number' ? got[0].id : null;
  }, first.next);
  return Math.max(0, last - keep);
}

/* The newest records of an oldest-first, cursor-paginated list, newest first: about `keep` of
   them (fewer when its ids are shared with other lists, e.g. deliveries of many webhooks). */
async function fetchNewest(path, key, keep) {
  let after = await tailAfter(path, key, keep), out = [];
  for (let i = 0; i < 20; i++) {
    const r = await api('GET', `${path}?limit=100` + (after !== null ? `&after=${after}` : ''));
    const got = listOf(r, key);
    out = out.concat(got).slice(-keep);
    if (!r || r.next === null || r.next === undefined || got.length === 0) break;
    after = r.next;
  }
  return out.reverse();
}

/* An event stream kept in memory, newest last; polls only the new part. tail: start near the
   newest events (for the global stream, whose ids are dense) instead of at the first one. */
function eventFeed(base, tail) {
  let events = [], after = null, primed = false;
  const seen = new Set();
  return {
    get events() { return events; },
    async update() {
      if (!primed && tail) after = await tailAfter(base, 'events', EVENT_KEEP);
      for (let i = 0; i < (primed ? 5 : 50); i++) {
        const r = await api('GET', `${base}?limit=100` + (after !== null ? `&after=${after}` : ''));
        const got = listOf(r, 'events').filter((e) => e && !seen.has(e.id));
        for (const e of got) seen.add(e.id);
        events = events.concat(got);
        if (events.length > EVENT_KEEP) events = events.slice(-EVENT_KEEP);
        const ids = got.map((e) => e.id).filter((x) => typeof x === 'number');
        if (r && r.next !== null && r.next !== undefined) after = r.next;
        else if (ids.length) after = Math.max(...ids);
        if (!r || r.next === null || r.next === undefined || got.length === 0) break;
      }
      primed = true;
    },
  };
}
function describeEvent(e) {
  const d = e.data || {};
  switch (e.type) {
    case 'level.switched':
      return `level ${d.from_level} \u2192 ${d.to_level} (${d.reason || '?'})` + (d.by ? ` by ${d.by}` : '');
    case 'origin.failback_available': return `level ${d.level} healthy again; current level ${d.current_level}`;
    case 'failback.ramp_started':
      return `ramp level ${d.from_level} \u2192 ${d.to_level}, steps ${(d.steps || []).join('/')}%` + (d.by ? ` by ${d.by}` : '');
    case 'failback.aborted':
      return `ramp to level ${d.to_level} aborted: ${d.why || '?'}`;
    case 'origin.health_changed':
      return `origin #${d.origin_id}: ${d.from} \u2192 ${d.to}` + (d.source ? ` (${d.source}` +
        (d.votes ? ', ' + votesText(d.votes) : '') + ')' : '');
    case 'incident.opened':
      return `${d.trigger || '?'} on level ${d.opened_level ?? '?'}` + (d.reopened ? `, reopened ${d.reopened}\u00d7` : '') +
        (typeof d.detect_ms === 'number' ? `, detected in ${fmtDur(d.detect_ms)}` : '');
    case 'incident.mitigated':
      return `served from level ${d.current_level ?? '?'}` + (typeof d.mitigate_ms === 'number' ? `, mitigated in ${fmtDur(d.mitigate_ms)}` : '');
    case 'incident.resolved':
      return `back on level ${d.current_level ?? '?'}` + (typeof d.resolve_ms === 'number' ? `, resolved in ${fmtDur(d.resolve_ms)}` : '');
    default: return short(e.data, 160);
  }
}
/* Newest-first list of a feed with client-side pages of EVENT_PAGE. */
function eventList(testid, withSite) {
  const state = { page: 0 };
  const el = h('div', tid(testid));
  function paint(events) {
    const all = events.slice().reverse();
    const pages = Math.max(1, Math.ceil(all.length / EVENT_PAGE));
    state.page = Math.min(state.page, pages - 1);
    const shown = all.slice(state.page * EVENT_PAGE, (state.page + 1) * EVENT_PAGE);
    if (!all.length) return put(el, h('p', { class: 'muted' }, 'No messages yet.'));
    put(el, h('ol', { class: 'events' }, shown.map((e) => h('li', { 'data-testid': 'event-' + e.id, 'data-type': e.type },
      h('div', { class: 'ev-head' }, h('strong', null, e.title || e.type), ' ',
        h('code', { class: 'ev-type' }, e.type), withSite && e.site
          ? [' \u00b7 ', h('a', { href: `#/sites/${e.site.id}` }, e.site.name || `site #${e.site.id}`)] : null),
      h('div', { class: 'ev-meta muted' }, fmtTime(e.created_at), ' \u00b7 ', describeEvent(e))))),
    h('div', { class: 'pager' },
      button('\u2190 Newer', () => { state.page--; paint(events); }, { disabled: state.page === 0, ...tid(testid + '-newer') }),
      h('span', { class: 'muted' }, ` page ${state.page + 1} of ${pages} (${all.length} messages) `),
      button('Older \u2192', () => { state.page++; paint(events); }, { disabled: state.page >= pages - 1, ...tid(testid + '-older') })));
  }
  return { el, paint };
}

/* ---------- page runner: one page at a time, polls without overlap ---------- */

const runner = { gen: 0, page: null, timer: null, running: null, again: false };
let lastInput = 0;
let routeFn = () => {};
/* The router signOut and go call (set once by app.js). */
function setRoute(fn) { routeFn = fn; }
/* Forget recent typing (a form was closed or submitted). */
function clearEditing() { lastInput = 0; }
document.addEventListener('input', (ev) => {
  const f = ev.target.closest && ev.target.closest('form');
  if (f) { lastInput = Date.now(); f.dataset.dirty = '1'; }
}, true);

/* True while the operator is typing in a form: polls wait so nothing moves under them. */
function editing() {
  const a = document.activeElement;
  if (a && a.matches && a.matches('input:not([type=checkbox]):not([readonly]), select, textarea') && a.closest('form')) return true;
  return Date.now() - lastInput < EDIT_PAUSE_MS;
}
function setRefreshState(text) { $('#refresh-state').textContent = text; }

function mount(page) {
  runner.gen++;
  clearTimeout(runner.timer);
  runner.page = page;
  runner.running = null;
  runner.again = false;
  lastInput = 0;
  banners.clear('api');
  document.title = `${page.title} \u2014 cdnca`;
  const signedIn = !!auth.get();
  $('#nav').hidden = !signedIn;
  $('#logout').hidden = !signedIn;
  for (const a of document.querySelectorAll('#nav a')) {
    if (a.dataset.nav === page.nav) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  setRefreshState('');
  const main = $('#main');
  main.replaceChildren();
  page.mount(main);
  if (page.refresh) {
    const gen = runner.gen;
    refreshNow().then(() => { if (gen === runner.gen) schedule(POLL_MS); });
  }
}
function schedule(ms) {
  const gen = runner.gen;
  clearTimeout(runner.timer);
  runner.timer = setTimeout(() => tick(gen), ms);
}
async function tick(gen) {
  if (gen !== runner.gen) return;
  if (editing()) {
    setRefreshState('Auto refresh paused while editing');
  } else {
    await refreshNow();
  }
  if (gen === runner.gen) schedule(POLL_MS);
}
/* Refresh the current page now; a call during a refresh runs one more after it, never two at once. */
function refreshNow() {
  const page = runner.page, gen = runner.gen;
  if (!page || !page.refresh) return Promise.resolve();
  if (runner.running) { runner.again = true; return runner.running; }
  const alive = () => gen === runner.gen;
  runner.running = (async () => {
    do {
      runner.again = false;
      try {
        await page.refresh(alive);
        if (alive()) {
          banners.clear('network');
          const d = new Date();
          setRefreshState(`Updated ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`);
        }
      } catch (e) {
        if (alive()) { showError(e); setRefreshState('Refresh failed'); }
      }
    } while (runner.again && alive());
  })().finally(() => { if (alive()) runner.running = null; });
  return runner.running;
}
/* Run an action (a write); report its error; refresh the page after success. */
async function act(fn, okText) {
  try {
    const r = await fn();
    banners.clear('api');
    if (okText) banners.notice(okText);
    lastInput = 0;
    if (document.activeElement && document.activeElement.blur) document.activeElement.blur();
    refreshNow();
    return r ?? true;
  } catch (e) {
    showError(e);
    return null;
  }
}

function signOut(message) {
  const wasIn = !!(runner.page && runner.page.nav);
  auth.clear();
  routeFn();
  if (message) banners.error([h('strong', null, wasIn ? 'Signed out' : 'Sign-in failed'), ' \u2014 ' + message], 'auth');
}
function go(hash) {
  if (location.hash === hash) routeFn();
  else location.hash = hash;
}


export {
  POLL_MS, EVENT_TYPES, h, add, put, $, tid, field, input, select, button, table, pad, fmtTime,
  fmtMs, fmtDur, badge, votesText, short, num, splitList, listOf, banners, showError, ApiError, auth, api, soft,
  fetchAll, fetchNewest, tailAfter, eventFeed, describeEvent, eventList, runner, editing, clearEditing, setRoute, mount,
  refreshNow, act, signOut, go, markField,
};
