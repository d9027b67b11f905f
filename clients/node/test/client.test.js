'use strict';
// The typed client against a real server with the module, through ioredis and node-redis.
const { test, describe, before, after } = require('node:test');
const assert = require('node:assert/strict');
const Redis = require('ioredis');
const { createClient } = require('redis');
const { RateLimit, ModuleNotLoadedError } = require('..');
const { startServer, commandCalls } = require('../testing/servers');

const T0 = 4000000000000; // a fixed instant (AT) for exact expectations

let server;
const clients = {};
before(async () => {
  server = await startServer();
  clients.ioredis = new Redis({ port: server.port, lazyConnect: false });
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
  describe(`RateLimit over ${kind}`, () => {
    const rl = () => new RateLimit(clients[kind], { prefix: `${kind}:` });

    test('token: exact decisions, retry after exactly retryAfterMs', async () => {
      const o = { capacity: 2, rate: 1, period: '1s' };
      assert.deepEqual(await rl().token('tok', { ...o, at: T0 }), { allowed: true, limit: 2, remaining: 1, retryAfterMs: 0, resetAfterMs: 1000 });
      assert.deepEqual(await rl().token('tok', { ...o, at: T0 }), { allowed: true, limit: 2, remaining: 0, retryAfterMs: 0, resetAfterMs: 2000 });
      assert.deepEqual(await rl().token('tok', { ...o, at: T0 }), { allowed: false, limit: 2, remaining: 0, retryAfterMs: 1000, resetAfterMs: 2000 });
      assert.equal((await rl().token('tok', { ...o, at: T0 + 999 })).allowed, false);
      assert.equal((await rl().token('tok', { ...o, at: T0 + 1000 })).allowed, true);
    });

    test('token STEP, cost, dryRun changes nothing', async () => {
      const o = { capacity: 10, rate: 5, period: 1000, step: true };
      assert.equal((await rl().token('step', { ...o, cost: 10, at: T0 })).remaining, 0);
      const dry = await rl().token('step', { ...o, at: T0 + 1000, dryRun: true });
      assert.deepEqual([dry.allowed, dry.remaining], [true, 4]);
      assert.deepEqual(await rl().token('step', { ...o, at: T0 + 1000, dryRun: true }), dry);
      assert.equal((await rl().token('step', { ...o, at: T0 + 999 })).allowed, false);
    });

    test('period with ALIGN offset, slide exact and bucketed, leaky delay', async () => {
      const p = await rl().period('per', { limit: 3, period: '1d', align: '-5h', cost: 2, at: T0 });
      assert.deepEqual([p.allowed, p.remaining], [true, 1]);
      // 4000000000000 ms is 2096-10-02T07:06:40Z; windows start at 05:00 UTC (UTC-5 midnight).
      const endOfDay = Date.UTC(2096, 9, 3, 5, 0, 0);
      assert.equal(p.resetAfterMs, endOfDay - T0);
      const s = rl();
      for (let i = 0; i < 2; i++) assert.equal((await s.slide('sl', { limit: 2, window: '10s', at: T0 + i })).allowed, true);
      const refused = await s.slide('sl', { limit: 2, window: '10s', at: T0 + 5 });
      assert.deepEqual([refused.allowed, refused.retryAfterMs], [false, 9995]);
      const b = await s.slide('slb', { limit: 100, window: '1m', buckets: 6, at: T0 });
      assert.deepEqual([b.allowed, b.remaining], [true, 99]);
      const l1 = await s.leaky('lk', { capacity: 3, rate: 1, period: '1s', at: T0 });
      const l2 = await s.leaky('lk', { capacity: 3, rate: 1, period: '1s', at: T0 });
      assert.deepEqual([l1.retryAfterMs, l2.retryAfterMs], [0, 1000]); // delay mode: wait your turn
      const nd = await s.leaky('lk2', { capacity: 3, rate: 1, period: '1s', nodelay: true, at: T0 });
      assert.equal(nd.retryAfterMs, 0);
    });

    test('throttle (CL.THROTTLE): seconds converted to ms', async () => {
      const o = { maxBurst: 1, count: 1, period: '10s', at: T0 };
      const a = await rl().throttle('gcra', o);
      assert.deepEqual([a.allowed, a.limit, a.remaining, a.retryAfterMs], [true, 2, 1, 0]);
      await rl().throttle('gcra', o);
      const r = await rl().throttle('gcra', o);
      assert.deepEqual([r.allowed, r.retryAfterMs], [false, 10000]);
    });

    test('all: all or nothing, binding index, details', async () => {
      const c = rl();
      const limits = [
        { key: '{u1}:s', algorithm: 'token', capacity: 5, rate: 5, period: '1s' },
        { key: '{u1}:d', algorithm: 'period', limit: 1, period: '1d' },
      ];
      const ok = await c.all(limits, { at: T0 });
      assert.deepEqual([ok.allowed, ok.index, ok.remaining, ok.details.length], [true, 1, 0, 2]);
      const no = await c.all(limits, { at: T0 });
      assert.deepEqual([no.allowed, no.index, no.details[0].allowed, no.details[1].allowed], [false, 1, true, false]);
      // the token bucket was not charged for the refused call
      assert.equal((await c.peek('{u1}:s')).remaining, 3); // 5 − 1 taken − 1 for the peek's own dry cost
    });

    test('refund gives permits back, stops at a fresh limiter; null when nothing to refund', async () => {
      const c = rl();
      await c.period('ref', { limit: 10, period: '1m', cost: 6 });
      const r = await c.refund('ref', 4);
      assert.equal(r.remaining, 7); // 2 used; a DRYRUN COST 1 would leave 7
      assert.equal(await c.refund('nothing-here', 1), null);
      await c.refund('ref', 100);
      assert.equal(await c.peek('ref'), null); // back to its initial state: deleted
    });

    test('charge bills an overrun past the limit as a debt; null when nothing live; sliding windows refuse', async () => {
      const c = rl();
      const at = 4_000_000_000_000;
      await c.leaky('debt', { capacity: 10, rate: 1, period: '1s', nodelay: true, cost: 10, at });
      const d = await c.charge('debt', 2, { at });
      // 12 in a bucket of 10 draining 1/s: a request of 1 waits until 9 are left
      assert.deepEqual([d.allowed, d.remaining, d.retryAfterMs, d.resetAfterMs], [false, 0, 3000, 12000]);
      assert.equal((await c.leaky('debt', { capacity: 10, rate: 1, period: '1s', nodelay: true, at: at + 2999 })).allowed, false);
      assert.equal((await c.leaky('debt', { capacity: 10, rate: 1, period: '1s', nodelay: true, at: at + 3000 })).allowed, true);
      assert.equal(await c.charge('nothing-here', 1), null);
      await c.slide('sl', { limit: 5, window: '1s' });
      await assert.rejects(c.charge('sl', 1), /takes no debt/);
      await assert.rejects(c.charge('debt', 0), /count must be an integer/);
      await assert.rejects(c.charge('debt', -1), TypeError);
    });

    test('acquire / release leases, ids, info', async () => {
      const c = rl();
      const a = await c.acquire('exports', { limit: 1, lease: '1m' });
      assert.equal(a.allowed, true);
      assert.match(a.id, /^\d+-1$/);
      const b = await c.acquire('exports', { limit: 1, lease: '1m' });
      assert.deepEqual([b.allowed, b.id], [false, null]);
      const renewed = await c.acquire('exports', { limit: 1, lease: '1m', id: a.id });
      assert.equal(renewed.allowed, true);
      const i = await c.info('exports');
      assert.equal(i.algorithm, 'lease');
      assert.equal(i.leases[0].id, a.id);
      assert.equal(await c.release('exports', a.id), true);
      assert.equal(await c.release('exports', a.id), false);
    });

    test('ban: refused calls start the penalty box', async () => {
      const c = rl();
      const o = { limit: 1, window: '1s', ban: '1h' };
      assert.equal((await c.slide('login', { ...o, at: T0 })).allowed, true);
      const banned = await c.slide('login', { ...o, at: T0 + 1 });
      assert.deepEqual([banned.allowed, banned.retryAfterMs], [false, 3600000]);
      assert.equal((await c.info('login')).bannedUntilMs, T0 + 1 + 3600000);
    });

    test('fresh: the key holds exactly this request; cost 0 deletes it', async () => {
      const c = rl();
      const o = { capacity: 10, rate: 1, period: '1m' };
      await c.token('fr', { ...o, cost: 9 });
      const d = await c.token('fr', { ...o, cost: 3, fresh: true });
      assert.deepEqual([d.allowed, d.remaining], [true, 7]);
      await c.token('fr', { ...o, cost: 0, fresh: true });
      assert.equal(await c.peek('fr'), null);
    });

    test('keepPeriod keeps the window in force; ban with clear ends with a fresh limiter', async () => {
      const c = rl();
      await c.period('kp', { limit: 5, period: '1m', at: T0 });
      const kept = await c.period('kp', { limit: 5, period: '1h', keepPeriod: true, at: T0 + 1000 });
      assert.deepEqual([kept.allowed, kept.remaining, kept.resetAfterMs], [true, 3, 59000]);
      assert.equal((await c.info('kp')).periodMs, 60000);
      const o = { limit: 1, period: '1m', ban: 500, clear: true };
      await c.period('cl', { ...o, at: T0 });
      const banned = await c.period('cl', { ...o, at: T0 + 1 });
      assert.deepEqual([banned.allowed, banned.retryAfterMs, banned.resetAfterMs], [false, 500, 500]);
      assert.equal((await c.info('cl')).used, 0);
      const after = await c.period('cl', { ...o, at: T0 + 501 });
      assert.deepEqual([after.allowed, after.remaining, after.resetAfterMs], [true, 0, 60000]);
    });

    test('info and peek', async () => {
      const c = rl();
      await c.token('inf', { capacity: 5, rate: 1, period: '1s', cost: 2 });
      const i = await c.info('inf');
      assert.deepEqual([i.algorithm, i.capacity, i.rate, i.periodMs, i.tokens], ['token', 5, 1, 1000, 3]);
      assert.equal(typeof i.ttlMs, 'number');
      assert.equal(await c.info('missing'), null);
      assert.equal(await c.peek('missing'), null);
    });

    test('each method is one command', async () => {
      const c = rl();
      const before = await commandCalls(server.port);
      await c.token('one', { capacity: 5, rate: 1, period: '1s' });
      await c.all([{ key: '{o}a', algorithm: 'slide', limit: 3, window: '1s' }]);
      await c.refund('one', 1);
      await c.peek('one');
      const after = await commandCalls(server.port);
      const delta = (name) => (after[name] || 0) - (before[name] || 0);
      assert.deepEqual([delta('rl.token'), delta('rl.all'), delta('rl.refund'), delta('rl.peek')], [1, 1, 1, 1]);
      const total = Object.keys(after).reduce((s, k) => s + (k === 'info' ? 0 : (after[k] || 0) - (before[k] || 0)), 0);
      assert.equal(total, 4);
    });

    test('server errors keep their code and text', async () => {
      await assert.rejects(rl().token('bad', { capacity: 0, rate: 1, period: 1 }), (err) => {
        assert.match(err.message, /^ERR capacity must be an integer between 1 and 1000000000000/);
        assert.ok(!(err instanceof ModuleNotLoadedError));
        return true;
      });
      await rl().period('typed', { limit: 1, period: '1s' });
      await assert.rejects(rl().token('typed', { capacity: 1, rate: 1, period: '1s' }), (err) => {
        assert.equal(err.message, 'WRONGTYPE key holds a period limiter, not a token limiter');
        return true;
      });
    });
  });
}

test('bad options fail in the caller, before anything is sent', async () => {
  const sent = [];
  const rl = new RateLimit(async (...args) => {
    sent.push(args);
    return [1, 1, 0, 0, 0];
  });
  await assert.rejects(rl.token('k', { capacity: 1, rate: 1, period: '1 fortnight' }), TypeError);
  await assert.rejects(rl.token('k', { capacity: 1.5, rate: 1, period: 1 }), TypeError);
  await assert.rejects(rl.token('k', { rate: 1, period: 1 }), /capacity is required/);
  await assert.rejects(rl.period('k', { limit: 1, period: 1000, align: 'noon' }), TypeError);
  await assert.rejects(rl.limit('k', { algorithm: 'gcra' }), TypeError);
  assert.equal(sent.length, 0);
  await rl.token('k', { capacity: 1, rate: 1, period: '2m', cost: 0, wait: '5s', dryRun: false });
  assert.deepEqual(sent[0], ['RL.TOKEN', 'k', '1', '1', '120000', 'COST', '0', 'WAIT', '5000']);
  assert.throws(() => new RateLimit({}), TypeError);
});

test('ioredis keyPrefix is applied to the module commands', async () => {
  const r = new Redis({ port: server.port, keyPrefix: 'app1:' });
  try {
    await new RateLimit(r).token('pfx', { capacity: 3, rate: 1, period: '1s' });
    assert.equal(await clients.ioredis.exists('app1:pfx'), 1);
  } finally {
    r.disconnect();
  }
});

test('WAIT: a waiter is admitted when its turn comes, not before', async () => {
  const waiter = new Redis({ port: server.port }); // a blocking call holds its connection
  try {
    const c = new RateLimit(clients.ioredis);
    const o = { capacity: 1, rate: 1, period: 300 };
    await c.token('q', o);
    const t0 = Date.now();
    const d = await new RateLimit(waiter).token('q', { ...o, wait: '5s' });
    assert.equal(d.allowed, true);
    assert.ok(Date.now() - t0 >= 250, `admitted after ${Date.now() - t0} ms`);
  } finally {
    waiter.disconnect();
  }
});

test('a server without the module: one clear error that says how to load it', async () => {
  const plain = await startServer({ module: false });
  const r = new Redis({ port: plain.port });
  const n = createClient({ socket: { port: plain.port, host: '127.0.0.1' } });
  await n.connect();
  try {
    for (const client of [r, n]) {
      await assert.rejects(new RateLimit(client).token('k', { capacity: 1, rate: 1, period: 1000 }), (err) => {
        assert.ok(err instanceof ModuleNotLoadedError);
        assert.match(err.message, /RL\.TOKEN/);
        assert.match(err.message, /--loadmodule .*libredis_ratelimit\.so/);
        assert.match(err.message, /MODULE LOAD/);
        assert.match(err.cause.message, /unknown command/i);
        return true;
      });
    }
  } finally {
    r.disconnect();
    await n.quit();
    await plain.stop();
  }
});
