'use strict';
// RedisModuleStore inside express-rate-limit (Express 5), through node-redis' sendCommand and ioredis.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const http = require('node:http');
const Redis = require('ioredis');
const { createClient } = require('redis');
const express = require('express');
const { rateLimit } = require('express-rate-limit');
const { RedisModuleStore } = require('..');
const { startServer } = require('../testing/servers');

let server;
let ioredis;
let nodeRedis;
before(async () => {
  server = await startServer();
  ioredis = new Redis({ port: server.port });
  nodeRedis = createClient({ socket: { port: server.port, host: '127.0.0.1' } });
  await nodeRedis.connect();
});
after(async () => {
  ioredis.disconnect();
  await nodeRedis.quit();
  await server.stop();
});

async function serve(app, fn) {
  const srv = http.createServer(app);
  await new Promise((r) => srv.listen(0, '127.0.0.1', r));
  try {
    const url = `http://127.0.0.1:${srv.address().port}`;
    await fn((path = '/') => fetch(url + path));
  } finally {
    srv.closeAllConnections();
    await new Promise((r) => srv.close(r));
  }
}

for (const [name, storeOptions] of [
  ['node-redis sendCommand', () => ({ sendCommand: (...args) => nodeRedis.sendCommand(args), prefix: 'erl1:' })],
  ['ioredis client', () => ({ client: ioredis, prefix: 'erl2:' })],
]) {
  test(`express-rate-limit with RedisModuleStore (${name}): limit 3 per window`, async () => {
    const store = new RedisModuleStore(storeOptions());
    const app = express();
    app.use(rateLimit({ windowMs: 60000, limit: 3, store, standardHeaders: 'draft-7', legacyHeaders: false }));
    app.get('/', (_req, res) => res.send('ok'));
    await serve(app, async (get) => {
      for (let i = 0; i < 3; i++) assert.equal((await get()).status, 200);
      const refused = await get();
      assert.equal(refused.status, 429);
      assert.match(refused.headers.get('ratelimit'), /limit=3, remaining=0, reset=(59|60)/);
    });
    const got = await store.get('::ffff:127.0.0.1').then((r) => r || store.get('127.0.0.1'));
    assert.equal(got.totalHits, 4);
    assert.ok(got.resetTime instanceof Date);
  });
}

test('an ioredis keyPrefix applies to every store call', async () => {
  const prefixed = new Redis({ port: server.port, keyPrefix: 'app:' });
  try {
    const store = new RedisModuleStore({ client: prefixed });
    store.init({ windowMs: 60000, limit: 5 });
    await store.increment('ip1');
    assert.equal(await ioredis.exists('app:rl:rl:ip1'), 1);
    assert.equal((await store.get('ip1')).totalHits, 1);
    await store.resetKey('ip1');
    assert.equal(await ioredis.exists('app:rl:rl:ip1'), 0);
  } finally {
    prefixed.disconnect();
  }
});

test('store calls: increment, decrement (stops at 0), get, resetKey', async () => {
  const store = new RedisModuleStore({ client: ioredis, prefix: 'erl3:' });
  store.init({ windowMs: 1000 });
  assert.equal(store.localKeys, false);
  assert.equal((await store.increment('k')).totalHits, 1);
  const two = await store.increment('k');
  assert.equal(two.totalHits, 2);
  assert.ok(two.resetTime.getTime() - Date.now() <= 1000);
  await store.decrement('k');
  assert.equal((await store.get('k')).totalHits, 1);
  await store.decrement('k');
  await store.decrement('k');
  assert.equal(await store.get('k'), undefined);
  await store.increment('k');
  await store.resetKey('k');
  assert.equal(await store.get('k'), undefined);
  assert.equal(await ioredis.exists('erl3:rl:k'), 0);
});

test('switched from rate-limit-redis on a live Redis: no WRONGTYPE, the stock count carried over once', async () => {
  const { RedisStore } = require('rate-limit-redis');
  const stock = new RedisStore({ sendCommand: (...args) => ioredis.call(...args), prefix: 'mig:' });
  stock.init({ windowMs: 60000, limit: 5 });
  await stock.increment('ip'); // the stock string counter at mig:ip
  await stock.increment('ip');
  const store = new RedisModuleStore({ client: ioredis, prefix: 'mig:' });
  store.init({ windowMs: 60000, limit: 5 });
  assert.equal((await store.increment('ip')).totalHits, 3);
  assert.equal((await store.increment('ip')).totalHits, 4, 'carried over once');
  assert.equal((await stock.increment('ip')).totalHits, 3, 'a stock instance still running keeps its own count');
  await store.resetKey('ip');
  assert.equal(await ioredis.exists('mig:ip', 'mig:rl:ip'), 0);
  const off = new RedisModuleStore({ client: ioredis, prefix: 'mig-off:', migrateFromStock: false });
  off.init({ windowMs: 60000, limit: 5 });
  await ioredis.set('mig-off:ip', '4');
  assert.equal((await off.increment('ip')).totalHits, 1);
});
