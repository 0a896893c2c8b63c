/* roles — what the signed-in token may do. Write controls are built only when may() says so, so
   a read token sees none; the server still decides (a refused write is a 403 banner). */
import { api, auth } from './core.js';

/* Rank of each role: a role may do what every lower one may. */
const RANK = { read: 1, operator: 2, admin: 3 };

/* Kept in memory only (a reload asks again): sessionStorage holds nothing but the token. */
const who = { role: null, name: null, id: null };

const missing = (e) => !e.auth && !e.network && (e.status === 404 || e.status === 405);

/* Without GET /v1/tokens/self: an admin may list tokens; a token refused that is taken as read
   (the least, so no control is shown that the server would refuse); a controld without token
   routes at all has admin tokens only. */
async function guessRole() {
  try {
    await api('GET', '/v1/tokens');
    return 'admin';
  } catch (e) {
    if (e.forbidden) return 'read';
    if (missing(e)) return 'admin';
    throw e;
  }
}

/* Learn the token's role and name (GET /v1/tokens/self). Throws what api() throws for a
   rejected token. */
async function loadRole() {
  if (!auth.get()) return who;
  try {
    const r = await api('GET', '/v1/tokens/self');
    who.role = r && RANK[r.role] ? r.role : 'read';
    who.name = r && r.name ? r.name : null;
    who.id = r && r.id !== undefined ? r.id : null;
  } catch (e) {
    if (!missing(e)) throw e;
    who.role = await guessRole();
    who.name = who.id = null;
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
