'use strict';
// RateLimiterRedisModule, RateLimiterUnionModule and RateLimiterQueueModule against a real server.
const { test, describe, before, after } = require('node:test');
const assert = require('node:assert/strict');
const Redis = require('ioredis');
const { createClient } = require('redis');
const RateLimiterRes = require('rate-limiter-flexible/lib/RateLimiterRes');
const RateLimiterQueueError = require('rate-limiter-flexible/lib/component/RateLimiterQueueError');
const { RateLimiterRedisModule, RateLimiterUnionModule, RateLimiterQueueModule } = require('..');
const { startServer, commandCalls } = require('../testing/servers');

let server;
const clients = {};
before(async () => {
  server = await startServer();
  clients.ioredis = new Redis({ port: server.port });
  const nr = createClient({ socket: { port: server.port, host: '127.0.0.1' } });
  await nr.connect();
  clients['node-redis'] = nr;
});
after(async () => {
  clients.ioredis.disconnect();
  await clients['node-redis'].quit();
  await server.stop();
});

for (const kind of ['ioredis', 'node-redis']) {
  describe(`RateLimiterRedisModule over ${kind}`, () => {
    const limiter = (opts) => new RateLimiterRedisModule({ storeClient: clients[kind], keyPrefix: `rlf-${kind}`, ...opts });

    test('consume counts every request, refused ones too, and rejects over the points', async () => {
      const l = limiter({ points: 2, duration: 5 });
      const a = await l.consume('c1');
      assert.ok(a instanceof RateLimiterRes);
      assert.deepEqual([a.consumedPoints, a.remainingPoints, a.isFirstInDuration], [1, 1, true]);
      assert.ok(a.msBeforeNext > 4900 && a.msBeforeNext <= 5000);
      await l.consume('c1');
      const rej = await l.consume('c1').then(() => null, (r) => r);
      assert.ok(rej instanceof RateLimiterRes);
      assert.deepEqual([rej.consumedPoints, rej.remainingPoints], [3, 0]);
      assert.equal((await l.get('c1')).consumedPoints, 3);
    });

    test('switched from the stock RateLimiterRedis on a live Redis: no WRONGTYPE on either side, the stock count carried over', async () => {
      const RateLimiterRedis = require('rate-limiter-flexible/lib/RateLimiterRedis');
      const opts = { storeClient: clients[kind], keyPrefix: `mig-${kind}`, points: 5, duration: 60 };
      const stock = new RateLimiterRedis({ ...opts, useRedisPackage: kind === 'node-redis' });
      await stock.consume('alice', 2); // the stock string counter at mig-<kind>:alice
      const ours = new RateLimiterRedisModule(opts);
      const first = await ours.consume('alice');
      assert.deepEqual([first.consumedPoints, first.remainingPoints], [3, 2]);
      assert.ok(first.msBeforeNext > 59000 && first.msBeforeNext <= 60000);
      assert.equal((await ours.consume('alice')).consumedPoints, 4, 'carried over once, not per call');
      // A stock instance still running beside it (a rollout) keeps counting on its own key.
      assert.equal((await stock.consume('alice')).consumedPoints, 3);
      await ours.consume('alice');
      const refused = await ours.consume('alice').then(() => null, (r) => r);
      assert.ok(refused instanceof RateLimiterRes, 'refused past the points');
      assert.equal(refused.consumedPoints, 6);
      // Without a stock key the first call of a window counts itself only.
      assert.equal((await ours.consume('bob')).consumedPoints, 1);
      const off = new RateLimiterRedisModule({ ...opts, keyPrefix: `mig-off-${kind}`, migrateFromStock: false });
      await new RateLimiterRedis({ ...opts, keyPrefix: `mig-off-${kind}`, useRedisPackage: kind === 'node-redis' }).consume('carol', 2);
      assert.equal((await off.consume('carol')).consumedPoints, 1, 'migrateFromStock: false reads no stock key');
    });

    test('one module command per consume, no Lua', async () => {
      const l = limiter({ points: 5, duration: 5 });
      const before = await commandCalls(server.port);
      for (let i = 0; i < 5; i++) await l.consume('one');
      const after = await commandCalls(server.port);
      assert.equal((after['rl.period'] || 0) - (before['rl.period'] || 0), 5);
      assert.equal((after.eval || 0) + (after.evalsha || 0), (before.eval || 0) + (before.evalsha || 0));
    });

    test('penalty adds, reward gives back and stops at 0 (no negative counts)', async () => {
      const l = limiter({ points: 5, duration: 5 });
      await l.consume('pr', 2);
      assert.equal((await l.penalty('pr', 2)).consumedPoints, 4);
      assert.equal((await l.reward('pr', 3)).consumedPoints, 1);
      assert.equal((await l.reward('pr', 5)).consumedPoints, 0);
      assert.equal((await l.reward('never-consumed', 1)).consumedPoints, 0);
    });

    test('get, delete, duration 0 never expires (msBeforeNext -1), customDuration', async () => {
      const l = limiter({ points: 5, duration: 5 });
      assert.equal(await l.get('g'), null);
      await l.consume('g');
      const g = await l.get('g');
      assert.equal(g.consumedPoints, 1);
      assert.ok(g.msBeforeNext > 4000 && g.msBeforeNext <= 5000);
      assert.equal(await l.delete('g'), true);
      assert.equal(await l.delete('g'), false);
      const forever = limiter({ points: 5, duration: 0 });
      assert.equal((await forever.consume('f')).msBeforeNext, -1);
      assert.equal((await forever.get('f')).msBeforeNext, -1);
      const custom = await l.consume('cd', 1, { customDuration: 1 });
      assert.ok(custom.msBeforeNext <= 1000);
    });

    test('customDuration on an existing key leaves msBeforeNext on the original window (KEEPPERIOD), as the stock script', async () => {
      const l = limiter({ points: 10, duration: 60 });
      const first = await l.consume('keep');
      assert.ok(first.msBeforeNext > 59000 && first.msBeforeNext <= 60000, `${first.msBeforeNext}`);
      // A shorter and a longer customDuration: the window in force keeps its end.
      const shorter = await l.consume('keep', 1, { customDuration: 1 });
      assert.ok(shorter.msBeforeNext > 58000 && shorter.msBeforeNext <= first.msBeforeNext, `${shorter.msBeforeNext}`);
      const longer = await l.penalty('keep', 2, { customDuration: 3600 });
      assert.ok(longer.msBeforeNext > 58000 && longer.msBeforeNext <= first.msBeforeNext, `${longer.msBeforeNext}`);
      const got = await l.get('keep');
      assert.equal(got.consumedPoints, 4);
      assert.ok(got.msBeforeNext > 58000 && got.msBeforeNext <= 60000, `${got.msBeforeNext}`);
      // The window is 60 s long on the server too, whatever the later calls said.
      const ttl = await clients.ioredis.pttl(l._moduleKey(l.getKey('keep')));
      assert.ok(ttl > 58000 && ttl <= 60000, `${ttl}`);
      // On a new key the customDuration starts the window.
      const fresh = await l.consume('keep-new', 1, { customDuration: 2 });
      assert.ok(fresh.msBeforeNext > 1000 && fresh.msBeforeNext <= 2000, `${fresh.msBeforeNext}`);
      // block/set (FRESH) still replace the window with their own duration.
      await l.set('keep', 1, 30);
      const set = await l.get('keep');
      assert.ok(set.msBeforeNext > 29000 && set.msBeforeNext <= 30000, `${set.msBeforeNext}`);
    });

    test('counts past the 2^32 − 1 ceiling still reach the library (refused there, reported as count + points)', async () => {
      const l = limiter({ points: 5, duration: 60 });
      await l.set('ceil', 4294967290, 60); // a count above 2^31 is stored under the 10^12 ceiling
      const rej = await l.consume('ceil', 10).then(() => null, (r) => r);
      assert.equal(rej.consumedPoints, 4294967300);
      assert.equal(rej.remainingPoints, 0);
      assert.ok(rej.msBeforeNext > 59000);
      const big = limiter({ points: 3000000000, duration: 60 }); // thresholds above 2^31: the 10^12 ceiling
      await big.set('ceil2', 4294967290, 60);
      assert.equal((await big.consume('ceil2', 10).then(() => null, (r) => r)).consumedPoints, 4294967300);
      assert.equal((await big.get('ceil2')).consumedPoints, 4294967300); // counted
    });

    test('input checks as the stock class', async () => {
      const l = limiter({ points: 5, duration: 5 });
      await assert.rejects(l.consume('x', 1.5), { message: 'Consuming decimal number of points is not supported by this package' });
      await assert.rejects(l.consume('x', '2.0'), { message: 'Consuming string different than integer values is not supported by this package' });
      assert.equal((await l.consume('x', '2')).consumedPoints, 2);
      const notReady = new RateLimiterRedisModule({ storeClient: { status: 'closed' }, points: 1, duration: 1, rejectIfRedisNotReady: true });
      await assert.rejects(notReady.consume('x'), { message: 'Redis connection is not ready' });
    });

    test('blockDuration via the library\'s _block (FRESH) or in memory', async () => {
      const mem = limiter({ points: 1, duration: 5, inMemoryBlockOnConsumed: 2, inMemoryBlockDuration: 10 });
      await mem.consume('m');
      const rej = await mem.consume('m').then(() => null, (r) => r);
      assert.ok(rej.msBeforeNext > 5000);
    });

    test('block and set replace the count (one FRESH command)', async () => {
      const l = limiter({ points: 2, duration: 5, blockDuration: 20 });
      await l.consume('b', 3).catch(() => {});
      const got = await l.get('b');
      assert.equal(got.consumedPoints, 3);
      assert.ok(got.msBeforeNext > 15000, `blocked for ${got.msBeforeNext} ms`);
      await l.block('b2', 0);
      assert.deepEqual([(await l.get('b2')).consumedPoints, (await l.get('b2')).msBeforeNext], [3, -1]);
      await l.consume('s', 2).catch(() => {});
      await l.set('s', 12, 30);
      const s = await l.get('s');
      assert.equal(s.consumedPoints, 12);
      assert.ok(s.msBeforeNext > 29000);
      await l.set('s', 1, 0);
      assert.deepEqual([(await l.get('s')).consumedPoints, (await l.get('s')).msBeforeNext], [1, -1]);
    });
  });
}

test('an ioredis keyPrefix applies to every store call, as with the stock class', async () => {
  const prefixed = new Redis({ port: server.port, keyPrefix: 'app:' });
  try {
    const l = new RateLimiterRedisModule({ storeClient: prefixed, keyPrefix: 'kp', points: 5, duration: 60 });
    await l.consume('x', 2);
    assert.equal(await clients.ioredis.exists('app:kp:rl:x'), 1);
    assert.equal((await l.get('x')).consumedPoints, 2);
    assert.equal((await l.reward('x', 1)).consumedPoints, 1);
    await l.set('x', 4, 60);
    assert.equal((await l.get('x')).consumedPoints, 4);
    assert.equal(await l.delete('x'), true);
    assert.equal(await clients.ioredis.exists('app:kp:rl:x'), 0);
  } finally {
    prefixed.disconnect();
  }
});

describe('RateLimiterUnionModule (RL.ALL)', () => {
  test('all or nothing: a refusal charges no other limiter', async () => {
    const perSecond = new RateLimiterRedisModule({ storeClient: clients.ioredis, keyPrefix: 'u-s', points: 5, duration: 1 });
    const perMinute = new RateLimiterRedisModule({ storeClient: clients.ioredis, keyPrefix: 'u-m', points: 2, duration: 60 });
    const union = new RateLimiterUnionModule(perSecond, perMinute);
    const ok = await union.consume('user');
    assert.deepEqual(Object.keys(ok).sort(), ['u-m', 'u-s']);
    assert.equal(ok['u-m'].remainingPoints, 1);
    await union.consume('user');
    const rej = await union.consume('user').then(() => null, (r) => r);
    assert.deepEqual(Object.keys(rej), ['u-m']);
    assert.ok(rej['u-m'].msBeforeNext > 50000);
    // the per-second limiter was charged twice, not three times
    assert.equal((await perSecond.get('user')).consumedPoints, 2);
    assert.throws(() => new RateLimiterUnionModule(perSecond, perSecond), /different keyPrefix/);
  });
});

describe('RateLimiterQueueModule (WAIT)', () => {
  test('requests wait in the server queue, in order, and are admitted when tokens come', async () => {
    const l = new RateLimiterRedisModule({ storeClient: clients.ioredis, keyPrefix: 'q', points: 2, duration: 1 });
    const queue = new RateLimiterQueueModule(l, { timeoutMs: '5s' });
    try {
      const t0 = Date.now();
      const order = [];
      const waits = [1, 2, 3, 4].map((i) => queue.removeTokens(1, 'jobs').then((left) => order.push([i, left, Date.now() - t0])));
      await Promise.all(waits);
      assert.deepEqual(order.map((o) => o[0]), [1, 2, 3, 4]);
      assert.ok(order[2][2] >= 900, `third admitted after ${order[2][2]} ms, not before the next window`);
      await assert.rejects(queue.removeTokens(3, 'jobs'), (e) => e instanceof RateLimiterQueueError);
      assert.ok((await queue.getTokensRemaining('jobs')) <= 2);
    } finally {
      await queue.close();
    }
  });

  test('a wait that times out rejects with RateLimiterQueueError', async () => {
    const l = new RateLimiterRedisModule({ storeClient: clients.ioredis, keyPrefix: 'q2', points: 1, duration: 60 });
    const queue = new RateLimiterQueueModule(l, { timeoutMs: 200, maxQueueSize: 1 });
    try {
      await queue.removeTokens(1);
      const t0 = Date.now();
      const pending = queue.removeTokens(1);
      await assert.rejects(queue.removeTokens(1), /maximum 1/);
      await assert.rejects(pending, (e) => e instanceof RateLimiterQueueError);
      assert.ok(Date.now() - t0 >= 190);
    } finally {
      await queue.close();
    }
  });
});
