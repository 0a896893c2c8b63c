// Unit tests of the dashboard's pure functions (controld/ui/model.js) under node, no browser:
//   node tests/unit/test_ui_model.mjs
// model.js is loaded as an ES module from a data: URL, so no package.json or node flag is needed.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const src = fs.readFileSync(path.join(here, '..', '..', 'controld', 'ui', 'model.js'), 'utf8');
const m = await import('data:text/javascript;charset=utf-8,' + encodeURIComponent(src));

let passed = 0, failed = 0;
async function test(name, fn) {
  try {
    await fn();
    passed++;
    console.log(`ok - ${name}`);
  } catch (e) {
    failed++;
    console.log(`not ok - ${name}\n${e.stack}`);
  }
}

// The dashboard's webhook and channel forms offer every event type controld accepts in a filter
// (event_type_names), and no other: the list is written in both, so it is compared here.
await test('EVENT_TYPES: the same as controld/event.c event_type_names', () => {
  const read = (f) => fs.readFileSync(path.join(here, '..', '..', 'controld', ...f), 'utf8');
  const c = read(['event.c']).match(/event_type_names\[EVENT_TYPES \+ 1\] = \{([^}]*)\}/);
  const js = read(['ui', 'core.js']).match(/const EVENT_TYPES = \[([^\]]*)\]/);
  assert.ok(c && js, 'both lists found');
  const inC = [...c[1].matchAll(/"([a-z_.]+)"/g)].map((x) => x[1]);
  const inJs = [...js[1].matchAll(/'([a-z_.]+)'/g)].map((x) => x[1]);
  assert.ok(inC.length >= 12, inC.join(','));
  assert.deepEqual(inJs, inC);
});

const vote = (ok, latency, extra) => Object.assign({ source: 'nodes', node_id: 1, ok, status: ok ? 200 : 503,
  error: null, latency_ms: latency }, extra || {});
const verdict = (sec, v, state, votes) => ({ round_id: sec, round_at: new Date(Date.UTC(2026, 0, 1, 0, 0, sec)).toISOString(),
  source: 'nodes', verdict: v, state_after: state, votes: votes || [] });

await test('voteLatency: median of the votes that carry one', () => {
  assert.equal(m.voteLatency([vote(true, 30), vote(true, 10), vote(false, 20)]), 20);
  assert.equal(m.voteLatency([vote(true, 10), vote(true, 31)]), 21);  // even count: mean of the middle two
  assert.equal(m.voteLatency([vote(true, null), vote(true, 7)]), 7);
  assert.equal(m.voteLatency([vote(true, null)]), null);
  assert.equal(m.voteLatency(null), null);
  assert.equal(m.voteLatency([vote(true, 0)]), 0);  // 0 ms is a latency, not "none"
});

await test('originMarks: oldest first, state changes flagged, bad rows dropped', () => {
  const api = [  // the API answers newest first
    verdict(4, 'success', 'healthy'), verdict(3, 'failure', 'unhealthy'),
    verdict(2, 'failure', 'unhealthy'), verdict(1, 'failure', 'healthy'),
    { round_at: 'not a time', verdict: 'success', state_after: 'healthy' },
  ];
  const marks = m.originMarks(api);
  assert.deepEqual(marks.map((x) => x.verdict), ['failure', 'failure', 'failure', 'success']);
  assert.deepEqual(marks.map((x) => x.changed), [false, true, false, true]);
  assert.deepEqual(marks.map((x) => x.state), ['healthy', 'unhealthy', 'unhealthy', 'healthy']);
  assert.ok(marks.every((x, i) => i === 0 || x.t > marks[i - 1].t));
});

await test('originMarks: a round without verdict (1-1 votes) stays a mark with verdict null', () => {
  const marks = m.originMarks([verdict(1, null, 'unknown', [vote(true, 5), vote(false, 9)])]);
  assert.equal(marks.length, 1);
  assert.equal(marks[0].verdict, null);
  assert.equal(marks[0].latency, 7);
  assert.equal(marks[0].changed, false);
});

await test('originMarks: nothing in, nothing out', () => {
  assert.deepEqual(m.originMarks(undefined), []);
  assert.deepEqual(m.originMarks([]), []);
});

await test('levelSwitches: only level.switched, with who did a manual one', () => {
  const ev = [
    { id: 3, type: 'level.switched', created_at: '2026-01-01T00:00:05Z', data: { from_level: 2, to_level: 1, reason: 'manual', by: 'alice' } },
    { id: 1, type: 'origin.health_changed', created_at: '2026-01-01T00:00:01Z', data: {} },
    { id: 2, type: 'level.switched', created_at: '2026-01-01T00:00:02Z', data: { from_level: 1, to_level: 2, reason: 'auto_failover' } },
  ];
  const s = m.levelSwitches(ev);
  assert.deepEqual(s.map((x) => [x.id, x.from, x.to, x.reason, x.by]), [[2, 1, 2, 'auto_failover', null], [3, 2, 1, 'manual', 'alice']]);
});

await test('windowOf: from the oldest mark of any origin to now', () => {
  const a = m.originMarks([verdict(10, 'success', 'healthy')]);
  const b = m.originMarks([verdict(5, 'success', 'healthy')]);
  const now = Date.UTC(2026, 0, 1, 0, 1, 0);
  assert.deepEqual(m.windowOf([a, b, []], now), { t0: Date.UTC(2026, 0, 1, 0, 0, 5), t1: now });
  assert.deepEqual(m.windowOf([], now), { t0: now - 60000, t1: now });
});

const site = (cur, origins, hc = 'active', failback = 'auto') => ({ current_level: cur, failback, health_check: { state: hc },
  origins: origins.map(([level, health, enabled]) => ({ level, health, enabled: enabled !== false })) });

await test('levelHealth: any healthy -> healthy; all unhealthy -> unhealthy; else unknown; disabled ignored', () => {
  const lh = m.levelHealth(site(1, [[1, 'unhealthy'], [1, 'healthy'], [2, 'unhealthy'], [2, 'unknown'],
    [3, 'unhealthy'], [3, 'healthy', false], [4, 'healthy', false]]));
  assert.equal(lh.get(1), 'healthy');
  assert.equal(lh.get(2), 'unknown');
  assert.equal(lh.get(3), 'unhealthy');
  assert.equal(lh.has(4), false);  // no enabled origin: an empty level
});

await test('siteState: primary is the first non-empty level, not level 1', () => {
  const st = m.siteState(site(2, [[1, 'healthy', false], [2, 'healthy'], [3, 'healthy']]));
  assert.equal(st.primary, true);
  assert.equal(st.health, 'healthy');
  assert.equal(m.siteState(site(3, [[1, 'healthy', false], [2, 'unhealthy'], [3, 'healthy']])).primary, false);
});

await test('siteState: all down and failback flags only with active health checks', () => {
  const down = site(2, [[1, 'unhealthy'], [2, 'unhealthy']]);
  assert.equal(m.siteState(down).allDown, true);
  assert.equal(m.siteState(Object.assign({}, down, { health_check: { state: 'paused' } })).allDown, false);
  const back = site(2, [[1, 'healthy'], [2, 'healthy']], 'active', 'manual');
  assert.equal(m.siteState(back).earlierHealthy, true);
  assert.equal(m.siteState(site(1, [[1, 'healthy'], [2, 'healthy']])).earlierHealthy, false);
  assert.equal(m.siteState(site(2, [[1, 'unknown'], [2, 'healthy']])).health, 'healthy');
});

/* A list of the given ids: next(after) as the API answers ?after=X&limit=1; counts the calls. */
function list(ids) {
  const sorted = ids.slice().sort((a, b) => a - b);
  const calls = { n: 0 };
  const next = async (after) => {
    calls.n++;
    const id = sorted.find((x) => x > after);
    return id === undefined ? null : id;
  };
  return { next, calls };
}

await test('lastId: finds the end of dense and sparse id lists, in few calls', async () => {
  for (const ids of [[1], [1, 2, 3], Array.from({ length: 10300 }, (_, i) => i + 1),
    Array.from({ length: 5000 }, (_, i) => 7 + i * 13), [5, 1023, 1024, 1025, 4096, 999999]]) {
    const l = list(ids);
    const last = await m.lastId(l.next, ids[0]);
    assert.equal(last, Math.max(...ids), `ids ending at ${Math.max(...ids)}`);
    assert.ok(l.calls.n <= 2 * Math.ceil(Math.log2(Math.max(...ids) + 1024)) + 2, `${l.calls.n} calls`);
  }
});

await test('lastId: an empty list ends at the id it was given', async () => {
  assert.equal(await m.lastId(list([]).next, 0), 0);
});

await test('lastId: bounded even if the list never ends', async () => {
  let calls = 0;
  const last = await m.lastId(async (after) => { calls++; return after + 1; }, 0);
  assert.ok(calls === 64 && last > 0);
});

console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
