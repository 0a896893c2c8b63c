/* site — one site: the banner of its active incident, status card, health timeline, levels and
   origins, its failover drills, its shadow health policy's comparison, propagation per node, audit, settings and messages. Write controls follow the token's role (roles.js). */
import {
  h, add, put, $, tid, field, input, select, button, table, fmtTime, fmtDur, badge, votesText, short, num,
  splitList, listOf, api, soft, eventFeed, eventList, act, go, refreshNow, clearEditing,
  markField,
} from './core.js';
import { may } from './roles.js';
import { timelineView, propagationView } from './timeline.js';
import { auditList } from './audit.js';
import { siteIncident, incidentBanner } from './incidents.js';
import { drillsPanel } from './drills.js';

/* Empty = null (off); a number as a number; anything else as typed (the server names it). */
function ratioOrNull(v) {
  const t = String(v).trim();
  if (t === '') return null;
  return Number.isFinite(Number(t)) ? Number(t) : t;
}

/* The newest manual switch of the site's messages, with who did it; null when none. */
function lastManual(events) {
  const e = (events || []).filter((x) => x.type === 'level.switched' && x.data && x.data.reason === 'manual').pop();
  if (!e) return null;
  return h('p', { class: 'muted', ...tid('last-manual') }, 'Last manual switch: level ', String(e.data.from_level),
    ' \u2192 ', String(e.data.to_level), ' ', fmtTime(e.created_at),
    e.data.by ? [' by ', h('strong', tid('last-manual-by'), e.data.by)] : '');
}


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

/* The shadow policy's would-have switches and the real ones in one list, newest first. */
function shadowSwitches(rep) {
  const tag = (kind) => (x) => Object.assign({ kind }, x);
  return (rep.switches || []).map(tag('shadow')).concat((rep.real_switches || []).map(tag('real')))
    .sort((a, b) => String(b.at).localeCompare(String(a.at)));
}

/* The shadow health policy panel (docs/design.md, Shadow health policies); null without one. */
function shadowPanel(rep) {
  if (!rep || !rep.health_check_shadow) return null;
  const pct = typeof rep.agreement === 'number' ? `${Math.round(rep.agreement * 1000) / 10}%` : '\u2014';
  const sw = shadowSwitches(rep);
  const hc = rep.health_check_shadow;
  return [
    h('h2', null, 'Shadow health policy'),
    h('p', { class: 'muted' }, `Probed by controld alone and acting on nothing: ${hc.path} within ${hc.timeout_ms} ms`,
      hc.expected_codes ? `, expecting ${hc.expected_codes.join(', ')}` : '',
      `, unhealthy after ${hc.unhealthy_after}, healthy after ${hc.healthy_after}. Promote it with a PATCH of health_check.`),
    h('dl', { class: 'facts' },
      h('dt', null, 'Agreement'), h('dd', { 'data-testid': 'shadow-agreement', 'data-agreement': rep.agreement ?? '' },
        `${pct} of ${rep.compared} verdicts (${rep.disagreements} disagreements) over ${rep.rounds} rounds`),
      h('dt', null, 'Would be on'), h('dd', tid('shadow-level'), rep.shadow_level === null ? '\u2014'
        : `level ${rep.shadow_level} (the site is on level ${rep.current_level})`),
      h('dt', null, 'Skipped rounds'), h('dd', tid('shadow-skipped'), String(rep.skipped_rounds))),
    table(['Origin', 'Level', 'Shadow', 'Real', 'Agree', 'Disagree', 'Last shadow error'], (rep.origins || []).map((o) =>
      h('tr', { 'data-testid': `shadow-origin-${o.origin_id}` },
        h('td', null, `#${o.origin_id}`), h('td', null, String(o.level)), h('td', null, badge(o.health)),
        h('td', null, badge(o.real_health)), h('td', null, String(o.agreements)), h('td', null, String(o.disagreements)),
        h('td', null, o.last_error ? short(o.last_error, 80) : ''))), tid('shadow-origins')),
    sw.length ? table(['When', 'Switch', 'From', 'To', 'Why'], sw.map((x) => h('tr', { 'data-testid': 'shadow-switch', 'data-kind': x.kind },
      h('td', null, fmtTime(x.at)), h('td', null, x.kind === 'shadow' ? 'would have (shadow)' : `real (${x.reason})`),
      h('td', null, String(x.from_level)), h('td', null, String(x.to_level)), h('td', null, x.why ? short(x.why, 100) : ''))),
    tid('shadow-switches')) : h('p', { class: 'muted', ...tid('shadow-no-switch') }, 'No switch since the comparison started.'),
  ];
}

function pageSite(id) {
  const st = { site: null, status: null, verdictOid: null, verdicts: null, levelsKey: '' };
  const feed = eventFeed(`/v1/sites/${id}/messages`);
  const msgs = eventList('messages-list', false);
  const audit = auditList(`site-audit`, id);
  let elTitle, elIncident, elCard, elLevels, elVerdicts, elShadow, drills, elTimeline, elProp, settings, originForm, switchForm;

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
        field('Description', input('description', { maxlength: 200, placeholder: '(none)', 'data-field': 'description' })),
        field('Enabled', h('span', null, input('enabled', { type: 'checkbox' }), ' takes traffic and is probed'))),
      h('div', { class: 'actions' },
        h('button', { type: 'submit', class: 'primary', ...tid('origin-form-submit') }, 'Save origin'),
        button('Cancel', () => { f.hidden = true; delete f.dataset.dirty; clearEditing(); }, tid('origin-form-cancel'))));
    f.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      const e = f.elements;
      const body = { level: num(e.level.value), address: e.address.value.trim(), port: num(e.port.value),
        scheme: e.scheme.value, weight: num(e.weight.value), enabled: e.enabled.checked,
        description: e.description.value };
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
    e.description.value = o ? o.description || '' : '';
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
        field('Checkpoints', h('span', null, input('checkpoints', { type: 'checkbox' }), ' add checkpoint votes')),
        field('Backup levels', h('span', null, input('backup_levels', { type: 'checkbox', 'data-field': 'node_retry.backup_levels',
          ...tid('settings-backup-levels') }), ' nodes send a request on to the next levels when the current one fails')),
        field('Failure ratio', input('failure_ratio', { type: 'number', min: 0, max: 1, step: 'any',
          'data-field': 'node_retry.failure_ratio', ...tid('settings-failure-ratio') }), 'nodes skip an origin at this failure share (empty = off)'),
        field('Minimum volume', input('failure_min_volume', { type: 'number', min: 1,
          'data-field': 'node_retry.failure_min_volume' }), 'outcomes in the window before the ratio applies')),
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
        hcOptions(e)),
        node_retry: { backup_levels: e.backup_levels.checked,
          failure_ratio: ratioOrNull(e.failure_ratio.value),
          failure_min_volume: num(e.failure_min_volume.value) } };
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
    if (!settings) return;
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
    const nr = site.node_retry || {};
    e.backup_levels.checked = nr.backup_levels !== false;
    e.failure_ratio.value = nr.failure_ratio ?? '';
    e.failure_min_volume.value = nr.failure_min_volume ?? '';
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
      c.ramp ? h('div', { class: 'alert unk', ...tid('ramp-box'), 'data-share': c.ramp.share },
        h('strong', null, `Failback ramp to level ${c.ramp.to_level}: ${c.ramp.share}% of new requests.`),
        ` Steps ${(c.ramp.steps || []).join(', ')}% every ${fmtDur(c.ramp.step_ms)}; level ${c.ramp.from_level} serves the rest` +
        ` (window: ${c.ramp.window_failures} failed of ${c.ramp.window_requests}).`) : null,
      c.failback_held_until ? h('div', { class: 'alert bad', ...tid('ramp-held') },
        `Failback ramp aborted: no failback before ${c.failback_held_until}.`) : null,
      c.failback_available && !c.ramp ? h('div', { class: 'alert unk', ...tid('failback-box') },
        target !== null
          ? [h('span', null, `Level ${target} is healthy again. Failback is manual: switch back when ready. `),
            may('operator') ? button(`Switch back to level ${target}`, () => switchTo(target, `Switched back to level ${target}.`),
              { class: 'primary big-btn', ...tid('switch-back') })
              : h('span', { class: 'muted' }, '(an operator or admin token can switch back)')]
          : 'A failback is available, but no earlier level is healthy in this card yet.') : null,
      h('p', { class: 'decision', 'data-testid': 'decision', 'data-action': dec ? dec.action : '' },
        h('span', { class: 'flabel' }, 'Decision: '), decText),
      may('operator') ? switchForm : null,
      lastManual(feed.events));
  }

  function paintLevels(levels, cur) {
    put(elLevels, h('h2', null, 'Levels and origins'), levels.map((l) => h('div',
      { class: 'level' + (l.level === cur ? ' is-current' : ''), 'data-testid': `level-${l.level}` },
      h('div', { class: 'level-head' },
        h('h3', null, `Level ${l.level}`, l.level === 1 ? ' (primary)' : ' (backup)'),
        badge(l.health, `level-${l.level}-health`),
        l.level === cur ? h('span', { class: 'tag' }, 'current') : null,
        h('span', { class: 'spacer' }),
        may('admin') ? button('Add origin', () => openOriginForm(null, l.level),
          { class: 'small', 'data-testid': `add-origin-level-${l.level}` }) : null),
      l.origins.length ? table(['Origin', 'Health', 'Last verdict', 'Last checked', 'Last error', 'Node observations', 'Weight', 'Actions'],
        l.origins.map((o) => {
          const obs = o.node_observations;
          return h('tr', { 'data-testid': `origin-${o.id}`, class: o.enabled === false ? 'disabled' : '' },
            h('td', null, h('strong', null, `#${o.id} `), `${o.scheme || 'http'}://${o.address || '?'}:${o.port ?? '?'}`,
              o.host_header ? h('div', { class: 'muted' }, 'Host: ' + o.host_header) : null,
              o.description ? h('div', { class: 'muted', ...tid(`origin-${o.id}-description`) }, o.description) : null,
              o.enabled === false ? h('div', { class: 'tag' }, 'disabled') : null),
            h('td', null, badge(o.health, `origin-${o.id}-health`)),
            h('td', tid(`origin-${o.id}-verdict`), o.last_verdict ? [badge(o.last_verdict), h('div', { class: 'muted' },
              `${votesText(o.votes)}${o.source ? ' \u00b7 via ' + o.source : ''}`)] : h('span', { class: 'muted' }, 'none yet')),
            h('td', null, fmtTime(o.last_checked_at)),
            h('td', { class: 'err' }, o.last_error ? short(o.last_error, 120) : h('span', { class: 'muted' }, '\u2014')),
            h('td', null, obs ? `${obs.requests ?? 0} requests, ${obs.failures ?? 0} failures` : h('span', { class: 'muted' }, '\u2014')),
            h('td', null, o.weight ?? ''),
            h('td', { class: 'row-actions' },
              may('admin') ? button('Edit', () => openOriginForm(o), { class: 'small', 'data-testid': `origin-${o.id}-edit` }) : null,
              !may('operator') ? null : button(o.enabled === false ? 'Enable' : 'Disable', () => act(() => api('PATCH',
                `/v1/sites/${id}/origins/${o.id}`, { enabled: o.enabled === false }),
                `Origin #${o.id} ${o.enabled === false ? 'enabled' : 'disabled'}.`), { class: 'small', 'data-testid': `origin-${o.id}-toggle` }),
              button('Verdicts', () => { st.verdictOid = o.id; st.verdicts = null; paintVerdicts(); refreshNow(); },
                { class: 'small', 'data-testid': `origin-${o.id}-verdicts` }),
              may('admin') ? button('Delete', async () => {
                if (!window.confirm(`Delete origin #${o.id} (${o.address}:${o.port})?`)) return;
                await act(() => api('DELETE', `/v1/sites/${id}/origins/${o.id}`), `Origin #${o.id} deleted.`);
              }, { class: 'small danger', 'data-testid': `origin-${o.id}-delete` }) : null));
        })) : h('p', { class: 'muted' }, 'No origins on this level.'))),
    may('admin') ? h('div', { class: 'actions' }, button('Add origin on a new level',
      () => openOriginForm(null, (levels.length ? levels[levels.length - 1].level : 0) + 1), tid('add-origin'))) : null);
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
      elIncident = h('div', { class: 'incident-slot', ...tid('incident-slot') });
      elCard = h('section', { class: 'card status-card', id: 'status-card', 'aria-live': 'polite', ...tid('status-card') },
        h('p', { class: 'muted' }, 'Loading\u2026'));
      switchForm = buildSwitchForm();
      elLevels = h('section', { class: 'card', id: 'levels', ...tid('levels') });
      originForm = buildOriginForm();
      elVerdicts = h('section', { class: 'card', id: 'verdicts', hidden: true, ...tid('verdicts') });
      elShadow = h('section', { class: 'card', id: 'shadow', hidden: true, ...tid('shadow-panel') });
      drills = drillsPanel(id);
      settings = may('admin') ? buildSettings() : null;
      elTimeline = h('div', null, h('p', { class: 'muted' }, 'Loading\u2026'));
      elProp = h('div', null, h('p', { class: 'muted' }, 'Loading\u2026'));
      add(main, h('div', { class: 'page-head' }, h('a', { href: '#/sites' }, '\u2190 Sites'), elTitle),
        elIncident, elCard,
        h('section', { class: 'card', id: 'timeline' }, h('h2', null, 'Health timeline'),
          h('p', { class: 'muted' }, 'Each mark is one probe round\u2019s verdict (upper: success, lower: failure); hover for the votes.'), elTimeline),
        elLevels, originForm, elVerdicts, drills.el(), elShadow,
        h('section', { class: 'card', id: 'propagation' }, h('h2', null, 'Propagation'), elProp),
        h('section', { class: 'card' }, h('h2', null, 'Audit of this site'), audit.el),
        settings,
        h('section', { class: 'card' }, h('h2', null, 'Site messages'), msgs.el));
    },
    async refresh(alive) {
      const [site, status, incident] = await Promise.all([api('GET', `/v1/sites/${id}`),
        api('GET', `/v1/sites/${id}/status`).catch(soft), siteIncident(id)]);
      await feed.update().catch(soft);
      const origins = (site && site.origins) || [];
      const [history, nodes] = await Promise.all([
        Promise.all(origins.map((o) => api('GET', `/v1/sites/${id}/origins/${o.id}/verdicts?limit=100`)
          .then((r) => [o.id, listOf(r, 'verdicts')]).catch((e) => { soft(e); return [o.id, []]; }))),
        api('GET', '/v1/nodes').then((r) => listOf(r, 'nodes')).catch(soft),
        audit.update().catch(soft), drills.update().catch(soft)]);
      const shadow = site && site.health_check_shadow
        ? await api('GET', `/v1/sites/${id}/shadow`).catch(soft) : null;
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
      put(elIncident, incidentBanner(incident));
      paintCard(st.site, st.status);
      paintLevels(levels, cur);
      paintVerdicts();
      drills.paint(levels, cur);
      const sp = shadowPanel(shadow);
      elShadow.hidden = !sp;
      put(elShadow, sp);
      fillSettings(st.site, false);
      msgs.paint(feed.events);
      put(elTimeline, timelineView(origins.slice().sort((a, b) => a.level - b.level || a.id - b.id),
        new Map(history), feed.events, Date.now()));
      const seq = status && status.propagation ? status.propagation.seq : undefined;
      put(elProp, h('p', { class: 'muted', ...tid('propagation-summary') }, typeof seq === 'number'
        ? `The site\u2019s current config is publication ${seq} (version ${status.config_version}).`
        : 'The current publication is unknown.'), nodes ? propagationView(nodes, seq) : null);
      audit.paint();
    },
  };
}


export { pageSite };
