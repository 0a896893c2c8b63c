/* cdnca dashboard: a single page over controld's REST API (/v1), hash-routed, no dependencies.
   This file routes and holds the small pages; the others live in their own modules. */
import {
  EVENT_TYPES, h, add, put, $, tid, field, input, button, table, fmtTime, short, badge, listOf, banners,
  showError, auth, api, soft, fetchNewest, eventFeed, eventList, mount, refreshNow, act, go, setRoute,
} from './core.js';
import { who, loadRole, knownRole, forgetRole, may } from './roles.js';
import { pageOverview } from './fleet.js';
import { pageSites } from './sites.js';
import { pageSite } from './site.js';
import { pageIncidents, pageIncident } from './incidents.js';
import { pageAudit } from './audit.js';
import { pageTokens } from './tokens.js';
import { pageEnrolKeys } from './enrolkeys.js';
import { pageChannels } from './channels.js';

/* Show the nav entries the role may use, and who is signed in. */
function paintWho() {
  for (const a of document.querySelectorAll('#nav a[data-role]')) a.hidden = !may(a.dataset.role);
  const el = $('#whoami');
  el.hidden = !auth.get() || !who.role;
  put(el, who.name ? `${who.name} \u00b7 ` : '', h('span', { class: 'tag role-' + who.role, 'data-testid': 'role', 'data-role': who.role || '' }, who.role || ''));
}

function route() {
  const full = location.hash || '#/';
  const qi = full.indexOf('?');
  const hash = qi < 0 ? full : full.slice(0, qi);
  const query = qi < 0 ? '' : full.slice(qi + 1);
  if (!auth.get()) {
    forgetRole();
    paintWho();
    return mount(pageLogin(hash === '#/login' ? '#/' : full));
  }
  if (!knownRole()) {
    loadRole().then(() => route(), (e) => { if (!e.auth) showError(e); });
    return undefined;
  }
  paintWho();
  let m;
  if (hash === '#/login' || hash === '#/' || hash === '#/overview') return mount(pageOverview());
  if (hash === '#/sites') return mount(pageSites(query));
  if ((m = /^#\/sites\/(\d+)$/.exec(hash))) return mount(pageSite(parseInt(m[1], 10)));
  if (hash === '#/incidents') return mount(pageIncidents(query));
  if ((m = /^#\/incidents\/(\d+)$/.exec(hash))) return mount(pageIncident(parseInt(m[1], 10)));
  if (hash === '#/notifications') return mount(pageNotifications());
  if (hash === '#/nodes') return mount(pageNodes());
  if (hash === '#/webhooks') return mount(pageWebhooks());
  if (hash === '#/audit') return mount(pageAudit());
  if (hash === '#/tokens') return mount(pageTokens());  /* not in the nav below admin; the API says 403 */
  if (hash === '#/enrolment-keys') return mount(pageEnrolKeys());  /* admin: others get a note, no form */
  if (hash === '#/channels') return mount(pageChannels());  /* admin: others get a note */
  return mount({ title: 'Not found', mount(main) {
    add(main, h('section', { class: 'card' }, h('h1', null, 'Page not found'), h('a', { href: '#/' }, 'Back to the overview')));
  } });
}

function pageLogin(next) {
  return {
    title: 'Sign in',
    mount(main) {
      const tok = h('input', { id: 'login-token', name: 'token', type: 'password', autocomplete: 'off',
        spellcheck: 'false', required: true, ...tid('login-token') });
      const form = h('form', { class: 'card narrow', ...tid('login-form') },
        h('h1', null, 'Sign in'),
        h('p', { class: 'muted' }, 'Paste an API token (admin, operator or read). It is kept only in this browser tab (session storage) and sent as a Bearer header.'),
        field('API token', tok),
        h('button', { type: 'submit', class: 'primary', ...tid('login-submit') }, 'Sign in'));
      form.addEventListener('submit', async (ev) => {
        ev.preventDefault();
        const t = tok.value.trim();
        if (!t) return;
        auth.set(t);
        try {
          await api('GET', '/v1/sites?limit=1');
        await loadRole();
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


/* ---------- notification center ---------- */

function pageNotifications() {
  const feed = eventFeed('/v1/notifications', true);
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
      add(main, h('section', { class: 'card' }, h('h1', null, 'Nodes'), list), may('admin') ? form : null);
      if (may('admin')) {
        add(form, h('p', { class: 'muted' }, 'Many nodes, or a configuration management rollout: one ',
          h('a', { href: '#/enrolment-keys', ...tid('nodes-enrolkeys-link') }, 'enrolment key'), ' enrols them all.'));
      }
    },
    async refresh(alive) {
      const nodes = listOf(await api('GET', '/v1/nodes'), 'nodes');
      if (!alive()) return;
      if (!nodes.length) return put(list, h('p', { class: 'muted' }, 'No nodes enrolled.'));
      put(list, table(['Name', 'State', 'Last seen', 'Config seq', 'Version', ''], nodes.map((n) => h('tr', { 'data-testid': `node-${n.id}` },
        h('td', null, n.name, h('span', { class: 'muted' }, ` #${n.id}`)),
        h('td', null, badge(n.online ? 'online' : 'offline', `node-${n.id}-online`)),
        h('td', null, fmtTime(n.last_seen_at)), h('td', null, n.config_seq ?? '\u2014'), h('td', null, n.version || '\u2014'),
        h('td', null, may('admin') ? button('Revoke', async () => {
          if (!window.confirm(`Revoke node "${n.name}"? Its token stops working at once.`)) return;
          await act(() => api('DELETE', `/v1/nodes/${n.id}`), `Node "${n.name}" revoked.`);
        }, { class: 'small danger', 'data-testid': `node-${n.id}-revoke` }) : null))), tid('nodes-table')));
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
      add(main, h('section', { class: 'card' }, h('h1', null, 'Webhooks'), list), deliveries, may('admin') ? form : null);
    },
    async refresh(alive) {
      const hooks = listOf(await api('GET', '/v1/webhooks'), 'webhooks');
      const open = st.open;
      const d = open ? await fetchNewest(`/v1/webhooks/${open}/deliveries`, 'deliveries', 100)
        .then((deliveries) => ({ deliveries })).catch(soft) : null;
      if (!alive()) return;
      if (open && open === st.open) st.data = d || { deliveries: [] };
      paintDeliveries();
      if (!hooks.length) return put(list, h('p', { class: 'muted' }, 'No webhooks.'));
      put(list, table(['URL', 'Events', ''], hooks.map((w) => h('tr', { 'data-testid': `webhook-${w.id}` },
        h('td', null, h('span', { class: 'mono' }, w.url), h('span', { class: 'muted' }, ` #${w.id}`)),
        h('td', null, Array.isArray(w.events) && w.events.length ? w.events.join(', ') : h('span', { class: 'muted' }, 'all events')),
        h('td', { class: 'row-actions' },
          !may('operator') ? null : button('Test', () => act(async () => {
            await api('POST', `/v1/webhooks/${w.id}/test`);
            st.open = w.id;
            st.data = null;
            paintDeliveries();
          },
            'Test event sent.'), { class: 'small', 'data-testid': `webhook-${w.id}-test` }),
          button('Deliveries', () => { st.open = w.id; st.data = null; paintDeliveries(); refreshNow(); },
            { class: 'small', 'data-testid': `webhook-${w.id}-deliveries` }),
          !may('admin') ? null : button('Delete', async () => {
            if (!window.confirm(`Delete webhook #${w.id} (${w.url})?`)) return;
            if (st.open === w.id) st.open = null;
            await act(() => api('DELETE', `/v1/webhooks/${w.id}`), `Webhook #${w.id} deleted.`);
          }, { class: 'small danger', 'data-testid': `webhook-${w.id}-delete` })))), tid('webhooks-table')));
    },
  };
}


/* ---------- start ---------- */

setRoute(route);
$('#logout').addEventListener('click', () => { auth.clear(); forgetRole(); banners.clear(); go('#/login'); });
window.addEventListener('hashchange', route);
route();
