'use strict';
// registerRateLimitMetrics (issue 25): after known traffic against real servers, the registry's
// text format holds exactly the module's counters (INFO ratelimit), RL.TOP's keys when asked
// for, and the middleware's own decisions; one INFO per node per scrape; a cluster adds up its
// primaries; a server that does not answer gives ratelimit_up 0.
const { test, describe, before, after } = require('node:test');
const assert = require('node:assert/strict');
const Redis = require('ioredis');
const { createClient, createCluster } = require('redis');
const promClient = require('prom-client');
const { registerRateLimitMetrics, rateLimit } = require('..');
const { startServer, startCluster, commandCalls } = require('../testing/servers');

/** The sample lines of the registry's text format, as { 'name{labels}': value }. */
async function samples(registry) {
  const out = {};
  for (const line of (await registry.metrics()).split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const i = line.lastIndexOf(' ');
    out[line.slice(0, i)] = Number(line.slice(i + 1));
  }
  return out;
}

/** Runs the middleware once on a bare request and response; resolves to the status code. */
function through(middleware, ip) {
  return new Promise((resolve) => {
    const res = {
      statusCode: 200,
      headers: {},
      setHeader(k, v) {
        this.headers[k] = v;
      },
      end() {
        resolve(this.statusCode);
      },
    };
    middleware({ ip, headers: {}, socket: {} }, res, (err) => resolve(err ? 500 : 200));
  });
}

describe('one server', () => {
  let server;
  let redis;
  before(async () => {
    server = await startServer();
    redis = new Redis({ port: server.port });
  });
  after(async () => {
    redis.disconnect();
    await server.stop();
  });

  test('decisions, calls, errors, RL.TOP keys and middleware decisions, exactly', async () => {
    const registry = new promClient.Registry();
    registerRateLimitMetrics(registry, redis, { topKeys: 2 });
    for (let i = 0; i < 3; i++) await redis.call('RL.TOKEN', 'a', 1, 1, '1h'); // 1 admitted, 2 limited
    for (let i = 0; i < 2; i++) await redis.call('RL.PERIOD', 'b', 1, '1h'); // 1, 1
    for (let i = 0; i < 4; i++) await redis.call('RL.PERIOD', 'c', 1, '1h'); // 1, 3
    await assert.rejects(redis.call('RL.TOKEN', 'a', 'x', 1, '1h'));
    const mw = rateLimit({ client: redis, algorithm: 'period', limit: 1, period: '1m', policy: 'prom-test' });
    assert.deepEqual([await through(mw, '192.0.2.1'), await through(mw, '192.0.2.1')], [200, 429]);
    const s = await samples(registry);
    assert.equal(s.ratelimit_up, 1);
    assert.equal(s['ratelimit_decisions_total{command="token",outcome="admitted"}'], 1);
    assert.equal(s['ratelimit_decisions_total{command="token",outcome="limited"}'], 2);
    // The middleware's two calls are RL.PERIOD calls too.
    assert.equal(s['ratelimit_decisions_total{command="period",outcome="admitted"}'], 3);
    assert.equal(s['ratelimit_decisions_total{command="period",outcome="limited"}'], 5);
    assert.equal(s['ratelimit_decisions_total{command="slide",outcome="admitted"}'], 0);
    assert.equal(s['ratelimit_decisions_total{command="peek",outcome="admitted"}'], undefined, 'no decisions of RL.PEEK');
    assert.equal(s['ratelimit_calls_total{command="token"}'], 4);
    assert.equal(s['ratelimit_errors_total{command="token"}'], 1);
    assert.equal(s.ratelimit_waiting, 0);
    assert.equal(s.ratelimit_top_refusals, 7);
    assert.equal(s.ratelimit_top_error_bound, 0);
    assert.equal(s['ratelimit_top_key_refused{key="c"}'], 3);
    assert.equal(s['ratelimit_top_key_refused{key="a"}'], 2);
    assert.equal(Object.keys(s).filter((k) => k.startsWith('ratelimit_top_key_refused')).length, 2, 'topKeys bounds the keys');
    assert.equal(s['ratelimit_middleware_decisions_total{policy="prom-test",outcome="admitted"}'], 1);
    assert.equal(s['ratelimit_middleware_decisions_total{policy="prom-test",outcome="limited"}'], 1);
    assert.equal(s['ratelimit_middleware_decisions_total{policy="prom-test",outcome="error"}'], 0);
    // Counters grow with traffic; one INFO per scrape whatever the number of metrics.
    await redis.call('RL.TOKEN', 'a', 1, 1, '1h');
    const before = (await commandCalls(server.port)).info || 0;
    const again = await samples(registry);
    assert.equal(again['ratelimit_decisions_total{command="token",outcome="limited"}'], 3);
    // (The reading of `before` is an INFO too.)
    assert.equal((await commandCalls(server.port)).info - before, 2, 'one INFO per scrape');
  });

  test('without topKeys no key is a label; node-redis and a sendCommand function work alike', async () => {
    const nodeRedis = createClient({ socket: { port: server.port } });
    await nodeRedis.connect();
    try {
      for (const client of [nodeRedis, (...args) => nodeRedis.sendCommand(args)]) {
        const registry = new promClient.Registry();
        registerRateLimitMetrics(registry, client);
        const s = await samples(registry);
        assert.equal(s.ratelimit_up, 1);
        assert.ok(s['ratelimit_decisions_total{command="token",outcome="limited"}'] >= 2);
        assert.equal(Object.keys(s).filter((k) => k.startsWith('ratelimit_top_key')).length, 0);
      }
    } finally {
      await nodeRedis.quit();
    }
  });

  test('bad options are refused at once', () => {
    const registry = new promClient.Registry();
    for (const topKeys of [-1, 101, 1.5, '3']) {
      assert.throws(() => registerRateLimitMetrics(registry, redis, { topKeys }), /topKeys/);
    }
    assert.throws(() => registerRateLimitMetrics(registry, 42), TypeError);
  });
});

test('a server that does not answer: ratelimit_up 0 and no server metrics', async () => {
  const server = await startServer();
  const redis = new Redis({ port: server.port, maxRetriesPerRequest: 0, enableOfflineQueue: false, retryStrategy: () => null });
  await new Promise((resolve) => redis.once('ready', resolve));
  const registry = new promClient.Registry();
  registerRateLimitMetrics(registry, redis);
  await server.stop();
  await new Promise((r) => setTimeout(r, 50));
  const s = await samples(registry);
  assert.equal(s.ratelimit_up, 0);
  assert.equal(Object.keys(s).filter((k) => k.startsWith('ratelimit_decisions_total')).length, 0);
  redis.disconnect();
});

test('a cluster: every primary scraped once, counters added up', async () => {
  const cluster = await startCluster();
  const ioCluster = new Redis.Cluster(cluster.ports.map((port) => ({ host: '127.0.0.1', port })));
  const nodeCluster = createCluster({ rootNodes: cluster.ports.map((port) => ({ url: `redis://127.0.0.1:${port}` })) });
  await nodeCluster.connect();
  try {
    const { RateLimit } = require('..');
    const rl = new RateLimit(ioCluster);
    // Keys on every node: each refused once after its admitted call.
    const keys = ['a', 'b', 'c', 'd', 'e', 'f'];
    for (const key of keys) {
      await rl.token(key, { capacity: 1, rate: 1, period: '1h' });
      await rl.token(key, { capacity: 1, rate: 1, period: '1h' });
    }
    for (const client of [ioCluster, nodeCluster]) {
      const registry = new promClient.Registry();
      registerRateLimitMetrics(registry, client, { topKeys: 10 });
      const before = await Promise.all(cluster.ports.map(async (p) => (await commandCalls(p)).info || 0));
      const s = await samples(registry);
      const after = await Promise.all(cluster.ports.map(async (p) => (await commandCalls(p)).info || 0));
      // (Each reading of `before` is an INFO too.)
      assert.deepEqual(after.map((n, i) => n - before[i]), [2, 2, 2], 'one INFO per primary');
      assert.equal(s['ratelimit_decisions_total{command="token",outcome="admitted"}'], 6);
      assert.equal(s['ratelimit_decisions_total{command="token",outcome="limited"}'], 6);
      assert.equal(s.ratelimit_top_refusals, 6);
      for (const key of keys) assert.equal(s[`ratelimit_top_key_refused{key="${key}"}`], 1, key);
    }
  } finally {
    ioCluster.disconnect();
    await nodeCluster.quit();
    await cluster.stop();
  }
});

// Issue 31, defect 6: with Redis paused (SIGSTOP, as a hung or partitioned server looks), a
// scrape answers within the collector's timeout with ratelimit_up 0 and the middleware's own
// counters — before Prometheus' 10 s scrape timeout — instead of waiting for Redis.
test('a paused server: the scrape answers ratelimit_up 0 within the timeout, then recovers', async () => {
  const server = await startServer();
  const redis = new Redis({ port: server.port });
  const mw = rateLimit({ client: redis, algorithm: 'period', limit: 5, period: '1m', policy: 'paused-test', timeout: 200 });
  try {
    assert.equal(await through(mw, '192.0.2.77'), 200);
    const registries = [new promClient.Registry(), new promClient.Registry()];
    registerRateLimitMetrics(registries[0], redis); // the default timeout (5 s)
    registerRateLimitMetrics(registries[1], redis, { timeout: '1s' });
    assert.equal((await samples(registries[1])).ratelimit_up, 1);
    process.kill(server.child.pid, 'SIGSTOP');
    try {
      assert.equal(await through(mw, '192.0.2.77'), 500, 'the middleware times out: an error');
      for (const registry of [registries[1], registries[1], registries[0]]) {
        let timer;
        const prometheusGivesUp = new Promise((r) => (timer = setTimeout(() => r('prometheus gave up'), 9000)));
        const s = await Promise.race([samples(registry), prometheusGivesUp]).finally(() => clearTimeout(timer));
        assert.notEqual(s, 'prometheus gave up', 'the scrape waited for the paused server');
        assert.equal(s.ratelimit_up, 0);
        assert.equal(Object.keys(s).filter((k) => k.startsWith('ratelimit_decisions_total')).length, 0);
        assert.equal(s['ratelimit_middleware_decisions_total{policy="paused-test",outcome="error"}'], 1);
        assert.equal(s['ratelimit_middleware_decisions_total{policy="paused-test",outcome="admitted"}'], 1);
      }
    } finally {
      process.kill(server.child.pid, 'SIGCONT');
    }
    const s = await samples(registries[1]);
    assert.equal(s.ratelimit_up, 1);
    assert.ok(s['ratelimit_decisions_total{command="period",outcome="admitted"}'] >= 1);
    assert.throws(() => registerRateLimitMetrics(new promClient.Registry(), redis, { timeout: 0 }), TypeError);
    assert.throws(() => registerRateLimitMetrics(new promClient.Registry(), redis, { timeout: 'soon' }), TypeError);
  } finally {
    redis.disconnect();
    await server.stop();
  }
});

// Issue 31, defect 4 (the collectors' side): a policy named like another INFO field (entries,
// bytes, calls) is read as a policy, and the RL.POLICY command's own counters stay; a policy's
// candidate is exposed beside it.
test('policies named entries, bytes, calls; a candidate', async () => {
  const server = await startServer();
  const redis = new Redis({ port: server.port });
  try {
    const { RateLimit } = require('..');
    const rl = new RateLimit(redis);
    for (const name of ['entries', 'bytes', 'calls']) {
      await rl.setPolicy(name, { algorithm: 'period', limit: 1, period: '1m' });
      await rl.hit(name, `k-${name}`);
      await rl.hit(name, `k-${name}`);
    }
    await rl.setPolicy('tier', { algorithm: 'period', limit: 5, period: '1m' });
    await redis.call('RL.POLICY', 'SET', 'tier', 'PERIOD', 2, 60000, 'CANDIDATE');
    for (let i = 0; i < 3; i++) assert.equal((await rl.hit('tier', 'c')).allowed, true);
    const registry = new promClient.Registry();
    registerRateLimitMetrics(registry, redis);
    const s = await samples(registry);
    assert.equal(s.ratelimit_up, 1);
    for (const name of ['entries', 'bytes', 'calls']) {
      assert.equal(s[`ratelimit_policy_decisions_total{policy="${name}",outcome="admitted"}`], 1, name);
      assert.equal(s[`ratelimit_policy_decisions_total{policy="${name}",outcome="limited"}`], 1, name);
    }
    assert.ok(s['ratelimit_calls_total{command="policy"}'] >= 4, 'the RL.POLICY command\'s own counter');
    assert.equal(s['ratelimit_decisions_total{command="hit",outcome="admitted"}'], 6);
    assert.equal(s['ratelimit_policy_decisions_total{policy="tier",outcome="admitted"}'], 3);
    assert.equal(s['ratelimit_policy_candidate_decisions_total{policy="tier",outcome="admitted"}'], 2);
    assert.equal(s['ratelimit_policy_candidate_decisions_total{policy="tier",outcome="limited"}'], 1);
    assert.equal(s['ratelimit_policy_candidate_decisions_total{policy="calls",outcome="admitted"}'], undefined, 'no candidate, no series');
  } finally {
    redis.disconnect();
    await server.stop();
  }
});
