/* audit — who changed what: the audit log (GET /v1/audit), globally or for one site, newest first. */
import { h, add, put, tid, button, table, fmtTime, badge, listOf, api, tailAfter } from './core.js';

const KEEP = 2000;     /* records kept in memory per view */
const PAGE = 25;       /* rows per page on screen */
const FETCH = 200;     /* records per request */

/* A list over the audit log (siteId null = every site): {el, update(), paint()}. update() reads
   the records newer than the last one seen (bounded); paint() draws them. */
function auditList(testid, siteId) {
  const st = { rows: [], after: null, primed: false, page: 0, missing: false };
  const seen = new Set();
  const el = h('div', tid(testid));
  async function update() {
    /* The global log's ids are dense: start near its end. A site's own records are read from its
       first one (they are sparse in the id space). */
    if (!st.primed && (siteId === null || siteId === undefined)) {
      try {
        st.after = await tailAfter('/v1/audit', 'audit', KEEP);
      } catch (e) {
        if (e.status === 404 && !e.auth) { st.missing = true; return; }
        throw e;
      }
    }
    for (let i = 0; i < (st.primed ? 5 : 50); i++) {
      const p = new URLSearchParams({ limit: String(FETCH) });
      if (st.after !== null) p.set('after', String(st.after));
      if (siteId !== null && siteId !== undefined) p.set('site_id', String(siteId));
      let r;
      try {
        r = await api('GET', '/v1/audit?' + p.toString());
      } catch (e) {
        if (e.status === 404 && !e.auth) { st.missing = true; return; }
        throw e;
      }
      const got = listOf(r, 'audit').filter((a) => a && !seen.has(a.id));
      for (const a of got) seen.add(a.id);
      st.rows = st.rows.concat(got);
      if (st.rows.length > KEEP) st.rows = st.rows.slice(-KEEP);
      const ids = got.map((a) => a.id).filter((x) => typeof x === 'number');
      if (r && r.next !== null && r.next !== undefined) st.after = r.next;
      else if (ids.length) st.after = Math.max(...ids);
      if (!r || r.next === null || r.next === undefined || got.length === 0) break;
    }
    st.primed = true;
  }
  function paint() {
    if (st.missing) return put(el, h('p', { class: 'muted' }, 'This controld keeps no audit log.'));
    const all = st.rows.slice().reverse();
    if (!all.length) return put(el, h('p', { class: 'muted', ...tid(testid + '-empty') }, 'No changes recorded yet.'));
    const pages = Math.max(1, Math.ceil(all.length / PAGE));
    st.page = Math.min(st.page, pages - 1);
    const shown = all.slice(st.page * PAGE, (st.page + 1) * PAGE);
    put(el, table(['When', 'Who', 'Request', siteId === null ? 'Site' : null, 'Result', 'What'].filter(Boolean),
      shown.map((a) => h('tr', { 'data-testid': `audit-${a.id}`, 'data-token': a.token ? a.token.name : '' },
        h('td', null, fmtTime(a.at)),
        h('td', { class: 'who' }, a.token ? [h('strong', null, a.token.name || `token #${a.token.id}`)] : '\u2014'),
        h('td', null, h('code', null, `${a.method} ${a.path}`)),
        siteId === null ? h('td', null, a.site_id ? h('a', { href: `#/sites/${a.site_id}` }, `#${a.site_id}`) : '\u2014') : null,
        h('td', null, badge(a.status >= 200 && a.status < 300 ? 'success' : 'failure'), ` ${a.status}`),
        h('td', null, a.summary || ''))), tid(testid + '-table')),
    pages > 1 ? h('div', { class: 'pager' },
      button('\u2190 Newer', () => { st.page--; paint(); }, { disabled: st.page === 0, ...tid(testid + '-newer') }),
      h('span', { class: 'muted' }, ` page ${st.page + 1} of ${pages} (${all.length} records) `),
      button('Older \u2192', () => { st.page++; paint(); }, { disabled: st.page >= pages - 1, ...tid(testid + '-older') })) : null);
  }
  return { el, update, paint };
}

/* The global audit page. */
function pageAudit() {
  const list = auditList('audit-list', null);
  return {
    title: 'Audit', nav: 'audit',
    mount(main) {
      add(main, h('section', { class: 'card' }, h('h1', null, 'Audit log'),
        h('p', { class: 'muted' }, 'Every accepted change through the API, with the token that made it, newest first.'), list.el));
    },
    async refresh(alive) {
      await list.update();
      if (alive()) list.paint();
    },
  };
}

export { auditList, pageAudit };
