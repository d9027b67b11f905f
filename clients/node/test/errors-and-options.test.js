'use strict';
// Regression suite "errors and options" (issue 23): server errors carry `.code` (the first word
// of the server's text) through ioredis and node-redis, as the README promises; bad options —
// NaN, Infinity, BigInt, missing ones, no options at all — are refused in the caller's process
// with a message naming the option and the value; info() answers camelCase fields.
const { test, describe, before, after } = require('node:test');
const assert = require('node:assert/strict');
const Redis = require('ioredis');
const { createClient } = require('redis');
const { RateLimit, ModuleNotLoadedError } = require('..');
const { startServer } = require('../testing/servers');

let server;
let bare;
const clients = {};
before(async () => {
  server = await startServer();
  bare = await startServer({ module: false });
  clients.ioredis = new Redis({ port: server.port });
  const nr = createClient({ socket: { port: server.port, host: '127.0.0.1' } });
  await nr.connect();
  clients['node-redis'] = nr;
});
after(async () => {
  clients.ioredis.disconnect();
  await clients['node-redis'].quit();
  await server.stop();
  await bare.stop();
});

for (const kind of ['ioredis', 'node-redis']) {
  describe(`server errors over ${kind}`, () => {
    test('WRONGTYPE and ERR replies have .code, their text unchanged', async () => {
      const rl = new RateLimit(clients[kind], { prefix: `${kind}:` });
      await rl.transport.send(['SET', `${kind}:str`, 'x']);
      await assert.rejects(rl.token('str', { capacity: 1, rate: 1, period: 1000 }), (err) => {
        assert.equal(err.code, 'WRONGTYPE');
        assert.match(err.message, /^WRONGTYPE /);
        return true;
      });
      // capacity 0 passes the client's checks (a whole number) and is refused by the server
      await assert.rejects(rl.token('zero', { capacity: 0, rate: 1, period: 1000 }), (err) => {
        assert.equal(err.code, 'ERR');
        assert.match(err.message, /capacity/);
        return true;
      });
    });
  });
}

test('a server without the module: ModuleNotLoadedError, code ERR', async () => {
  const redis = new Redis({ port: bare.port });
  try {
    await assert.rejects(new RateLimit(redis).token('k', { capacity: 1, rate: 1, period: 1 }), (err) => err instanceof ModuleNotLoadedError && err.code === 'ERR');
    // a command newer than some modules: the advice says the module may be older
    await assert.rejects(new RateLimit(redis).hit('free', 'k'), (err) => err instanceof ModuleNotLoadedError && /older than RL\.HIT/.test(err.message));
  } finally {
    redis.disconnect();
  }
});

describe('bad options name the option and the value', () => {
  const rl = () => new RateLimit(clients.ioredis);
  const cases = [
    ['NaN', { capacity: NaN, rate: 1, period: 1000 }, /^capacity must be a whole number \(got NaN\)$/],
    ['Infinity', { capacity: 1, rate: Infinity, period: 1000 }, /^rate must be a whole number \(got Infinity\)$/],
    ['a fraction', { capacity: 1.5, rate: 1, period: 1000 }, /capacity must be a whole number \(got 1\.5\)/],
    ['negative', { capacity: -1, rate: 1, period: 1000 }, /capacity must be a whole number \(got -1\)/],
    ['a BigInt too big', { capacity: 2n ** 64n, rate: 1, period: 1000 }, /capacity must be a whole number \(got 18446744073709551616n\)/],
    ['a NaN duration', { capacity: 1, rate: 1, period: NaN }, /^period must be a duration: .*\(got NaN\)$/],
    ['a missing option', { capacity: 1, period: 1000 }, /rate is required/],
  ];
  for (const [what, opts, message] of cases) {
    test(what, async () => {
      await assert.rejects(rl().token('k', opts), (err) => err instanceof TypeError && message.test(err.message));
    });
  }

  test('a BigInt in the safe range is taken as a number', async () => {
    const d = await rl().token('bigint', { capacity: 3n, rate: 1n, period: 1000n });
    assert.deepEqual([d.allowed, d.limit, d.remaining], [true, 3, 2]);
  });

  test('no options object at all', async () => {
    for (const [method, needs] of [['token', /token needs an options object \{capacity, rate, period\} \(got undefined\)/], ['period', /period needs/], ['slide', /slide needs/], ['leaky', /leaky needs/], ['throttle', /throttle needs/], ['acquire', /acquire needs/]]) {
      await assert.rejects(rl()[method]('k'), (err) => err instanceof TypeError && needs.test(err.message), method);
    }
    await assert.rejects(rl().all([null]), /each limit of all\(\) needs an options object/);
    await assert.rejects(rl().limit('k'), /algorithm must be one of token, period, slide, leaky \(got undefined\)/);
  });

  test('a key that is not a string or Buffer', async () => {
    for (const key of [undefined, '', 42, {}]) {
      await assert.rejects(rl().token(key, { capacity: 1, rate: 1, period: 1 }), /key must be a non-empty string or Buffer/);
    }
  });
});

test('info(): camelCase fields, numbers as numbers', async () => {
  const rl = new RateLimit(clients.ioredis, { prefix: 'info:' });
  await rl.period('p', { limit: 5, period: '1m' });
  const i = await rl.info('p');
  assert.equal(i.algorithm, 'period');
  for (const f of ['limit', 'periodMs', 'used', 'windowStartMs', 'windowEndMs', 'updatedMs', 'ttlMs', 'nowMs']) assert.equal(typeof i[f], 'number', f);
  assert.equal(i.used, 1);
  assert.ok(!Object.keys(i).some((k) => k.includes('_')), Object.keys(i).join());
});
