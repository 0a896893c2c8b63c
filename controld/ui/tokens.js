/* tokens — API tokens with a role (GET/POST/DELETE /v1/tokens): create, the secret shown once with
   a copy button, list, revoke. Admin only; the nav hides it for other roles. */
import { h, add, put, tid, field, input, select, button, table, fmtTime, listOf, banners, api, act, clearEditing } from './core.js';
import { who, may } from './roles.js';

const ROLES = ['read', 'operator', 'admin'];
const ROLE_HELP = {
  read: 'may only read (GET)',
  operator: 'may also switch levels, enable/disable origins and test webhooks',
  admin: 'may do everything, including tokens',
};

/* The box that shows a new secret once: a read-only field, Copy and Done. */
function secretBox(box, r) {
  const out = h('input', { readonly: true, value: r.token, class: 'w-l mono', 'aria-label': 'New token', ...tid('token-secret') });
  put(box, h('p', null, h('strong', null, `Token "${r.name}" (${r.role}, id ${r.id}).`),
    ' It is shown only this once: copy it now.'),
  h('div', { class: 'inline' }, out, button('Copy', async () => {
    out.select();
    try {
      await navigator.clipboard.writeText(r.token);
      banners.notice('Token copied.');
    } catch (e) {
      banners.notice('Selected: press Ctrl+C to copy.');
    }
  }, tid('token-copy')), button('Done', () => { box.hidden = true; box.replaceChildren(); }, tid('token-done'))));
  box.hidden = false;
  out.select();
}

function pageTokens() {
  let list, box;
  return {
    title: 'Tokens', nav: 'tokens',
    mount(main) {
      list = h('div', null, h('p', { class: 'muted' }, 'Loading\u2026'));
      box = h('div', { class: 'alert unk', hidden: true, ...tid('token-box') });
      const roleSel = select('role', ROLES, 'read', tid('token-role'));
      const hint = h('small', { class: 'muted' }, ROLE_HELP.read);
      roleSel.addEventListener('change', () => { hint.textContent = ROLE_HELP[roleSel.value] || ''; });
      const form = h('form', { class: 'card', ...tid('create-token-form') }, h('h2', null, 'New token'),
        h('div', { class: 'inline' },
          field('Name', input('name', { required: true, placeholder: 'oncall-alice', 'data-field': 'name', ...tid('token-name') })),
          field('Role', roleSel, null),
          h('button', { type: 'submit', class: 'primary', ...tid('create-token-submit') }, 'Create token')), hint, box);
      form.addEventListener('submit', async (ev) => {
        ev.preventDefault();
        const name = form.elements.name.value.trim();
        const r = await act(() => api('POST', '/v1/tokens', { name, role: roleSel.value }), `Token "${name}" created.`);
        if (!r || !r.token) return;
        form.elements.name.value = '';
        delete form.dataset.dirty;
        clearEditing();
        secretBox(box, r);
      });
      add(main, h('section', { class: 'card' }, h('h1', null, 'API tokens'),
        h('p', { class: 'muted' }, 'Tokens for people and tools. Secrets are stored hashed and shown only when created.'), list),
      may('admin') ? form : null);
    },
    async refresh(alive) {
      const tokens = listOf(await api('GET', '/v1/tokens'), 'tokens');
      if (!alive()) return;
      if (!tokens.length) return put(list, h('p', { class: 'muted' }, 'No tokens.'));
      put(list, table(['Name', 'Role', 'Created', 'Expires', ''], tokens.map((t) => h('tr', { 'data-testid': `token-${t.id}`, 'data-name': t.name },
        h('td', null, t.name, h('span', { class: 'muted' }, ` #${t.id}`), who.id === t.id ? h('span', { class: 'tag' }, 'used by this tab') : null),
        h('td', null, h('span', { class: 'tag role-' + t.role }, t.role)),
        h('td', null, fmtTime(t.created_at)),
        h('td', null, t.expires_at ? fmtTime(t.expires_at) : h('span', { class: 'muted' }, 'never')),
        h('td', null, button('Revoke', async () => {
          if (!window.confirm(`Revoke token "${t.name}"? It stops working at once.`)) return;
          await act(() => api('DELETE', `/v1/tokens/${t.id}`), `Token "${t.name}" revoked.`);
        }, { class: 'small danger', 'data-testid': `token-${t.id}-revoke` })))), tid('tokens-table')));
    },
  };
}

export { pageTokens };
