/* sites — the sites list (server-side pages, filter by state, search) and the new-site form. */
import {
  h, add, put, $, tid, field, input, select, button, table, badge, num, splitList, listOf, banners,
  api, act, go, refreshNow, markField,
} from './core.js';
import { may } from './roles.js';
import { siteState } from './model.js';

const PAGE_SIZES = [50, 100, 200];
/* The list filters GET /v1/sites takes (state=), with their labels. */
const STATES = [
  ['', 'All sites'], ['on_backup', 'On a backup level'], ['all_down', 'All levels unhealthy'],
  ['failback_available', 'Failback available'], ['paused', 'Health checks paused'],
];
const SEARCH_DELAY_MS = 300;
/* The orders GET /v1/sites takes (sort=); '' = by id. "changed" = the site's last publication
   (a config change or a level switch), newest first. */
const SORTS = [['', 'By site id'], ['changed', 'Last change first']];


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


/* A compact "when": how long ago (the full time on hover). */
function ago(iso) {
  const t = Date.parse(iso || '');
  if (Number.isNaN(t)) return h('span', { class: 'muted' }, '\u2014');
  const s = Math.max(0, Math.round((Date.now() - t) / 1000));
  const text = s < 120 ? `${s} s ago` : s < 7200 ? `${Math.round(s / 60)} min ago`
    : s < 172800 ? `${Math.round(s / 3600)} h ago` : `${Math.round(s / 86400)} days ago`;
  return h('time', { datetime: iso, title: iso }, text);
}

function stateCell(s, site) {
  const st = siteState(site);
  return h('td', { class: 'badges' },
    h('span', { class: 'badge ' + (st.primary ? 'b-ok' : 'b-unk'), 'data-testid': `site-${s.id}-position`,
      'data-state': st.primary ? 'primary' : 'backup' }, st.primary ? 'primary' : 'backup'),
    ' ', badge(st.health, `site-${s.id}-health`),
    st.allDown ? [' ', h('span', { class: 'flag bad', ...tid(`site-${s.id}-all-down`) }, '\u26a0 all down')] : null,
    st.earlierHealthy ? [' ', h('span', { class: 'flag unk', ...tid(`site-${s.id}-failback`) },
      site.failback === 'manual' ? '\u21b6 failback available' : '\u21b6 failing back')] : null);
}

/* The query of a list view from the hash (#/sites?state=..&q=..&limit=..). */
function parseQuery(q) {
  const p = new URLSearchParams(q || '');
  const limit = parseInt(p.get('limit') || '', 10);
  const sort = SORTS.some(([v]) => v === p.get('sort')) ? p.get('sort') : '';
  return { state: p.get('state') || '', q: p.get('q') || '', sort, limit: PAGE_SIZES.includes(limit) ? limit : PAGE_SIZES[0] };
}
function queryHash(f) {
  const p = new URLSearchParams();
  if (f.state) p.set('state', f.state);
  if (f.q) p.set('q', f.q);
  if (f.sort) p.set('sort', f.sort);
  if (f.limit !== PAGE_SIZES[0]) p.set('limit', String(f.limit));
  const t = p.toString();
  return '#/sites' + (t ? '?' + t : '');
}

function pageSites(query) {
  const f = parseQuery(query);
  const st = { after: null, back: [], next: null, shown: 0 };
  let list, info, prev, next, searchTimer = null;
  function setFilter(change) {
    Object.assign(f, change);
    st.after = null;
    st.back = [];
    history.replaceState(null, '', queryHash(f));
    refreshNow();
  }
  return {
    title: 'Sites', nav: 'sites',
    mount(main) {
      list = h('div', { id: 'sites-list' }, h('p', { class: 'muted' }, 'Loading\u2026'));
      info = h('span', { class: 'muted', ...tid('sites-page-info') });
      prev = button('\u2190 Previous', () => { st.after = st.back.pop() ?? null; refreshNow(); }, tid('sites-prev'));
      next = button('Next \u2192', () => { st.back.push(st.after); st.after = st.next; refreshNow(); }, tid('sites-next'));
      const stateSel = h('select', { name: 'state', ...tid('sites-state'), 'aria-label': 'Filter by state' },
        STATES.map(([v, label]) => h('option', { value: v, selected: v === f.state }, label)));
      stateSel.addEventListener('change', () => setFilter({ state: stateSel.value }));
      const search = h('input', { type: 'search', name: 'q', value: f.q, placeholder: 'name or hostname', class: 'w-m',
        'aria-label': 'Search sites', ...tid('sites-search') });
      search.addEventListener('input', () => {
        clearTimeout(searchTimer);
        searchTimer = setTimeout(() => setFilter({ q: search.value.trim() }), SEARCH_DELAY_MS);
      });
      const size = h('select', { name: 'limit', 'aria-label': 'Sites per page', ...tid('sites-limit') },
        PAGE_SIZES.map((n) => h('option', { value: n, selected: n === f.limit }, `${n} per page`)));
      size.addEventListener('change', () => setFilter({ limit: parseInt(size.value, 10) }));
      const sortSel = h('select', { name: 'sort', 'aria-label': 'Order', ...tid('sites-sort') },
        SORTS.map(([v, label]) => h('option', { value: v, selected: v === f.sort }, label)));
      sortSel.addEventListener('change', () => setFilter({ sort: sortSel.value }));
      add(main, h('section', { class: 'card' },
        h('div', { class: 'list-head' }, h('h1', null, 'Sites'), h('span', { class: 'spacer' }),
          h('div', { class: 'toolbar' }, stateSel, search, sortSel, size)),
        list, h('div', { class: 'pager' }, prev, info, next)),
      may('admin') ? siteCreateForm() : null);
    },
    async refresh(alive) {
      const p = new URLSearchParams({ limit: String(f.limit) });
      if (st.after !== null) p.set('after', String(st.after));
      if (f.state) p.set('state', f.state);
      if (f.q) p.set('q', f.q);
      if (f.sort) p.set('sort', f.sort);
      const t0 = performance.now();
      const r = await api('GET', '/v1/sites?' + p.toString());
      if (!alive()) return;
      const sites = listOf(r, 'sites');
      st.next = r && r.next !== null && r.next !== undefined ? r.next : null;
      prev.disabled = st.back.length === 0 && st.after === null;
      next.disabled = st.next === null;
      const first = st.back.length * f.limit;
      info.textContent = sites.length ? ` sites ${first + 1}\u2013${first + sites.length}${st.next === null ? '' : ' (more)'} ` : ' ';
      if (!sites.length) {
        put(list, h('p', { class: 'muted', ...tid('no-sites') }, f.state || f.q ? 'No site matches.' : 'No sites yet. Create one below.'));
      } else {
        put(list, table(['Site', 'Hostnames', 'Level', 'State', 'Health checks', 'Last change'], sites.map((s) => {
          const hc = s.health_check || {};
          return h('tr', { 'data-testid': `site-row-${s.id}` },
            h('td', null, h('a', { href: `#/sites/${s.id}`, 'data-testid': `site-link-${s.id}` }, s.name || `site #${s.id}`)),
            h('td', { class: 'hostnames' }, (s.hostnames || []).join(', ')),
            h('td', { 'data-testid': `site-${s.id}-level` }, s.current_level ?? '\u2014'),
            stateCell(s, s),
            h('td', null, badge(hc.state, `site-${s.id}-hc`)),
            h('td', { class: 'when' }, ago(s.updated_at)));
        }), tid('sites-table')));
      }
      list.dataset.renderMs = String(Math.round(performance.now() - t0));
      list.dataset.rows = String(sites.length);
    },
  };
}

export { pageSites, queryHash, STATES };
