'use strict';
// Policies (issue 24): limits the server holds. rl.hit judges a key as the direct command with
// the policy's parameters would; setPolicy/getPolicy/deletePolicy/policies/policyStats; an
// override for one key; shadow mode; the middleware on a server policy; on a cluster client
// setPolicy writes to every primary.
const { test, describe, before, after } = require('node:test');
const assert = require('node:assert/strict');
const Redis = require('ioredis');
const { createCluster } = require('redis');
const { RateLimit, rateLimit } = require('..');
const { startServer, startCluster, rawCommand } = require('../testing/servers');

const T0 = 4000000000000;
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

describe('policies on one server', () => {
  test('hit() judges as the direct command with the policy\'s parameters', async () => {
    const rl = new RateLimit(redis, { prefix: 'pol:' });
    await rl.setPolicy('free', { algorithm: 'period', limit: 2, period: '1m' });
    for (let i = 0; i < 3; i++) {
      const viaPolicy = await rl.hit('free', 'u1', { at: T0 + i });
      const direct = await rl.period('direct-u1', { limit: 2, period: '1m', at: T0 + i });
      assert.deepEqual(viaPolicy, direct, `call ${i + 1}`);
    }
    assert.equal((await rl.info('u1')).algorithm, 'period');
  });

  test('getPolicy, policies, an override for one key, deletePolicy', async () => {
    const rl = new RateLimit(redis, { prefix: 'pol2:' });
    await rl.setPolicy('tier', { algorithm: 'slide', limit: 5, window: '1m' }, { ban: '10m', clear: true });
    const def = await rl.getPolicy('tier');
    assert.deepEqual([def.algorithm, def.limit, def.windowMs, def.banMs, def.clear, def.shadow], ['slide', 5, 60000, 600000, 1, 0]);
    assert.ok((await rl.policies()).includes('tier'));
    await rl.setPolicy('tier', { algorithm: 'slide', limit: 50, window: '1m' }, { for: 'big' });
    assert.equal((await rl.getPolicy('tier', { for: 'big' })).limit, 50);
    assert.equal((await rl.hit('tier', 'big')).limit, 50, 'the override');
    assert.equal((await rl.hit('tier', 'small')).limit, 5, 'the policy');
    assert.equal(await rl.deletePolicy('tier', { for: 'big' }), true);
    assert.equal(await rl.getPolicy('tier', { for: 'big' }), null);
    assert.equal(await rl.deletePolicy('tier'), true);
    assert.equal(await rl.deletePolicy('tier'), false);
    assert.equal(await rl.getPolicy('tier'), null);
  });

  test('an unknown policy is a server error naming it, with its code; shadow admits and counts', async () => {
    const rl = new RateLimit(redis, { prefix: 'pol3:' });
    await assert.rejects(rl.hit('nosuchpolicy', 'k'), (err) => typeof err.code === 'string' && /nosuchpolicy/.test(err.message));
    await rl.setPolicy('trial', { algorithm: 'token', capacity: 1, rate: 1, period: '1h' }, { shadow: true });
    assert.equal((await rl.getPolicy('trial')).shadow, 1);
    const first = await rl.hit('trial', 'k');
    const second = await rl.hit('trial', 'k');
    assert.deepEqual([first.allowed, second.allowed], [true, true], 'shadow: admitted');
    const stats = await rl.policyStats('trial');
    assert.deepEqual([stats.calls, stats.shadowLimited], [2, 1]);
    for (const f of ['admitted', 'limited', 'nearLimit']) assert.equal(typeof stats[f], 'number', f);
    await rl.resetPolicyStats();
    assert.deepEqual([(await rl.policyStats('trial')).calls, (await rl.policyStats('trial')).shadowLimited], [0, 0]);
  });

  test('all() mixes a policy with limits of its own (RL.ALL … POLICY name), all or nothing', async () => {
    const rl = new RateLimit(redis, { prefix: 'pol4:' });
    await rl.setPolicy('daily', { algorithm: 'period', limit: 2, period: '1d' });
    const limits = [
      { key: '{u7}:s', algorithm: 'token', capacity: 10, rate: 10, period: '1s' },
      { key: '{u7}:d', policy: 'daily', cost: 1 },
    ];
    assert.equal((await rl.all(limits, { at: T0 })).allowed, true);
    assert.equal((await rl.all(limits, { at: T0 })).allowed, true);
    const refused = await rl.all(limits, { at: T0 });
    assert.deepEqual([refused.allowed, refused.index, refused.details[1].limit], [false, 1, 2]);
    assert.equal((await rl.info('{u7}:s')).tokens, 8, 'the refusal charged no limit');
    await assert.rejects(rl.all([{ key: 'k', policy: 'nosuch' }]), /nosuch/);
  });

  test('the middleware on a server policy: RL.HIT per request, headers from the reply', async () => {
    const rl = new RateLimit(redis);
    await rl.setPolicy('web', { algorithm: 'period', limit: 1, period: '1m' });
    const mw = rateLimit({ client: redis, policy: 'web' });
    const run = () =>
      new Promise((resolve) => {
        const headers = {};
        const res = { statusCode: 200, setHeader: (k, v) => (headers[k] = v), end: () => resolve({ status: res.statusCode, headers }) };
        mw({ ip: '192.0.2.50', headers: {} }, res, () => resolve({ status: 200, headers }));
      });
    const ok = await run();
    assert.deepEqual([ok.status, ok.headers['RateLimit-Policy']], [200, '"web";q=1;w=60']);
    assert.equal((await run()).status, 429);
    assert.equal(await redis.exists('ratelimit:192.0.2.50'), 1, 'the default key layout: ratelimit:<tenant>');
  });
});

test('setPolicy on a cluster client writes to every primary (ioredis and node-redis)', async () => {
  const cluster = await startCluster({ masters: 3 });
  const io = new Redis.Cluster(cluster.ports.map((port) => ({ host: '127.0.0.1', port })));
  const nr = createCluster({ rootNodes: cluster.ports.map((port) => ({ socket: { host: '127.0.0.1', port } })) });
  try {
    await nr.connect();
    await io.ping();
    for (const [name, client] of [['io', io], ['nr', nr]]) {
      const rl = new RateLimit(client);
      await rl.setPolicy(`everywhere-${name}`, { algorithm: 'period', limit: 3, period: '1m' });
      for (const port of cluster.ports) {
        assert.match(await rawCommand(port, 'RL.POLICY LIST'), new RegExp(`everywhere-${name}`), `node ${port}`);
      }
      // keys on every node are judged under it
      for (let i = 0; i < 30; i++) assert.equal((await rl.hit(`everywhere-${name}`, `user:${i}`)).limit, 3);
      assert.equal((await rl.policyStats(`everywhere-${name}`)).calls, 30, 'summed over the primaries');
      await rl.resetPolicyStats();
      assert.equal((await rl.policyStats(`everywhere-${name}`)).calls, 0, 'reset on every primary');
      assert.equal(await rl.deletePolicy(`everywhere-${name}`), true);
      assert.deepEqual((await rl.policies()).filter((p) => p.startsWith('everywhere')), []);
    }
  } finally {
    io.disconnect();
    await nr.quit().catch(() => {});
    await cluster.stop();
  }
});
