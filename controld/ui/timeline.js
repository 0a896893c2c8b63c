/* timeline — a site's health over time, drawn from the verdict history: per origin a strip of
   success/failure marks (state changes and level switches marked, hover shows the evidence), a
   latency sparkline, and the propagation of the site's config to each node; an incident's
   timeline on the same kind of strip. Inline SVG only. */
import { h, put, tid, badge, table, fmtTime, fmtMs, short, describeEvent } from './core.js';
import { originMarks, levelSwitches, windowOf } from './model.js';

const SVG_NS = 'http://www.w3.org/2000/svg';
const W = 1000;        /* viewBox width of a strip; marks are placed in this space */
const STRIP_H = 28;    /* success marks fill the upper half, failures the lower: shape, not only colour */
const SPARK_H = 24;

function svg(tag, attrs, ...kids) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v !== null && v !== undefined && v !== false) el.setAttribute(k, String(v));
  }
  for (const k of kids.flat()) if (k) el.appendChild(k);
  return el;
}

const xOf = (t, win) => ((t - win.t0) / (win.t1 - win.t0)) * W;

function voteText(v) {
  const who = v.node_name || (v.node_id !== null && v.node_id !== undefined ? `node ${v.node_id}` : v.checkpoint || 'control');
  return `${who}: ${v.ok ? 'ok' : 'failed'}` + (v.status ? ` HTTP ${v.status}` : '') +
    (v.error ? ` (${short(v.error, 60)})` : '') + (typeof v.latency_ms === 'number' ? ` ${v.latency_ms} ms` : '');
}
/* The words a hover shows for one mark. */
function markText(m) {
  const ok = m.votes.filter((v) => v.ok).length;
  return [
    `${new Date(m.t).toLocaleTimeString()} \u2014 ${m.verdict || 'no verdict'} via ${m.source || '?'}` +
      ` (${ok} ok / ${m.votes.length - ok} failed)` + (m.latency !== null ? `, ${m.latency} ms` : ''),
    `state after: ${m.state}${m.changed ? ' (changed)' : ''}`,
    ...m.votes.map(voteText),
  ];
}

/* One origin's strip: marks, state-change lines, level-switch lines; data-* for tests. */
function strip(oid, marks, switches, win, tip) {
  const step = marks.length > 1 ? W / marks.length : W / 40;
  const mw = Math.max(2, Math.min(14, step * 0.7));
  const g = svg('svg', { viewBox: `0 0 ${W} ${STRIP_H}`, preserveAspectRatio: 'none', class: 'tl-svg',
    role: 'img', 'aria-label': `origin ${oid}: ${marks.length} verdicts` },
  svg('line', { x1: 0, x2: W, y1: STRIP_H / 2, y2: STRIP_H / 2, class: 'tl-axis' }));
  for (const s of switches) {
    if (s.t < win.t0) continue;
    const x = xOf(s.t, win);
    g.appendChild(svg('line', { x1: x, x2: x, y1: 0, y2: STRIP_H, class: 'tl-switch', 'data-testid': `tl-switch-${oid}-${s.id}` }));
  }
  marks.forEach((m, i) => {
    const x = xOf(m.t, win);
    if (m.changed) {
      g.appendChild(svg('line', { x1: x, x2: x, y1: 0, y2: STRIP_H, class: 'tl-change st-' + m.state,
        'data-testid': `tl-change-${oid}`, 'data-state': m.state }));
    }
    const cls = m.verdict === 'success' ? 'ok' : m.verdict === 'failure' ? 'bad' : 'none';
    const y = cls === 'ok' ? 2 : cls === 'bad' ? STRIP_H / 2 + 1 : STRIP_H / 2 - 3;
    const hgt = cls === 'none' ? 6 : STRIP_H / 2 - 3;
    g.appendChild(svg('rect', { x: x - mw / 2, y, width: mw, height: hgt, class: 'tl-mark m-' + cls,
      'data-testid': `tl-mark-${oid}`, 'data-verdict': m.verdict || 'none', 'data-i': i }));
  });
  const wrap = h('div', { class: 'tl-strip', 'data-testid': `timeline-${oid}`, 'data-marks': marks.length,
    'data-changes': marks.filter((m) => m.changed).length }, g);
  /* Hover: the mark nearest the pointer (thin marks are hard to hit exactly). */
  wrap.addEventListener('mousemove', (ev) => {
    if (!marks.length) return;
    const r = wrap.getBoundingClientRect();
    const t = win.t0 + ((ev.clientX - r.left) / r.width) * (win.t1 - win.t0);
    let best = 0;
    for (let i = 1; i < marks.length; i++) if (Math.abs(marks[i].t - t) < Math.abs(marks[best].t - t)) best = i;
    tip.show(markText(marks[best]), ev.clientX - r.left, wrap, oid, best);
  });
  wrap.addEventListener('mouseleave', () => tip.hide());
  return wrap;
}

/* Latency sparkline of one origin on the same time axis; null when no latency is known. */
function sparkline(oid, marks, win) {
  const pts = marks.filter((m) => m.latency !== null);
  if (!pts.length) return null;
  const max = Math.max(1, ...pts.map((m) => m.latency));
  const line = pts.map((m) => `${xOf(m.t, win).toFixed(1)},${(SPARK_H - 1 - (m.latency / max) * (SPARK_H - 2)).toFixed(1)}`).join(' ');
  const last = pts[pts.length - 1].latency;
  return h('div', { class: 'tl-spark', 'data-testid': `sparkline-${oid}`, 'data-points': pts.length },
    svg('svg', { viewBox: `0 0 ${W} ${SPARK_H}`, preserveAspectRatio: 'none', class: 'tl-svg', role: 'img',
      'aria-label': `latency of origin ${oid}, last ${last} ms, max ${max} ms` },
    svg('polyline', { points: pts.length > 1 ? line : `0,${line.split(',')[1]} ${line}`, class: 'tl-line' })),
    h('span', { class: 'tl-spark-label muted' }, `latency ${last} ms (max ${max} ms)`));
}

/* The floating box a hover fills. */
function tooltip() {
  const el = h('div', { class: 'tl-tip', role: 'tooltip', hidden: true, ...tid('timeline-tip') });
  return {
    el,
    show(lines, x, within, oid, i) {
      put(el, lines.map((l, k) => h('div', { class: k === 0 ? 'tl-tip-head' : '' }, l)));
      el.dataset.origin = String(oid);
      el.dataset.i = String(i);
      el.hidden = false;
      const box = within.closest('.timeline');
      const off = within.getBoundingClientRect().left - box.getBoundingClientRect().left;
      const top = within.getBoundingClientRect().bottom - box.getBoundingClientRect().top + 4;
      el.style.left = Math.max(0, Math.min(box.clientWidth - 320, off + x - 40)) + 'px';
      el.style.top = top + 'px';
    },
    hide() { el.hidden = true; },
  };
}

/* The whole timeline card body: origins [{id, level, address, port}], verdictsBy Map(oid → API
   verdicts), events (the site's messages), now (ms). */
function timelineView(origins, verdictsBy, events, now) {
  const tip = tooltip();
  const marks = origins.map((o) => originMarks(verdictsBy.get(o.id)));
  const win = windowOf(marks, now);
  const switches = levelSwitches(events).filter((s) => s.t >= win.t0);
  const rows = origins.map((o, i) => h('div', { class: 'tl-row' },
    h('div', { class: 'tl-label' }, h('strong', null, `#${o.id}`), ` L${o.level} `,
      h('span', { class: 'muted' }, `${o.address}:${o.port}`)),
    h('div', { class: 'tl-body' }, strip(o.id, marks[i], switches, win, tip), sparkline(o.id, marks[i], win))));
  const total = marks.reduce((n, m) => n + m.length, 0);
  return h('div', { class: 'timeline', 'data-testid': 'timeline', 'data-marks': total },
    h('div', { class: 'tl-axis-labels muted' }, h('span', null, fmtTime(new Date(win.t0).toISOString())),
      h('span', null, `${Math.round((win.t1 - win.t0) / 1000)} s`), h('span', null, 'now')),
    total ? rows : h('p', { class: 'muted' }, 'No verdicts recorded yet.'),
    h('div', { class: 'tl-legend muted' },
      h('span', { class: 'lg lg-ok' }, 'success'), h('span', { class: 'lg lg-bad' }, 'failure'),
      h('span', { class: 'lg lg-change' }, 'state change'), h('span', { class: 'lg lg-switch' }, 'level switch')),
    switches.length ? h('ul', { class: 'tl-switches', ...tid('timeline-switches') }, switches.map((s) => h('li', null,
      fmtTime(new Date(s.t).toISOString()), ` level ${s.from} \u2192 ${s.to} (${s.reason})`, s.by ? ` by ${s.by}` : ''))) : null,
    tip.el);
}

/* The mark class of an incident timeline entry: shape and colour as on the health strips. */
function entryClass(e) {
  if (e.kind === 'note') return 'note';
  switch (e.type) {
    case 'incident.opened': case 'site.all_levels_unhealthy': return 'bad';
    case 'incident.mitigated': case 'origin.failback_available': return 'unk';
    case 'incident.resolved': case 'site.recovered': return 'ok';
    case 'level.switched': return 'switch';
    default: return 'none';
  }
}
/* What one entry says in words (notes: their text). */
function entryText(e) {
  const d = e.data || {};
  if (e.kind === 'note') return typeof d.text === 'string' ? d.text : '';
  return describeEvent({ type: e.type, data: d });
}

/* An incident's timeline: one strip over [t0, t1] (wall ms) with a line per level switch (blue)
   and origin state change (dashed), a mark per other entry, hover for the entry; then every
   entry in time order. entries: the API's timeline [{id, at, kind, event_id, type, title, data}]. */
function incidentTimelineView(entries, t0, t1) {
  const tip = tooltip();
  const list = (entries || []).filter((e) => e && typeof e.at === 'number').slice()
    .sort((a, b) => a.at - b.at || a.id - b.id);
  const first = list.length ? list[0].at : t0;
  const win = { t0: Math.min(t0, first), t1: Math.max(t1, t0 + 1000, list.length ? list[list.length - 1].at : 0) };
  const g = svg('svg', { viewBox: `0 0 ${W} ${STRIP_H}`, preserveAspectRatio: 'none', class: 'tl-svg',
    role: 'img', 'aria-label': `incident timeline: ${list.length} entries` },
  svg('line', { x1: 0, x2: W, y1: STRIP_H / 2, y2: STRIP_H / 2, class: 'tl-axis' }));
  for (const e of list) {
    const x = xOf(e.at, win);
    if (e.type === 'level.switched') {
      g.appendChild(svg('line', { x1: x, x2: x, y1: 0, y2: STRIP_H, class: 'tl-switch' }));
    } else if (e.type === 'origin.health_changed') {
      g.appendChild(svg('line', { x1: x, x2: x, y1: 0, y2: STRIP_H, class: 'tl-change st-' + ((e.data || {}).to || 'unknown') }));
    } else {
      const cls = entryClass(e);
      g.appendChild(svg('rect', { x: x - 4, y: cls === 'ok' || cls === 'note' ? 2 : STRIP_H / 2 + 1, width: 8,
        height: STRIP_H / 2 - 3, class: 'tl-mark m-' + cls }));
    }
  }
  const wrap = h('div', { class: 'tl-strip', ...tid('incident-strip'), 'data-entries': list.length }, g);
  wrap.addEventListener('mousemove', (ev) => {
    if (!list.length) return;
    const r = wrap.getBoundingClientRect();
    const t = win.t0 + ((ev.clientX - r.left) / r.width) * (win.t1 - win.t0);
    let best = 0;
    for (let i = 1; i < list.length; i++) if (Math.abs(list[i].at - t) < Math.abs(list[best].at - t)) best = i;
    const e = list[best];
    tip.show([`${new Date(e.at).toLocaleTimeString()} \u2014 ${e.title || e.type}`, e.type, short(entryText(e), 300)],
      ev.clientX - r.left, wrap, 'incident', best);
  });
  wrap.addEventListener('mouseleave', () => tip.hide());
  return h('div', { class: 'timeline', ...tid('incident-timeline'), 'data-entries': list.length },
    h('div', { class: 'tl-axis-labels tl-axis-full muted' }, h('span', null, fmtMs(win.t0)),
      h('span', null, `${Math.round((win.t1 - win.t0) / 1000)} s`), h('span', null, fmtMs(win.t1))),
    wrap,
    h('div', { class: 'tl-legend muted' },
      h('span', { class: 'lg lg-bad' }, 'opened / all down'), h('span', { class: 'lg lg-unk' }, 'mitigated'),
      h('span', { class: 'lg lg-ok' }, 'resolved / recovered'), h('span', { class: 'lg lg-note' }, 'note'),
      h('span', { class: 'lg lg-change' }, 'origin state change'), h('span', { class: 'lg lg-switch' }, 'level switch')),
    list.length ? h('ol', { class: 'events incident-entries' }, list.map((e) => h('li', {
      'data-testid': `tl-entry-${e.id}`, 'data-type': e.type, 'data-kind': e.kind, class: 'ent-' + entryClass(e) },
    h('div', { class: 'ev-head' }, h('span', { class: 'ent-dot', 'aria-hidden': 'true' }), h('strong', null, e.title || e.type), ' ',
      h('code', { class: 'ev-type' }, e.kind === 'note' ? (e.type === 'resolve' ? 'note on resolving' : 'note') : e.type)),
    e.kind === 'note'
      ? h('div', { class: 'note-text' }, entryText(e))
      : null,
    h('div', { class: 'ev-meta muted' }, fmtMs(e.at), e.kind === 'note' ? '' : [' \u00b7 ', entryText(e)]))))
      : h('p', { class: 'muted' }, 'No entries yet.'),
    tip.el);
}

/* Which nodes have the site's current config: nodes (GET /v1/nodes), seq = the site's last
   publication (status card propagation.seq). */
function propagationView(nodes, seq) {
  if (!nodes.length) return h('p', { class: 'muted', ...tid('propagation-nodes') }, 'No nodes enrolled.');
  const rows = nodes.slice().sort((a, b) => Number(b.online) - Number(a.online) || String(a.name).localeCompare(String(b.name)));
  return table(['Node', 'State', 'Config seq', 'Current config', 'Last seen'], rows.map((n) => {
    const cur = typeof seq === 'number' && typeof n.config_seq === 'number' && n.config_seq >= seq;
    return h('tr', { 'data-testid': `prop-node-${n.id}`, 'data-current': cur ? 'yes' : 'no' },
      h('td', null, n.name, h('span', { class: 'muted' }, ` #${n.id}`)),
      h('td', null, badge(n.online ? 'online' : 'offline')),
      h('td', null, n.config_seq ?? '\u2014'),
      h('td', null, cur ? h('span', { class: 'badge b-ok' }, '\u2713 has it')
        : h('span', { class: 'badge b-unk' }, `\u231b behind (needs seq ${seq})`)),
      h('td', null, fmtTime(n.last_seen_at)));
  }), tid('propagation-nodes'));
}

export { timelineView, propagationView, incidentTimelineView };
