/* enrolkeys — enrolment keys (GET/POST/DELETE /v1/enrolment-keys): one key enrols many nodes,
   each noded trading it for a node token of its own at its first start. Create (the secret shown
   once, with the noded env line and command line that use it), list, revoke. Admin only; the nav
   hides it for other roles and the page shows them neither the list nor the form. */
import { h, add, put, tid, field, input, button, table, fmtTime, listOf, banners, api, act, clearEditing } from './core.js';
import { may } from './roles.js';

/* The API's states, in words; the badge keeps data-state as the API says it. */
const STATES = {
  active: ['\u2713', 'ok', 'active'],
  expired: ['\u231b', 'none', 'expired'],
  used_up: ['\u2205', 'none', 'used up'],
  revoked: ['\u2717', 'bad', 'revoked'],
};

function stateBadge(state, testid) {
  const [icon, cls, text] = STATES[state] || ['\u2022', 'unk', String(state || 'unknown')];
  return h('span', { class: 'badge b-' + cls, 'data-testid': testid, 'data-state': state || '' },
    h('span', { 'aria-hidden': 'true' }, icon), ' ' + text);
}

/* A datetime-local value ("2027-02-01T00:00", local time) as RFC 3339 UTC; other text as typed,
   so that controld names the bad field. */
function expiresValue(v) {
  const t = String(v || '').trim();
  if (!t) return null;
  const d = new Date(t);
  return isNaN(d.getTime()) ? t : d.toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/* Copy text, else select the field for Ctrl+C. */
async function copy(el, text, what) {
  el.select();
  try {
    await navigator.clipboard.writeText(text);
    banners.notice(`${what} copied.`);
  } catch (e) {
    banners.notice('Selected: press Ctrl+C to copy.');
  }
}

/* A read-only line with a Copy button. */
function copyLine(label, text, testid, what) {
  const out = h('input', { readonly: true, value: text, class: 'w-l mono', 'aria-label': label, ...tid(testid) });
  return [out, button('Copy', () => copy(out, text, what), tid(testid + '-copy'))];
}

/* The box that shows a new key once: the secret, and how noded takes it. */
function secretBox(box, r) {
  const controld = location.origin;
  const envLine = `CDNCA_ENROL_KEY=${r.key}`;
  const cmd = `CDNCA_ENROL_KEY=${r.key} noded --controld ${controld} --name $(hostname -s) --state-dir /var/lib/cdnca-node`;
  const [out, copyBtn] = copyLine('New enrolment key', r.key, 'enrolkey-secret', 'Key');
  put(box, h('div', null,
    h('p', null, h('strong', null, `Enrolment key "${r.name}" (id ${r.id}).`),
      ' It is shown only this once: copy it now (Copy, or select it and press Ctrl+C) and keep it in the vault of your configuration management.'),
    h('div', { class: 'inline' }, out, copyBtn),
    h('p', null, 'Give it to each host\u2019s noded in ', h('code', null, '/etc/cdnca/noded.env'),
      ' (a node token, ', h('code', null, 'CDNCA_NODE_TOKEN'), ', wins when set):'),
    h('div', { class: 'inline' }, ...copyLine('Environment line', envLine, 'enrolkey-env', 'Line')),
    h('p', null, 'or on the command line (or in a file named by ', h('code', null, '--enrol-key-file'), '):'),
    h('div', { class: 'inline' }, ...copyLine('noded command line', cmd, 'enrolkey-cmd', 'Command line')),
    h('p', { class: 'muted' }, 'At its first start each noded enrols under its name and writes its own node token to ',
      h('code', null, 'STATE_DIR/node-token'), ' (mode 0600); later starts need no key.'),
    h('div', { class: 'actions' }, button('Done', () => { box.hidden = true; box.replaceChildren(); }, tid('enrolkey-done')))));
  box.hidden = false;
  out.select();
}

function usesText(k) {
  return k.max_uses === null || k.max_uses === undefined ? `${k.uses} / unlimited` : `${k.uses} / ${k.max_uses}`;
}

function pageEnrolKeys() {
  let list, box;
  return {
    title: 'Enrolment keys', nav: 'enrolment-keys',
    mount(main) {
      if (!may('admin')) {
        add(main, h('section', { class: 'card', ...tid('enrolkeys-denied') }, h('h1', null, 'Enrolment keys'),
          h('p', { class: 'muted' }, 'Enrolment keys are managed with an admin token.')));
        return;
      }
      list = h('div', null, h('p', { class: 'muted' }, 'Loading\u2026'));
      box = h('div', { class: 'alert unk', hidden: true, ...tid('enrolkey-box') });
      const form = h('form', { class: 'card', ...tid('create-enrolkey-form') }, h('h2', null, 'New enrolment key'),
        h('div', { class: 'inline' },
          field('Name', input('name', { required: true, placeholder: 'fra-rollout', 'data-field': 'name', ...tid('enrolkey-name') })),
          field('Expires', input('expires_at', { type: 'datetime-local', 'data-field': 'expires_at', ...tid('enrolkey-expires') }),
            'empty = never'),
          field('Max uses', input('max_uses', { type: 'number', min: 1, max: 1000000, step: 1, class: 'w-s',
            'data-field': 'max_uses', ...tid('enrolkey-max-uses') }), 'empty = unlimited'),
          h('button', { type: 'submit', class: 'primary', ...tid('create-enrolkey-submit') }, 'Create key')), box);
      form.addEventListener('submit', async (ev) => {
        ev.preventDefault();
        const name = form.elements.name.value.trim();
        const mu = form.elements.max_uses.value.trim();
        const body = { name, expires_at: expiresValue(form.elements.expires_at.value),
          max_uses: mu === '' ? null : (/^\d+$/.test(mu) ? parseInt(mu, 10) : mu) };
        const r = await act(() => api('POST', '/v1/enrolment-keys', body), `Enrolment key "${name}" created.`);
        if (!r || !r.key) return;
        form.reset();
        delete form.dataset.dirty;
        clearEditing();
        secretBox(box, r);
      });
      add(main, h('section', { class: 'card' }, h('h1', null, 'Enrolment keys'),
        h('p', { class: 'muted' }, 'One key enrols many nodes: each noded trades it for a node token of its own at its first start. ' +
          'Keys are stored hashed and shown only when created.'), list), form);
    },
    async refresh(alive) {
      if (!list) return;
      const keys = listOf(await api('GET', '/v1/enrolment-keys'), 'enrolment_keys');
      if (!alive()) return;
      if (!keys.length) return put(list, h('p', { class: 'muted', ...tid('enrolkeys-none') }, 'No enrolment keys.'));
      put(list, table(['Name', 'State', 'Uses', 'Expires', 'Created', ''], keys.map((k) => h('tr',
        { 'data-testid': `enrolkey-${k.id}`, 'data-name': k.name, 'data-state': k.state, 'data-uses': k.uses },
        h('td', null, k.name, h('span', { class: 'muted' }, ` #${k.id}`)),
        h('td', null, stateBadge(k.state, `enrolkey-${k.id}-state`),
          k.revoked_at ? h('small', { class: 'muted' }, ' ', fmtTime(k.revoked_at)) : null),
        h('td', { 'data-testid': `enrolkey-${k.id}-uses` }, usesText(k)),
        h('td', null, k.expires_at ? fmtTime(k.expires_at) : h('span', { class: 'muted' }, 'never')),
        h('td', null, fmtTime(k.created_at)),
        h('td', null, k.state === 'revoked' ? null : button('Revoke', async () => {
          if (!window.confirm(`Revoke enrolment key "${k.name}"? No node can enrol with it from now on; nodes already enrolled keep their tokens.`)) return;
          await act(() => api('DELETE', `/v1/enrolment-keys/${k.id}`), `Enrolment key "${k.name}" revoked.`);
        }, { class: 'small danger', 'data-testid': `enrolkey-${k.id}-revoke` })))), tid('enrolkeys-table')));
    },
  };
}

export { pageEnrolKeys };
