/* incidents — the incidents list (active first, filter by state and site, cursor pages), one
   incident (figures, levels served, propagation per switch, visitor impact, timeline, webhook
   deliveries, notes, resolve, the Markdown report) and the banner the site page shows while its
   site has an active incident. Write controls follow the token's role (roles.js). */
import {
  h, add, put, tid, field, button, table, fmtMs, fmtDur, badge, listOf, api, soft, act,
  refreshNow, clearEditing, showError,
} from './core.js';
import { may } from './roles.js';
import { incidentTimelineView } from './timeline.js';

const PAGE = 50;
const STATES = [['', 'Active first, then resolved'], ['active', 'Active (open or mitigated)'], ['open', 'Open'],
  ['mitigated', 'Mitigated'], ['resolved', 'Resolved']];
const TRIGGERS = {
  origin_unhealthy: 'an origin turned unhealthy', switch: 'an automatic switch',
  all_levels_unhealthy: 'every level unhealthy',
};
const active = (i) => i && (i.state === 'open' || i.state === 'mitigated');

/* How long it took or is taking: "resolved in 4 min 2 s" / "open for 12.0 s". */
function duration(i, now) {
  if (i.state === 'resolved') {
    const ms = i.figures && typeof i.figures.resolve_ms === 'number' ? i.figures.resolve_ms
      : typeof i.resolved_at === 'number' ? i.resolved_at - i.opened_at : null;
    return `resolved in ${fmtDur(ms)}`;
  }
  return `${i.state} for ${fmtDur(now - i.opened_at)}`;
}

/* The list's query from the hash (#/incidents?state=..&site_id=..). */
function parseQuery(q) {
  const p = new URLSearchParams(q || '');
  const state = STATES.some(([v]) => v === p.get('state')) ? p.get('state') : '';
  const site = /^[1-9]\d{0,15}$/.test(p.get('site_id') || '') ? p.get('site_id') : '';
  return { state, site };
}
function queryHash(f) {
  const p = new URLSearchParams();
  if (f.state) p.set('state', f.state);
  if (f.site) p.set('site_id', f.site);
  const t = p.toString();
  return '#/incidents' + (t ? '?' + t : '');
}

/* One list of incidents in one state, with its own cursor pages: {el, reset(), update(f), paint()}. */
function incidentTable(state, title) {
  const st = { after: null, back: [], next: null, rows: null };
  const key = state || 'all';
  const body = h('div', null, h('p', { class: 'muted' }, 'Loading\u2026'));
  const info = h('span', { class: 'muted', ...tid(`incidents-${key}-info`) });
  const prev = button('\u2190 Newer', () => { st.after = st.back.pop() ?? null; refreshNow(); }, tid(`incidents-${key}-prev`));
  const next = button('Older \u2192', () => { st.back.push(st.after); st.after = st.next; refreshNow(); }, tid(`incidents-${key}-next`));
  const el = h('section', { class: 'card', ...tid(`incidents-${key}`) }, h('h2', null, title), body,
    h('div', { class: 'pager' }, prev, info, next));
  return {
    el,
    reset() { st.after = null; st.back = []; },
    async update(f) {
      const p = new URLSearchParams({ limit: String(PAGE) });
      if (state) p.set('state', state);
      if (f.site) p.set('site_id', f.site);
      if (st.after !== null) p.set('after', String(st.after));
      const r = await api('GET', '/v1/incidents?' + p.toString());
      st.rows = listOf(r, 'incidents');
      st.next = r && r.next !== null && r.next !== undefined ? r.next : null;
    },
    paint() {
      const rows = st.rows || [];
      const now = Date.now();
      prev.disabled = st.back.length === 0 && st.after === null;
      next.disabled = st.next === null;
      const first = st.back.length * PAGE;
      info.textContent = rows.length ? ` ${first + 1}\u2013${first + rows.length}${st.next === null ? '' : ' (more)'} ` : ' ';
      if (!rows.length) return put(body, h('p', { class: 'muted', ...tid(`incidents-${key}-empty`) }, 'No incidents.'));
      put(body, table(['Incident', 'Site', 'State', 'Trigger', 'Opened', 'Duration'], rows.map((i) => h('tr', {
        'data-testid': `incident-row-${i.id}`, 'data-state': i.state },
      h('td', null, h('a', { href: `#/incidents/${i.id}`, ...tid(`incident-link-${i.id}`) }, `#${i.id}`)),
      h('td', null, h('a', { href: `#/sites/${i.site_id}` }, i.site_name || `site #${i.site_id}`)),
      h('td', null, badge(i.state, `incident-${i.id}-state`)),
      h('td', null, TRIGGERS[i.trigger] || i.trigger, h('span', { class: 'muted' }, ` (level ${i.opened_level})`)),
      h('td', { class: 'when' }, fmtMs(i.opened_at)),
      h('td', { class: 'when', ...tid(`incident-${i.id}-duration`) }, duration(i, now)))), tid(`incidents-${key}-table`)));
    },
  };
}

function pageIncidents(query) {
  const f = parseQuery(query);
  let lists = [], holder;
  function build() {
    lists = f.state ? [incidentTable(f.state, STATES.find(([v]) => v === f.state)[1])]
      : [incidentTable('active', 'Active (open or mitigated)'), incidentTable('resolved', 'Resolved')];
    put(holder, lists.map((l) => l.el));
  }
  function setFilter(change) {
    Object.assign(f, change);
    history.replaceState(null, '', queryHash(f));
    build();
    refreshNow();
  }
  return {
    title: 'Incidents', nav: 'incidents',
    mount(main) {
      const stateSel = h('select', { name: 'state', 'aria-label': 'Filter by state', ...tid('incidents-state') },
        STATES.map(([v, label]) => h('option', { value: v, selected: v === f.state }, label)));
      stateSel.addEventListener('change', () => setFilter({ state: stateSel.value }));
      const site = h('input', { type: 'number', min: 1, name: 'site_id', value: f.site, class: 'w-s', placeholder: 'site id',
        'aria-label': 'Site id', ...tid('incidents-site') });
      const form = h('form', { class: 'toolbar', ...tid('incidents-filter') }, stateSel, site,
        h('button', { type: 'submit' }, 'Filter'),
        button('All sites', () => { site.value = ''; clearEditing(); setFilter({ site: '' }); }, { class: 'link' }));
      form.addEventListener('submit', (ev) => {
        ev.preventDefault();
        delete form.dataset.dirty;
        clearEditing();
        const v = site.value.trim();
        setFilter({ site: /^\d+$/.test(v) ? v : '' });
      });
      holder = h('div', null);
      add(main, h('section', { class: 'card' },
        h('div', { class: 'list-head' }, h('h1', null, 'Incidents'), h('span', { class: 'spacer' }), form),
        h('p', { class: 'muted' }, 'One incident per outage of a site: opened when an origin of its current level fails, an automatic switch or every level down; mitigated while a healthy other level serves it; resolved once it is back and has stayed healthy.')),
      holder);
      build();
    },
    async refresh(alive) {
      const now = lists;
      await Promise.all(now.map((l) => l.update(f)));
      if (!alive() || now !== lists) return;
      for (const l of now) l.paint();
    },
  };
}

/* ---------- one incident ---------- */

function figureTile(key, label, ms, hint) {
  const known = typeof ms === 'number';
  return h('div', { class: 'tile t-none', 'data-testid': `figure-${key}`, 'data-ms': known ? ms : '' },
    h('span', { class: 'tile-n' }, known ? fmtDur(ms) : '\u2014'), h('span', { class: 'tile-l' }, label),
    hint ? h('span', { class: 'tile-l' }, hint) : null);
}

function propagationCard(prop) {
  if (!prop.length) return h('p', { class: 'muted', ...tid('incident-propagation-none') }, 'No switch was published during this incident.');
  return prop.map((p) => h('div', { class: 'level', 'data-testid': `incident-prop-${p.seq}`, 'data-reason': p.reason,
    'data-applied': p.applied },
  h('div', { class: 'level-head' }, h('h3', null, `Publication ${p.seq}`), h('span', { class: 'tag' }, p.reason),
    h('span', { class: 'muted' }, 'published ', fmtMs(p.published_at))),
  h('p', { class: 'facts-line', ...tid(`incident-prop-${p.seq}-summary`) },
    `Applied by ${p.applied} of ${p.online ?? '?'} online nodes`,
    p.p50_ms !== null && p.p50_ms !== undefined ? ` \u00b7 p50 ${fmtDur(p.p50_ms)}` : '',
    p.max_ms !== null && p.max_ms !== undefined ? ` \u00b7 slowest ${fmtDur(p.max_ms)}` : '',
    p.slowest_node ? [' (', h('strong', null, p.slowest_node), ')'] : '',
    p.all_applied_at ? [' \u00b7 all applied ', fmtMs(p.all_applied_at)] : ''),
  (p.nodes || []).length ? table(['Node', 'Applied at', 'After'], p.nodes.map((n) => h('tr', {
    'data-testid': `incident-prop-${p.seq}-node-${n.node_id}` },
  h('td', null, n.node, h('span', { class: 'muted' }, ` #${n.node_id}`)), h('td', null, fmtMs(n.applied_at)),
  h('td', null, fmtDur(n.after_ms))))) : h('p', { class: 'muted' }, 'No node has asked for it yet.'),
  p.nodes_omitted > 0 ? h('p', { class: 'muted', ...tid(`incident-prop-${p.seq}-omitted`) },
    `The ${p.nodes.length} slowest nodes are listed; ${p.nodes_omitted} faster ones applied it before them.`) : null));
}

function impactCard(impact) {
  const t = (impact && impact.total) || {};
  const by = (impact && impact.by_node) || [];
  return [
    h('div', { class: 'tiles', ...tid('incident-impact-total'), 'data-requests': t.requests ?? 0, 'data-failures': t.failures ?? 0 },
      figureTileN('requests', 'requests', t.requests), figureTileN('failures', 'failures', t.failures, (t.failures || 0) > 0),
      figureTileN('backup-picks', 'backup-level picks', t.backup_picks), figureTileN('fail-open', 'fail-opens', t.fail_open),
      figureTileN('nodes', 'nodes reporting', t.nodes)),
    h('p', { class: 'muted' }, 'First visitor failure seen: ', fmtMs(t.first_failure_at), '; last: ', fmtMs(t.last_failure_at),
      ' (nodes report with every heartbeat).'),
    by.length ? table(['Node', 'Origin', 'Requests', 'Failures', 'Backup-level picks', 'Fail-opens', 'Failures seen'],
      by.map((m) => h('tr', { 'data-testid': `incident-impact-${m.node_id}-${m.origin_id}` },
        h('td', null, m.node, h('span', { class: 'muted' }, ` #${m.node_id}`)), h('td', null, `#${m.origin_id}`),
        h('td', null, m.requests), h('td', null, m.failures), h('td', null, m.backup_picks), h('td', null, m.fail_open),
        h('td', { class: 'when' }, m.first_failure_at ? [fmtMs(m.first_failure_at), ' \u2013 ', fmtMs(m.last_failure_at)] : '\u2014'))),
      tid('incident-impact-table'))
      : h('p', { class: 'muted' }, 'No node reported traffic for this site while it was active.'),
  ];
}
function figureTileN(key, label, n, alarm) {
  return h('div', { class: `tile ${alarm ? 't-bad' : 't-none'}`, 'data-testid': `impact-${key}`, 'data-count': n ?? '' },
    h('span', { class: 'tile-n' }, n ?? '\u2014'), h('span', { class: 'tile-l' }, label));
}

function deliveriesCard(ds) {
  if (!ds.length) return h('p', { class: 'muted', ...tid('incident-deliveries-none') }, 'No webhook deliveries of its events.');
  return table(['Event', 'Webhook', 'State', 'Attempts', 'Last status'], ds.map((d) => h('tr', {
    'data-testid': `incident-delivery-${d.event_id}-${d.webhook_id}`, 'data-state': d.state },
  h('td', null, h('code', null, d.event_type), h('span', { class: 'muted' }, ` event #${d.event_id}`)),
  h('td', null, `#${d.webhook_id}`),
  h('td', null, badge(d.state)),
  h('td', null, d.attempts), h('td', null, d.last_status ?? '\u2014'))), tid('incident-deliveries-table'));
}

function notesList(entries) {
  const notes = entries.filter((e) => e.kind === 'note');
  if (!notes.length) return h('p', { class: 'muted', ...tid('incident-notes-none') }, 'No notes yet.');
  return h('ol', { class: 'events' }, notes.map((e) => h('li', { 'data-testid': `incident-note-${e.id}`, 'data-type': e.type },
    h('div', { class: 'ev-head' }, h('strong', null, e.title || 'operator'), e.type === 'resolve' ? h('span', { class: 'tag' }, 'resolved') : null),
    h('div', { class: 'note-text' }, (e.data && typeof e.data.text === 'string') ? e.data.text : ''),
    h('div', { class: 'ev-meta muted' }, fmtMs(e.at)))));
}

/* Save the incident's Markdown report (GET /v1/incidents/{id}/report) as a file. */
async function downloadReport(id) {
  try {
    const text = await api('GET', `/v1/incidents/${id}/report`, undefined, { text: true });
    const url = URL.createObjectURL(new Blob([text], { type: 'text/markdown' }));
    const a = h('a', { href: url, download: `incident-${id}.md`, hidden: true });
    document.body.appendChild(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
  } catch (e) {
    showError(e);
  }
}

function pageIncident(id) {
  let elTitle, elSummary, elFigures, elTimeline, elProp, elImpact, elDeliveries, elNotes, noteForm, resolveForm;
  function buildNoteForm() {
    const text = h('textarea', { name: 'text', rows: 3, maxlength: 4096, required: true, class: 'w-l',
      placeholder: 'What was found, what was done', ...tid('note-text') });
    const f = h('form', { class: 'note-form', ...tid('note-form') }, field('Add a note', text),
      h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary', ...tid('note-submit') }, 'Add note')));
    f.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      if (!text.value.trim()) return;
      if (await act(() => api('POST', `/v1/incidents/${id}/notes`, { text: text.value }), 'Note added.')) {
        f.reset();
        delete f.dataset.dirty;
        clearEditing();
      }
    });
    return f;
  }
  function buildResolveForm() {
    const note = h('input', { name: 'note', class: 'w-l', maxlength: 4096, placeholder: 'why it is over (optional)',
      'aria-label': 'Note on resolving', ...tid('resolve-note') });
    const f = h('form', { class: 'inline', ...tid('resolve-form') }, note,
      h('button', { type: 'submit', class: 'danger', ...tid('resolve-submit') }, 'Resolve incident'));
    f.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      if (!window.confirm(`Resolve incident #${id} now? It is marked resolved by your token.`)) return;
      const body = note.value.trim() ? { note: note.value } : {};
      if (await act(() => api('POST', `/v1/incidents/${id}/resolve`, body), `Incident #${id} resolved.`)) {
        f.reset();
        delete f.dataset.dirty;
        clearEditing();
      }
    });
    return f;
  }
  function paintSummary(i) {
    put(elTitle, `Incident #${i.id} \u00b7 `, h('a', { href: `#/sites/${i.site_id}` }, i.site_name || `site #${i.site_id}`),
      ' ', badge(i.state, 'incident-state'));
    put(elSummary,
      h('dl', { class: 'facts' },
        h('dt', null, 'Trigger'), h('dd', tid('incident-trigger'), TRIGGERS[i.trigger] || i.trigger,
          h('span', { class: 'muted' }, ` (${i.trigger})`)),
        h('dt', null, 'Opened'), h('dd', null, fmtMs(i.opened_at), ` on level ${i.opened_level}`,
          i.reopened ? h('span', { class: 'muted' }, ` \u00b7 reopened ${i.reopened}\u00d7`) : null),
        h('dt', null, 'First failure'), h('dd', null, fmtMs(i.first_failure_at)),
        h('dt', null, 'Switched'), h('dd', null, i.switched_at ? fmtMs(i.switched_at) : h('span', { class: 'muted' }, 'no switch')),
        h('dt', null, 'Mitigated'), h('dd', null, i.mitigated_at ? fmtMs(i.mitigated_at) : h('span', { class: 'muted' }, 'not yet')),
        h('dt', null, 'Resolved'), h('dd', tid('incident-resolved'), i.resolved_at ? [fmtMs(i.resolved_at),
          i.resolved_by ? [' by ', h('strong', null, i.resolved_by)] : ''] : h('span', { class: 'muted' }, `not yet (${duration(i, Date.now())})`)),
        h('dt', null, 'Levels served'), h('dd', { 'data-testid': 'incident-levels', 'data-levels': (i.levels_served || []).join(',') },
          (i.levels_served || []).length ? i.levels_served.map((l) => `level ${l}`).join(' \u2192 ') : '\u2014')),
      h('div', { class: 'actions' },
        button('Download the report (Markdown)', () => downloadReport(id), tid('incident-report')),
        h('a', { href: `#/incidents?site_id=${i.site_id}` }, 'All incidents of this site')),
      active(i) && may('operator') ? resolveForm : null);
    const f = i.figures || {};
    put(elFigures, figureTile('detect', 'time to detect', f.detect_ms, 'first failed verdict \u2192 opened'),
      figureTile('switch', 'time to switch', f.switch_ms, 'opened \u2192 first switch'),
      figureTile('mitigate', 'time to mitigate', f.mitigate_ms, 'opened \u2192 mitigated'),
      figureTile('resolve', 'time to resolve', f.resolve_ms, 'opened \u2192 resolved'));
  }
  return {
    title: `Incident #${id}`, nav: 'incidents',
    mount(main) {
      elTitle = h('h1', tid('incident-title'), `Incident #${id}`);
      elSummary = h('div', null, h('p', { class: 'muted' }, 'Loading\u2026'));
      elFigures = h('div', { class: 'tiles', ...tid('incident-figures') });
      elTimeline = h('div', null, h('p', { class: 'muted' }, 'Loading\u2026'));
      elProp = h('div', tid('incident-propagation'));
      elImpact = h('div', tid('incident-impact'));
      elDeliveries = h('div', tid('incident-deliveries'));
      elNotes = h('div', tid('incident-notes'));
      noteForm = may('operator') ? buildNoteForm() : null;
      resolveForm = may('operator') ? buildResolveForm() : null;
      add(main, h('div', { class: 'page-head' }, h('a', { href: '#/incidents' }, '\u2190 Incidents'), elTitle),
        h('section', { class: 'card', ...tid('incident-summary') }, elSummary),
        h('section', { class: 'card' }, h('h2', null, 'Figures'), elFigures),
        h('section', { class: 'card', id: 'incident-timeline' }, h('h2', null, 'Timeline'),
          h('p', { class: 'muted' }, 'Every event of the site while the incident was active, in time order; hover the strip for an entry.'), elTimeline),
        h('section', { class: 'card' }, h('h2', null, 'Propagation of each switch'), elProp),
        h('section', { class: 'card' }, h('h2', null, 'Visitor impact'), elImpact),
        h('section', { class: 'card' }, h('h2', null, 'Webhook deliveries'), elDeliveries),
        h('section', { class: 'card' }, h('h2', null, 'Notes'), elNotes, noteForm));
    },
    async refresh(alive) {
      const i = await api('GET', `/v1/incidents/${id}`);
      if (!alive() || !i) return;
      document.title = `Incident #${i.id} (${i.site_name || 'site #' + i.site_id}) \u2014 cdnca`;
      paintSummary(i);
      const entries = Array.isArray(i.timeline) ? i.timeline : [];
      put(elTimeline, incidentTimelineView(entries, i.opened_at, i.resolved_at || Date.now()),
        i.timeline_dropped ? h('p', { class: 'muted' }, `${i.timeline_dropped} later entries were not kept.`) : null);
      put(elProp, propagationCard(Array.isArray(i.propagation) ? i.propagation : []));
      put(elImpact, impactCard(i.impact));
      put(elDeliveries, deliveriesCard(Array.isArray(i.deliveries) ? i.deliveries : []));
      put(elNotes, notesList(entries));
    },
  };
}

/* The banner of a site page: its active incident (newest), or nothing. */
async function siteIncident(siteId) {
  const r = await api('GET', `/v1/incidents?site_id=${siteId}&state=active&limit=1`).catch(soft);
  return listOf(r, 'incidents')[0] || null;
}
function incidentBanner(i) {
  if (!i) return null;
  return h('div', { class: 'alert ' + (i.state === 'open' ? 'bad' : 'unk'), role: 'status', 'data-testid': 'incident-banner',
    'data-incident': i.id, 'data-state': i.state },
  h('strong', null, `\u26a0 Incident #${i.id} is ${i.state}`),
  h('span', null, ' since ', fmtMs(i.opened_at), ` (${TRIGGERS[i.trigger] || i.trigger}).`),
  h('a', { href: `#/incidents/${i.id}`, ...tid('incident-banner-link') }, 'Open the incident \u2192'));
}

export { pageIncidents, pageIncident, siteIncident, incidentBanner };
