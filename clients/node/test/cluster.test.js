'use strict';
// On a Redis Cluster every call goes straight to the node that owns the key: measured with the
// nodes' MOVED counters (INFO errorstats), against a control that sends the same commands the
// way a plain `cluster.call` does (and gets redirected).
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const Redis = require('ioredis');
const { createCluster } = require('redis');
const { RateLimit, RateLimiterRedisModule, ThrottlerStorageRedisModule } = require('..');
const { startCluster, movedCount } = require('../testing/servers');

let cluster;
before(async () => {
  cluster = await startCluster({ masters: 3 });
});
after(async () => {
  await cluster.stop();
});

const totalMoved = async () => (await Promise.all(cluster.ports.map(movedCount))).reduce((a, b) => a + b, 0);
const KEYS = Array.from({ length: 300 }, (_, i) => `user:${i}`);

test('ioredis Cluster: no MOVED in steady state; a plain call gets redirected (control)', async () => {
  const c = new Redis.Cluster(cluster.ports.map((port) => ({ host: '127.0.0.1', port })));
  try {
    const rl = new RateLimit(c);
    await rl.token('warm', { capacity: 5, rate: 1, period: '1s' });
    const base = await totalMoved();
    for (const k of KEYS) assert.equal((await rl.token(k, { capacity: 5, rate: 1, period: '1s' })).allowed, true);
    for (const k of KEYS) assert.notEqual(await rl.peek(k), null);
    assert.equal((await totalMoved()) - base, 0, 'MOVED replies for the package calls');

    const ctl = await totalMoved();
    for (const k of KEYS) await c.call('RL.TOKEN', `ctl:${k}`, 5, 1, 1000);
    assert.ok((await totalMoved()) - ctl > 0, 'the control (cluster.call) must see MOVED replies');
  } finally {
    c.disconnect();
  }
});

test('node-redis cluster: no MOVED', async () => {
  const c = createCluster({ rootNodes: cluster.ports.map((port) => ({ socket: { host: '127.0.0.1', port } })) });
  await c.connect();
  try {
    const rl = new RateLimit(c);
    const base = await totalMoved();
    for (const k of KEYS) assert.equal((await rl.period(`nr:${k}`, { limit: 5, period: '1s' })).allowed, true);
    assert.equal((await totalMoved()) - base, 0);
  } finally {
    await c.quit();
  }
});

test('RL.ALL with hash tags, and the adapters, on a cluster', async () => {
  const c = new Redis.Cluster(cluster.ports.map((port) => ({ host: '127.0.0.1', port })));
  try {
    const rl = new RateLimit(c);
    const base = await totalMoved();
    for (let u = 0; u < 50; u++) {
      const d = await rl.all([
        { key: `{u${u}}:s`, algorithm: 'token', capacity: 10, rate: 10, period: '1s' },
        { key: `{u${u}}:d`, algorithm: 'period', limit: 1000, period: '1d' },
      ]);
      assert.equal(d.allowed, true);
    }
    const limiter = new RateLimiterRedisModule({ storeClient: c, points: 2, duration: 10 });
    for (let u = 0; u < 50; u++) assert.equal((await limiter.consume(`u${u}`)).consumedPoints, 1);
    const storage = new ThrottlerStorageRedisModule(c);
    for (let u = 0; u < 50; u++) assert.equal((await storage.increment(`u${u}`, 10000, 3, 10000, 'default')).totalHits, 1);
    assert.equal((await totalMoved()) - base, 0);
    await assert.rejects(
      rl.all([
        { key: 'a', algorithm: 'token', capacity: 1, rate: 1, period: 1000 },
        { key: 'b', algorithm: 'token', capacity: 1, rate: 1, period: 1000 },
      ]),
      (err) => /CROSSSLOT/.test(err.message),
    );
  } finally {
    c.disconnect();
  }
});
