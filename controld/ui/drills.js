/* drills — a site's failover drills on its page (docs/design.md, Drills): start one (operator),
   watch the running one live (its target level's requests and failure share against the drill's
   limit, refreshed with the page), cancel it, and the history of results with each drill's
   figures per origin and the nodes' apply times of its two switches. */
import { h, put, $, tid, field, input, select, button, table, fmtMs, fmtDur, badge, num, api, act, soft,
  fetchNewest, markField, clearEditing } from './core.js';
import { may } from './roles.js';

const HISTORY = 20;

/* "12 / 340 (3.5 %)": failures of requests and their share; a dash before any request. */
function shareText(failures, requests) {
  if (!requests) return '\u2014';
  return `${failures} / ${requests} (${(100 * failures / requests).toFixed(1)} %)`;
}

/* A drill's state or result as one badge word. */
function drillBadge(d, testid) {
  return badge(d.state === 'finished' ? d.result : d.state, testid);
}

/* Empty = null; otherwise the number of hours in ms (the server names a bad value). */
function hoursMs(v) {
  const t = String(v).trim();
  if (t === '') return null;
  return Number.isFinite(Number(t)) ? Math.round(Number(t) * 3600000) : t;
}

/* The figures of one drill: per origin of its target level and the nodes' apply times. */
function drillDetail(d) {
  const applied = (rows, what) => rows && rows.length
    ? table(['Node', 'Publication', `Applied the ${what}`, 'Took'], rows.map((a) => h('tr', null,
      h('td', null, a.node_name || `node ${a.node_id}`), h('td', null, String(a.seq)), h('td', null, fmtMs(a.applied_at)),
      h('td', null, fmtDur(a.took_ms)))), tid(`drill-${d.id}-applied-${what === 'switch' ? 'switch' : 'back'}`))
    : h('p', { class: 'muted' }, `No node has reported applying the ${what} yet.`);
  return h('div', { class: 'drill-detail', ...tid(`drill-${d.id}-detail`) },
    h('h3', null, `Drill #${d.id}: level ${d.from_level} \u2192 ${d.to_level}`),
    d.why ? h('p', tid(`drill-${d.id}-why`), d.why) : null,
    (d.origins || []).length ? table(['Origin', 'Requests', 'Failures', 'Average latency'], d.origins.map((o) =>
      h('tr', { 'data-testid': `drill-${d.id}-origin-${o.origin_id}` },
        h('td', null, o.name || `#${o.origin_id}`), h('td', null, String(o.requests)),
        h('td', null, shareText(o.failures, o.requests)),
        h('td', null, typeof o.latency_avg_ms === 'number' ? `${o.latency_avg_ms.toFixed(1)} ms` : '\u2014'))),
    tid(`drill-${d.id}-origins`)) : h('p', { class: 'muted' }, 'No visitor request reached the target level\u2019s origins.'),
    applied(d.switch_applied, 'switch'), applied(d.back_applied, 'switch back'));
}

/* The drills card of site id. el() is the card; update() reads; paint(levels, current) draws. */
function drillsPanel(id) {
  const st = { list: null, open: null, detail: null };
  const el = h('section', { class: 'card', id: 'drills', ...tid('drills-panel') });
  const elRun = h('div', tid('drill-running-slot'));
  const elHist = h('div', tid('drill-history-slot'));
  const elDetail = h('div', { hidden: true, ...tid('drill-detail-slot') });
  const form = may('operator') ? buildForm() : null;

  function buildForm() {
    /* novalidate: the server checks every value and names the field it refuses */
    const f = h('form', { class: 'grid', novalidate: true, ...tid('drill-form') },
      field('Level to drill', h('select', { name: 'to_level', 'data-field': 'to_level', ...tid('drill-level') })),
      field('Duration (s)', input('duration_s', { type: 'number', min: 10, value: 600, 'data-field': 'duration_ms', ...tid('drill-duration') })),
      field('Abort over failure share', input('max_failure_ratio', { value: '0.02', 'data-field': 'max_failure_ratio', ...tid('drill-ratio') }),
        'of the visitors\u2019 requests to the level, 0 to 1'),
      field('Judged after requests', input('min_requests', { type: 'number', min: 1, value: 100, 'data-field': 'min_requests', ...tid('drill-min-requests') })),
      field('Repeat every (hours)', input('every_h', { placeholder: '(once)', 'data-field': 'every_ms', ...tid('drill-every') }), 'at least 1'),
      h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary', ...tid('drill-start') }, 'Start drill')));
    f.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      const e = f.elements;
      const dur = String(e.duration_s.value).trim();
      const body = { to_level: num(e.to_level.value),
        duration_ms: /^\d+(\.\d+)?$/.test(dur) ? Math.round(Number(dur) * 1000) : dur,
        max_failure_ratio: Number.isFinite(Number(e.max_failure_ratio.value)) ? Number(e.max_failure_ratio.value) : e.max_failure_ratio.value,
        min_requests: num(e.min_requests.value), every_ms: hoursMs(e.every_h.value) };
      if (!window.confirm(`Send the site's visitors to level ${body.to_level} for a drill now?`)) return;
      const r = await act(() => api('POST', `/v1/sites/${id}/drills`, body), 'Drill started.');
      if (r) clearEditing();
      else { const fe = $('#error-banner [data-testid=error-field]'); markField(f, fe ? fe.textContent : null); }
    });
    return f;
  }

  async function openDetail(did) {
    st.open = did;
    st.detail = await api('GET', `/v1/drills/${did}`).catch(soft);
    paintDetail();
  }
  function paintDetail() {
    elDetail.hidden = !st.open;
    if (!st.open) return put(elDetail);
    put(elDetail, st.detail ? drillDetail(st.detail) : h('p', { class: 'muted' }, 'Loading\u2026'),
      button('Close', () => { st.open = null; st.detail = null; paintDetail(); }, { class: 'small', ...tid('drill-detail-close') }));
  }

  function paintRunning(d) {
    if (!d) return put(elRun, h('p', { class: 'muted', ...tid('drill-none') }, 'No drill is running.'));
    const live = d.state === 'running';
    return put(elRun, h('div', { class: 'drill-live', 'data-testid': 'drill-running', 'data-drill': d.id, 'data-state': d.state },
      h('p', null, drillBadge(d, 'drill-running-state'), ` Drill #${d.id}: level ${d.from_level || 1} \u2192 ${d.to_level}`,
        live ? [', ends ', fmtMs(d.ends_at)] : [', starts ', fmtMs(d.start_at)],
        d.every_ms ? ` (every ${fmtDur(d.every_ms)})` : ''),
      live ? h('p', null, 'Visitors\u2019 requests to the level failed: ',
        h('strong', tid('drill-running-share'), shareText(d.failures, d.requests)),
        ` \u2014 aborts over ${(100 * d.max_failure_ratio).toFixed(1)} % once ${d.min_requests} requests are in a window.`) : null,
      may('operator') ? button('Cancel drill', async () => {
        if (!window.confirm(`Cancel drill #${d.id}? A running drill switches back at once.`)) return;
        await act(() => api('POST', `/v1/drills/${d.id}/cancel`), `Drill #${d.id} cancelled.`);
      }, { class: 'danger small', ...tid('drill-cancel') }) : null));
  }

  function paintHistory(done) {
    put(elHist, done.length ? table(['Drill', 'Started', 'Level', 'Result', 'Requests', 'Failures', 'Why', ''], done.map((d) =>
      h('tr', { 'data-testid': `drill-${d.id}`, 'data-result': d.result || '' },
        h('td', null, `#${d.id}`), h('td', null, fmtMs(d.started_at || d.start_at)),
        h('td', null, `${d.from_level || 1} \u2192 ${d.to_level}`), h('td', null, drillBadge(d, `drill-${d.id}-result`)),
        h('td', null, String(d.requests ?? 0)), h('td', null, shareText(d.failures, d.requests)),
        h('td', { class: 'small' }, d.why || ''),
        h('td', null, button('Figures', () => openDetail(d.id), { class: 'small', ...tid(`drill-${d.id}-open`) })))),
    tid('drill-history')) : h('p', { class: 'muted', ...tid('drill-history-none') }, 'No drill has finished yet.'));
  }

  return {
    el: () => {
      put(el, h('h2', null, 'Failover drills'),
        h('p', { class: 'muted' }, 'A drill sends the visitors to a backup level for a while and switches back; it aborts at once when the level fails them.'),
        elRun, form, h('h3', null, 'Results'), elHist, elDetail);
      return el;
    },
    async update() {
      st.list = await fetchNewest(`/v1/sites/${id}/drills`, 'drills', HISTORY).catch(soft);
      if (st.open && st.list && st.list.some((d) => d.id === st.open && d.state !== 'finished'))
        st.detail = await api('GET', `/v1/drills/${st.open}`).catch(soft);
    },
    /* levels: the site's levels ({level, health}); current: its level */
    paint(levels, current) {
      const list = st.list || [];
      paintRunning(list.find((d) => d.state === 'running') || list.find((d) => d.state === 'scheduled'));
      paintHistory(list.filter((d) => d.state === 'finished'));
      paintDetail();
      if (form) {
        const sel = form.elements.to_level;
        const keep = sel.value;
        const opts = levels.filter((l) => l.level > 1 && l.health !== 'empty');
        const key = opts.map((l) => l.level + ':' + l.health).join(',') + '|' + current;
        if (key !== form.dataset.key) {
          form.dataset.key = key;
          put(sel, opts.map((l) => h('option', { value: l.level, selected: String(l.level) === keep }, `Level ${l.level} (${l.health})`)));
        }
      }
    },
  };
}

export { drillsPanel, drillDetail, shareText };
