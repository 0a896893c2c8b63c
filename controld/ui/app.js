/* cdnca dashboard: a single page over controld's REST API (/v1), hash-routed, no dependencies. */
'use strict';
(function () {
  const TOKEN_KEY = 'cdnca.admin_token';
  const POLL_MS = 3000;
  const FETCH_TIMEOUT_MS = 15000;
  const EDIT_PAUSE_MS = 10000;
  const EVENT_KEEP = 1000;
  const EVENT_PAGE = 25;
  const EVENT_TYPES = ['level.switched', 'origin.failback_available', 'site.all_levels_unhealthy',
    'site.recovered', 'origin.health_changed'];

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
  };
  /* A state badge: an icon and the word, never colour alone. */
  function badge(state, testid) {
    const s = state === null || state === undefined || state === '' ? 'unknown' : String(state);
    const [icon, cls] = HEALTH[s] || ['\u2022', 'unk'];
    return h('span', { class: 'badge b-' + cls, 'data-testid': testid, 'data-state': s },
      h('span', { 'aria-hidden': 'true' }, icon), ' ' + s);
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

  async function api(method, path, body) {
    const token = auth.get();
    if (!token) {
      const e = new ApiError(401, 'no_token', 'not signed in');
      e.auth = true;
      signOut('Sign in with an admin token.');
      throw e;
    }
    const opts = {
      method, cache: 'no-store', credentials: 'omit', redirect: 'error',
      headers: { Authorization: 'Bearer ' + token, Accept: 'application/json' },
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
    if (text) {
      try { data = JSON.parse(text); } catch (e) { data = null; }
    }
    const e = (data && data.error) || {};
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

  /* An event stream ({events, next}, oldest first) kept in memory, newest last; polls only the new part. */
  function eventFeed(base) {
    let events = [], after = null, primed = false;
    const seen = new Set();
    return {
      get events() { return events; },
      async update() {
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
      case 'level.switched': return `level ${d.from_level} \u2192 ${d.to_level} (${d.reason || '?'})`;
      case 'origin.failback_available': return `level ${d.level} healthy again; current level ${d.current_level}`;
      case 'origin.health_changed':
        return `origin #${d.origin_id}: ${d.from} \u2192 ${d.to}` + (d.source ? ` (${d.source}` +
          (d.votes ? ', ' + votesText(d.votes) : '') + ')' : '');
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
    route();
    if (message) banners.error([h('strong', null, wasIn ? 'Signed out' : 'Sign-in failed'), ' \u2014 ' + message], 'auth');
  }
  function go(hash) {
    if (location.hash === hash) route();
    else location.hash = hash;
  }

  function route() {
    const hash = location.hash || '#/sites';
    if (!auth.get()) return mount(pageLogin(hash === '#/login' ? '#/sites' : hash));
    let m;
    if (hash === '#/login' || hash === '#/' || hash === '#/sites') return mount(pageSites());
    if ((m = /^#\/sites\/(\d+)$/.exec(hash))) return mount(pageSite(parseInt(m[1], 10)));
    if (hash === '#/notifications') return mount(pageNotifications());
    if (hash === '#/nodes') return mount(pageNodes());
    if (hash === '#/webhooks') return mount(pageWebhooks());
    return mount({ title: 'Not found', mount(main) {
      add(main, h('section', { class: 'card' }, h('h1', null, 'Page not found'), h('a', { href: '#/sites' }, 'Back to sites')));
    } });
  }

  /* ---------- login ---------- */

  function pageLogin(next) {
    return {
      title: 'Sign in',
      mount(main) {
        const tok = h('input', { id: 'login-token', name: 'token', type: 'password', autocomplete: 'off',
          spellcheck: 'false', required: true, ...tid('login-token') });
        const form = h('form', { class: 'card narrow', ...tid('login-form') },
          h('h1', null, 'Sign in'),
          h('p', { class: 'muted' }, 'Paste an admin token. It is kept only in this browser tab (session storage) and sent as a Bearer header.'),
          field('Admin token', tok),
          h('button', { type: 'submit', class: 'primary', ...tid('login-submit') }, 'Sign in'));
        form.addEventListener('submit', async (ev) => {
          ev.preventDefault();
          const t = tok.value.trim();
          if (!t) return;
          auth.set(t);
          try {
            await api('GET', '/v1/sites?limit=1');
          } catch (e) {
            if (!e.auth) { auth.clear(); showError(e); }
            return;
          }
          banners.clear();
          go(next);
        });
        add(main, form);
        tok.focus();
      },
    };
  }

  /* ---------- sites list + create ---------- */

  function originRow(levelDefault) {
    const row = h('div', { class: 'origin-row', ...tid('new-origin-row') },
      field('Level', input('level', { type: 'number', min: 1, value: levelDefault, required: true, class: 'w-xs' })),
      field('Address', input('address', { placeholder: '10.0.0.1 (blank row = skipped)', class: 'w-m' })),
      field('Port', input('port', { type: 'number', min: 1, max: 65535, value: 80, class: 'w-s' })),
      field('Scheme', select('scheme', ['http', 'https'], 'http')),
      field('Host header', input('host_header', { placeholder: '(first hostname)', class: 'w-m' })),
      field('Weight', input('weight', { type: 'number', min: 1, value: 1, class: 'w-xs' })));
    add(row, button('Remove', () => row.remove(), { class: 'link', 'aria-label': 'Remove this origin row' }));
    return row;
  }
  function rowOrigin(row) {
    const v = (n) => row.querySelector(`[name=${n}]`).value.trim();
    const o = { level: num(v('level')), address: v('address'), port: num(v('port')), scheme: v('scheme'), weight: num(v('weight')) };
    if (v('host_header')) o.host_header = v('host_header');
    return o;
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

  function siteCreateForm() {
    const rows = h('div', { class: 'origin-rows' }, originRow(1), originRow(2));
    const form = h('form', { class: 'card', id: 'create-site', ...tid('create-site-form') },
      h('h2', null, 'New site'),
      h('div', { class: 'grid' },
        field('Name', input('name', { required: true, 'data-field': 'name', ...tid('site-name') })),
        field('Hostnames', input('hostnames', { required: true, 'data-field': 'hostnames',
          placeholder: 'shop.example.com, www.shop.example.com', ...tid('site-hostnames') }), 'comma or space separated'),
        field('Failback', select('failback', ['auto', 'manual'], 'auto', { 'data-field': 'failback', ...tid('site-failback') })),
        field('Health checks', h('span', null, input('hc_enabled', { type: 'checkbox', checked: true, ...tid('site-hc-enabled') }), ' enabled')),
        field('Health check path', input('path', { value: '/', 'data-field': 'health_check.path', ...tid('site-hc-path') }))),
      h('h3', null, 'Origins'), h('p', { class: 'muted' }, 'Level 1 is the primary; higher levels are backups.'),
      rows,
      h('div', { class: 'actions' },
        button('Add origin', () => rows.appendChild(originRow(rows.children.length + 1)), tid('add-origin-row')),
        h('button', { type: 'submit', class: 'primary', ...tid('create-site-submit') }, 'Create site')));
    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      const used = [...rows.children].filter((r) => r.querySelector('[name=address]').value.trim() !== '');
      const f = form.elements;
      const body = {
        name: f.name.value.trim(), hostnames: splitList(f.hostnames.value), failback: f.failback.value,
        health_check: { enabled: f.hc_enabled.checked, path: f.path.value.trim() || '/' },
        origins: used.map(rowOrigin),
      };
      const site = await act(() => api('POST', '/v1/sites', body));
      if (!site) {
        const e = $('#error-banner [data-testid=error-field]');
        markField(form, e ? e.textContent : null, used);
        return;
      }
      banners.notice(`Site "${body.name}" created.`);
      delete form.dataset.dirty;
      if (site && site.id) go(`#/sites/${site.id}`);
    });
    return form;
  }

  function pageSites() {
    let list;
    return {
      title: 'Sites', nav: 'sites',
      mount(main) {
        list = h('div', { id: 'sites-list' }, h('p', { class: 'muted' }, 'Loading\u2026'));
        add(main, h('section', { class: 'card' }, h('h1', null, 'Sites'), list), siteCreateForm());
      },
      async refresh(alive) {
        const sites = await fetchAll('/v1/sites', 'sites', 100, 20);
        const cards = await Promise.all(sites.map((s) => api('GET', `/v1/sites/${s.id}/status`)
          .catch((e) => { if (e.auth || e.network) throw e; return { error: e }; })));
        if (!alive()) return;
        if (!sites.length) return put(list, h('p', { class: 'muted', ...tid('no-sites') }, 'No sites yet. Create one below.'));
        put(list, table(['Site', 'Hostnames', 'Current level', 'Health checks', 'Status'], sites.map((s, i) => {
          const c = cards[i] || {};
          const hc = c.health_check || {};
          let flag;
          if (c.error) flag = h('span', { class: 'muted' }, 'status unavailable: ' + c.error.message);
          else if (c.all_levels_unhealthy) flag = h('span', { class: 'flag bad', ...tid(`site-${s.id}-all-down`) }, '\u26a0 ALL LEVELS DOWN');
          else if (c.failback_available) flag = h('span', { class: 'flag unk' }, '\u21b6 failback available');
          else flag = h('span', { class: 'muted' }, 'ok');
          return h('tr', { 'data-testid': `site-row-${s.id}` },
            h('td', null, h('a', { href: `#/sites/${s.id}`, 'data-testid': `site-link-${s.id}` }, s.name || `site #${s.id}`)),
            h('td', null, (s.hostnames || []).join(', ')),
            h('td', { 'data-testid': `site-${s.id}-level` }, c.current_level ?? s.current_level ?? '\u2014'),
            h('td', null, badge(hc.state, `site-${s.id}-hc`), hc.reason ? h('small', { class: 'muted' }, ' ' + hc.reason) : null),
            h('td', null, flag));
        }), tid('sites-table')));
      },
    };
  }

  /* ---------- one site: status card, origins, settings, messages ---------- */

  /* Levels from the status card merged with the site's origin configuration, sorted. */
  function mergeLevels(site, status) {
    const levels = new Map();
    const cfg = new Map((site && site.origins || []).map((o) => [o.id, o]));
    for (const l of (status && status.levels) || []) {
      levels.set(l.level, { level: l.level, health: l.health, origins: (l.origins || []).map((o) => {
        const c = cfg.get(o.id) || {};
        cfg.delete(o.id);
        return Object.assign({}, c, o, { enabled: o.enabled ?? c.enabled });
      }) });
    }
    for (const c of cfg.values()) {
      if (!levels.has(c.level)) levels.set(c.level, { level: c.level, health: null, origins: [] });
      levels.get(c.level).origins.push(Object.assign({ health: 'unknown' }, c));
    }
    for (const l of levels.values()) {
      if (!l.health) l.health = l.origins.some((o) => o.enabled !== false) ? 'unknown' : 'empty';
    }
    return [...levels.values()].sort((a, b) => a.level - b.level);
  }
  /* The earliest healthy level before the current one (the manual failback target), or null. */
  function failbackTarget(status) {
    const cur = status.current_level;
    const l = (status.levels || []).filter((x) => x.level < cur && x.health === 'healthy').sort((a, b) => a.level - b.level)[0];
    return l ? l.level : null;
  }

  function pageSite(id) {
    const st = { site: null, status: null, verdictOid: null, verdicts: null, levelsKey: '' };
    const feed = eventFeed(`/v1/sites/${id}/messages`);
    const msgs = eventList('messages-list', false);
    let elTitle, elCard, elLevels, elVerdicts, settings, originForm, switchForm;

    async function switchTo(level, ok) {
      await act(() => api('POST', `/v1/sites/${id}/switch`, { level }), ok || `Switched to level ${level}.`);
    }

    function buildSwitchForm() {
      const sel = h('select', { name: 'level', ...tid('switch-level'), 'aria-label': 'Level to switch to' });
      const f = h('form', { class: 'inline', ...tid('switch-form') }, h('span', { class: 'flabel' }, 'Manual switch to'), sel,
        h('button', { type: 'submit', ...tid('switch-submit') }, 'Switch'));
      f.addEventListener('submit', async (ev) => {
        ev.preventDefault();
        const level = parseInt(sel.value, 10);
        if (!level) return;
        if (!window.confirm(`Switch site to level ${level} now?`)) return;
        await switchTo(level);
      });
      return f;
    }
    function fillSwitch(levels, current) {
      const key = levels.map((l) => l.level + ':' + l.health).join(',') + '|' + current;
      if (key === st.levelsKey) return;
      st.levelsKey = key;
      const sel = switchForm.elements.level;
      const keep = sel.value;
      put(sel, levels.filter((l) => l.health !== 'empty').map((l) => h('option', { value: l.level, selected: String(l.level) === keep },
        `Level ${l.level} (${l.health})${l.level === current ? ' \u2014 current' : ''}`)));
    }

    function buildOriginForm() {
      const f = h('form', { class: 'card', id: 'origin-form', hidden: true, ...tid('origin-form') },
        h('h2', { 'data-role': 'title' }, 'Add origin'),
        h('div', { class: 'grid' },
          field('Level', input('level', { type: 'number', min: 1, required: true, 'data-field': 'level' })),
          field('Address', input('address', { required: true, 'data-field': 'address' })),
          field('Port', input('port', { type: 'number', min: 1, max: 65535, 'data-field': 'port' })),
          field('Scheme', select('scheme', ['http', 'https'], 'http', { 'data-field': 'scheme' })),
          field('Host header', input('host_header', { placeholder: '(first hostname)', 'data-field': 'host_header' })),
          field('Weight', input('weight', { type: 'number', min: 1, 'data-field': 'weight' })),
          field('Enabled', h('span', null, input('enabled', { type: 'checkbox' }), ' takes traffic and is probed'))),
        h('div', { class: 'actions' },
          h('button', { type: 'submit', class: 'primary', ...tid('origin-form-submit') }, 'Save origin'),
          button('Cancel', () => { f.hidden = true; delete f.dataset.dirty; lastInput = 0; }, tid('origin-form-cancel'))));
      f.addEventListener('submit', async (ev) => {
        ev.preventDefault();
        const e = f.elements;
        const body = { level: num(e.level.value), address: e.address.value.trim(), port: num(e.port.value),
          scheme: e.scheme.value, weight: num(e.weight.value), enabled: e.enabled.checked };
        const hh = e.host_header.value.trim();
        if (hh) body.host_header = hh;
        else if (f.dataset.oid && f.dataset.hadHost) body.host_header = null;
        const oid = f.dataset.oid;
        const r = await act(() => oid ? api('PATCH', `/v1/sites/${id}/origins/${oid}`, body)
          : api('POST', `/v1/sites/${id}/origins`, body), oid ? `Origin #${oid} saved.` : 'Origin added.');
        if (r) { f.hidden = true; delete f.dataset.dirty; }
        else { const fe = $('#error-banner [data-testid=error-field]'); markField(f, fe ? fe.textContent : null); }
      });
      return f;
    }
    function openOriginForm(o, level) {
      const e = originForm.elements;
      originForm.dataset.oid = o ? o.id : '';
      if (!o) delete originForm.dataset.oid;
      originForm.dataset.hadHost = o && o.host_header ? '1' : '';
      $('[data-role=title]', originForm).textContent = o ? `Edit origin #${o.id}` : `Add origin to level ${level}`;
      e.level.value = o ? o.level : level;
      e.address.value = o ? o.address || '' : '';
      e.port.value = o ? o.port ?? '' : 80;
      e.scheme.value = o ? o.scheme || 'http' : 'http';
      e.host_header.value = o ? o.host_header || '' : '';
      e.weight.value = o ? o.weight ?? 1 : 1;
      e.enabled.checked = o ? o.enabled !== false : true;
      originForm.hidden = false;
      e.address.focus();
    }

    function buildSettings() {
      const f = h('form', { class: 'card', id: 'site-settings', ...tid('site-settings') },
        h('h2', null, 'Settings'),
        h('div', { class: 'grid' },
          field('Name', input('name', { required: true, 'data-field': 'name' })),
          field('Hostnames', input('hostnames', { 'data-field': 'hostnames', ...tid('settings-hostnames') }), 'comma or space separated'),
          field('Failback', select('failback', ['auto', 'manual'], 'auto', { 'data-field': 'failback', ...tid('settings-failback') })),
          field('Health checks', h('span', null, input('hc_enabled', { type: 'checkbox', ...tid('settings-hc-enabled') }), ' enabled')),
          field('Path', input('path', { 'data-field': 'health_check.path' })),
          field('Timeout (ms)', input('timeout_ms', { type: 'number', min: 1, 'data-field': 'health_check.timeout_ms' })),
          field('Unhealthy after', input('unhealthy_after', { type: 'number', min: 1,
            'data-field': 'health_check.unhealthy_after' }), 'consecutive failures'),
          field('Healthy after', input('healthy_after', { type: 'number', min: 1,
            'data-field': 'health_check.healthy_after' }), 'consecutive successes'),
          field('Checkpoints', h('span', null, input('checkpoints', { type: 'checkbox' }), ' add checkpoint votes'))),
        h('h3', null, 'What healthy means'),
        h('div', { class: 'grid', ...tid('settings-hc-options') },
          field('Check type', select('hc_type', ['http', 'tcp'], 'http', { 'data-field': 'health_check.type', ...tid('settings-hc-type') }),
            'tcp: the connection alone'),
          field('Method', select('hc_method', ['GET', 'HEAD'], 'GET', { 'data-field': 'health_check.method', ...tid('settings-hc-method') })),
          field('Expected codes', input('hc_codes', { placeholder: 'any status < 500', 'data-field': 'health_check.expected_codes',
            ...tid('settings-hc-codes') }), 'codes and ranges, e.g. 200-299, 301'),
          field('Expected body', input('hc_body', { placeholder: 'none', 'data-field': 'health_check.expected_body',
            ...tid('settings-hc-body') }), 'text in the first 64 KiB'),
          field('Health port', input('hc_port', { type: 'number', min: 1, max: 65535, placeholder: "the origin's port",
            'data-field': 'health_check.port', ...tid('settings-hc-port') })),
          field('Interval (ms)', input('hc_interval', { type: 'number', min: 1000, placeholder: 'the global interval',
            'data-field': 'health_check.interval_ms', ...tid('settings-hc-interval') })),
          field('Healthy origins per level', input('hc_quorum', { type: 'number', min: 1, 'data-field': 'health_check.level_min_healthy',
            ...tid('settings-hc-quorum') }), '1 = any healthy origin keeps a level'),
          field('Request headers', h('textarea', { name: 'hc_headers', rows: 3, placeholder: 'Name: value (one per line, up to 8)',
            'data-field': 'health_check.headers', ...tid('settings-hc-headers') }))),
        h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary', ...tid('settings-submit') }, 'Save settings'),
          button('Delete site', async () => {
            if (!window.confirm(`Delete site #${id} and all its origins?`)) return;
            if (await act(() => api('DELETE', `/v1/sites/${id}`), 'Site deleted.')) go('#/sites');
          }, { class: 'danger', ...tid('delete-site') })));
      f.addEventListener('submit', async (ev) => {
        ev.preventDefault();
        const e = f.elements;
        const body = { name: e.name.value.trim(), hostnames: splitList(e.hostnames.value), failback: e.failback.value,
          health_check: Object.assign({ enabled: e.hc_enabled.checked, path: e.path.value.trim(), timeout_ms: num(e.timeout_ms.value),
            unhealthy_after: num(e.unhealthy_after.value), healthy_after: num(e.healthy_after.value), checkpoints: e.checkpoints.checked },
          hcOptions(e)) };
        const r = await act(() => api('PATCH', `/v1/sites/${id}`, body), 'Settings saved.');
        if (r) { delete f.dataset.dirty; if (typeof r === 'object') fillSettings(r, true); }
        else { const fe = $('#error-banner [data-testid=error-field]'); markField(f, fe ? fe.textContent : null); }
      });
      return f;
    }
    /* The health-check options from the form: blank = the default (null). */
    function hcOptions(e) {
      const opt = (v) => (String(v).trim() === '' ? null : num(v));
      const headers = {};
      for (const line of String(e.hc_headers.value).split('\n')) {
        const t = line.trim();
        if (!t) continue;
        const i = t.indexOf(':');
        /* a line without ':' is sent as a name with an empty value: the API names it */
        headers[(i < 0 ? t : t.slice(0, i)).trim()] = i < 0 ? '' : t.slice(i + 1).trim();
      }
      const codes = splitList(e.hc_codes.value);
      return { type: e.hc_type.value, method: e.hc_method.value, headers,
        expected_codes: codes.length ? codes : null,
        expected_body: e.hc_body.value === '' ? null : e.hc_body.value,
        port: opt(e.hc_port.value), interval_ms: opt(e.hc_interval.value),
        level_min_healthy: opt(e.hc_quorum.value) ?? 1 };
    }
    function fillSettings(site, force) {
      if (!force && (settings.dataset.dirty || settings.contains(document.activeElement))) return;
      const e = settings.elements, hc = site.health_check || {};
      e.name.value = site.name || '';
      e.hostnames.value = (site.hostnames || []).join(', ');
      e.failback.value = site.failback || 'auto';
      e.hc_enabled.checked = !!hc.enabled;
      e.path.value = hc.path ?? '/';
      e.timeout_ms.value = hc.timeout_ms ?? '';
      e.unhealthy_after.value = hc.unhealthy_after ?? '';
      e.healthy_after.value = hc.healthy_after ?? '';
      e.checkpoints.checked = !!hc.checkpoints;
      e.hc_type.value = hc.type || 'http';
      e.hc_method.value = hc.method || 'GET';
      e.hc_codes.value = (hc.expected_codes || []).join(', ');
      e.hc_body.value = hc.expected_body ?? '';
      e.hc_port.value = hc.port ?? '';
      e.hc_interval.value = hc.interval_ms ?? '';
      e.hc_quorum.value = hc.level_min_healthy ?? 1;
      e.hc_headers.value = Object.entries(hc.headers || {}).map(([k, v]) => `${k}: ${v}`).join('\n');
    }

    /* The site's success rule in words, from the card's health_check options. */
    function hcRuleText(hc, site) {
      const path = (site && site.health_check && site.health_check.path) || '/';
      const parts = [];
      if (hc.type === 'tcp') parts.push('the TCP connection completes');
      else {
        parts.push(`${hc.method || 'GET'} ${path} answers ` +
          (hc.expected_codes && hc.expected_codes.length ? hc.expected_codes.join(', ') : 'any status below 500'));
        if (hc.expected_body) parts.push(`with "${short(hc.expected_body, 40)}" in the body`);
        const hn = Object.keys(hc.headers || {}).length;
        if (hn) parts.push(`(${hn} extra header${hn > 1 ? 's' : ''})`);
      }
      if (hc.port) parts.push(`on port ${hc.port}`);
      parts.push(hc.interval_ms ? `every ${hc.interval_ms} ms` : 'every global interval');
      if ((hc.level_min_healthy || 1) > 1) parts.push(`; a level needs ${hc.level_min_healthy} healthy origins`);
      return parts.join(' ');
    }
    function paintCard(site, c) {
      if (!c) {
        return put(elCard, h('p', { class: 'muted', ...tid('status-unavailable') },
          'The status card is unavailable right now.'));
      }
      const cur = c.current_level;
      const hc = c.health_check || {};
      const dec = c.decision || null;
      const target = c.failback_available ? failbackTarget(c) : null;
      const p = c.propagation || {};
      let decText = 'no decision reported';
      if (dec) {
        decText = (dec.action === 'switch' ? `switch to level ${dec.to_level}` : `stay on level ${dec.to_level ?? cur}`) +
          (dec.why ? ` \u2014 ${dec.why}` : '');
      }
      put(elCard,
        h('div', { class: 'card-head' },
          h('div', { class: 'current' }, h('span', { class: 'flabel' }, 'Current level'),
            h('span', { class: 'big', 'data-testid': 'current-level', 'data-level': cur ?? '' }, cur ?? '\u2014')),
          h('dl', { class: 'facts' },
            h('dt', null, 'Health checks'), h('dd', null, badge(hc.state, 'hc-state'),
              hc.reason ? h('span', { class: 'muted', ...tid('hc-reason') }, ' ' + hc.reason) : null),
            h('dt', null, 'Healthy means'), h('dd', tid('hc-rule'), hcRuleText(hc, site)),
            h('dt', null, 'Failback'), h('dd', tid('failback-mode'), (c.failback || (site && site.failback) || '?') +
              (c.manual_pin ? ' (held: level chosen by hand, no automatic failback)' : '')),
            h('dt', null, 'Config version'), h('dd', tid('config-version'), c.config_version ?? '\u2014'),
            h('dt', null, 'Propagation'), h('dd', tid('propagation'), p.nodes_online
              ? `${p.nodes_on_current_version ?? 0} of ${p.nodes_online} online nodes on the current version`
              : 'no nodes online'))),
        c.all_levels_unhealthy ? h('div', { class: 'alert bad', role: 'alert', ...tid('all-down-banner') },
          h('strong', null, '\u26a0 All levels are unhealthy.'),
          ` Staying on level ${cur}; visitors may see errors until an origin recovers.`) : null,
        c.failback_available ? h('div', { class: 'alert unk', ...tid('failback-box') },
          target !== null
            ? [h('span', null, `Level ${target} is healthy again. Failback is manual: switch back when ready. `),
              button(`Switch back to level ${target}`, () => switchTo(target, `Switched back to level ${target}.`),
                { class: 'primary big-btn', ...tid('switch-back') })]
            : 'A failback is available, but no earlier level is healthy in this card yet.') : null,
        h('p', { class: 'decision', 'data-testid': 'decision', 'data-action': dec ? dec.action : '' },
          h('span', { class: 'flabel' }, 'Decision: '), decText),
        switchForm);
    }

    function paintLevels(levels, cur) {
      put(elLevels, h('h2', null, 'Levels and origins'), levels.map((l) => h('div',
        { class: 'level' + (l.level === cur ? ' is-current' : ''), 'data-testid': `level-${l.level}` },
        h('div', { class: 'level-head' },
          h('h3', null, `Level ${l.level}`, l.level === 1 ? ' (primary)' : ' (backup)'),
          badge(l.health, `level-${l.level}-health`),
          l.level === cur ? h('span', { class: 'tag' }, 'current') : null,
          h('span', { class: 'spacer' }),
          button('Add origin', () => openOriginForm(null, l.level), { class: 'small', 'data-testid': `add-origin-level-${l.level}` })),
        l.origins.length ? table(['Origin', 'Health', 'Last verdict', 'Last checked', 'Last error', 'Node observations', 'Weight', 'Actions'],
          l.origins.map((o) => {
            const obs = o.node_observations;
            return h('tr', { 'data-testid': `origin-${o.id}`, class: o.enabled === false ? 'disabled' : '' },
              h('td', null, h('strong', null, `#${o.id} `), `${o.scheme || 'http'}://${o.address || '?'}:${o.port ?? '?'}`,
                o.host_header ? h('div', { class: 'muted' }, 'Host: ' + o.host_header) : null,
                o.enabled === false ? h('div', { class: 'tag' }, 'disabled') : null),
              h('td', null, badge(o.health, `origin-${o.id}-health`)),
              h('td', tid(`origin-${o.id}-verdict`), o.last_verdict ? [badge(o.last_verdict), h('div', { class: 'muted' },
                `${votesText(o.votes)}${o.source ? ' \u00b7 via ' + o.source : ''}`)] : h('span', { class: 'muted' }, 'none yet')),
              h('td', null, fmtTime(o.last_checked_at)),
              h('td', { class: 'err' }, o.last_error ? short(o.last_error, 120) : h('span', { class: 'muted' }, '\u2014')),
              h('td', null, obs ? `${obs.requests ?? 0} requests, ${obs.failures ?? 0} failures` : h('span', { class: 'muted' }, '\u2014')),
              h('td', null, o.weight ?? ''),
              h('td', { class: 'row-actions' },
                button('Edit', () => openOriginForm(o), { class: 'small', 'data-testid': `origin-${o.id}-edit` }),
                button(o.enabled === false ? 'Enable' : 'Disable', () => act(() => api('PATCH',
                  `/v1/sites/${id}/origins/${o.id}`, { enabled: o.enabled === false }),
                  `Origin #${o.id} ${o.enabled === false ? 'enabled' : 'disabled'}.`), { class: 'small', 'data-testid': `origin-${o.id}-toggle` }),
                button('Verdicts', () => { st.verdictOid = o.id; st.verdicts = null; paintVerdicts(); refreshNow(); },
                  { class: 'small', 'data-testid': `origin-${o.id}-verdicts` }),
                button('Delete', async () => {
                  if (!window.confirm(`Delete origin #${o.id} (${o.address}:${o.port})?`)) return;
                  await act(() => api('DELETE', `/v1/sites/${id}/origins/${o.id}`), `Origin #${o.id} deleted.`);
                }, { class: 'small danger', 'data-testid': `origin-${o.id}-delete` })));
          })) : h('p', { class: 'muted' }, 'No origins on this level.'))),
      h('div', { class: 'actions' }, button('Add origin on a new level',
        () => openOriginForm(null, (levels.length ? levels[levels.length - 1].level : 0) + 1), tid('add-origin'))));
    }

    function paintVerdicts() {
      if (!st.verdictOid) { elVerdicts.hidden = true; return; }
      elVerdicts.hidden = false;
      const head = h('div', { class: 'level-head' }, h('h2', null, `Verdicts of origin #${st.verdictOid}`), h('span', { class: 'spacer' }),
        button('Close', () => { st.verdictOid = null; paintVerdicts(); }, { class: 'small', ...tid('verdicts-close') }));
      if (!st.verdicts) return put(elVerdicts, head, h('p', { class: 'muted' }, 'Loading\u2026'));
      const rows = listOf(st.verdicts, 'verdicts').concat(listOf(st.verdicts, 'rounds'));
      put(elVerdicts, head, rows.length ? table(['Round', 'Source', 'Votes', 'Verdict', 'State after'], rows.map((v) => {
        const votes = Array.isArray(v.votes) ? v.votes : [];
        return h('tr', null,
          h('td', null, fmtTime(v.round_at || v.at || v.created_at || v.time || v.checked_at)),
          h('td', null, v.source || ''),
          h('td', null, votes.length ? h('ul', { class: 'votes' }, votes.map((x) => h('li', null,
            badge(x.ok ? 'success' : 'failure'), ' ',
            x.node_name || (x.node_id !== undefined && x.node_id !== null ? `node ${x.node_id}` : x.checkpoint || 'control'),
            x.status ? ` \u00b7 HTTP ${x.status}` : '', x.error ? ` \u00b7 ${short(x.error, 80)}` : '',
            x.latency_ms !== undefined && x.latency_ms !== null ? ` \u00b7 ${x.latency_ms} ms` : ''))) : votesText(v.votes)),
          h('td', null, badge(v.verdict || v.result)),
          h('td', null, badge(v.state_after || v.state || v.health_after || v.health)));
      }), tid('verdicts-table')) : h('p', { class: 'muted' }, 'No verdicts recorded yet.'));
    }

    return {
      title: `Site #${id}`, nav: 'sites',
      mount(main) {
        elTitle = h('h1', null, `Site #${id}`);
        elCard = h('section', { class: 'card status-card', id: 'status-card', 'aria-live': 'polite', ...tid('status-card') },
          h('p', { class: 'muted' }, 'Loading\u2026'));
        switchForm = buildSwitchForm();
        elLevels = h('section', { class: 'card', id: 'levels', ...tid('levels') });
        originForm = buildOriginForm();
        elVerdicts = h('section', { class: 'card', id: 'verdicts', hidden: true, ...tid('verdicts') });
        settings = buildSettings();
        add(main, h('div', { class: 'page-head' }, h('a', { href: '#/sites' }, '\u2190 Sites'), elTitle),
          elCard, elLevels, originForm, elVerdicts, settings,
          h('section', { class: 'card' }, h('h2', null, 'Site messages'), msgs.el));
      },
      async refresh(alive) {
        const [site, status] = await Promise.all([api('GET', `/v1/sites/${id}`),
          api('GET', `/v1/sites/${id}/status`).catch(soft)]);
        await feed.update().catch(soft);
        const oid = st.verdictOid;
        let verdicts = null;
        if (oid) verdicts = await api('GET', `/v1/sites/${id}/origins/${oid}/verdicts?limit=10`).catch(soft);
        if (!alive()) return;
        st.site = site || {};
        st.status = status;
        if (oid && oid === st.verdictOid) st.verdicts = verdicts || { verdicts: [] };
        elTitle.textContent = `${st.site.name || 'Site #' + id}`;
        const hn = (st.site.hostnames || []).join(', ');
        if (hn) add(put(elTitle, st.site.name || `Site #${id}`), ' ', h('small', { class: 'muted' }, hn));
        document.title = `${st.site.name || 'Site #' + id} \u2014 cdnca`;
        const levels = mergeLevels(st.site, st.status);
        const cur = st.status ? st.status.current_level : st.site.current_level;
        fillSwitch(levels, cur);
        paintCard(st.site, st.status);
        paintLevels(levels, cur);
        paintVerdicts();
        fillSettings(st.site, false);
        msgs.paint(feed.events);
      },
    };
  }

  /* ---------- notification center ---------- */

  function pageNotifications() {
    const feed = eventFeed('/v1/notifications');
    const list = eventList('notifications-list', true);
    return {
      title: 'Notifications', nav: 'notifications',
      mount(main) {
        add(main, h('section', { class: 'card' }, h('h1', null, 'Notification center'),
          h('p', { class: 'muted' }, 'Every site\u2019s level switches, failback notices and alerts, newest first.'), list.el));
      },
      async refresh(alive) {
        await feed.update();
        if (alive()) list.paint(feed.events);
      },
    };
  }

  /* ---------- nodes ---------- */

  function pageNodes() {
    let list, tokenBox;
    return {
      title: 'Nodes', nav: 'nodes',
      mount(main) {
        list = h('div', null, h('p', { class: 'muted' }, 'Loading\u2026'));
        tokenBox = h('div', { class: 'alert unk', hidden: true, ...tid('node-token-box') });
        const form = h('form', { class: 'card', ...tid('create-node-form') }, h('h2', null, 'Enrol a node'),
          h('div', { class: 'inline' }, field('Name', input('name', { required: true, placeholder: 'edge-fra-1', ...tid('node-name') })),
            h('button', { type: 'submit', class: 'primary', ...tid('create-node-submit') }, 'Create node')), tokenBox);
        form.addEventListener('submit', async (ev) => {
          ev.preventDefault();
          const name = form.elements.name.value.trim();
          const r = await act(() => api('POST', '/v1/nodes', { name }), `Node "${name}" created.`);
          if (!r || !r.token) return;
          form.reset();
          delete form.dataset.dirty;
          const out = h('input', { readonly: true, value: r.token, class: 'w-l mono', ...tid('node-token'), 'aria-label': 'Node token' });
          put(tokenBox, h('p', null, h('strong', null, `Token for node "${r.name || name}" (id ${r.id}).`),
            ' It is shown only this once: copy it now and give it to noded as CDNCA_NODE_TOKEN.'),
          h('div', { class: 'inline' }, out, button('Copy', async () => {
            out.select();
            try {
              await navigator.clipboard.writeText(r.token);
              banners.notice('Token copied.');
            } catch (e) {
              banners.notice('Selected: press Ctrl+C to copy.');
            }
          }, tid('node-token-copy')), button('Done', () => { tokenBox.hidden = true; tokenBox.replaceChildren(); }, tid('node-token-done'))));
          tokenBox.hidden = false;
          out.select();
        });
        add(main, h('section', { class: 'card' }, h('h1', null, 'Nodes'), list), form);
      },
      async refresh(alive) {
        const nodes = listOf(await api('GET', '/v1/nodes'), 'nodes');
        if (!alive()) return;
        if (!nodes.length) return put(list, h('p', { class: 'muted' }, 'No nodes enrolled.'));
        put(list, table(['Name', 'State', 'Last seen', 'Config seq', 'Version', ''], nodes.map((n) => h('tr', { 'data-testid': `node-${n.id}` },
          h('td', null, n.name, h('span', { class: 'muted' }, ` #${n.id}`)),
          h('td', null, badge(n.online ? 'online' : 'offline', `node-${n.id}-online`)),
          h('td', null, fmtTime(n.last_seen_at)), h('td', null, n.config_seq ?? '\u2014'), h('td', null, n.version || '\u2014'),
          h('td', null, button('Revoke', async () => {
            if (!window.confirm(`Revoke node "${n.name}"? Its token stops working at once.`)) return;
            await act(() => api('DELETE', `/v1/nodes/${n.id}`), `Node "${n.name}" revoked.`);
          }, { class: 'small danger', 'data-testid': `node-${n.id}-revoke` })))), tid('nodes-table')));
      },
    };
  }

  /* ---------- webhooks ---------- */

  function genericTable(rows, testid) {
    const cols = [];
    for (const r of rows.slice(0, 20)) for (const k of Object.keys(r || {})) if (!cols.includes(k)) cols.push(k);
    return table(cols, rows.map((r) => h('tr', null, cols.map((k) => h('td', null,
      /_at$/.test(k) && r[k] ? fmtTime(r[k]) : short(r[k], 100))))), tid(testid));
  }

  function pageWebhooks() {
    let list, deliveries;
    const st = { open: null, data: null };
    function paintDeliveries() {
      if (!st.open) { deliveries.hidden = true; return; }
      deliveries.hidden = false;
      const rows = st.data ? listOf(st.data, 'deliveries') : null;
      put(deliveries, h('div', { class: 'level-head' }, h('h2', null, `Deliveries of webhook #${st.open}`), h('span', { class: 'spacer' }),
        button('Close', () => { st.open = null; paintDeliveries(); }, { class: 'small' })),
      rows === null ? h('p', { class: 'muted' }, 'Loading\u2026')
        : rows.length ? genericTable(rows, 'deliveries-table') : h('p', { class: 'muted' }, 'No deliveries yet.'));
    }
    return {
      title: 'Webhooks', nav: 'webhooks',
      mount(main) {
        list = h('div', null, h('p', { class: 'muted' }, 'Loading\u2026'));
        deliveries = h('section', { class: 'card', hidden: true, ...tid('deliveries') });
        const form = h('form', { class: 'card', ...tid('create-webhook-form') }, h('h2', null, 'New webhook'),
          h('div', { class: 'grid' },
            field('URL', input('url', { type: 'url', required: true, placeholder: 'https://hooks.example.com/cdnca',
              'data-field': 'url', ...tid('webhook-url') })),
            field('Secret', input('secret', { type: 'password', autocomplete: 'off', required: true,
              'data-field': 'secret', ...tid('webhook-secret') }), 'signs each delivery (HMAC-SHA256)')),
          h('fieldset', null, h('legend', null, 'Events (none checked = all)'),
            EVENT_TYPES.map((t) => h('label', { class: 'check' }, h('input', { type: 'checkbox', name: 'events', value: t }), ' ' + t))),
          h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary', ...tid('create-webhook-submit') }, 'Create webhook')));
        form.addEventListener('submit', async (ev) => {
          ev.preventDefault();
          const body = { url: form.elements.url.value.trim(), secret: form.elements.secret.value };
          const events = [...form.querySelectorAll('[name=events]:checked')].map((c) => c.value);
          if (events.length) body.events = events;
          if (await act(() => api('POST', '/v1/webhooks', body), 'Webhook created.')) { form.reset(); delete form.dataset.dirty; }
        });
        add(main, h('section', { class: 'card' }, h('h1', null, 'Webhooks'), list), deliveries, form);
      },
      async refresh(alive) {
        const hooks = listOf(await api('GET', '/v1/webhooks'), 'webhooks');
        const open = st.open;
        const d = open ? await api('GET', `/v1/webhooks/${open}/deliveries`).catch(soft) : null;
        if (!alive()) return;
        if (open && open === st.open) st.data = d || { deliveries: [] };
        paintDeliveries();
        if (!hooks.length) return put(list, h('p', { class: 'muted' }, 'No webhooks.'));
        put(list, table(['URL', 'Events', ''], hooks.map((w) => h('tr', { 'data-testid': `webhook-${w.id}` },
          h('td', null, h('span', { class: 'mono' }, w.url), h('span', { class: 'muted' }, ` #${w.id}`)),
          h('td', null, Array.isArray(w.events) && w.events.length ? w.events.join(', ') : h('span', { class: 'muted' }, 'all events')),
          h('td', { class: 'row-actions' },
            button('Test', () => act(async () => {
              await api('POST', `/v1/webhooks/${w.id}/test`);
              st.open = w.id;
              st.data = null;
              paintDeliveries();
            },
              'Test event sent.'), { class: 'small', 'data-testid': `webhook-${w.id}-test` }),
            button('Deliveries', () => { st.open = w.id; st.data = null; paintDeliveries(); refreshNow(); },
              { class: 'small', 'data-testid': `webhook-${w.id}-deliveries` }),
            button('Delete', async () => {
              if (!window.confirm(`Delete webhook #${w.id} (${w.url})?`)) return;
              if (st.open === w.id) st.open = null;
              await act(() => api('DELETE', `/v1/webhooks/${w.id}`), `Webhook #${w.id} deleted.`);
            }, { class: 'small danger', 'data-testid': `webhook-${w.id}-delete` })))), tid('webhooks-table')));
      },
    };
  }

  /* ---------- start ---------- */

  $('#logout').addEventListener('click', () => { auth.clear(); banners.clear(); go('#/login'); });
  window.addEventListener('hashchange', route);
  route();
})();
