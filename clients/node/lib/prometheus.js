'use strict';
/**
 * Prometheus metrics with prom-client (an optional peer dependency):
 *
 *     const promClient = require('prom-client');
 *     registerRateLimitMetrics(promClient.register, redis, { topKeys: 10 });
 *
 * At each scrape the metrics read the module's counters (INFO ratelimit: per command, per
 * policy, waiting clients, RL.TOP's totals) and, with topKeys, RL.TOP — one pipelined round trip
 * per node (every primary of a cluster client), shared by every metric of the scrape — plus the
 * middleware's own decisions counted in this process. Labels stay low-cardinality: command,
 * policy, outcome; keys only in the opt-in ratelimit_top_key_refused (at most 100 of them).
 * docs/observability.md lists every metric.
 */
const { Transport } = require('./transport');
const { decisionCounts, OUTCOMES } = require('./outcomes');
const { toMs } = require('./duration');

/** How long a scrape waits for the servers by default (ms): below Prometheus' 10 s scrape timeout. */
const DEFAULT_SCRAPE_TIMEOUT_MS = 5000;

/** INFO commands whose calls decide nothing (their admitted/limited stay 0). */
const NOT_DECIDING = new Set(['peek', 'info', 'restore', 'top', 'refund', 'release', 'policy']);
const POLICY_OUTCOMES = ['admitted', 'limited', 'shadow_limited', 'near_limit'];
/** A candidate's outcomes (its INFO fields are `candidate_<outcome>`). */
const CANDIDATE_OUTCOMES = ['admitted', 'limited', 'near_limit'];
/** The INFO field of one policy's counters: `ratelimit_policy_stats_<name>:calls=…,…` (no other field starts so). */
const POLICY_LINE = 'policy_stats_';
const MAX_TOP_KEYS = 100;

/**
 * The `ratelimit_*` fields of an INFO reply: numbers by name (prefix dropped), and the policy
 * lines (`policy_stats_<name>:calls=…,admitted=…`) as objects by policy name.
 */
function parseInfo(text) {
  const fields = new Map();
  const policies = new Map();
  for (const line of String(text).split(/\r?\n/)) {
    if (!line.startsWith('ratelimit_')) continue;
    const colon = line.lastIndexOf(':');
    if (colon < 0) continue;
    const name = line.slice('ratelimit_'.length, colon);
    const value = line.slice(colon + 1);
    if (value.includes('=')) {
      if (!name.startsWith(POLICY_LINE)) continue;
      const stats = {};
      for (const pair of value.split(',')) {
        const [k, v] = pair.split('=');
        stats[k] = Number(v);
      }
      policies.set(name.slice(POLICY_LINE.length), stats);
    } else if (/^-?\d+$/.test(value)) {
      fields.set(name, Number(value));
    }
  }
  return { fields, policies };
}

/** One function per node that sends several commands in one pipelined round trip. */
function nodes(client) {
  const t = Transport.of(client);
  const c = t.client;
  const ioredis = (node) => async (commands) => {
    const replies = await node.pipeline(commands.map((argv) => ['call', ...argv])).exec();
    return replies.map(([err, reply]) => {
      if (err) throw err;
      return reply;
    });
  };
  switch (t.kind) {
    case 'ioredis-cluster':
      return c.nodes('master').map(ioredis);
    case 'ioredis':
      return [ioredis(c)];
    case 'node-redis-cluster': {
      const masters = typeof c.getMasters === 'function' ? c.getMasters() : c.masters;
      // node-redis writes the commands of one tick together: one round trip.
      return masters.map((m) => async (commands) => {
        const node = await c.nodeClient(m);
        return Promise.all(commands.map((argv) => node.sendCommand(argv.map(String))));
      });
    }
    case 'node-redis':
      return [(commands) => Promise.all(commands.map((argv) => c.sendCommand(argv.map(String))))];
    default:
      return [(commands) => Promise.all(commands.map((argv) => c(...argv.map(String))))];
  }
}

/** Every node's counters added up, and the top keys across nodes. */
async function scrape(client, topKeys) {
  const commands = [['INFO', 'ratelimit']];
  if (topKeys > 0) commands.push(['RL.TOP', 'COUNT', topKeys]);
  const replies = await Promise.all(nodes(client).map((send) => send(commands)));
  const fields = new Map();
  const policies = new Map();
  const top = new Map();
  for (const [info, rows] of replies) {
    const parsed = parseInfo(Buffer.isBuffer(info) ? info.toString() : info);
    for (const [k, v] of parsed.fields) fields.set(k, (fields.get(k) || 0) + v);
    for (const [name, stats] of parsed.policies) {
      const sum = policies.get(name) || {};
      for (const [k, v] of Object.entries(stats)) sum[k] = (sum[k] || 0) + v;
      policies.set(name, sum);
    }
    for (const [key, refused] of rows || []) {
      const k = Buffer.isBuffer(key) ? key.toString() : String(key);
      top.set(k, (top.get(k) || 0) + Number(refused));
    }
  }
  const topRows = [...top].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1)).slice(0, topKeys);
  return { fields, policies, top: topRows };
}

/** The commands INFO counts (those with a `<cmd>_calls` field). */
function commandsOf(fields) {
  return [...fields.keys()].filter((k) => k.endsWith('_calls')).map((k) => k.slice(0, -'_calls'.length));
}

/**
 * Registers the module's metrics and the middleware's in `registry` (a prom-client Registry).
 * @param {object} registry  prom-client Registry (e.g. require('prom-client').register)
 * @param {object|Function} client  ioredis Redis/Cluster, node-redis client/cluster, or a sendCommand function
 * @param {{topKeys?: number, timeout?: number|string}} [options]  topKeys: expose the n most
 *   refused keys (0 … 100, default 0); timeout: how long a scrape waits for the servers (ms or
 *   a duration such as '2s'; default 5 s) — past it the scrape answers ratelimit_up 0 with the
 *   middleware's counters, and the next scrape waits for the same late replies instead of
 *   queueing more commands behind them
 * @returns {object[]} the metrics registered
 */
function registerRateLimitMetrics(registry, client, options = {}) {
  const topKeys = options.topKeys === undefined ? 0 : options.topKeys;
  if (!Number.isInteger(topKeys) || topKeys < 0 || topKeys > MAX_TOP_KEYS) {
    throw new TypeError(`topKeys must be an integer from 0 to ${MAX_TOP_KEYS}`);
  }
  const timeoutMs = options.timeout === undefined ? DEFAULT_SCRAPE_TIMEOUT_MS : toMs(options.timeout, 'timeout');
  if (!(timeoutMs > 0)) throw new TypeError('timeout must be a positive duration');
  Transport.of(client); // refuses what is not a client now, not at the first scrape
  let prom;
  try {
    prom = require('prom-client');
  } catch {
    throw new Error("registerRateLimitMetrics needs prom-client: npm install prom-client");
  }

  // One scrape of the servers shared by every metric collected at once (prom-client collects
  // them concurrently); a failed or late scrape leaves the server metrics empty and
  // ratelimit_up 0. The servers' replies themselves (`asked`) are awaited by later scrapes
  // while they are late, so a hung server gets one INFO, not one per scrape.
  let inflight = null;
  let asked = null;
  const snapshot = () => {
    if (inflight === null) {
      if (asked === null) {
        const mine = scrape(client, topKeys).catch((error) => ({ error }));
        asked = mine;
        mine.then(() => {
          if (asked === mine) asked = null;
        });
      }
      let timer;
      const late = new Promise((resolve) => {
        timer = setTimeout(() => resolve({ error: new Error(`the servers did not answer the scrape within ${timeoutMs} ms`) }), timeoutMs);
      });
      inflight = Promise.race([asked, late]).finally(() => clearTimeout(timer));
      inflight.then(() => setImmediate(() => (inflight = null)));
    }
    return inflight;
  };
  const metric = (Kind, name, help, labelNames, fill) =>
    new Kind({
      name,
      help,
      labelNames,
      registers: [registry],
      async collect() {
        const s = await snapshot();
        this.reset();
        if (!s.error || name === 'ratelimit_up') fill(this, s);
      },
    });
  const set = (m, labels, v) => (m instanceof prom.Counter ? m.inc(labels, v) : m.set(labels, v));
  const field = (name) => (m, s) => set(m, {}, s.fields.get(name) || 0);
  const perCommand = (suffix) => (m, s) => {
    for (const command of commandsOf(s.fields)) set(m, { command }, s.fields.get(`${command}_${suffix}`) || 0);
  };

  return [
    metric(prom.Gauge, 'ratelimit_up', 'Whether every node answered the last scrape (1) or not (0)', [], (m, s) => m.set(s.error ? 0 : 1)),
    metric(prom.Counter, 'ratelimit_decisions_total', 'Limiting calls the module decided, by command and outcome (admitted, limited)', ['command', 'outcome'], (m, s) => {
      for (const command of commandsOf(s.fields)) {
        if (NOT_DECIDING.has(command)) continue;
        for (const outcome of ['admitted', 'limited']) m.inc({ command, outcome }, s.fields.get(`${command}_${outcome}`) || 0);
      }
    }),
    metric(prom.Counter, 'ratelimit_calls_total', 'Calls of each module command, errors included', ['command'], perCommand('calls')),
    metric(prom.Counter, 'ratelimit_errors_total', 'Calls of each module command answered with an error', ['command'], perCommand('errors')),
    metric(prom.Counter, 'ratelimit_policy_decisions_total', 'Decisions per server policy (RL.HIT) by outcome (admitted, limited, shadow_limited, near_limit)', ['policy', 'outcome'], (m, s) => {
      for (const [policy, stats] of s.policies) {
        for (const outcome of POLICY_OUTCOMES) m.inc({ policy, outcome }, stats[outcome] || 0);
      }
    }),
    metric(prom.Counter, 'ratelimit_policy_candidate_decisions_total', "What a policy's candidate (evaluated in shadow beside it) decided, by outcome (admitted, limited, near_limit)", ['policy', 'outcome'], (m, s) => {
      for (const [policy, stats] of s.policies) {
        if (stats.candidate_calls === undefined) continue;
        for (const outcome of CANDIDATE_OUTCOMES) m.inc({ policy, outcome }, stats[`candidate_${outcome}`] || 0);
      }
    }),
    metric(prom.Gauge, 'ratelimit_waiting', 'Clients blocked in WAIT now', [], field('waiting')),
    metric(prom.Counter, 'ratelimit_wait_admitted_total', 'Calls admitted after waiting (WAIT)', [], field('wait_admitted')),
    metric(prom.Counter, 'ratelimit_wait_timeouts_total', 'Waits (WAIT) that timed out', [], field('wait_timeouts')),
    metric(prom.Gauge, 'ratelimit_top_refusals', 'Refusals RL.TOP covers now (the last one to two windows)', [], field('top_refusals')),
    metric(prom.Gauge, 'ratelimit_top_error_bound', 'Every count RL.TOP reports is within this of the true count', [], field('top_error_bound')),
    ...(topKeys > 0
      ? [metric(prom.Gauge, 'ratelimit_top_key_refused', `Refusals of the ${topKeys} most refused keys now (RL.TOP)`, ['key'], (m, s) => {
          for (const [key, refused] of s.top) m.set({ key }, refused);
        })]
      : []),
    new prom.Counter({
      name: 'ratelimit_middleware_decisions_total',
      help: "This process's rateLimit() middleware decisions by policy and outcome (admitted, limited, error)",
      labelNames: ['policy', 'outcome'],
      registers: [registry],
      collect() {
        this.reset();
        for (const [policy, c] of decisionCounts()) {
          for (const outcome of OUTCOMES) this.inc({ policy, outcome }, c[outcome]);
        }
      },
    }),
  ];
}

module.exports = { registerRateLimitMetrics, parseInfo, DEFAULT_SCRAPE_TIMEOUT_MS };
