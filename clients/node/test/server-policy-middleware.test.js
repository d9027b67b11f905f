'use strict';
// The middleware on a server policy (issue 31): a SHADOW policy never holds a request (defect 3),
// the default key is `ratelimit:` + the tenant, the same as Python's and Go's (defect 5,
// clients/key-layout.json), RateLimit-Policy carries the policy's window `w`, and yes/no options
// take only true or false (defect 12).
const { test, describe, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const Redis = require('ioredis');
const { RateLimit, rateLimit } = require('..');
const { addressKey } = require('../lib/client-address');
const { startServer, commandCalls } = require('../testing/servers');

const LAYOUT = JSON.parse(fs.readFileSync(path.join(__dirname, '..', '..', 'key-layout.json'), 'utf8'));

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

/** One request through the middleware; resolves to {status, headers, waited: whether next() came after a timer}. */
function run(mw, req) {
  return new Promise((resolve) => {
    const headers = {};
    const res = {
      statusCode: 200,
      setHeader: (k, v) => (headers[k] = v),
      end: () => resolve({ status: res.statusCode, headers }),
    };
    mw({ headers: {}, socket: {}, ...req }, res, (err) => resolve({ status: err ? 500 : 200, headers, err }));
  });
}

/** Resolves to 'timer' when `ms` pass first, else to what `p` resolves to. */
function before_(p, ms) {
  let t;
  const timer = new Promise((r) => (t = setTimeout(() => r('timer'), ms)));
  return Promise.race([p, timer]).finally(() => clearTimeout(t));
}

describe('a SHADOW policy (defect 3)', () => {
  test('request 6 of PERIOD 5 1m SHADOW is answered at once, not after the window', async () => {
    const rl = new RateLimit(redis);
    await rl.setPolicy('shadow5', { algorithm: 'period', limit: 5, period: '1m' }, { shadow: true });
    const mw = rateLimit({ client: redis, policy: 'shadow5', key: () => 'tenant-shadow' });
    for (let i = 1; i <= 5; i++) assert.equal((await run(mw, {})).status, 200, `request ${i}`);
    // The sixth is a would-be refusal: admitted, its reply carries a retry time of ~60 s. It
    // must reach next() well before a 5 s timer (the window is 60 s).
    const sixth = await before_(run(mw, {}), 5000);
    assert.notEqual(sixth, 'timer', 'the middleware held the request for the retry time');
    assert.equal(sixth.status, 200);
    assert.equal((await rl.policyStats('shadow5')).shadowLimited, 1);
  });

  test('a leaky bucket of its own in delay mode still delays; with nodelay it does not', async () => {
    const delayed = rateLimit({ client: redis, algorithm: 'leaky', capacity: 5, rate: 1, period: '300ms', prefix: 'leaky-delay:', key: () => 'k' });
    const order = [];
    const first = run(delayed, {}).then(() => order.push('first'));
    await first;
    const second = run(delayed, {}).then(() => order.push('second'));
    // the second waits for the water ahead of it (about 300 ms): a 0 ms timer fires first
    await new Promise((r) => setTimeout(r, 0));
    order.push('timer');
    await second;
    assert.deepEqual(order, ['first', 'timer', 'second']);
    const meter = rateLimit({ client: redis, algorithm: 'leaky', capacity: 5, rate: 1, period: '1m', nodelay: true, prefix: 'leaky-nodelay:', key: () => 'k' });
    for (let i = 0; i < 3; i++) assert.notEqual(await before_(run(meter, {}), 5000), 'timer');
  });
});

describe('the default key layout (defect 5)', () => {
  test('addressKey follows clients/key-layout.json (the rule Python and Go share)', () => {
    for (const [address, tenant] of LAYOUT.addresses) assert.equal(addressKey(address, LAYOUT.ipv6_subnet), tenant, address);
  });

  test('a middleware on a server policy writes ratelimit:<tenant>, whatever the policy', async () => {
    const rl = new RateLimit(redis);
    await rl.setPolicy('free', { algorithm: 'period', limit: 100, period: '1m' });
    await rl.setPolicy('pro', { algorithm: 'period', limit: 1000, period: '1m' });
    const free = rateLimit({ client: redis, policy: 'free' });
    for (const [address, tenant] of LAYOUT.addresses) {
      assert.equal((await run(free, { ip: address })).status, 200, address);
      assert.equal(await redis.exists(`${LAYOUT.prefix}${tenant}`), 1, `${address} → ${LAYOUT.prefix}${tenant}`);
    }
    // A key function's tenant, and the same key when the tenant changes tier.
    const byTenant = (policy) => rateLimit({ client: redis, policy, key: (req) => req.headers['x-tenant'] });
    await run(byTenant('free'), { headers: { 'x-tenant': 't1' } });
    assert.equal(await redis.exists('ratelimit:t1'), 1);
    const before = (await rl.info('ratelimit:t1')).used;
    await run(byTenant('pro'), { headers: { 'x-tenant': 't1' } });
    assert.equal((await rl.info('ratelimit:t1')).used, before + 1, 'the same counter under the other tier');
    assert.deepEqual(await redis.keys('rl:policy:*'), []);
  });
});

describe('RateLimit-Policy of a server policy carries w', () => {
  test('w of each algorithm, read once beside the first RL.HIT, then reused', async () => {
    const rl = new RateLimit(redis);
    const cases = [
      ['w-period', { algorithm: 'period', limit: 5, period: '1m' }, '"w-period";q=5;w=60'],
      ['w-slide', { algorithm: 'slide', limit: 7, window: '90s' }, '"w-slide";q=7;w=90'],
      ['w-token', { algorithm: 'token', capacity: 10, rate: 1, period: '1s' }, '"w-token";q=10;w=10'],
      ['w-leaky', { algorithm: 'leaky', capacity: 6, rate: 3, period: '1s', nodelay: true }, '"w-leaky";q=6;w=2'],
    ];
    for (const [name, limit, expected] of cases) {
      await rl.setPolicy(name, limit);
      const mw = rateLimit({ client: redis, policy: name, key: () => `w:${name}` });
      const gets = (await commandCalls(server.port))['rl.policy|get'] || 0;
      for (let i = 0; i < 3; i++) assert.equal((await run(mw, {})).headers['RateLimit-Policy'], expected, name);
      assert.equal(((await commandCalls(server.port))['rl.policy|get'] || 0) - gets, 1, `${name}: one RL.POLICY GET for three requests`);
    }
  });

  test('the same header as a limit of its own; a key under an override of another quota has no w', async () => {
    const rl = new RateLimit(redis);
    await rl.setPolicy('same', { algorithm: 'period', limit: 5, period: '1m' });
    await rl.setPolicy('same', { algorithm: 'period', limit: 50, period: '1h' }, { for: 'ratelimit:big' });
    const own = rateLimit({ client: redis, algorithm: 'period', limit: 5, period: '1m', policy: 'same', prefix: 'own:' });
    const onServer = rateLimit({ client: redis, policy: 'same', key: (req) => req.headers['x-tenant'] });
    const a = await run(own, { ip: '192.0.2.9' });
    const b = await run(onServer, { headers: { 'x-tenant': 'small' } });
    assert.equal(b.headers['RateLimit-Policy'], a.headers['RateLimit-Policy']);
    assert.equal((await run(onServer, { headers: { 'x-tenant': 'big' } })).headers['RateLimit-Policy'], '"same";q=50');
  });
});

describe('yes/no options take true or false only (defect 12)', () => {
  test("setPolicy(shadow: 'yes') is a TypeError and leaves the live policy as it was", async () => {
    const rl = new RateLimit(redis);
    await rl.setPolicy('live', { algorithm: 'period', limit: 3, period: '1m' });
    for (const shadow of ['yes', 'no', 1, 0, 'true', {}]) {
      await assert.rejects(rl.setPolicy('live', { algorithm: 'period', limit: 999, period: '1m' }, { shadow }), TypeError, String(shadow));
    }
    await assert.rejects(rl.setPolicy('live', { algorithm: 'token', capacity: 1, rate: 1, period: '1s', step: 'yes' }), TypeError);
    await assert.rejects(rl.setPolicy('live', { algorithm: 'period', limit: 9, period: '1m' }, { ban: '1m', clear: 1 }), TypeError);
    const def = await rl.getPolicy('live');
    assert.deepEqual([def.limit, def.shadow], [3, 0]);
    await rl.setPolicy('live', { algorithm: 'period', limit: 4, period: '1m' }, { shadow: false });
    assert.equal((await rl.getPolicy('live')).limit, 4);
  });

  test('the other yes/no options', async () => {
    const rl = new RateLimit(redis);
    await assert.rejects(rl.token('flags', { capacity: 1, rate: 1, period: '1s', dryRun: 'yes' }), TypeError);
    await assert.rejects(rl.leaky('flags', { capacity: 1, rate: 1, period: '1s', nodelay: 1 }), TypeError);
    await assert.rejects(rl.period('flags', { limit: 1, period: '1s', keepPeriod: 'true' }), TypeError);
    assert.throws(() => rateLimit({ client: redis, algorithm: 'period', limit: 1, period: '1s', failOpen: 'yes' }), TypeError);
    assert.throws(() => rateLimit({ client: redis, algorithm: 'leaky', capacity: 1, rate: 1, period: '1s', nodelay: 'no' }), TypeError);
    assert.equal(await redis.exists('flags'), 0, 'nothing was sent');
  });
});

describe('DEADLINE: a call the server runs after its request was answered counts nothing (defect 8)', () => {
  test('requests that timed out behind a paused server are not charged when it resumes', async () => {
    const own = await startServer();
    const client = new Redis({ port: own.port });
    try {
      const rl = new RateLimit(client);
      await rl.setPolicy('stall', { algorithm: 'period', limit: 300, period: '1m' });
      const mw = rateLimit({ client, policy: 'stall', key: () => 't-stall', timeout: 200 });
      assert.equal((await run(mw, {})).status, 200);
      process.kill(own.child.pid, 'SIGSTOP');
      const answered = [];
      try {
        for (let i = 0; i < 5; i++) {
          const r = await run(mw, {});
          answered.push(r.status);
          assert.equal(r.err && r.err.code, 'ETIMEDOUT');
        }
      } finally {
        process.kill(own.child.pid, 'SIGCONT');
      }
      assert.deepEqual(answered, [500, 500, 500, 500, 500]);
      assert.equal(await client.ping(), 'PONG'); // queued behind the five stalled RL.HIT calls: they have run
      assert.equal((await rl.info('ratelimit:t-stall')).used, 1, 'the answered requests were not charged');
      const stats = await rl.policyStats('stall');
      assert.equal(stats.admitted, 1);
      // The client's own option, and the server's error code.
      await assert.rejects(rl.hit('stall', 'k', { deadline: Date.now() - 1000 }), (err) => err.code === 'DEADLINE');
      await assert.rejects(rl.token('ratelimit:k', { capacity: 1, rate: 1, period: '1s', deadline: Date.now() - 1000 }), (err) => err.code === 'DEADLINE');
      assert.equal(await client.exists('ratelimit:k'), 0);
      assert.equal((await rl.token('ratelimit:k', { capacity: 1, rate: 1, period: '1s', deadline: Date.now() + 60000 })).allowed, true);
    } finally {
      client.disconnect();
      await own.stop();
    }
  });

  test('a timeout is answered only once the deadline it sent has passed (its timer may fire up to 1 ms early)', async () => {
    const own = await startServer();
    const client = new Redis({ port: own.port });
    try {
      const rl = new RateLimit(client);
      await rl.setPolicy('early', { algorithm: 'period', limit: 300, period: '1m' });
      const mw = rateLimit({ client, policy: 'early', key: () => 't-early', timeout: 5 });

      for (let i = 0; i < 60; i++) {
        process.kill(own.child.pid, 'SIGSTOP');
        let r;
        try {
          r = await run(mw, {});

        } finally {
          process.kill(own.child.pid, 'SIGCONT');
        }
        assert.equal(r.status, 500);
        assert.equal(r.err && r.err.code, 'ETIMEDOUT');
        assert.equal(await client.ping(), 'PONG'); // the stalled RL.HIT has run, right after the answer
      }
      const info = await rl.info('ratelimit:t-early'); // null: never counted
      assert.equal(info && info.used, null, 'a timed-out request was charged: answered before its deadline');
    } finally {
      client.disconnect();
      await own.stop();
    }
  });
});
