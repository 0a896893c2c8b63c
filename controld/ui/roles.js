/* roles — what the signed-in token may do. Write controls are built only when may() says so, so
   a read token sees none; the server still decides (a refused write is a 403 banner). */
import { api, auth } from './core.js';

/* Rank of each role: a role may do what every lower one may. */
const RANK = { read: 1, operator: 2, admin: 3 };

/* Kept in memory only (a reload asks again): sessionStorage holds nothing but the token. */
const who = { role: null, name: null, id: null };

/* Learn the token's role (GET /v1/tokens/self); a controld without that route has admin tokens
   only. Throws what api() throws for a rejected token. */
async function loadRole() {
  if (!auth.get()) return who;
  try {
    const r = await api('GET', '/v1/tokens/self');
    who.role = r && RANK[r.role] ? r.role : 'read';
    who.name = r && r.name ? r.name : null;
    who.id = r && r.id !== undefined ? r.id : null;
  } catch (e) {
    if (e.auth || e.network) throw e;
    if (e.status === 404 || e.status === 405) {
      who.role = 'admin';
      who.name = null;
    } else {
      throw e;
    }
  }
  return who;
}
function knownRole() { return !!who.role; }
function forgetRole() { who.role = who.name = who.id = null; }
/* True when the token's role is at least `role` ('read' | 'operator' | 'admin'). */
function may(role) {
  return (RANK[who.role] || 0) >= (RANK[role] || 99);
}

export { who, loadRole, knownRole, forgetRole, may };
