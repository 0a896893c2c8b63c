/* fleet — the landing page: fleet counts (GET /v1/summary), each a link to the filtered sites
   list; nodes online and lagging; the latest notifications. */
import { h, add, put, tid, listOf, api, soft, eventFeed, eventList } from './core.js';

/* One tile per summary key: label, the sites-list filter it links to (null = all sites), tone. */
const TILES = [
  ['sites', 'Sites', '', 'none'],
  ['on_primary', 'On their primary level', null, 'ok'],
  ['on_backup', 'On a backup level', 'on_backup', 'unk'],
  ['all_levels_unhealthy', 'All levels unhealthy', 'all_down', 'bad'],
  ['failback_available', 'Failback available', 'failback_available', 'unk'],
  ['paused', 'Health checks paused', 'paused', 'none'],
];
const LATEST = 10;

function tile(key, label, href, tone, value, alarm) {
  return h('a', { class: `tile t-${alarm ? tone : 'none'}`, href, 'data-testid': `summary-${key}`, 'data-count': value ?? '' },
    h('span', { class: 'tile-n' }, value ?? '\u2014'), h('span', { class: 'tile-l' }, label));
}

function pageOverview() {
  const feed = eventFeed('/v1/notifications', true);
  const latest = eventList('latest-notifications', true);
  let tiles, nodesEl;
  return {
    title: 'Overview', nav: 'overview',
    mount(main) {
      tiles = h('div', { class: 'tiles', ...tid('summary') }, h('p', { class: 'muted' }, 'Loading\u2026'));
      nodesEl = h('div', { class: 'tiles' });
      add(main, h('section', { class: 'card' }, h('h1', null, 'Fleet overview'), tiles),
        h('section', { class: 'card' }, h('h2', null, 'Nodes'), nodesEl),
        h('section', { class: 'card' }, h('h2', null, 'Latest notifications'), latest.el,
          h('p', null, h('a', { href: '#/notifications' }, 'All notifications \u2192'))));
    },
    async refresh(alive) {
      let sum = null, missing = false;
      try {
        sum = await api('GET', '/v1/summary');
      } catch (e) {
        if (e.status === 404 && !e.auth) missing = true;
        else throw e;
      }
      const [, nodes] = await Promise.all([feed.update().catch(soft),
        missing ? api('GET', '/v1/nodes').then((r) => listOf(r, 'nodes')).catch(soft) : null]);
      if (!alive()) return;
      if (missing) {
        put(tiles, h('p', { class: 'muted' }, 'This controld has no fleet summary; see the sites list.'));
        const on = (nodes || []).filter((n) => n.online).length;
        put(nodesEl, tile('nodes_online', 'Nodes online', '#/nodes', 'ok', on, false));
      } else {
        put(tiles, TILES.map(([key, label, state, tone]) => tile(key, label,
          state === null ? '#/sites' : '#/sites' + (state ? '?state=' + state : ''), tone, sum[key], sum[key] > 0)));
        put(nodesEl, tile('nodes_online', 'Nodes online', '#/nodes', 'ok', sum.nodes_online, false),
          tile('nodes_lagging', 'Lagging behind the current config', '#/nodes', 'unk', sum.nodes_lagging, sum.nodes_lagging > 0));
      }
      latest.paint(feed.events.slice(-LATEST));
    },
  };
}

export { pageOverview };
