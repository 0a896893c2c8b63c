/* channels — notification channels (GET/POST/DELETE /v1/channels, POST …/test, GET …/deliveries):
   webhook, Slack, PagerDuty and email. Create (the fields of the chosen kind; secrets go in once
   and are never shown again), list, send a test, read the deliveries, delete. Admin only: the nav
   hides it for other roles and the page shows them neither the list nor the form. */
import { EVENT_TYPES, h, add, put, tid, field, input, select, button, table, fmtTime, listOf, api, act, soft, fetchNewest, splitList, clearEditing, refreshNow } from './core.js';
import { may } from './roles.js';

const KINDS = ['slack', 'pagerduty', 'email', 'webhook'];

/* The inputs of each kind: [label, name, attrs, hint]. */
const KIND_FIELDS = {
  slack: [['Incoming webhook URL', 'url', { type: 'password', placeholder: 'https://hooks.slack.com/services/…' }, 'holds Slack\u2019s token: stored, never shown again']],
  pagerduty: [['Routing key', 'routing_key', { type: 'password', autocomplete: 'off' }, 'the integration key (32 characters)'],
    ['Events API URL', 'url', { type: 'url', placeholder: 'https://events.pagerduty.com/v2/enqueue' }, 'empty = PagerDuty\u2019s']],
  email: [['SMTP URL', 'smtp_url', { placeholder: 'smtps://mail.example.net' }, 'smtp:// requires STARTTLS (except to loopback)'],
    ['From', 'from', { placeholder: 'cdnca@example.net' }],
    ['To', 'to', { placeholder: 'oncall@example.net, ops@example.net' }, 'up to 20 addresses'],
    ['Username', 'username', { autocomplete: 'off' }, 'optional'],
    ['Password', 'password', { type: 'password', autocomplete: 'off' }, 'optional; never shown again']],
  webhook: [['URL', 'url', { type: 'url', placeholder: 'https://hooks.example.com/cdnca' }],
    ['Secret', 'secret', { type: 'password', autocomplete: 'off' }, 'signs each delivery (HMAC-SHA256), 16 characters or more']],
};

/* Where a channel sends, in words that carry no secret. */
function target(c) {
  if (c.kind === 'slack') return c.url_set ? 'Slack incoming webhook (set)' : 'Slack (no URL)';
  if (c.kind === 'pagerduty') return `PagerDuty ${c.url}` + (c.routing_key_set ? ' (routing key set)' : '');
  if (c.kind === 'email') return `${c.smtp_url} \u2192 ${(c.to || []).join(', ')}`;
  return c.url;
}

function deliveriesTable(rows) {
  return table(['Id', 'Event', 'Site', 'State', 'Attempts', 'Last error', 'Created'], rows.map((d) => h('tr',
    { 'data-testid': `delivery-${d.id}`, 'data-state': d.state, 'data-event': d.event_type },
    h('td', null, String(d.id)), h('td', { class: 'mono' }, d.event_type), h('td', null, d.site_id ?? '\u2014'),
    h('td', { 'data-testid': `delivery-${d.id}-state` }, d.state), h('td', null, String(d.attempts)),
    h('td', null, d.last_error || (d.state !== 'delivered' && d.last_status ? `HTTP ${d.last_status}` : '')),
    h('td', null, fmtTime(d.created_at)))), tid('channel-deliveries-table'));
}

function pageChannels() {
  let list, deliveries, kindFields;
  const st = { open: null, data: null };
  function paintDeliveries() {
    if (!deliveries) return;
    if (!st.open) { deliveries.hidden = true; return; }
    deliveries.hidden = false;
    const rows = st.data ? listOf(st.data, 'deliveries') : null;
    put(deliveries, h('div', { class: 'level-head' }, h('h2', null, `Deliveries of channel #${st.open}`), h('span', { class: 'spacer' }),
      button('Close', () => { st.open = null; paintDeliveries(); }, { class: 'small' })),
    rows === null ? h('p', { class: 'muted' }, 'Loading\u2026')
      : rows.length ? deliveriesTable(rows) : h('p', { class: 'muted', ...tid('channel-deliveries-none') }, 'No deliveries yet.'));
  }
  function paintKind(kind) {
    put(kindFields, KIND_FIELDS[kind].map(([label, name, attrs, hint]) =>
      field(label, input(name, { ...attrs, 'data-field': name, ...tid(`channel-${name.replace('_', '-')}`) }), hint)));
  }
  return {
    title: 'Channels', nav: 'channels',
    mount(main) {
      if (!may('admin')) {
        add(main, h('section', { class: 'card', ...tid('channels-denied') }, h('h1', null, 'Channels'),
          h('p', { class: 'muted' }, 'Notification channels are managed with an admin token.')));
        return;
      }
      list = h('div', null, h('p', { class: 'muted' }, 'Loading\u2026'));
      deliveries = h('section', { class: 'card', hidden: true, ...tid('channel-deliveries') });
      kindFields = h('div', { class: 'grid' });
      const kind = select('kind', KINDS, 'slack', { 'data-field': 'kind', ...tid('channel-kind') });
      kind.addEventListener('change', () => paintKind(kind.value));
      const form = h('form', { class: 'card', ...tid('create-channel-form') }, h('h2', null, 'New channel'),
        h('div', { class: 'grid' }, field('Kind', kind),
          field('Name', input('name', { placeholder: '#cdn-alerts', 'data-field': 'name', ...tid('channel-name') }), 'for people'),
          field('Sites', input('site_ids', { placeholder: '1, 4', 'data-field': 'site_ids', ...tid('channel-sites') }), 'site ids; empty = every site')),
        kindFields,
        h('fieldset', null, h('legend', null, 'Events (none checked = all; PagerDuty: its four)'),
          EVENT_TYPES.map((t) => h('label', { class: 'check' }, h('input', { type: 'checkbox', name: 'events', value: t }), ' ' + t))),
        h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary', ...tid('create-channel-submit') }, 'Create channel')));
      paintKind('slack');
      form.addEventListener('submit', async (ev) => {
        ev.preventDefault();
        const k = kind.value;
        const body = { kind: k };
        const name = form.elements.name.value.trim();
        if (name) body.name = name;
        const sites = splitList(form.elements.site_ids.value);
        if (sites.length) body.site_ids = sites.map((s) => (/^\d+$/.test(s) ? parseInt(s, 10) : s));
        const events = [...form.querySelectorAll('[name=events]:checked')].map((c) => c.value);
        if (events.length) body.events = events;
        for (const [, n] of KIND_FIELDS[k]) {
          const v = form.elements[n].value.trim();
          if (!v) continue;
          body[n] = n === 'to' ? splitList(v) : v;
        }
        if (k === 'pagerduty' && !events.length) delete body.events;
        if (await act(() => api('POST', '/v1/channels', body), 'Channel created.')) {
          form.reset();
          paintKind(kind.value);
          delete form.dataset.dirty;
          clearEditing();
        }
      });
      add(main, h('section', { class: 'card' }, h('h1', null, 'Channels'),
        h('p', { class: 'muted' }, 'Where events go: Slack, PagerDuty (trigger and resolve, one incident per outage), email, or a signed webhook. ' +
          'Secrets are stored write-only.'), list), deliveries, form);
    },
    async refresh(alive) {
      if (!list) return;
      const chans = listOf(await api('GET', '/v1/channels'), 'channels');
      const open = st.open;
      const d = open ? await fetchNewest(`/v1/channels/${open}/deliveries`, 'deliveries', 100)
        .then((deliveries) => ({ deliveries })).catch(soft) : null;
      if (!alive()) return;
      if (open && open === st.open) st.data = d || { deliveries: [] };
      paintDeliveries();
      if (!chans.length) return put(list, h('p', { class: 'muted', ...tid('channels-none') }, 'No channels.'));
      put(list, table(['Kind', 'Name', 'Sends to', 'Events', 'Sites', ''], chans.map((c) => h('tr',
        { 'data-testid': `channel-${c.id}`, 'data-kind': c.kind, 'data-name': c.name },
        h('td', null, c.kind, h('span', { class: 'muted' }, ` #${c.id}`)),
        h('td', null, c.name || h('span', { class: 'muted' }, '\u2014')),
        h('td', { class: 'mono', 'data-testid': `channel-${c.id}-target` }, target(c)),
        h('td', null, Array.isArray(c.events) && c.events.length ? c.events.join(', ') : h('span', { class: 'muted' }, 'all events')),
        h('td', null, Array.isArray(c.site_ids) ? c.site_ids.join(', ') : h('span', { class: 'muted' }, 'all sites')),
        h('td', { class: 'row-actions' },
          button('Test', () => act(async () => {
            await api('POST', `/v1/channels/${c.id}/test`);
            st.open = c.id;
            st.data = null;
            paintDeliveries();
          }, 'Test message queued.'), { class: 'small', 'data-testid': `channel-${c.id}-test` }),
          button('Deliveries', () => { st.open = c.id; st.data = null; paintDeliveries(); refreshNow(); },
            { class: 'small', 'data-testid': `channel-${c.id}-deliveries` }),
          button('Delete', async () => {
            if (!window.confirm(`Delete ${c.kind} channel #${c.id}${c.name ? ` (${c.name})` : ''} with its queued deliveries?`)) return;
            if (st.open === c.id) st.open = null;
            await act(() => api('DELETE', `/v1/channels/${c.id}`), `Channel #${c.id} deleted.`);
          }, { class: 'small danger', 'data-testid': `channel-${c.id}-delete` })))), tid('channels-table')));
    },
  };
}

export { pageChannels };
