'use strict';
// Waiting calls and retries over ioredis against a real server (issue 39): a WAIT longer than the
// client's commandTimeout is answered, once; a limiting call whose connection closed before the
// reply is never sent again on the next connection (it may have counted).
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const Redis = require('ioredis');
const { RateLimit, CallMayHaveCountedError } = require('..');
const { startServer } = require('../testing/servers');

let server;
let probe;
before(async () => {
  server = await startServer({ args: ['--enable-debug-command', 'yes'] });
  probe = new Redis({ port: server.port });
});
after(async () => {
  probe.disconnect();
  await server.stop();
});

const used = async (key) => {
  const r = await probe.call('RL.PEEK', key);
  return r === null ? 0 : Number(r[1]) - Number(r[2]) - (Number(r[0]) === 1 ? 1 : 0);
};

test('a WAIT longer than the client\'s commandTimeout is answered, admitted once', async () => {
  const client = new Redis({ port: server.port, commandTimeout: 200 });
  try {
    const rl = new RateLimit(client);
    const o = { capacity: 1, rate: 1, period: '700ms' };
    assert.equal((await rl.token('w', o)).allowed, true);
    const started = Date.now();
    const waited = await rl.token('w', { ...o, wait: '2s' });
    assert.equal(waited.allowed, true);
    assert.ok(Date.now() - started >= 600, 'it waited in the server');
    assert.equal(Number((await probe.call('INFO', 'ratelimit')).match(/ratelimit_wait_admitted:(\d+)/)[1]), 1);
    // Other calls keep the client's commandTimeout.
    assert.equal((await rl.token('w2', o)).allowed, true);
  } finally {
    client.disconnect();
  }
});

test('a WAIT the client\'s socketTimeout would cut off is refused before it is sent', async () => {
  const client = new Redis({ port: server.port, socketTimeout: 500 });
  try {
    const rl = new RateLimit(client);
    await assert.rejects(rl.token('s', { capacity: 1, rate: 1, period: '1s', wait: '1s' }), RangeError);
    await assert.rejects(rl.token('s', { capacity: 1, rate: 1, period: '1s', wait: 0 }), RangeError);
    assert.equal(await probe.exists('s'), 0, 'nothing sent');
    assert.equal((await rl.token('s', { capacity: 1, rate: 1, period: '1s', wait: '100ms' })).allowed, true);
  } finally {
    client.disconnect();
  }
});

test('a limiting call cut off by a lost connection errors and is not sent again (counted at most once)', async () => {
  // socketTimeout destroys the connection while the server sleeps; ioredis reconnects and would
  // re-send what was unanswered.
  const client = new Redis({ port: server.port, socketTimeout: 300, retryStrategy: () => 50 });
  try {
    const rl = new RateLimit(client);
    await client.ping();
    const sleeper = new Redis({ port: server.port });
    const sleeping = sleeper.call('DEBUG', 'SLEEP', '1');
    await new Promise((r) => setTimeout(r, 50));
    const call = rl.token('cut', { capacity: 5, rate: 5, period: '1h' });
    await assert.rejects(call, (err) => err instanceof CallMayHaveCountedError && err.code === 'ECONNRESET');
    await sleeping;
    sleeper.disconnect();
    await client.ping(); // reconnected: anything ioredis re-sent has run by now
    assert.ok((await used('cut')) <= 1, `counted ${await used('cut')} times`);
    assert.equal((await rl.token('cut', { capacity: 5, rate: 5, period: '1h' })).allowed, true, 'the client works on');
  } finally {
    client.disconnect();
  }
});
