/* model — the dashboard's pure functions (no DOM): verdict history to timeline marks, level
   switches from events, a site's state badges from its origins, the end of a growing list.
   Unit-tested under node (tests/unit/test_ui_model.mjs). */

const ms = (iso) => {
  const t = Date.parse(iso);
  return Number.isNaN(t) ? null : t;
};

/* Median of the votes' latencies (ms), or null when no vote carries one. */
function voteLatency(votes) {
  const l = (Array.isArray(votes) ? votes : []).map((v) => v && v.latency_ms)
    .filter((x) => typeof x === 'number' && x >= 0).sort((a, b) => a - b);
  if (!l.length) return null;
  const m = l.length >> 1;
  return l.length % 2 ? l[m] : Math.round((l[m - 1] + l[m]) / 2);
}

/* The marks of one origin, oldest first: {t, verdict, source, votes, state, changed, latency}.
   verdicts: the API's list (newest first). A mark is "changed" when its state_after differs from
   the mark before it. */
function originMarks(verdicts) {
  const rows = (Array.isArray(verdicts) ? verdicts : []).map((v) => ({
    t: ms(v.round_at), verdict: v.verdict || null, source: v.source || null,
    votes: Array.isArray(v.votes) ? v.votes : [], state: v.state_after || 'unknown', round: v.round_id,
    latency: voteLatency(v.votes),
  })).filter((m) => m.t !== null).sort((a, b) => a.t - b.t);
  for (let i = 0; i < rows.length; i++) rows[i].changed = i > 0 && rows[i].state !== rows[i - 1].state;
  return rows;
}

/* Level switches (level.switched events) as {t, from, to, reason, by}, oldest first. */
function levelSwitches(events) {
  return (events || []).filter((e) => e && e.type === 'level.switched').map((e) => {
    const d = e.data || {};
    return { t: ms(e.created_at), from: d.from_level, to: d.to_level, reason: d.reason || '', by: d.by || null, id: e.id };
  }).filter((s) => s.t !== null).sort((a, b) => a.t - b.t);
}

/* The common time window [t0, t1] of every origin's marks (t1 at least now). */
function windowOf(markLists, now) {
  let t0 = Infinity;
  for (const l of markLists) if (l.length) t0 = Math.min(t0, l[0].t);
  if (t0 === Infinity) t0 = now - 60000;
  const t1 = Math.max(now, t0 + 1000);
  return { t0, t1 };
}
/* Health of each level from the site's own origins (as the status card computes it with the default
   level rule): healthy if an enabled origin is healthy, unhealthy if all are, else unknown. */
function levelHealth(site) {
  const by = new Map();
  for (const o of site.origins || []) {
    if (o.enabled === false) continue;
    if (!by.has(o.level)) by.set(o.level, []);
    by.get(o.level).push(o.health || 'unknown');
  }
  const out = new Map();
  for (const [l, hs] of by) {
    out.set(l, hs.includes('healthy') ? 'healthy' : hs.every((x) => x === 'unhealthy') ? 'unhealthy' : 'unknown');
  }
  return out;
}
/* The row's state badges: current level (primary or backup), its health, and the flags. */
function siteState(site) {
  const lh = levelHealth(site);
  const levels = [...lh.keys()].sort((a, b) => a - b);
  const cur = site.current_level;
  const hc = (site.health_check && site.health_check.state) || 'disabled';
  const active = hc === 'active';
  return {
    level: cur, primary: levels.length === 0 || cur === levels[0], health: lh.get(cur) || 'empty', hc,
    allDown: active && levels.length > 0 && levels.every((l) => lh.get(l) === 'unhealthy'),
    earlierHealthy: active && levels.some((l) => l < cur && lh.get(l) === 'healthy'),
  };
}

/* The largest id of a list whose ids only grow. next(after) resolves to the id of the first record
   with an id > after, or null when there is none; known is an id that exists (or 0). Gallops
   (steps doubling) while records follow, then bisects: about 2 log2(last id) calls, at most
   LAST_ID_PROBES. */
const LAST_ID_PROBES = 64;
async function lastId(next, known) {
  let last = known || 0, step = 1024, growing = true;
  for (let i = 0; i < LAST_ID_PROBES; i++) {
    const id = await next(last + step - 1);
    const found = id !== null && id > last;
    if (found) last = id;
    if (!found && step === 1) break;
    if (!found) growing = false;
    /* after the first miss the end lies within one step: bisect */
    step = growing ? step * 2 : Math.max(1, Math.floor(step / 2));
  }
  return last;
}

export { lastId, voteLatency, originMarks, levelSwitches, windowOf, levelHealth, siteState };
